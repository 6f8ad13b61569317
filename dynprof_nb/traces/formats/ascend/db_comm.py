"""Communication frames of an Ascend profiler database: HCCL ops, their tasks, per-op times and
per-link bandwidth, from ``COMMUNICATION_OP`` / ``COMMUNICATION_TASK_INFO`` x ``TASK`` or, when
torch_npu's analysis.db has them, its ``CommAnalyzer*`` tables (the numbers of
communication.json / communication_matrix.json)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dynprof_nb.traces import schema, validate
from dynprof_nb.traces.formats.ascend import bandwidth as ascend_bandwidth
from dynprof_nb.traces.formats.common.sqlite import DbFile, enum, ns, raw, text
from dynprof_nb.traces.intervals import steps_of

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
    "plane",
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
    keep = df["start_ns"].notna() & df["end_ns"].notna() & ~validate.repeated(df["op_id"])
    return df[keep].astype({"start_ns": "int64", "end_ns": "int64"})


def comm_tasks(db: DbFile) -> pd.DataFrame:
    """COMMUNICATION_TASK_INFO x TASK: one row per HCCL task (links, sizes, durations)."""
    if not db.has("COMMUNICATION_TASK_INFO", "TASK"):
        return pd.DataFrame(columns=TASK_COLUMNS)
    info = db.select(
        "COMMUNICATION_TASK_INFO",
        [
            raw("globalTaskId", "gid", required=True),
            raw("opId", "op_id"),
            raw("planeId", "plane"),
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
    task = task[~validate.repeated(task["gid"])]  # a copied TASK row: once (AscendDb says)
    info = info[~validate.repeated(info["gid"])]
    df = info.merge(task, on="gid", how="inner").drop(columns="gid")
    # the task kind is on TASK in torch_npu dbs (COMMUNICATION_TASK_INFO says N/A at Level0)
    info_task = df.pop("info_task")
    df["task"] = df["task"].where(df["task"].notna() & (df["task"] != "N/A"), info_task)
    return df[TASK_COLUMNS]


def communication(
    db: DbFile, ana: DbFile | None, step_time: pd.DataFrame, notes: list[str] | None = None
) -> pd.DataFrame:
    """One row per communication op, with the columns of the communication.json reader.

    analysis.db ``CommAnalyzerTime``/``CommAnalyzerBandwidth`` when present (the same numbers as
    communication.json); otherwise COMMUNICATION_OP with transit, wait and synchronization from
    the HCCL tasks of the op's main plane (:func:`_plane_times`, Ascend's own definitions) and
    idle = elapse - transit - wait. Where the tasks carry no plane id (a Level0 export: planeId
    is 4294967295 on every task) those four are NaN: the planes' tasks run in parallel, mixed on
    one stream, so summing them counted every plane's wait (rank 1 of the Level0 sample waited
    198,676 µs in ops that lasted 93,994 µs), and no peer computes them there either (torch_npu
    writes no CommAnalyzerTime at Level0; msprof-analyze's communication_time_sum writes
    nothing). ``notes`` (if given) is told why. Either way ``size_mb`` and ``bandwidth_gbps``
    come from the per-transport rows of :func:`bandwidth` by the one rule of
    :func:`ascend_bandwidth.op_totals`, as the text reader's do.
    """
    if ana is not None and "hccl_op_name" in ana.columns("CommAnalyzerTime"):
        return _analysis_comm(ana)
    if not db.has("COMMUNICATION_OP"):  # a single-device run: no HCCL, no table
        return schema.empty("communication")
    ops = comm_ops(db)
    if ops.empty:
        return schema.empty("communication")
    tasks = comm_tasks(db)
    times = pd.DataFrame(columns=["transit_us", "wait_us", "synchronization_us"], dtype="float64")
    tot = ascend_bandwidth.op_totals(pd.DataFrame(columns=["op_id", "transport"]), "op_id")
    if len(tasks) and tasks["op_id"].notna().any():
        times = _plane_times(tasks)
        tot = ascend_bandwidth.op_totals(_task_bandwidth(tasks), "op_id")
        if notes is not None and len(times) < tasks["op_id"].nunique() and NO_PLANES not in notes:
            notes.append(NO_PLANES)
    op = ops["op_id"]
    elapse = (ops["end_ns"] - ops["start_ns"]) / 1000.0
    transit, wait = op.map(times["transit_us"]), op.map(times["wait_us"])
    out = pd.DataFrame(
        {
            "step": steps_of(ops["start_ns"].to_numpy("int64"), step_time),
            "name": ops["name"],
            "group": ops["grp"],
            "start_ns": pd.array(ops["start_ns"], dtype="Int64"),
            "elapse_us": elapse,
            "transit_us": transit.astype("float64"),
            "wait_us": wait.astype("float64"),
            "synchronization_us": op.map(times["synchronization_us"]).astype("float64"),
            "idle_us": (elapse - transit - wait).astype("float64"),
            "size_mb": op.map(tot["size_mb"]).astype("float64"),
            "bandwidth_gbps": op.map(tot["bandwidth_gbps"]).astype("float64"),
            "source": db.path.name,
            "type": ops["type"],
            "op_id": ops["op_id"],
            "end_ns": ops["end_ns"],
            "data_type": ops["data_type"],
            "alg_type": ops["alg_type"],
            "transport_transit_us": op.map(tot["transport_transit_us"]).astype("float64"),
        }
    )
    return schema.conform(out.sort_values("start_ns", ignore_index=True), "communication")


NO_PLANES = (
    "communication wait/transit/synchronization/idle unknown (NaN) for ops whose HCCL tasks "
    "carry no plane id (a Level0 export): the planes run in parallel, so their tasks cannot be "
    "summed, and Ascend's analysis gives none either"
)
# planeId of a task that has none (Level0 exports write UINT32_MAX on every task)
NO_PLANE = 2**32 - 1


def _plane_ids(tasks: pd.DataFrame) -> pd.Series:
    """Each task's planeId, NaN where it has none (missing, or the UINT32_MAX sentinel)."""
    plane = pd.to_numeric(tasks["plane"], errors="coerce")
    return plane.where(plane < NO_PLANE)


