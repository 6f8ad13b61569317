"""Readers for Ascend ASCEND_PROFILER_OUTPUT files: CSVs, communication.json and the SQLite db.

Column names follow REFERENCE §2; timestamps are parsed from text so they stay exact (kernel
start times carry a trailing tab and 16 significant digits, more than float64 holds).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from . import schema
from ._time import NA_NS, str_us_to_ns
from .errors import TraceFormatError

MB = 1024 * 1024


def _exact_ns(col: pd.Series) -> pd.Series:
    vals = [str_us_to_ns(v) if isinstance(v, str) else (None if v != v else str_us_to_ns(repr(v)))
            for v in col.tolist()]
    return pd.array([v if v is not None else None for v in vals], dtype="Int64")


def read_csv(path: str | Path, time_cols: tuple[str, ...] = ()) -> pd.DataFrame:
    """pandas CSV read where timestamp columns stay text (parsed exactly later)."""
    try:
        return pd.read_csv(path, dtype={c: str for c in time_cols}, na_values=["N/A", "NA", "-"],
                           keep_default_na=True, skipinitialspace=False, on_bad_lines="warn")
    except pd.errors.EmptyDataError as exc:
        raise TraceFormatError(path, "CSV file is empty", offset=0,
                               hint="the analysis step may have been interrupted; re-run it") from exc
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise TraceFormatError(path, f"cannot parse CSV: {exc}", offset=0,
                               hint="check that this is a text CSV written by the profiler") from exc


def _num(frame: pd.DataFrame, *names: str) -> pd.Series:
    for n in names:
        if n in frame.columns:
            return pd.to_numeric(frame[n], errors="coerce")
    return pd.Series(np.nan, index=frame.index)


def kernel_details(path: str | Path) -> pd.DataFrame:
    raw = read_csv(path, ("Start Time(us)",))
    if "Start Time(us)" not in raw.columns or "Name" not in raw.columns:
        raise TraceFormatError(path, "not a kernel_details.csv: no 'Name'/'Start Time(us)' columns",
                               line=1, hint="expected Ascend kernel_details.csv columns")
    out = pd.DataFrame({
        "name": raw["Name"], "type": raw.get("Type"), "core": raw.get("Accelerator Core"),
        "stream": _num(raw, "Stream ID").astype("Int64"),
        "start_ns": _exact_ns(raw["Start Time(us)"]),
        "duration_us": _num(raw, "Duration(us)"), "wait_us": _num(raw, "Wait Time(us)"),
        "step": _num(raw, "Step Id").astype("Int64"),
    })
    used = {"Name", "Type", "Accelerator Core", "Stream ID", "Start Time(us)", "Duration(us)",
            "Wait Time(us)", "Step Id"}
    for c in raw.columns:
        if c not in used:
            out[c] = raw[c]
    return schema.conform(out, "kernels")


def op_statistic(path: str | Path) -> pd.DataFrame:
    raw = read_csv(path)
    if "OP Type" not in raw.columns:
        raise TraceFormatError(path, "not an op_statistic.csv: no 'OP Type' column", line=1)
    total = _num(raw, "Total Time(us)")
    out = pd.DataFrame({"name": raw["OP Type"].astype(str), "count": _num(raw, "Count").fillna(0).astype("int64"),
                        "total_us": total, "self_us": total, "avg_us": _num(raw, "Avg Time(us)"),
                        "min_us": _num(raw, "Min Time(us)"), "max_us": _num(raw, "Max Time(us)"),
                        "share": _num(raw, "Ratio(%)") / 100.0})
    if "Core Type" in raw.columns:
        out["core"] = raw["Core Type"]
    return schema.conform(out.sort_values("total_us", ascending=False, ignore_index=True), "ops")


def step_trace_time(path: str | Path) -> pd.DataFrame:
    raw = read_csv(path)
    if "Computing" not in raw.columns:
        raise TraceFormatError(path, "not a step_trace_time.csv: no 'Computing' column", line=1)
    comp = _num(raw, "Computing")
    not_ov = _num(raw, "Communication(Not Overlapped)")
    free = _num(raw, "Free")
    out = pd.DataFrame({"step": _num(raw, "Step").fillna(-1).astype("int64"),
                        "duration_us": comp + not_ov.fillna(0) + free.fillna(0),
                        "computing_us": comp, "communication_us": _num(raw, "Communication"),
                        "overlapped_us": _num(raw, "Overlapped"), "free_us": free})
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
        alloc = pd.DataFrame({"ts_ns": _exact_ns(raw["Allocation Time(us)"]), "device": dev,
                              "allocated_bytes": _num(raw, "Allocation Total Allocated(MB)") * MB,
                              "reserved_bytes": _num(raw, "Allocation Total Reserved(MB)") * MB,
                              "active_bytes": _num(raw, "Allocation Total Active(MB)") * MB,
                              "delta_bytes": size, "name": raw["Name"]})
        rel = pd.DataFrame({"ts_ns": _exact_ns(raw["Release Time(us)"]), "device": dev,
                            "allocated_bytes": _num(raw, "Release Total Allocated(MB)") * MB,
                            "reserved_bytes": _num(raw, "Release Total Reserved(MB)") * MB,
                            "active_bytes": _num(raw, "Release Total Active(MB)") * MB,
                            "delta_bytes": -size, "name": raw["Name"]})
        out = pd.concat([alloc, rel], ignore_index=True)
    else:
        raw = read_csv(path, ("Timestamp(us)",))
        if "Timestamp(us)" not in raw.columns:
            raise TraceFormatError(path, "memory CSV without 'Timestamp(us)' column", line=1)
        dev = raw.get("Device Type", raw.get("Device", pd.Series("", index=raw.index))).astype(str)
        out = pd.DataFrame({"ts_ns": _exact_ns(raw["Timestamp(us)"]), "device": dev,
                            "allocated_bytes": _num(raw, "Total Allocated(MB)") * MB,
                            "reserved_bytes": _num(raw, "Total Reserved(MB)") * MB,
                            "active_bytes": _num(raw, "Total Active(MB)") * MB,
                            "delta_bytes": np.nan, "name": raw.get("Component", "")})
    out = out[out["ts_ns"].notna()]
    out["ts_ns"] = out["ts_ns"].astype("int64")
    out["source"] = name
    return schema.conform(out.sort_values("ts_ns", ignore_index=True), "memory")


_STEP_KEY = re.compile(r"^step(\d*)$", re.IGNORECASE)


def communication_json(path: str | Path) -> pd.DataFrame:
    """Per-rank communication.json, or msprof-analyze's cluster_communication.json (adds rank)."""
    try:
        doc = msgspec.json.decode(Path(path).read_bytes())
    except msgspec.DecodeError as exc:
        raise TraceFormatError(path, f"invalid JSON: {exc}", hint="re-run the Ascend analysis") from exc
    if not isinstance(doc, dict):
        raise TraceFormatError(path, "not a communication.json: top level is not an object", offset=0)
    rows: list[dict] = []

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
                rows.append(_comm_row(val, c))
            else:
                walk(val, c)

    walk(doc, {})
    if not rows:
        return schema.empty("communication")
    out = pd.DataFrame(rows)
    out["source"] = Path(path).name
    return schema.conform(out, "communication")


