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
    selfs = self_times(ev)
    names = ev["name"].astype(object)
    # Like torch's key_averages(): all step markers fold into one STEP_FOLDED row
    # (the per-step view is the steps frame).
    names = names.where(~names.str.startswith(STEP_PREFIX, na=False), STEP_FOLDED)
    g = pd.DataFrame(
        {
            "name": names.to_numpy(),
            "dur": ev["dur_ns"].to_numpy("int64") / 1000.0,
            "self": selfs / 1000.0,
        }
    )
    t = (
        g.groupby("name", sort=False)
        .agg(
            count=("dur", "size"),
            total_us=("dur", "sum"),
            self_us=("self", "sum"),
            min_us=("dur", "min"),
            max_us=("dur", "max"),
        )
        .reset_index()
    )
    t["avg_us"] = t["total_us"] / t["count"]
    total_self = t["self_us"].sum()
    t["share"] = t["self_us"] / total_self if total_self > 0 else 0.0
    t = t.sort_values(["self_us", "total_us"], ascending=False, ignore_index=True)
    return schema.conform(t, "ops")
