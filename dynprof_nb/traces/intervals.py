"""Interval arithmetic on device tasks: unions, overlaps, the step each task falls in, and the
step breakdown (computing / communication / overlapped / free) torch_npu's step_trace_time
defines. Shared by the .db reader and the cluster analyses."""

from __future__ import annotations

import numpy as np
import pandas as pd


def union_us(start: np.ndarray, end: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Total length (µs) of the union of [start, end) intervals, and the merged intervals."""
    if len(start) == 0:
        return 0.0, np.empty(0, "int64"), np.empty(0, "int64")
    o = np.argsort(start, kind="stable")
    s, e = start[o], end[o]
    run_end = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    gs = s[new]
    idx = np.flatnonzero(new)
    ge = np.maximum.reduceat(e, idx)
    return float((ge - gs).sum()) / 1000.0, gs, ge


def intersect_us(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> float:
    """Length (µs) of the intersection of two unions of intervals (:func:`intersection_ns`)."""
    return intersection_ns(a0, a1, b0, b1) / 1000.0


def intersection_ns(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> int:
    """Length of the intersection of two unions of [start, end) intervals, each given as its
    merged intervals in order (as :func:`union_us` returns them): |A| + |B| - |A u B|, exact
    int64. Anything else (an interval ending before it starts, or overlapping the next) is
    measured by the two-pointer walk, which sums the overlap of each pair it meets."""
    if not len(a0) or not len(b0):
        return 0
    a0, a1, b0, b1 = (np.asarray(x, np.int64) for x in (a0, a1, b0, b1))
    if (
        (a1 >= a0).all()
        and (b1 >= b0).all()
        and (a0[1:] >= a1[:-1]).all()
        and (b0[1:] >= b1[:-1]).all()
    ):
        s, e = np.concatenate([a0, b0]), np.concatenate([a1, b1])
        o = np.argsort(s, kind="stable")
        s, e = s[o], e[o]
        new = np.ones(len(s), bool)
        new[1:] = s[1:] > np.maximum.accumulate(e)[:-1]
        union = int((np.maximum.reduceat(e, np.flatnonzero(new)) - s[new]).sum())
        return int((a1 - a0).sum()) + int((b1 - b0).sum()) - union
    total, i, j = 0, 0, 0
    while i < len(a0) and j < len(b0):
        lo, hi = max(a0[i], b0[j]), min(a1[i], b1[j])
        if hi > lo:
            total += int(hi - lo)
        if a1[i] < b1[j]:
            i += 1
        else:
            j += 1
    return total


def overlap_breakdown(kernels: pd.DataFrame) -> dict[str, float]:
    """Computing / communication / overlapped / free µs of one step's device tasks, the way
    torch_npu's step_trace_time defines them (unions of intervals; the step spans the first
    task's start to the last task's end)."""
    if kernels.empty:
        return {
            "duration_us": 0.0,
            "computing_us": 0.0,
            "communication_us": 0.0,
            "overlapped_us": 0.0,
            "free_us": 0.0,
            "communication_not_overlapped_us": 0.0,
        }
    start = kernels["start_ns"].to_numpy("int64")
    end = (
        start + kernels["duration_ns"].to_numpy("int64")
        if "duration_ns" in kernels
        else start + np.round(kernels["duration_us"].to_numpy("float64") * 1000).astype("int64")
    )
    comm = (kernels["core"].astype(str) == "HCCL").to_numpy()
    comp_us, c0, c1 = union_us(start[~comm], end[~comm])
    comm_us, m0, m1 = union_us(start[comm], end[comm])
    ov = intersect_us(c0, c1, m0, m1)
    stage = (end.max() - start.min()) / 1000.0
    not_ov = comm_us - ov
    return {
        "duration_us": stage,
        "computing_us": comp_us,
        "communication_us": comm_us,
        "overlapped_us": ov,
        "free_us": stage - comp_us - not_ov,
        "communication_not_overlapped_us": not_ov,
    }


def steps_of(start: np.ndarray, steps: pd.DataFrame) -> pd.arrays.IntegerArray:
    """The STEP_TIME step each start falls in (NA outside every step)."""
    out = np.full(len(start), -1, dtype="int64")
    mask = np.zeros(len(start), dtype=bool)
    if len(steps):
        s = steps.sort_values("start_ns")
        a, b, ids = (s[c].to_numpy("int64") for c in ("start_ns", "end_ns", "step"))
        i = np.searchsorted(a, start, side="right") - 1
        ok = i >= 0
        ok[ok] &= start[ok] <= b[i[ok]]
        out[ok] = ids[i[ok]]
        mask = ok
    return pd.arrays.IntegerArray(out, ~mask)


def stream_wait(stream: pd.Series, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Gap before each task since the previous task on its stream ended (0 for the first)."""
    wait = np.full(len(start), np.nan)
    st = pd.to_numeric(stream, errors="coerce")
    for _, idx in pd.Series(np.arange(len(start))).groupby(st.to_numpy()).groups.items():
        ix = np.asarray(idx)
        ix = ix[np.argsort(start[ix], kind="stable")]
        prev_end = np.maximum.accumulate(end[ix])
        gap = np.empty(len(ix))
        gap[0] = 0.0
        gap[1:] = np.maximum(start[ix][1:] - prev_end[:-1], 0) / 1000.0
        wait[ix] = gap
    return wait


def union_by(tasks: pd.DataFrame) -> pd.Series:
    """Per op_id, the union length (µs) of its tasks' intervals (tasks on parallel planes
    overlap, so a plain sum would exceed the op's own duration)."""
    out = {}
    for op, g in tasks.groupby("op_id"):
        out[op] = union_us(g["start_ns"].to_numpy("int64"), g["end_ns"].to_numpy("int64"))[0]
    return pd.Series(out, dtype="float64")
