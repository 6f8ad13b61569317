"""Frames derived from the events frame when no dedicated file gives them: step intervals and
the step column, device tasks, collectives, memory counters, step-time breakdown."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dynprof_nb.protocol import STEP_RE

from . import comm as comm_names
from . import schema

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
DEVICE_PROCESSES = {"Ascend Hardware", "HCCL"}
# host ranges that may be communication when a trace has no device events (CPU, gloo, built-in)
# (not cpu_op: aten::broadcast_tensors is no broadcast)
RANGE_CATS = {"user_annotation", "communication"}
OVERLAP_THREADS = {
    "Computing": "computing_us",
    "Communication": "communication_us",
    "Communication(Not Overlapped)": "_not_overlapped_us",
    "Free": "free_us",
}


def timed(events: pd.DataFrame) -> pd.DataFrame:
    """The events that have a time: a ts the reader could not hold (NA, said in the trace's
    repairs) places its event in no step and no interval."""
    ts = events["ts_ns"]
    return events[ts.notna()] if ts.hasnans else events


def step_intervals(events: pd.DataFrame) -> pd.DataFrame:
    """(step, start_ns, end_ns) from the host-side step marker spans."""
    events = timed(events)
    if events.empty:
        return pd.DataFrame(
            {
                "step": pd.Series(dtype="int64"),
                "start_ns": pd.Series(dtype="int64"),
                "end_ns": pd.Series(dtype="int64"),
            }
        )
    names = events["name"]
    cats = names.cat.categories if hasattr(names, "cat") else pd.Index(names.unique())
    step_names = {
        c: int(m.group(1)) for c in cats if isinstance(c, str) and (m := STEP_RE.match(c))
    }
    sel = events[names.isin(list(step_names)) & (events["ph"] == "X")]
    sel = sel[sel["cat"].astype(object) != "gpu_user_annotation"]
    sel = sel[~sel["process"].astype(object).isin(DEVICE_PROCESSES)]
    if sel.empty:
        return step_intervals(events.iloc[:0])
    df = pd.DataFrame(
        {
            "step": sel["name"].astype(object).map(step_names).astype("int64"),
            "start_ns": sel["ts_ns"].astype("int64"),
            "end_ns": (sel["ts_ns"] + sel["dur_ns"]).astype("int64"),
        }
    )
    return df.groupby("step", as_index=False).agg(
        start_ns=("start_ns", "min"), end_ns=("end_ns", "max")
    )


def assign_steps(ts_ns: np.ndarray, intervals: pd.DataFrame) -> pd.array:
    """Step number of each timestamp (NA outside every step)."""
    out = np.full(len(ts_ns), -1, dtype=np.int64)
    if len(intervals) and len(ts_ns):
        iv = intervals.sort_values("start_ns")
        starts = iv["start_ns"].to_numpy()
        ends = iv["end_ns"].to_numpy()
        steps = iv["step"].to_numpy()
        pos = np.searchsorted(starts, ts_ns, side="right") - 1
        ok = pos >= 0
        posc = np.where(ok, pos, 0)
        ok &= ts_ns < ends[posc]
        out[ok] = steps[posc[ok]]
    arr = pd.array(out, dtype="Int64")
    arr[out < 0] = pd.NA
    return arr


def _union_us(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> tuple[float, list]:
    s = np.clip(starts, lo, hi)
    e = np.clip(ends, lo, hi)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return 0.0, []
    order = np.argsort(s, kind="stable")
    merged = []
    cs, ce = s[order[0]], e[order[0]]
    for a, b in zip(s[order[1:]], e[order[1:]], strict=True):
        if a <= ce:
            ce = max(ce, b)
        else:
            merged.append((cs, ce))
            cs, ce = a, b
    merged.append((cs, ce))
    return sum(b - a for a, b in merged) / 1000.0, merged


def _overlap_len(a: list, b: list) -> float:
    i = j = 0
    total = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total / 1000.0


def device_mask(events: pd.DataFrame) -> pd.Series:
    return (
        events["cat"].astype(object).isin(DEVICE_CATS)
        | events["process"].astype(object).isin(DEVICE_PROCESSES)
    ) & (events["ph"] == "X")


def steps_from_events(
    events: pd.DataFrame, comm: comm_names.PatternSpec = None
) -> tuple[pd.DataFrame, str]:
    """Step table from the step marker spans, with the breakdown from the Overlap Analysis
    process (Ascend) or from device compute/communication intervals (GPU/NPU); ``comm`` says
    which kernel names are communication (see :mod:`dynprof_nb.traces.comm`)."""
    events = timed(events)
    iv = step_intervals(events)
    if iv.empty:
        return schema.empty("steps"), "no step marker events"
    out = pd.DataFrame(
        {
            "step": iv["step"],
            "start_ns": iv["start_ns"].astype("Int64"),
            "duration_us": (iv["end_ns"] - iv["start_ns"]) / 1000.0,
        }
    )
    proc = events["process"].astype(object)
    overlap = events[(proc == "Overlap Analysis") & (events["ph"] == "X")]
    how = "step marker events"
    if not overlap.empty:
        how += " + Overlap Analysis process"
        thread = overlap["thread"].astype(object)
        for tname, col in OVERLAP_THREADS.items():
            sub = overlap[thread == tname]
            s = sub["ts_ns"].to_numpy(np.int64)
            e = s + sub["dur_ns"].to_numpy(np.int64)
            out[col] = [
                _union_us(s, e, lo, hi)[0]
                for lo, hi in zip(iv["start_ns"], iv["end_ns"], strict=True)
            ]
        out["overlapped_us"] = out["communication_us"] - out.pop("_not_overlapped_us")
        return schema.conform(out, "steps"), how
    dev = events[device_mask(events)]
    if dev.empty:
        return schema.conform(out, "steps"), how + " (no device events: no breakdown)"
    comm = comm_names.is_communication(dev["name"], comm)
    s_all = dev["ts_ns"].to_numpy(np.int64)
    e_all = s_all + dev["dur_ns"].to_numpy(np.int64)
    rows = []
    for lo, hi in zip(iv["start_ns"], iv["end_ns"], strict=True):
        c_us, c_iv = _union_us(s_all[~comm], e_all[~comm], lo, hi)
        m_us, m_iv = _union_us(s_all[comm], e_all[comm], lo, hi)
        ov = _overlap_len(c_iv, m_iv)
        rows.append((c_us, m_us, ov, (hi - lo) / 1000.0 - (c_us + m_us - ov)))
    out[["computing_us", "communication_us", "overlapped_us", "free_us"]] = rows
    return schema.conform(
        out, "steps"
    ), how + f" + device kernels ({int(comm.sum())} matched the communication patterns)"


def kernels_from_events(events: pd.DataFrame) -> pd.DataFrame:
    dev = events[device_mask(events)]
    if dev.empty:
        return schema.empty("kernels")
    tid = dev["tid"]
    stream = pd.to_numeric(tid.astype(object), errors="coerce").astype("Int64")
    out = pd.DataFrame(
        {
            "name": dev["name"].astype(object),
            "type": dev["cat"].astype(object),
            "core": dev["process"].astype(object),
            "stream": stream,
            "start_ns": dev["ts_ns"].astype("Int64"),
            "duration_us": dev["dur_ns"] / 1000.0,
            "wait_us": np.nan,
            "step": dev["step"] if "step" in dev else pd.NA,
        }
    )
    return schema.conform(out.reset_index(drop=True), "kernels")


def communication_from_events(
    events: pd.DataFrame, comm: comm_names.PatternSpec = None
) -> pd.DataFrame:
    """Device kernels (and HCCL tasks) whose names match the communication patterns; a trace
    with no device events at all gives its matching host ranges instead (gloo on CPU, a
    ``dynprof_nb.range(..., category="communication")``)."""
    dev_mask = device_mask(events) | (events["process"].astype(object) == "HCCL")
    source = "collective events"
    if not dev_mask.any():
        cats = events["cat"].astype(object)
        dev_mask = (events["ph"] == "X") & cats.isin(RANGE_CATS)
        source = "communication ranges"
    dev = events[dev_mask]
    if dev.empty:
        return schema.empty("communication")
    hit = comm_names.is_communication(dev["name"], comm)
    if source == "communication ranges":
        hit = hit | (dev["cat"].astype(object) == "communication").to_numpy()
    sel = dev[hit]
    if sel.empty:
        return schema.empty("communication")
    out = pd.DataFrame(
        {
            "step": sel["step"],
            "name": sel["name"].astype(object),
            "group": sel["thread"].astype(object),
            "start_ns": sel["ts_ns"].astype("Int64"),
            "elapse_us": sel["dur_ns"] / 1000.0,
            "source": source,
        }
    )
    return schema.conform(out.reset_index(drop=True), "communication")


def memory_from_counters(counters: pd.DataFrame) -> pd.DataFrame:
    """``ph: "C"`` counters whose name mentions memory, one row per timestamp."""
    if counters.empty:
        return schema.empty("memory")
    sel = counters[counters["name"].str.contains("mem", case=False, na=False)]
    if sel.empty:
        return schema.empty("memory")
    wide = sel.pivot_table(
        index=["ts_ns", "name"], columns="series", values="value", aggfunc="last"
    )
    wide = wide.reset_index()
    lower = {c.lower(): c for c in wide.columns if isinstance(c, str)}

    def pick(*keys: str) -> pd.Series:
        for k in lower:
            if any(x in k for x in keys):
                return wide[lower[k]]
        return pd.Series(np.nan, index=wide.index)

    out = pd.DataFrame(
        {
            "ts_ns": wide["ts_ns"].astype("int64"),
            "device": "host",
            "allocated_bytes": pick("allocated", "bytes", "used"),
            "reserved_bytes": pick("reserved"),
            "active_bytes": pick("active"),
            "delta_bytes": np.nan,
            "name": wide["name"],
            "source": "counter events",
        }
    )
    return schema.conform(out, "memory")
