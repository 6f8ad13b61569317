"""The ``ops`` frame: one row per host operation name, with self time, as torch's
``key_averages()`` counts it. Derived from the events frame, so every format that has events
has ops; the analysis package builds its tables on top of it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dynprof_nb.contract.protocol import STEP_FOLDED, STEP_PREFIX

from ... import schema
from .from_events import DEVICE_CATS

# Not host operations: Python stack frames (they would swallow their ops' time as children and
# torch's key_averages has no such rows), the profiler's own span, device-side tasks, Ascend's
# synthetic overlap lanes and MindSpore's scope lane (which spans everything).
NON_OP_CATS = {"python_function", "Trace", "gpu_user_annotation", "step_marker", *DEVICE_CATS}
GC_CAT = "gc"  # training.gcpauses.GC_CATEGORY (traces/ imports nothing of training/)
NON_OP_PROCESSES = {"Ascend Hardware", "Overlap Analysis", "HCCL", "Scope Layer"}


def host_ops(events: pd.DataFrame) -> pd.DataFrame:
    """The complete events that count as host operations.

    Python frames are left out (torch's key_averages has no such rows), except when they are
    all a trace has besides its steps: a built-in ``with_stack`` window of plain Python code,
    whose functions are then its operations.
    """
    ev = events[events["ph"] == "X"]
    ev = ev[~ev["process"].astype(object).isin(NON_OP_PROCESSES)]
    cats = ev["cat"].astype(object)
    ops = ev[~cats.isin(NON_OP_CATS)]
    frames = ev[cats == "python_function"]
    # steps and garbage collections (the backends' ``gc`` spans) are not code of the user's:
    # a window of plain Python code with GC pauses still has its functions as operations
    besides = ~(ops["name"].astype(str).str.startswith(STEP_PREFIX) | (cats[ops.index] == GC_CAT))
    if len(frames) and not besides.any():
        return ev[~cats.isin(NON_OP_CATS - {"python_function"})]
    return ops


def self_times(ev: pd.DataFrame) -> np.ndarray:
    """Duration minus the durations of direct children on the same thread (ns), per row of ev.

    A row's children are found by a stack walk over the thread's rows by ts, longest first
    (:func:`walk_children`); threads whose ops nest properly (nearly all) get the same answer
    from :func:`nested_parents` in numpy, and only the others are walked in Python."""
    n = len(ev)
    if n == 0:
        return np.zeros(0, np.int64)
    keys = [pd.factorize(ev["pid"])[0], pd.factorize(ev["tid"])[0]]
    if "rank" in ev:
        keys.append(pd.factorize(ev["rank"])[0])
    thread = np.zeros(n, np.int64)
    for k in keys:
        thread = thread * (int(k.max()) + 1) + k
    ts = ev["ts_ns"].to_numpy("int64", na_value=0)
    dur = ev["dur_ns"].to_numpy("int64")
    order = np.lexsort((-dur, ts, thread))
    th, st, du = thread[order], ts[order], dur[order]
    parent, walk, _ = nested_parents(th, st, du)
    child = child_sums(parent, np.where(walk, 0, du), n)
    if walk.any():
        at = np.flatnonzero(walk)
        child[at] = walk_children(th[at], st[at], du[at])
    out = np.empty(n, np.int64)
    out[order] = du - child
    return out


def walk_children(th: np.ndarray, st: np.ndarray, du: np.ndarray) -> np.ndarray:
    """Each row's direct children's time, by the stack walk (rows sorted by thread, ts, longest
    first): a row's parent is the op on top of its thread's stack once every op there that
    ended by the row's start is popped. Any overlap is read this way, nested or not."""
    n = len(th)
    th_, st_, du_ = th.tolist(), st.tolist(), du.tolist()
    child = [0] * n
    stack: list[int] = []  # positions in sorted order
    ends: list[int] = []
    cur = None
    for i in range(n):
        if th_[i] != cur:
            cur = th_[i]
            stack.clear()
            ends.clear()
        s = st_[i]
        while ends and ends[-1] <= s:
            ends.pop()
            stack.pop()
        if stack:
            child[stack[-1]] += du_[i]
        stack.append(i)
        ends.append(s + du_[i])
    return np.asarray(child, np.int64)


def nested_parents(
    th: np.ndarray, st: np.ndarray, du: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parent :func:`walk_children` gives each row (sorted by thread, ts, longest first;
    -1: none), in numpy, for the threads whose stack stays properly nested; a mask of the rows
    of the other threads (left to the walk); and a mask of the rows still open after the last
    row of their thread (on the walk's stack at the end).

    Row j stays on the stack until the first row of its thread starting at or after its end:
    ``close[j]`` (at least j + 1). While every row pushed closes no later than the row under
    it (nested), the stack at row i is exactly the rows j < i with ``close[j] > i``: its depth
    is i minus the rows closed by then, and its top is the last row before i one level up.
    That each row closes no later than the parent so found is checked, row by row, which by
    induction makes the whole thread's answer the walk's; a thread where it fails is walked.
    """
    n = len(th)
    parent = np.full(n, -1, np.int64)
    if n == 0:
        return parent, np.zeros(0, bool), np.zeros(0, bool)
    if int(np.abs(st).max()) >= 2**62 or int(np.abs(du).max()) >= 2**62:
        return parent, np.ones(n, bool), np.zeros(n, bool)  # no int64 room: walk them all
    rows = np.arange(n)
    first = np.flatnonzero(np.concatenate([[True], th[1:] != th[:-1]]))
    stop = np.append(first[1:], n)
    seg = np.repeat(np.arange(len(first)), stop - first)  # thread segment of each row
    end = st + du
    # every thread's times moved into a range of its own, so one searchsorted finds, for each
    # row, the first row of its own thread starting at or after its end
    lo = st[first]
    hi = np.maximum.reduceat(np.maximum(end, st), first)
    if float((hi.astype(np.float64) - lo + 1).sum()) >= 2**61:
        close = np.empty(n, np.int64)
        for a, b in zip(first.tolist(), stop.tolist(), strict=True):
            close[a:b] = a + np.searchsorted(st[a:b], end[a:b], "left")
    else:
        span = hi - lo + 1
        base, low = (np.cumsum(span) - span)[seg], lo[seg]
        close = np.searchsorted(st - low + base, np.maximum(end, low) - low + base, "left")
    close = np.maximum(close, rows + 1)
    depth = rows - np.cumsum(np.bincount(close, minlength=n + 1))[:n]
    by_depth = np.argsort(depth.astype(np.int16) if depth.max() < 2**15 else depth, kind="stable")
    key = depth[by_depth] * n + by_depth  # ascending: by depth, then row
    deeper = np.count_nonzero(depth == 0)  # rows past this in by_depth have a parent
    inner = by_depth[deeper:]
    query = key[deeper:] - n  # one level up, same row: ascending, which searchsorted is quick at
    up = query - inner
    pos = np.searchsorted(key, query, "left") - 1
    par = key[np.maximum(pos, 0)] - up  # < 0 where no row one level up comes before
    ok = (pos >= 0) & (par >= 0)
    par = np.where(ok, par, 0)
    ok &= (close[par] > inner) & (close[inner] <= close[par])
    bad = np.zeros(len(first), bool)
    bad[seg[inner[~ok]]] = True
    walk = bad[seg]
    parent[inner[ok]] = par[ok]
    parent[walk] = -1
    return parent, walk, (close == stop[seg]) & ~walk


def child_sums(parent: np.ndarray, du: np.ndarray, n: int) -> np.ndarray:
    """Per row, the sum of ``du`` over the rows whose parent it is (exact int64)."""
    has = parent >= 0
    p, d = parent[has], du[has]
    if not len(p):
        return np.zeros(n, np.int64)
    if float(np.abs(d).astype(np.float64).sum()) < 2**52:  # float sums exact here
        return np.rint(np.bincount(p, d, n)).astype(np.int64)
    out = np.zeros(n, np.int64)
    np.add.at(out, p, d)
    return out


def op_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per host operation name, sorted by self time."""
    ev = host_ops(events)
    if ev.empty:
        return schema.empty("ops")
    g = pd.DataFrame(
        {
            "name": ev["name"].astype(object).to_numpy(),
            "dur": ev["dur_ns"].to_numpy("int64"),
            "self": self_times(ev),
        }
    )
    t = g.groupby("name", sort=False).agg(
        count=("dur", "size"),
        total_ns=("dur", "sum"),
        self_ns=("self", "sum"),
        min_ns=("dur", "min"),
        max_ns=("dur", "max"),
    )
    return table_from_sums(t)


def table_from_sums(t: pd.DataFrame) -> pd.DataFrame:
    """The ``ops`` frame from per-name integer sums (index: names in order of first appearance;
    columns count, total_ns, self_ns, min_ns, max_ns), as :func:`op_table` and the streamed
    summary (:mod:`dynprof_nb.traces.formats.chrome.summaries`) both build it.

    Sums are exact int64 ns and become µs once, so a table merged from pieces is the same, to
    the last bit, as one computed over the whole frame. Like torch's key_averages(), all step
    markers fold into one ``STEP_FOLDED`` row (the per-step view is the steps frame)."""
    names = pd.Series(t.index.astype(object), dtype=object)
    names = names.where(~names.str.startswith(STEP_PREFIX, na=False), STEP_FOLDED)
    t = t.groupby(names.to_numpy(), sort=False).agg(
        count=("count", "sum"),
        total_ns=("total_ns", "sum"),
        self_ns=("self_ns", "sum"),
        min_ns=("min_ns", "min"),
        max_ns=("max_ns", "max"),
    )
    out = pd.DataFrame(
        {
            "name": t.index.to_numpy(dtype=object),
            "count": t["count"].to_numpy("int64"),
            "total_us": t["total_ns"].to_numpy("int64") / 1000.0,
            "self_us": t["self_ns"].to_numpy("int64") / 1000.0,
            "min_us": t["min_ns"].to_numpy("int64") / 1000.0,
            "max_us": t["max_ns"].to_numpy("int64") / 1000.0,
        }
    )
    out["avg_us"] = out["total_us"] / out["count"]
    total_self = out["self_us"].sum()
    out["share"] = out["self_us"] / total_self if total_self > 0 else 0.0
    out = out.sort_values(["self_us", "total_us"], ascending=False, ignore_index=True)
    return schema.conform(out, "ops")