def _on_main_plane(tasks: pd.DataFrame, is_wait: pd.Series) -> pd.Series:
    """Whether each task is on its op's main plane, the one Ascend's op-level Transit / Wait
    Time are read from: the lowest planeId of the op that waits on a peer (plane 0 may hold
    only the copies within the device). The planes run in parallel, so the op's times are one
    plane's, not all planes' together. Tasks without a plane id are on none."""
    plane = _plane_ids(tasks)
    waits = plane[is_wait].groupby(tasks["op_id"][is_wait]).min()
    main = tasks["op_id"].map(waits).fillna(plane.groupby(tasks["op_id"]).transform("min"))
    return plane.notna() & (plane == main)


def _plane_times(tasks: pd.DataFrame) -> pd.DataFrame:
    """Per op_id with plane ids, from its main plane's tasks (they run one after another, so
    their summed durations are the time the plane spent), Ascend's definitions: transit_us =
    the data-moving tasks, wait_us = the Notify Wait tasks, synchronization_us = the Notify
    Wait tasks that start before its first data-moving task (all of them if none moves)."""
    kind = tasks["task"].astype(str)
    is_wait = kind.isin(WAIT_TASKS)
    moves = ~is_wait & ~kind.isin(SIGNAL_TASKS)
    main = _on_main_plane(tasks, is_wait)
    t = tasks[main]
    dur = (t["end_ns"] - t["start_ns"]) / 1000.0
    first_move = t["start_ns"].where(moves[main]).groupby(t["op_id"]).transform("min")
    before = is_wait[main] & ~(t["start_ns"] >= first_move)
    by = t["op_id"]
    return pd.DataFrame(
        {
            "transit_us": dur.where(moves[main], 0.0).groupby(by).sum(),
            "wait_us": dur.where(is_wait[main], 0.0).groupby(by).sum(),
            "synchronization_us": dur.where(before, 0.0).groupby(by).sum(),
        }
    )


def _task_bandwidth(tasks: pd.DataFrame) -> pd.DataFrame:
    """Per op and transport from the raw HCCL tasks, as Ascend's analysis computes them: the
    tasks that moved bytes to another rank, size summed and durations summed, by link (HCCS,
    PCIE, SIO: transport SDMA) or RDMA, plus the SDMA total of the links. Copies within the
    device (ON_CHIP / LOCAL, src == dst) are in none of them."""
    sz = pd.to_numeric(tasks["size_bytes"], errors="coerce")
    kind = tasks["task"].astype(str)
    moves = ~kind.isin(WAIT_TASKS) & ~kind.isin(SIGNAL_TASKS) & (sz > 0)
    src = pd.to_numeric(tasks["src_rank"], errors="coerce")
    dst = pd.to_numeric(tasks["dst_rank"], errors="coerce")
    transport = tasks["transport"].astype(str)
    link = tasks["link"].astype(str)
    on = np.where(
        transport == "RDMA",
        "RDMA",
        np.where((transport == "SDMA") & link.isin(ascend_bandwidth.SDMA_LINKS), link, ""),
    )
    t = tasks.assign(
        transport=on,
        size_mb=sz / 1e6,
        transit_us=(tasks["end_ns"] - tasks["start_ns"]) / 1000.0,
    )[moves & (src != dst) & pd.Series(on != "", index=tasks.index)]
    rows = (
        t.groupby(["op_id", "transport"], sort=False)[["size_mb", "transit_us"]].sum().reset_index()
    )
    return ascend_bandwidth.with_sdma_total(rows, "op_id")


