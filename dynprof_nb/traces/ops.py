"""The ``ops`` frame: one row per host operation name, with self time, as torch's
``key_averages()`` counts it. Derived from the events frame, so every format that has events
has ops; the analysis package builds its tables on top of it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dynprof_nb.protocol import STEP_FOLDED, STEP_PREFIX

from . import schema
from .derive import DEVICE_CATS

# Not host operations: Python stack frames (they would swallow their ops' time as children and
# torch's key_averages has no such rows), the profiler's own span, device-side tasks, Ascend's
# synthetic overlap lanes and MindSpore's scope lane (which spans everything).
NON_OP_CATS = {"python_function", "Trace", "gpu_user_annotation", "step_marker", *DEVICE_CATS}
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
    if len(frames) and ops["name"].astype(str).str.startswith(STEP_PREFIX).all():
        return ev[~cats.isin(NON_OP_CATS - {"python_function"})]
    return ops


def self_times(ev: pd.DataFrame) -> np.ndarray:
    """Duration minus the durations of direct children on the same thread (ns), per row of ev."""
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
    th, st, du = thread[order].tolist(), ts[order].tolist(), dur[order].tolist()
    child = [0] * n
    stack: list[int] = []  # positions in sorted order
    ends: list[int] = []
    cur = None
    for i in range(n):
        if th[i] != cur:
            cur = th[i]
            stack.clear()
            ends.clear()
        s = st[i]
        while ends and ends[-1] <= s:
            ends.pop()
            stack.pop()
        if stack:
            child[stack[-1]] += du[i]
        stack.append(i)
        ends.append(s + du[i])
    out = np.empty(n, np.int64)
    out[order] = np.asarray(du, np.int64) - np.asarray(child, np.int64)
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
    summary (:mod:`dynprof_nb.traces.stream`) both build it.

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