def _comm_row(val: dict, ctx: dict) -> dict:
    t = val.get("Communication Time Info") or {}
    bw = val.get("Communication Bandwidth Info") or {}
    size = sum(float(v.get("Transit Size(MB)") or 0) for v in bw.values() if isinstance(v, dict))
    transit_ms = t.get("Transit Time(ms)")
    start = t.get("Start Timestamp(us)")
    row = {"step": ctx.get("step"), "name": ctx.get("name"), "group": ctx.get("group"),
           "start_ns": str_us_to_ns(repr(start)) if isinstance(start, int | float) else
           (str_us_to_ns(start) if isinstance(start, str) else None),
           "elapse_us": _ms(t.get("Elapse Time(ms)")), "transit_us": _ms(transit_ms),
           "wait_us": _ms(t.get("Wait Time(ms)")), "synchronization_us": _ms(t.get("Synchronization Time(ms)")),
           "idle_us": _ms(t.get("Idle Time(ms)")), "size_mb": size,
           "bandwidth_gbps": (size / float(transit_ms)) if transit_ms else np.nan}
    if "rank" in ctx:
        row["rank"] = ctx["rank"]
    if "kind" in ctx:
        row["kind"] = ctx["kind"]
    return row


def _ms(v: object) -> float:
    try:
        return float(v) * 1000.0
    except (TypeError, ValueError):
        return np.nan


# ---- SQLite (ascend_{mindspore,pytorch}_profiler_{rank}.db) ---------------------------------