def bandwidth(db: DbFile, ana: DbFile | None, step_time: pd.DataFrame) -> pd.DataFrame:
    """Per communication op and transport (HCCS, PCIE, SIO, SDMA = their total, RDMA): size,
    transit time, bandwidth; analysis.db ``CommAnalyzerBandwidth`` when present (the numbers of
    communication.json), else summed from the HCCL tasks."""
    if ana is not None and {"hccl_op_name", "transit_size"} <= set(
        ana.columns("CommAnalyzerBandwidth")
    ):
        return _analysis_bandwidth(ana)
    if not db.has("COMMUNICATION_OP"):
        return ascend_bandwidth.frame(pd.DataFrame(columns=ascend_bandwidth.COLUMNS))
    tasks = comm_tasks(db)
    ops = comm_ops(db).set_index("op_id")
    rows = (
        _task_bandwidth(tasks)
        if len(tasks)
        else pd.DataFrame(columns=["op_id", "transport", "size_mb", "transit_us"])
    )
    start = rows["op_id"].map(ops["start_ns"])
    rows = rows.assign(
        step=steps_of(start.fillna(0).to_numpy("int64"), step_time) if len(rows) else None,
        name=rows["op_id"].map(ops["name"]),
        group=rows["op_id"].map(ops["grp"]),
        large_packet_ratio=np.nan,
        bandwidth_gbps=np.nan,
    )
    return ascend_bandwidth.frame(rows)


def _analysis_bandwidth(ana: DbFile) -> pd.DataFrame:
    """CommAnalyzerBandwidth has one row per op, transport and packet size (the "Size
    Distribution"); size, transit time and bandwidth repeat on each: one row per op and
    transport."""
    b = ana.read_all("CommAnalyzerBandwidth")
    key = "transport_type" if "transport_type" in b else "band_type"
    b = b.drop_duplicates(["hccl_op_name", "group_name", key, "step"][: 4 if "step" in b else 3])
    return ascend_bandwidth.frame(
        pd.DataFrame(
            {
                "step": b.get("step"),
                "name": b["hccl_op_name"],
                "group": b.get("group_name"),
                "transport": b[key].astype(str),
                "size_mb": b["transit_size"],
                "transit_us": pd.to_numeric(b.get("transit_time"), errors="coerce") * 1000.0,
                "bandwidth_gbps": b.get("bandwidth"),
                "large_packet_ratio": b.get("large_packet_ratio"),
                "kind": b.get("type"),
            }
        )
    )


def _analysis_comm(ana: DbFile) -> pd.DataFrame:
    t = ana.read_all("CommAnalyzerTime")
    tot = ascend_bandwidth.op_totals(
        pd.DataFrame(columns=["name", "group", "transport"]), ["name", "group"]
    )
    if {"hccl_op_name", "transit_size"} <= set(ana.columns("CommAnalyzerBandwidth")):
        tot = ascend_bandwidth.op_totals(_analysis_bandwidth(ana), ["name", "group"])
    tot = tot.reset_index()
    tot["group"] = tot["group"].astype(str)

    def ms(c: str) -> pd.Series:
        return (
            pd.to_numeric(t[c], errors="coerce") * 1000.0
            if c in t
            else pd.Series(np.nan, index=t.index)
        )

    start = t.get("start_timestamp")
    out = pd.DataFrame(
        {
            "step": ascend_bandwidth.step_numbers(t["step"]) if "step" in t else pd.NA,
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
            "source": ana.path.name,
        }
    )
    key = out[["name", "group"]].astype(str)
    m = key.merge(tot, on=["name", "group"], how="left")
    for c in ("size_mb", "bandwidth_gbps", "transport_transit_us"):
        out[c] = m[c].to_numpy("float64")
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
            ascend_bandwidth.step_numbers(m["step"]) if "step" in m else None,
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
