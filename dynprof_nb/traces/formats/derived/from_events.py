"""Frames derived from the events frame when no dedicated file gives them: step intervals and
the step column, device tasks, collectives, memory counters, step-time breakdown."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from dynprof_nb.contract.protocol import STEP_RE

from ... import comm as comm_names
from ... import schema, validate
from ...intervals import intersect_us, union_us
from ...partitioned import rows as ooc_rows

#: Every category Kineto writes for activity on a device: CUDA/ROCm kernels, copies and sets,
#: the device side of a CUDA synchronisation (on the stream's lane, as HTA counts it), and MTIA's
#: (Meta's accelerator) command processor events. Older Kineto spelled the first three capitalised.
DEVICE_CATS = {
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "Kernel",
    "Memcpy",
    "Memset",
    "cuda_sync",
    "mtia_ccp_events",
}
MEMORY_CATS = {"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"}
# HTA's (hta.utils.utils) kernel types: MEMORY is a name starting Memcpy/Memset/dma, and what is
# neither communication nor memory is COMPUTATION unless it is a sync or an NCCL helper (OTHER).
_INT64_MAX = int(np.iinfo(np.int64).max)
_MEMORY_NAME = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE_NAME = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
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


def _distinct(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each row's index into the column's distinct values, NA one of them (factorize's
    ``use_na_sentinel=False``): a categorical's own codes and categories, with no Python object
    per row (three summaries of a 0.5 GB trace factorised its 267k kernel names 0.09 s each)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy().astype(np.int64)
        raw = np.append(col.cat.categories.to_numpy(dtype=object), np.nan)
        return np.where(codes < 0, len(raw) - 1, codes), raw
    return pd.factorize(col.astype(object).to_numpy(dtype=object), use_na_sentinel=False)


def device_kinds(
    names: pd.Series, cats: pd.Series, comm: comm_names.PatternSpec = None
) -> np.ndarray:
    """Per device row: "communication" (the communication patterns), "memory" (a copy or set:
    its category or a Memcpy/Memset/dma name), "computation", or "other" (synchronisation and
    NCCL helpers), HTA's ``get_kernel_type`` with dynprof_nb's communication patterns."""
    # each distinct name once: a fixed-width copy of a million long kernel names is gigabytes
    inv, raw = _distinct(names)
    uniq = np.array(["" if pd.isna(u) else str(u) for u in raw], dtype=object)
    kind_u = np.where(
        [bool(_MEMORY_NAME.match(u)) for u in uniq],
        "memory",
        np.where([bool(_NOT_COMPUTE_NAME.match(u)) for u in uniq], "other", "computation"),
    ).astype(object)
    kind = kind_u[np.asarray(inv).reshape(-1)] if len(uniq) else np.empty(0, object)
    cat_inv, cat_raw = _distinct(cats)
    kind[np.isin(cat_raw, list(MEMORY_CATS))[cat_inv]] = "memory"
    if len(uniq):
        comm_u = comm_names.is_communication(pd.Series(uniq, dtype=object), comm)
        kind[comm_u[np.asarray(inv).reshape(-1)]] = "communication"
    return kind


def timed(events: pd.DataFrame) -> pd.DataFrame:
    """The events that have a time: a ts the reader could not hold (NA, said in the trace's
    repairs) places its event in no step and no interval."""
    ts = events["ts_ns"]
    return events[ts.notna()] if ts.hasnans else events


def step_intervals(events: pd.DataFrame, repeats: bool = False) -> pd.DataFrame:
    """(step, start_ns, end_ns) from the host-side step marker spans: per step its first
    marker (the earliest), for assigning rows to steps. A marker whose id is impossible
    (beyond :data:`~dynprof_nb.traces.validate.MAX_STEP`) marks no step. With ``repeats``
    every marker instead (a marker written twice with the same times counted once), such an
    id as int64's max: the steps frame then carries the repeats and the impossible ids, which
    its check (:mod:`dynprof_nb.traces.validate`) drops with the one warning."""
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
    step_names = {  # an id past int64 (a hostile name) is int64's max: impossible, not fatal
        c: min(int(m.group(1)), _INT64_MAX)
        for c in cats
        if isinstance(c, str) and (m := STEP_RE.match(c))
    }
    sel = events[names.isin(list(step_names)) & (events["ph"] == "X")]
    sel = sel[sel["cat"].astype(object) != "gpu_user_annotation"]
    sel = sel[~sel["process"].astype(object).isin(DEVICE_PROCESSES)]
    if sel.empty:
        return step_intervals(events.iloc[:0])
    step = sel["name"].astype(object).map(step_names).to_numpy("int64")
    start = sel["ts_ns"].to_numpy("int64")
    end = (sel["ts_ns"] + sel["dur_ns"]).to_numpy("int64")
    order = np.lexsort((start, step))  # by step, then start: a step's first marker first
    step, start, end = step[order], start[order], end[order]
    keep = np.ones(len(step), bool)
    if repeats:  # but not a marker written twice, times and all (the same span, said once)
        keep[1:] = (step[1:] != step[:-1]) | (start[1:] != start[:-1]) | (end[1:] != end[:-1])
    else:
        keep[1:] = step[1:] != step[:-1]
        keep &= step <= validate.MAX_STEP
    step, start, end = step[keep], start[keep], end[keep]
    return pd.DataFrame({"step": step, "start_ns": start, "end_ns": end})


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


def device_steps(events: pd.DataFrame, intervals: pd.DataFrame, steps: pd.array) -> pd.array:
    """The ``step`` column with each device row moved to the step of its launch.

    A Kineto device row whose ``correlation`` matches a host event (``launch_ns``, found by
    the Chrome reader) belongs to the step that host event ran in, as HTA attributes kernels
    (``hta.common.trace.add_iteration``): the device runs behind the host, so its own time says
    the next step, or none. A device row with a correlation but no host event in the trace has
    no step (HTA: iteration -1), and so has a device row without a correlation in a trace whose
    device rows are linked (MTIA's DMA requests). In a trace with no links at all (Ascend, a
    hand-made trace) a device row keeps the step its own start time falls in."""
    if "launch_ns" not in events or "correlation" not in events:
        return steps
    dev = device_mask(events).to_numpy()
    linked = events["correlation"].notna().to_numpy() & dev
    if not linked.any():
        return steps
    launch = events["launch_ns"].to_numpy("int64", na_value=-1)[linked]
    by_launch = assign_steps(launch, intervals)
    by_launch[launch < 0] = pd.NA
    out = steps.copy()
    out[dev & ~linked] = pd.NA
    out[np.flatnonzero(linked)] = by_launch
    return out


def _union_us(
    starts: np.ndarray, ends: np.ndarray, lo: int, hi: int
) -> tuple[float, tuple[np.ndarray, np.ndarray]]:
    """The union (µs, and its merged intervals) of the intervals clipped to [lo, hi)."""
    s = np.clip(starts, lo, hi)
    e = np.clip(ends, lo, hi)
    keep = e > s
    total, merged_s, merged_e = union_us(s[keep], e[keep])
    return total, (merged_s, merged_e)


def _by_start(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intervals sorted by start, with the running maximum of their ends (for :func:`_near`)."""
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    return s, e, np.maximum.accumulate(e) if len(e) else e


