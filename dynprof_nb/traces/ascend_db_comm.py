"""Communication frames of an Ascend profiler database: HCCL ops, their tasks, per-op times and
per-link bandwidth, from ``COMMUNICATION_OP`` / ``COMMUNICATION_TASK_INFO`` x ``TASK`` or, when
torch_npu's analysis.db has them, its ``CommAnalyzer*`` tables (the numbers of
communication.json / communication_matrix.json)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dynprof_nb.traces import schema
from dynprof_nb.traces.dbfile import DbFile, enum, ns, raw, text
from dynprof_nb.traces.intervals import steps_of, union_by

# communication task types that wait rather than move data (the rest count as transit)
WAIT_TASKS = ("Notify Wait", "Notify_Wait", "NOTIFY_WAIT")
SIGNAL_TASKS = (
    "Notify Record",
    "Notify_Record",
    "Write Value",
    "Write_Value",
    "EVENT_RECORD",
    "EVENT_WAIT",
)
TASK_COLUMNS = [
    "op_id",
    "task",
    "start_ns",
    "end_ns",
    "src_rank",
    "dst_rank",
    "transport",
    "link",
    "size_bytes",
]


def comm_ops(db: DbFile) -> pd.DataFrame:
    """COMMUNICATION_OP rows with both times (exact int64 ns), names resolved."""
    df = db.select(
        "COMMUNICATION_OP",
        [
            ns("startNs", "start_ns"),
            ns("endNs", "end_ns"),
            text("opName", "name", required=True),
            text("opType", "type"),
            text("groupName", "grp"),
            raw("opId", "op_id"),
            raw("connectionId", "connection_id"),
            enum("dataType", "ENUM_HCCL_DATA_TYPE", "data_type"),
            text("algType", "alg_type"),
            raw("count", "count"),
        ],
    )
    return df[df["start_ns"].notna() & df["end_ns"].notna()].astype(
        {"start_ns": "int64", "end_ns": "int64"}
    )


def comm_tasks(db: DbFile) -> pd.DataFrame:
    """COMMUNICATION_TASK_INFO x TASK: one row per HCCL task (links, sizes, durations)."""
    if not db.has("COMMUNICATION_TASK_INFO", "TASK"):
        return pd.DataFrame(columns=TASK_COLUMNS)
    info = db.select(
        "COMMUNICATION_TASK_INFO",
        [
            raw("globalTaskId", "gid", required=True),
            raw("opId", "op_id"),
            text("taskType", "info_task"),
            raw("srcRank", "src_rank"),
            raw("dstRank", "dst_rank"),
            enum("transportType", "ENUM_HCCL_TRANSPORT_TYPE", "transport"),
            enum("linkType", "ENUM_HCCL_LINK_TYPE", "link"),
            raw("size", "size_bytes"),
        ],
        what="the communication tasks (COMMUNICATION_TASK_INFO)",
    )
    task = db.select(
        "TASK",
        [
            raw("globalTaskId", "gid", required=True),
            text("taskType", "task"),
            ns("startNs", "start_ns"),
            ns("endNs", "end_ns"),
        ],
        what="the communication tasks (TASK)",
    )
    df = info.merge(task, on="gid", how="inner").drop(columns="gid")
    # the task kind is on TASK in torch_npu dbs (COMMUNICATION_TASK_INFO says N/A at Level0)
    info_task = df.pop("info_task")
    df["task"] = df["task"].where(df["task"].notna() & (df["task"] != "N/A"), info_task)
    return df[TASK_COLUMNS]


def communication(db: DbFile, ana: DbFile | None, step_time: pd.DataFrame) -> pd.DataFrame:
    """One row per communication op, with the columns of the communication.json reader.

    analysis.db ``CommAnalyzerTime``/``CommAnalyzerBandwidth`` when present (the same numbers as
    communication.json); otherwise COMMUNICATION_OP with wait (Notify Wait tasks) and transit
    (data-moving tasks) summed from its HCCL tasks.
    """
    if ana is not None and "hccl_op_name" in ana.columns("CommAnalyzerTime"):
        return _analysis_comm(ana)
    if not db.has("COMMUNICATION_OP"):  # a single-device run: no HCCL, no table
        return schema.empty("communication")
    ops = comm_ops(db)
    if ops.empty:
        return schema.empty("communication")
    tasks = comm_tasks(db)
    wait = transit = size = pd.Series(dtype="float64")
    if len(tasks) and tasks["op_id"].notna().any():
        kind = tasks["task"].astype(str)
        is_wait = kind.isin(WAIT_TASKS)
        moves = ~is_wait & ~kind.isin(SIGNAL_TASKS)
        wait = union_by(tasks[is_wait])
        transit = union_by(tasks[moves])
        sz = pd.to_numeric(tasks["size_bytes"], errors="coerce")
        ok = moves & (sz > 0)
        size = (sz[ok] / 1e6).groupby(tasks["op_id"][ok]).sum()
    op = ops["op_id"]
    transit_us = op.map(transit).astype("float64")
    size_mb = op.map(size).astype("float64")
    out = pd.DataFrame(
        {
            "step": steps_of(ops["start_ns"].to_numpy("int64"), step_time),
            "name": ops["name"],
            "group": ops["grp"],
            "start_ns": pd.array(ops["start_ns"], dtype="Int64"),
            "elapse_us": (ops["end_ns"] - ops["start_ns"]) / 1000.0,
            "transit_us": transit_us,
            "wait_us": op.map(wait).astype("float64"),
            "synchronization_us": np.nan,
            "idle_us": np.nan,
            "size_mb": size_mb,
            "bandwidth_gbps": size_mb / (transit_us / 1000.0),
            "source": db.path.name,
            "type": ops["type"],
            "op_id": ops["op_id"],
            "end_ns": ops["end_ns"],
            "data_type": ops["data_type"],
            "alg_type": ops["alg_type"],
        }
    )
    return schema.conform(out.sort_values("start_ns", ignore_index=True), "communication")


def _analysis_comm(ana: DbFile) -> pd.DataFrame:
    t = ana.read_all("CommAnalyzerTime")
    bw = ana.columns("CommAnalyzerBandwidth")
    size = pd.Series(dtype="float64")
    if {"hccl_op_name", "transit_size"} <= set(bw):
        b = ana.read_all("CommAnalyzerBandwidth")
        key = (
            "transport_type"
            if "transport_type" in b
            else ("band_type" if "band_type" in b else None)
        )
        if key:
            b = b[b[key].astype(str).isin(["SDMA", "RDMA"])]
        size = pd.to_numeric(b["transit_size"], errors="coerce").groupby(b["hccl_op_name"]).sum()

    def ms(c: str) -> pd.Series:
        return (
            pd.to_numeric(t[c], errors="coerce") * 1000.0
            if c in t
            else pd.Series(np.nan, index=t.index)
        )

    start = t.get("start_timestamp")
    out = pd.DataFrame(
        {
            "step": pd.to_numeric(t.get("step"), errors="coerce") if "step" in t else pd.NA,
            "name": t["hccl_op_name"],
            "group": t.get("group_name"),
            "start_ns": None
            if start is None
            else pd.array(
                [None if v is None or v != v else round(float(v) * 1000) for v in start],
                dtype="Int64",
            ),
            "elapse_us": ms("elapse_time"),
            "transit_us": ms("transit_time"),
            "wait_us": ms("wait_time"),
            "synchronization_us": ms("synchronization_time"),
            "idle_us": ms("idle_time"),
            "size_mb": t["hccl_op_name"].map(size).astype("float64"),
            "source": ana.path.name,
        }
    )
    out["bandwidth_gbps"] = out["size_mb"] / (out["transit_us"] / 1000.0)
    if "type" in t:
        out["kind"] = t["type"]
    return schema.conform(out, "communication")


def links(db: DbFile, ana: DbFile | None, step_time: pd.DataFrame) -> pd.DataFrame:
    """Per communication op and link (src -> dst rank, transport): size, transit time,
    bandwidth, from analysis.db CommAnalyzerMatrix or the HCCL tasks."""
    if ana is not None and {"src_rank", "dst_rank", "transit_size"} <= set(
        ana.columns("CommAnalyzerMatrix")
    ):
        m = ana.read_all("CommAnalyzerMatrix")
        return links_frame(
            m.get("step"),
            m.get("hccl_op_name"),
            m.get("group_name"),
            m["src_rank"],
            m["dst_rank"],
            m.get("transport_type"),
            pd.to_numeric(m["transit_size"], errors="coerce"),
            pd.to_numeric(m.get("transit_time"), errors="coerce") * 1000.0,
        )
    tasks = comm_tasks(db)
    sz = pd.to_numeric(tasks.get("size_bytes"), errors="coerce")
    ok = (sz > 0) & tasks["src_rank"].notna() & (pd.to_numeric(tasks["src_rank"]) < 2**31)
    tasks = tasks[ok]
    if tasks.empty:
        return links_frame(*([pd.Series(dtype=object)] * 8))
    ops = comm_ops(db).set_index("op_id")
    g = (
        tasks.assign(dur=(tasks["end_ns"] - tasks["start_ns"]) / 1000.0, mb=sz[ok] / 1e6)
        .groupby(["op_id", "src_rank", "dst_rank", "transport"], dropna=False)
        .agg(size_mb=("mb", "sum"), transit_us=("dur", "sum"))
        .reset_index()
    )
    steps = steps_of(g["op_id"].map(ops["start_ns"]).fillna(0).to_numpy("int64"), step_time)
    return links_frame(
        steps,
        g["op_id"].map(ops["name"]),
        g["op_id"].map(ops["grp"]),
        g["src_rank"],
        g["dst_rank"],
        g["transport"],
        g["size_mb"],
        g["transit_us"],
    )


def links_frame(step, name, group, src, dst, transport, size_mb, transit_us) -> pd.DataFrame:
    """The links frame from its columns (any of step/name/group/transport may be None)."""
    size_mb = (
        pd.to_numeric(pd.Series(size_mb), errors="coerce").astype("float64").reset_index(drop=True)
    )
    transit_us = (
        pd.to_numeric(pd.Series(transit_us), errors="coerce")
        .astype("float64")
        .reset_index(drop=True)
    )
    n = len(size_mb)

    def col(v, dtype=None):
        if v is None:
            return pd.Series([pd.NA] * n, dtype=dtype or object)
        s = pd.Series(v).reset_index(drop=True)
        return pd.to_numeric(s, errors="coerce").astype(dtype) if dtype else s

    return pd.DataFrame(
        {
            "step": col(step, "Int64"),
            "name": col(name),
            "group": col(group),
            "src_rank": col(src, "Int64"),
            "dst_rank": col(dst, "Int64"),
            "transport": col(transport),
            "size_mb": size_mb,
            "transit_us": transit_us,
            "bandwidth_gbps": size_mb / (transit_us / 1000.0),
        }
    )
