"""Readers for MindSpore's FRAMEWORK/ files (written on CPU, where no ASCEND CSVs exist)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dynprof_nb.contract.protocol import STEP_PREFIX

from ... import schema
from ...errors import TraceFormatError
from ..ascend.text import read_csv
from ..common.timestamps import parse_scaled


def cpu_op_detail(path: str | Path) -> pd.DataFrame:
    """cpu_op_detail_info_{rank}.csv as an ops frame (name = full_op_name, times from ms)."""
    raw = read_csv(path)
    need = {"full_op_name", "op_occurrences", "op_total_time(ms)"}
    if not need <= set(raw.columns):
        raise TraceFormatError(
            path, f"not a cpu_op_detail_info CSV: needs columns {sorted(need)}", line=1
        )
    total = pd.to_numeric(raw["op_total_time(ms)"], errors="coerce") * 1000.0
    count = pd.to_numeric(raw["op_occurrences"], errors="coerce").fillna(0).astype("int64")
    out = pd.DataFrame(
        {
            "name": raw["full_op_name"].astype(str),
            "count": count,
            "total_us": total,
            "self_us": total,
            "avg_us": total / count.where(count > 0),
            "share": total / total.sum(),
            "type": raw.get("op_type"),
        }
    )
    return schema.conform(out.sort_values("total_us", ascending=False, ignore_index=True), "ops")


def cpu_op_execute_timestamps(path: str | Path) -> pd.DataFrame:
    """cpu_op_execute_timestamp_{rank}.txt (``name;type;start_ns,dur_ms,tid ...``) as events."""
    names, types, ts, dur, tid = [], [], [], [], []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.rstrip("\n").split(";")
            if len(parts) < 3:
                if line.strip():
                    raise TraceFormatError(
                        path, "expected 'name;type;start,dur,tid ...'", line=lineno
                    )
                continue
            for item in parts[2].split():
                fields = item.split(",")
                if len(fields) < 2:
                    continue
                d = parse_scaled(fields[1], 6)
                if not fields[0].isdigit() or d is None:
                    continue
                names.append(parts[0])
                types.append(parts[1])
                ts.append(int(fields[0]))
                dur.append(d)
                tid.append(int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else 0)
    n = len(names)
    out = pd.DataFrame(
        {
            "name": pd.Categorical(names),
            "cat": pd.Categorical(types),
            "ph": pd.Categorical(["X"] * n),
            "pid": np.zeros(n, np.int64),
            "tid": np.asarray(tid, dtype=np.int64),
            "process": pd.Categorical(["CPU OP"] * n),
            "thread": pd.Categorical([f"Thread {t}" for t in tid]),
            "ts_ns": np.asarray(ts, dtype=np.int64),
            "dur_ns": np.asarray(dur, dtype=np.int64),
        }
    )
    return out.sort_values("ts_ns", ignore_index=True)


def cpu_memory_record(path: str | Path) -> pd.DataFrame:
    """cpu_ms_memory_record_{rank}.txt: Timestamp(ns), Total Allocated/Reserved/Active(Byte)."""
    raw = read_csv(path)
    if "Timestamp(ns)" not in raw.columns:
        raise TraceFormatError(path, "not a cpu_ms_memory_record file: no 'Timestamp(ns)'", line=1)
    out = pd.DataFrame(
        {
            "ts_ns": pd.to_numeric(raw["Timestamp(ns)"], errors="coerce"),
            "device": "cpu",
            "allocated_bytes": pd.to_numeric(raw.get("Total Allocated(Byte)"), errors="coerce"),
            "reserved_bytes": pd.to_numeric(raw.get("Total Reserved(Byte)"), errors="coerce"),
            "active_bytes": pd.to_numeric(raw.get("Total Active(Byte)"), errors="coerce"),
            "delta_bytes": np.nan,
            "name": "MindSpore CPU",
            "source": Path(path).name,
        }
    )
    out = out[out["ts_ns"].notna()]
    out["ts_ns"] = out["ts_ns"].astype("int64")
    return schema.conform(out.reset_index(drop=True), "memory")


STEP_MARKER = "step_marker"


def step_markers(path: str | Path) -> pd.DataFrame:
    """``dynprof_steps.csv`` (name, cat, start_ns, end_ns, tid) as events.

    dynprof_nb's MindSpore backend writes it because MindSpore on CPU records no step markers:
    one step marker row per recorded step and one row per user range, in wall-clock ns.
    """
    raw = read_csv(path)
    missing = {"name", "cat", "start_ns", "end_ns"} - set(raw.columns)
    if missing:
        raise TraceFormatError(
            path, f"not a dynprof_steps.csv: no column {sorted(missing)}", line=1
        )
    start = pd.to_numeric(raw["start_ns"], errors="coerce")
    end = pd.to_numeric(raw["end_ns"], errors="coerce")
    keep = start.notna() & end.notna() & (end >= start)
    raw, start, end = raw[keep], start[keep].astype("int64"), end[keep].astype("int64")
    tid = pd.to_numeric(raw.get("tid", 0), errors="coerce").fillna(0).astype("int64")
    n = len(raw)
    names = raw["name"].astype(str)
    # the steps bound the window's steps; they are not operations of MindSpore's own threads
    cats = raw["cat"].astype(str).where(~names.str.startswith(STEP_PREFIX), STEP_MARKER)
    return pd.DataFrame(
        {
            "name": pd.Categorical(names),
            "cat": pd.Categorical(cats),
            "ph": pd.Categorical(["X"] * n),
            "pid": np.zeros(n, np.int64),
            "tid": tid.to_numpy(),
            "process": pd.Categorical(["dynprof_nb"] * n),
            "thread": pd.Categorical([f"Thread {t}" for t in tid]),
            "ts_ns": start.to_numpy(),
            "dur_ns": (end - start).to_numpy(),
        }
    )