def _near(
    by_start: tuple[np.ndarray, np.ndarray, np.ndarray], lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray]:
    """The intervals that may reach into [lo, hi): every one left out ends by ``lo`` or starts
    at ``hi`` or later, so clipping would drop it (a step reads its own kernels, not all)."""
    s, e, run = by_start
    a = int(np.searchsorted(run, lo, side="right"))
    b = int(np.searchsorted(s, hi, side="left"))
    return s[a:b], e[a:b]


def device_mask(events: pd.DataFrame) -> pd.Series:
    device = _isin(events["cat"], DEVICE_CATS) | _isin(events["process"], DEVICE_PROCESSES)
    return device & (events["ph"] == "X")


def _isin(col: pd.Series, values: set) -> pd.Series:
    """``col.astype(object).isin(values)``; a categorical column (every reader's ``cat`` and
    ``process``) is tested once per category and taken by each row's code, not by hashing an
    object per row (half a million rows: most of a device mask's time)."""
    if not isinstance(col.dtype, pd.CategoricalDtype):
        return col.astype(object).isin(values)
    hit = np.append(np.asarray([v in values for v in col.cat.categories], bool), False)
    return pd.Series(hit[col.cat.codes.to_numpy()], index=col.index)  # code -1 (NaN): False


def steps_from_events(
    events: pd.DataFrame, comm: comm_names.PatternSpec = None
) -> tuple[pd.DataFrame, str]:
    """Step table from the step marker spans, with the breakdown from the Overlap Analysis
    process (Ascend) or from device intervals (GPU/NPU); ``comm`` says which kernel names are
    communication (see :mod:`dynprof_nb.traces.comm`).

    From device intervals, each within the step's host span: ``computing_us`` is the union of
    computation (HTA's COMPUTATION: no copy, set, sync or communication), ``communication_us``
    the union of communication, ``overlapped_us`` their intersection (HTA's comm/comp overlap,
    per step), ``free_us`` the span with no device activity at all (copies count as busy)."""
    events = timed(events)
    iv = step_intervals(events, repeats=True)
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
    kinds = device_kinds(dev["name"], dev["cat"], comm)
    comm = kinds == "communication"
    comp = kinds == "computation"
    s_all = dev["ts_ns"].to_numpy(np.int64)
    e_all = s_all + dev["dur_ns"].to_numpy(np.int64)
    rows = []
    by_comp, by_comm = _by_start(s_all[comp], e_all[comp]), _by_start(s_all[comm], e_all[comm])
    by_all = _by_start(s_all, e_all)
    for lo, hi in zip(iv["start_ns"], iv["end_ns"], strict=True):
        c_us, c_iv = _union_us(*_near(by_comp, lo, hi), lo, hi)
        m_us, m_iv = _union_us(*_near(by_comm, lo, hi), lo, hi)
        ov = intersect_us(*c_iv, *m_iv)
        busy_us = _union_us(*_near(by_all, lo, hi), lo, hi)[0]
        rows.append((c_us, m_us, ov, (hi - lo) / 1000.0 - busy_us))
    out[["computing_us", "communication_us", "overlapped_us", "free_us"]] = rows
    return schema.conform(
        out, "steps"
    ), how + f" + device kernels ({int(comm.sum())} matched the communication patterns)"


