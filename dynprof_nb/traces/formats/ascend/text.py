"""Readers for Ascend ASCEND_PROFILER_OUTPUT files: CSVs, communication.json and the SQLite db.

Column names follow torch_npu's and MindSpore's own exports; timestamps are parsed from text
so they stay exact (kernel start times carry a trailing tab and 16 significant digits, more
than float64 holds).
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from ... import schema
from ...errors import TraceFormatError
from ..common.timestamps import NA_NS, str_us_to_ns
from . import bandwidth as ascend_bandwidth

MB = 1024 * 1024


def _exact_ns(col: pd.Series) -> pd.Series:
    vals = [
        str_us_to_ns(v) if isinstance(v, str) else (None if v != v else str_us_to_ns(repr(v)))
        for v in col.tolist()
    ]
    # a time written but beyond int64 ns (1e300) is impossible, not missing: NA_NS, which
    # the frames' check (traces/validate.py) drops and counts as a negative time
    return pd.array(
        [v if v is None or -(2**63) < v < 2**63 else NA_NS for v in vals], dtype="Int64"
    )


def read_csv(path: str | Path, time_cols: tuple[str, ...] = ()) -> pd.DataFrame:
    """pandas CSV read where timestamp columns stay text (parsed exactly later)."""
    try:
        return pd.read_csv(
            path,
            dtype={c: str for c in time_cols},
            na_values=["N/A", "NA", "-"],
            keep_default_na=True,
            skipinitialspace=False,
            on_bad_lines="warn",
        )
    except pd.errors.EmptyDataError as exc:
        raise TraceFormatError(
            path,
            "CSV file is empty",
            offset=0,
            hint="the analysis step may have been interrupted; re-run it",
        ) from exc
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise TraceFormatError(
            path,
            f"cannot parse CSV: {exc}",
            offset=0,
            hint="check that this is a text CSV written by the profiler",
        ) from exc


def _num(frame: pd.DataFrame, *names: str) -> pd.Series:
    for n in names:
        if n in frame.columns:
            return pd.to_numeric(frame[n], errors="coerce")
    return pd.Series(np.nan, index=frame.index)


def kernel_details(path: str | Path) -> pd.DataFrame:
    raw = read_csv(path, ("Start Time(us)",))
    if "Start Time(us)" not in raw.columns or "Name" not in raw.columns:
        raise TraceFormatError(
            path,
            "not a kernel_details.csv: no 'Name'/'Start Time(us)' columns",
            line=1,
            hint="expected Ascend kernel_details.csv columns",
        )
    out = pd.DataFrame(
        {
            "name": raw["Name"],
            "type": raw.get("Type"),
            "core": raw.get("Accelerator Core"),
            "stream": _num(raw, "Stream ID").astype("Int64"),
            "start_ns": _exact_ns(raw["Start Time(us)"]),
            "duration_us": _num(raw, "Duration(us)"),
            "wait_us": _num(raw, "Wait Time(us)"),
            "step": _num(raw, "Step Id").astype("Int64"),
        }
    )
    used = {
        "Name",
        "Type",
        "Accelerator Core",
        "Stream ID",
        "Start Time(us)",
        "Duration(us)",
        "Wait Time(us)",
        "Step Id",
    }
    for c in raw.columns:
        if c not in used:
            out[c] = raw[c]
    return schema.conform(out, "kernels")


def op_statistic(path: str | Path) -> pd.DataFrame:
    raw = read_csv(path)
    if "OP Type" not in raw.columns:
        raise TraceFormatError(path, "not an op_statistic.csv: no 'OP Type' column", line=1)
    total = _num(raw, "Total Time(us)")
    out = pd.DataFrame(
        {
            "name": raw["OP Type"].astype(str),
            "count": _num(raw, "Count").fillna(0).astype("int64"),
            "total_us": total,
            "self_us": total,
            "avg_us": _num(raw, "Avg Time(us)"),
            "min_us": _num(raw, "Min Time(us)"),
            "max_us": _num(raw, "Max Time(us)"),
            "share": _num(raw, "Ratio(%)") / 100.0,
        }
    )
    if "Core Type" in raw.columns:
        out["core"] = raw["Core Type"]
    return schema.conform(out.sort_values("total_us", ascending=False, ignore_index=True), "ops")


# msprof-analyze's ClusterStepTraceTime / analysis.db StepTraceTime spell the columns this way
_SNAKE_STEP_COLUMNS = {
    "step": "Step",
    "type": "Type",
    "index": "Index",
    "computing": "Computing",
    "communication_not_overlapped": "Communication(Not Overlapped)",
    "overlapped": "Overlapped",
    "communication": "Communication",
    "free": "Free",
    "stage": "Stage",
    "bubble": "Bubble",
    "preparing": "Preparing",
}


def step_trace_time(path: str | Path) -> pd.DataFrame:
    raw = read_csv(path)
    if "Computing" not in raw.columns and "computing" in raw.columns:
        raw = raw.rename(columns=_SNAKE_STEP_COLUMNS)
    if "Computing" not in raw.columns:
        raise TraceFormatError(path, "not a step_trace_time.csv: no 'Computing' column", line=1)
    comp = _num(raw, "Computing")
    not_ov = _num(raw, "Communication(Not Overlapped)")
    free = _num(raw, "Free")
    out = pd.DataFrame(
        {
            "step": _num(raw, "Step").fillna(-1).astype("int64"),
            "duration_us": comp + not_ov.fillna(0) + free.fillna(0),
            "computing_us": comp,
            "communication_us": _num(raw, "Communication"),
            "overlapped_us": _num(raw, "Overlapped"),
            "free_us": free,
        }
    )
    if "Type" in raw.columns and "Index" in raw.columns:  # msprof-analyze cluster form
        is_rank = raw["Type"].astype(str).str.lower() == "rank"
        out["rank"] = _num(raw, "Index").where(is_rank).astype("Int64")
    elif "Device_id" in raw.columns:
        out["device"] = _num(raw, "Device_id").astype("Int64")
    for c in ("Stage", "Bubble", "Preparing"):
        if c in raw.columns:
            out[c.lower() + "_us"] = _num(raw, c)
    return schema.conform(out, "steps")


def memory_csv(path: str | Path) -> pd.DataFrame:
    """memory_record.csv, operator_memory.csv or npu_module_mem.csv into memory rows."""
    name = Path(path).name
    if name.startswith("operator_memory"):
        raw = read_csv(path, ("Allocation Time(us)", "Release Time(us)"))
        size = _num(raw, "Size(KB)") * 1024
        dev = raw.get("Device Type", pd.Series("", index=raw.index)).astype(str)
        alloc = pd.DataFrame(
            {
                "ts_ns": _exact_ns(raw["Allocation Time(us)"]),
                "device": dev,
                "allocated_bytes": _num(raw, "Allocation Total Allocated(MB)") * MB,
                "reserved_bytes": _num(raw, "Allocation Total Reserved(MB)") * MB,
                "active_bytes": _num(raw, "Allocation Total Active(MB)") * MB,
                "delta_bytes": size,
                "name": raw["Name"],
            }
        )
        rel = pd.DataFrame(
            {
                "ts_ns": _exact_ns(raw["Release Time(us)"]),
                "device": dev,
                "allocated_bytes": _num(raw, "Release Total Allocated(MB)") * MB,
                "reserved_bytes": _num(raw, "Release Total Reserved(MB)") * MB,
                "active_bytes": _num(raw, "Release Total Active(MB)") * MB,
                "delta_bytes": -size,
                "name": raw["Name"],
            }
        )
        out = pd.concat([alloc, rel], ignore_index=True)
    else:
        raw = read_csv(path, ("Timestamp(us)",))
        if "Timestamp(us)" not in raw.columns:
            raise TraceFormatError(path, "memory CSV without 'Timestamp(us)' column", line=1)
        dev = raw.get("Device Type", raw.get("Device", pd.Series("", index=raw.index))).astype(str)
        out = pd.DataFrame(
            {
                "ts_ns": _exact_ns(raw["Timestamp(us)"]),
                "device": dev,
                "allocated_bytes": _num(raw, "Total Allocated(MB)") * MB,
                "reserved_bytes": _num(raw, "Total Reserved(MB)") * MB,
                "active_bytes": _num(raw, "Total Active(MB)") * MB,
                "delta_bytes": np.nan,
                "name": raw.get("Component", ""),
            }
        )
    out = out[out["ts_ns"].notna()]
    out["ts_ns"] = out["ts_ns"].astype("int64")
    out["source"] = name
    return schema.conform(out.sort_values("ts_ns", ignore_index=True), "memory")


_STEP_KEY = re.compile(r"^step(\d*)$", re.IGNORECASE)


def _json_object(path: str | Path, what: str) -> dict:
    """An Ascend analysis JSON whose top level must be an object (else a TraceFormatError)."""
    try:
        doc = msgspec.json.decode(Path(path).read_bytes())
    except msgspec.DecodeError as exc:
        raise TraceFormatError(
            path, f"invalid JSON: {exc}", hint="re-run the Ascend analysis"
        ) from exc
    if not isinstance(doc, dict):
        raise TraceFormatError(path, f"not a {what}: top level is not an object", offset=0)
    return doc


def communication_json(path: str | Path) -> pd.DataFrame:
    """Per-rank communication.json, or msprof-analyze's cluster_communication.json (adds rank):
    one row per op; ``size_mb`` / ``bandwidth_gbps`` follow :func:`ascend_bandwidth.op_totals`
    (SDMA + RDMA over their own transit times), ``transit_us`` is the op's "Transit Time"."""
    ops, bw = _communication_walk(path)
    if ops.empty:
        return schema.empty("communication")
    tot = ascend_bandwidth.op_totals(bw, "_op")
    for c in ("size_mb", "transport_transit_us", "bandwidth_gbps"):
        ops[c] = ops["_op"].map(tot[c]).astype("float64")
    ops["source"] = Path(path).name
    return schema.conform(ops.drop(columns="_op"), "communication")