def open_db(path: str | Path) -> sqlite3.Connection:
    try:
        con = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        return con
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(path, f"not a readable SQLite database ({exc})", offset=0,
                               hint="the profiler may still be writing it, or it is not a .db") from exc


def _tables(con: sqlite3.Connection) -> dict[str, list[str]]:
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {n: [r[1] for r in con.execute(f'PRAGMA table_info("{n}")')] for n in names}


def _strings(con: sqlite3.Connection, tables: dict) -> dict[int, str]:
    if "STRING_IDS" not in tables:
        return {}
    return dict(con.execute("SELECT id, value FROM STRING_IDS"))


def db_frames(path: str | Path) -> dict[str, pd.DataFrame]:
    """events, kernels, steps, communication, memory from the Ascend db (whichever tables exist)."""
    con = open_db(path)
    try:
        tables = _tables(con)
        strings = _strings(con, tables)
        out: dict[str, pd.DataFrame] = {}
        if "STEP_TIME" in tables:
            st = pd.read_sql_query("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY startNs", con)
            out["steps"] = schema.conform(pd.DataFrame({
                "step": st["id"].astype("int64"), "start_ns": st["startNs"].astype("Int64"),
                "duration_us": (st["endNs"] - st["startNs"]) / 1000.0}), "steps")
        if "TASK" in tables:
            join = "COMPUTE_TASK_INFO" in tables
            q = ("SELECT t.startNs, t.endNs, t.streamId, t.deviceId"
                 + (", c.name, c.opType" if join else ", t.taskType AS name, t.taskType AS opType")
                 + " FROM TASK t"
                 + (" LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId" if join else ""))
            tk = pd.read_sql_query(q, con)
            out["kernels"] = schema.conform(pd.DataFrame({
                "name": tk["name"].map(strings).fillna(tk["name"].astype(str)),
                "type": tk["opType"].map(strings), "core": "device " + tk["deviceId"].astype(str),
                "stream": tk["streamId"].astype("Int64"), "start_ns": tk["startNs"].astype("Int64"),
                "duration_us": (tk["endNs"] - tk["startNs"]) / 1000.0}), "kernels")
        if "COMMUNICATION_OP" in tables:
            co = pd.read_sql_query("SELECT opName, startNs, endNs, groupName FROM COMMUNICATION_OP", con)
            out["communication"] = schema.conform(pd.DataFrame({
                "name": co["opName"].map(strings), "group": co["groupName"].map(strings),
                "start_ns": co["startNs"].astype("Int64"),
                "elapse_us": (co["endNs"] - co["startNs"]) / 1000.0, "source": Path(path).name}),
                "communication")
        ev = []
        for table, proc in (("PYTORCH_API", "Python"), ("CANN_API", "CANN")):
            cols = tables.get(table, [])
            if {"startNs", "endNs", "name"} <= set(cols):
                tid = "globalTid" if "globalTid" in cols else "0"
                df = pd.read_sql_query(f"SELECT startNs, endNs, name, {tid} AS tid FROM {table}", con)
                ev.append(pd.DataFrame({"name": df["name"].map(strings).fillna(df["name"].astype(str)),
                                        "cat": table.lower(), "ph": "X", "pid": 0,
                                        "tid": df["tid"].astype("int64"), "process": proc,
                                        "thread": df["tid"].astype(str), "ts_ns": df["startNs"].astype("int64"),
                                        "dur_ns": (df["endNs"] - df["startNs"]).astype("int64")}))
        if "kernels" in out and not out["kernels"].empty:
            k = out["kernels"]
            ev.append(pd.DataFrame({"name": k["name"].astype(object), "cat": "device", "ph": "X", "pid": 1,
                                    "tid": k["stream"].fillna(-1).astype("int64"),
                                    "process": "Ascend Hardware",
                                    "thread": "Stream " + k["stream"].astype(str),
                                    "ts_ns": k["start_ns"].astype("int64"),
                                    "dur_ns": (k["duration_us"] * 1000).round().astype("int64")}))
        if ev:
            e = pd.concat(ev, ignore_index=True)
            for c in ("name", "cat", "ph", "process", "thread"):
                e[c] = e[c].astype("category")
            out["events"] = e.sort_values("ts_ns", ignore_index=True)
        return out
    finally:
        con.close()


__all__ = ["kernel_details", "op_statistic", "step_trace_time", "memory_csv",
           "communication_json", "db_frames", "NA_NS"]