def used_categories(col: pd.Series) -> pd.Series:
    """``col.astype(object).astype("category")`` (its values as a categorical of the values in
    use, sorted), computed from a categorical's codes: a take of the codes through a table of
    its categories, not one Python string per row hashed again (2.65M kernel names took a
    third of a 0.5 GB trace's streamed pass). Other columns, and categories that are not all
    strings (whose order pandas may infer otherwise), take the long way."""
    if not isinstance(col.dtype, pd.CategoricalDtype):
        return col.astype(object).astype("category")
    cats = col.cat.categories
    if cats.dtype != object and not pd.api.types.is_string_dtype(cats.dtype):
        return col.astype(object).astype("category")
    values = cats.to_numpy(dtype=object)
    if not all(type(v) is str for v in values):
        return col.astype(object).astype("category")
    codes = col.cat.codes.to_numpy()
    seen = np.zeros(len(values) + 1, bool)  # the last slot takes the NA code, -1
    seen[codes] = True
    keep = np.flatnonzero(seen[:-1])
    kept = values[keep]
    order = np.argsort(kept, kind="stable")
    lut = np.full(len(values) + 1, -1, np.int64)
    lut[keep[order]] = np.arange(len(keep))
    cat = pd.Categorical.from_codes(lut[codes], categories=pd.Index(list(kept[order])))
    return pd.Series(cat, index=col.index, name=col.name)


def _numeric_ids(tid: pd.Series) -> pd.Series:
    """``tid`` as Int64, NA where it is not a number (a device lane named by a string): an
    int column as it is, a categorical through its categories (one per lane, not a Python
    object per kernel: millions of them on a 5 GB trace)."""
    if pd.api.types.is_integer_dtype(tid.dtype):
        return tid.astype("Int64")
    if isinstance(tid.dtype, pd.CategoricalDtype):
        per_lane = _numeric_ids(pd.Series(tid.cat.categories.to_numpy(object))).array
        rows = per_lane.take(tid.cat.codes.to_numpy(), allow_fill=True)  # code -1: NA
        return pd.Series(rows, index=tid.index, name=tid.name)
    return pd.to_numeric(tid.astype(object), errors="coerce").astype("Int64")


def kernels_from_events(events: pd.DataFrame) -> pd.DataFrame:
    dev = events[device_mask(events)]
    if dev.empty:
        return schema.empty("kernels")
    stream = _numeric_ids(dev["tid"])
    out = pd.DataFrame(
        {
            "name": used_categories(dev["name"]),
            "type": used_categories(dev["cat"]),
            "core": used_categories(dev["process"]),
            "stream": stream,
            "start_ns": dev["ts_ns"].astype("Int64"),
            "duration_us": dev["dur_ns"] / 1000.0,
            "wait_us": np.nan,
            "step": dev["step"] if "step" in dev else pd.NA,
        }
    )
    for col in ("correlation", "launch_ns", "stream_arg"):
        if col in dev:
            out[col] = dev[col]
    return schema.conform(out.reset_index(drop=True), "kernels")