def communication_bandwidth_json(path: str | Path) -> pd.DataFrame:
    """communication.json's "Communication Bandwidth Info": one row per op and transport
    (HCCS, PCIE, SIO, SDMA = their total, RDMA) with Ascend's own size, transit time,
    bandwidth and large-packet ratio (see :mod:`ascend_bandwidth`)."""
    ops, bw = _communication_walk(path)
    if bw.empty:
        return ascend_bandwidth.frame(pd.DataFrame(columns=ascend_bandwidth.COLUMNS))
    keep = [c for c in ("rank", "kind") if c in ops]
    bw = bw.merge(ops[["_op", "step", "name", "group", *keep]], on="_op", how="left")
    return ascend_bandwidth.frame(bw.drop(columns="_op"))


def _communication_walk(path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per op, one row per op and transport), joined by ``_op``."""
    doc = _json_object(path, "communication.json")
    rows: list[dict] = []
    bw_rows: list[dict] = []

    def walk(node: dict, ctx: dict) -> None:
        for key, val in node.items():
            if not isinstance(val, dict):
                continue
            c = dict(ctx)
            m = _STEP_KEY.match(str(key))
            if m:
                c["step"] = int(m.group(1)) if m.group(1) else None
            elif "@" in str(key):
                c["name"], _, c["group"] = str(key).partition("@")
            elif str(key).isdigit() and "name" in c:
                c["rank"] = int(key)
            elif key in ("collective", "p2p"):
                c["kind"] = key
            if "Communication Time Info" in val:
                op = len(rows)
                rows.append({"_op": op, **_comm_row(val, c)})
                bw_rows.extend({"_op": op, **b} for b in _bandwidth_rows(val))
            else:
                walk(val, c)

    walk(doc, {})
    return pd.DataFrame(rows), pd.DataFrame(
        bw_rows,
        columns=[
            "_op",
            "transport",
            "size_mb",
            "transit_us",
            "bandwidth_gbps",
            "large_packet_ratio",
        ],
    )


def _comm_row(val: dict, ctx: dict) -> dict:
    t = val.get("Communication Time Info") or {}
    start = t.get("Start Timestamp(us)")
    row = {
        "step": ctx.get("step"),
        "name": ctx.get("name"),
        "group": ctx.get("group"),
        "start_ns": str_us_to_ns(repr(start))
        if isinstance(start, int | float)
        else (str_us_to_ns(start) if isinstance(start, str) else None),
        "elapse_us": _ms(t.get("Elapse Time(ms)")),
        "transit_us": _ms(t.get("Transit Time(ms)")),
        "wait_us": _ms(t.get("Wait Time(ms)")),
        "synchronization_us": _ms(t.get("Synchronization Time(ms)")),
        "idle_us": _ms(t.get("Idle Time(ms)")),
    }
    if "rank" in ctx:
        row["rank"] = ctx["rank"]
    if "kind" in ctx:
        row["kind"] = ctx["kind"]
    return row


def _bandwidth_rows(val: dict) -> list[dict]:
    bw = val.get("Communication Bandwidth Info") or {}
    return [
        {
            "transport": str(tr),
            "size_mb": _float(v.get("Transit Size(MB)")),
            "transit_us": _ms(v.get("Transit Time(ms)")),
            "bandwidth_gbps": _float(v.get("Bandwidth(GB/s)")),
            "large_packet_ratio": _float(v.get("Large Packet Ratio")),
        }
        for tr, v in bw.items()
        if isinstance(v, dict)
    ]


def _ms(v: object) -> float:
    try:
        return float(v) * 1000.0
    except (TypeError, ValueError):
        return np.nan


LINK_COLUMNS = [
    "step",
    "kind",
    "name",
    "group",
    "src_rank",
    "dst_rank",
    "transport",
    "size_mb",
    "transit_us",
    "bandwidth_gbps",
]


def communication_matrix_json(path: str | Path) -> pd.DataFrame:
    """communication_matrix.json (per rank) or msprof-analyze's cluster_communication_matrix.json:
    one row per op and link ``src-dst`` with transport type, size, transit time and bandwidth."""
    doc = _json_object(path, "communication_matrix.json")
    rows: list[dict] = []

    def walk(node: dict, ctx: dict) -> None:
        for key, val in node.items():
            if not isinstance(val, dict):
                continue
            k = str(key)
            c = dict(ctx)
            m = _STEP_KEY.match(k)
            if m:
                c["step"] = int(m.group(1)) if m.group(1) else None
            elif k in ("collective", "p2p"):
                c["kind"] = k
            elif "-" in k and all(p.strip().isdigit() for p in k.split("-", 1)) and "name" in c:
                src, dst = (int(p) for p in k.split("-", 1))
                size, ms = _float(val.get("Transit Size(MB)")), _float(val.get("Transit Time(ms)"))
                bw = _float(val.get("Bandwidth(GB/s)"))
                rows.append(
                    {
                        **c,
                        "src_rank": src,
                        "dst_rank": dst,
                        "transport": val.get("Transport Type"),
                        "size_mb": size,
                        "transit_us": ms * 1000.0,
                        "bandwidth_gbps": bw if bw == bw else size / ms if ms else np.nan,
                    }
                )
                continue
            elif "@" in k:
                c["name"], _, c["group"] = k.partition("@")
            else:  # "Total Op Info": a per-step aggregate of the ops beside it
                continue
            walk(val, c)

    walk(doc, {})
    out = pd.DataFrame(rows, columns=LINK_COLUMNS)
    out["step"] = pd.array(pd.to_numeric(out["step"], errors="coerce"), dtype="Int64")
    for c in ("src_rank", "dst_rank"):
        out[c] = out[c].astype("Int64")
    for c in ("size_mb", "transit_us", "bandwidth_gbps"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("float64")
    return out


def _float(v: object) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan


__all__ = [
    "kernel_details",
    "op_statistic",
    "step_trace_time",
    "memory_csv",
    "communication_json",
    "communication_bandwidth_json",
    "communication_matrix_json",
    "NA_NS",
]