def _communication_candidates(events: pd.DataFrame) -> pd.Series:
    """The rows :func:`communication_from_events` may keep: device rows, HCCL tasks, and the
    complete host ranges of the categories it falls back to."""
    return (
        device_mask(events)
        | (events["process"].astype(object) == "HCCL")
        | ((events["ph"] == "X") & events["cat"].astype(object).isin(RANGE_CATS))
    )


def communication_from_events(
    events: pd.DataFrame, comm: comm_names.PatternSpec = None
) -> pd.DataFrame:
    """Device kernels (and HCCL tasks) whose names match the communication patterns; a trace
    with no device events at all gives its matching host ranges instead (gloo on CPU, a
    ``dynprof_nb.range(..., category="communication")``)."""
    events = ooc_rows(events, _communication_candidates)  # (an out-of-core frame: these only)
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
            "group": _groups(sel),
            "start_ns": sel["ts_ns"].astype("Int64"),
            "elapse_us": sel["dur_ns"] / 1000.0,
            "source": source,
        }
    )
    if "in_nelems" in sel:
        out = out.join(collective_sizes(sel))
    if "pg_ranks" in sel:
        out["group_ranks"] = sel["pg_ranks"].astype(object)
    return schema.conform(out.reset_index(drop=True), "communication")


def _groups(sel: pd.DataFrame) -> pd.Series:
    """The communication group of each row: the process group Kineto names on a collective
    (``Process Group Name``, the same on every member rank, as Ascend's group name is), else
    the stream or thread it ran on (gloo, older PyTorch, a trace without the args)."""
    lane = sel["thread"].astype(object)
    if "pg_name" not in sel:
        return lane
    return sel["pg_name"].astype(object).where(sel["pg_name"].notna(), lane)


#: bytes per element of the ``dtype`` names Kineto writes (c10's ScalarType names)
DTYPE_BYTES = {
    "Byte": 1,
    "Char": 1,
    "Bool": 1,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1,
    "Float8_e5m2fnuz": 1,
    "QInt8": 1,
    "QUInt8": 1,
    "Short": 2,
    "Half": 2,
    "BFloat16": 2,
    "ComplexHalf": 4,
    "Int": 4,
    "Float": 4,
    "QInt32": 4,
    "Long": 8,
    "Double": 8,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "UInt16": 2,
    "UInt32": 4,
    "UInt64": 8,
}

#: nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md) per collective, for n ranks
_BUS_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "_allgather_base": lambda n: (n - 1) / n,
    "allgather_into_tensor_coalesced": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "_reduce_scatter_base": lambda n: (n - 1) / n,
    "reduce_scatter_tensor_coalesced": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "alltoall_base": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def collective_sizes(rows: pd.DataFrame) -> pd.DataFrame:
    """Message size and bandwidths of NCCL collectives from Kineto's ``args`` (``In/Out msg
    nelems``, ``dtype``, ``Group size``, ``Collective name``), as nccl-tests defines them
    (doc/PERFORMANCE.md): ``size_mb`` is the larger of the input and output buffers
    (allreduce: the buffer; allgather: the gathered output; reducescatter: the scattered
    input), ``algbw_gbps = size / time``, ``busbw_gbps = algbw x factor`` (allreduce 2(n-1)/n;
    allgather, reducescatter, alltoall (n-1)/n; broadcast, reduce, send/recv 1) with n the group
    size. ``bandwidth_gbps`` is the algorithm bandwidth. GB/s are 1e9 bytes a second; MB 1e6."""
    elem = rows["dtype"].astype(object).map(DTYPE_BYTES).astype("float64")
    n_el = np.fmax(rows["in_nelems"].to_numpy("float64"), rows["out_nelems"].to_numpy("float64"))
    size = n_el * elem.to_numpy("float64")
    secs = rows["dur_ns"].to_numpy("float64") / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(secs > 0, size / secs / 1e9, np.nan)
    n = rows["group_size"].to_numpy("float64")
    names = rows["collective"].astype(object).fillna("").str.lower().to_numpy(dtype=object)
    factor = np.array(
        [
            _BUS_FACTOR[c](g) if c in _BUS_FACTOR and g >= 1 else np.nan
            for c, g in zip(names, n, strict=True)
        ],
        dtype="float64",
    )
    return pd.DataFrame(
        {
            "collective": rows["collective"].astype(object).to_numpy(),
            "dtype": rows["dtype"].astype(object).to_numpy(),
            "group_size": rows["group_size"].astype("Int64").to_numpy(),
            "size_mb": size / 1e6,
            "bandwidth_gbps": algbw,
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * factor,
        },
        index=rows.index,
    )


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
