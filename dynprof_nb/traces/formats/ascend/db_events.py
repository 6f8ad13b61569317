"""The events frame of an Ascend profiler database, laid out as torch_npu's trace_view.json is.

The databases store each host row's thread as one ``globalTid`` = pid << 32 | tid (TASK's
``globalPid`` is that same pid), PYTORCH_API rows of three kinds (``type``: op, queue, trace =
the ``with_stack`` Python frames), and the communication ops with their group but no stream.
Decoded here into the pids, tids, lane names and categories the text export has ("Python" /
"Thread 3016828", "Ascend Hardware" / "Stream 2", "HCCL" / "Group 0 Communication";
``python_function`` for the Python frames), so a .db window reads, plots and is summarised like
the text window of the same run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dynprof_nb.traces import schema
from dynprof_nb.traces.formats.ascend import db_comm as ascend_db_comm
from dynprof_nb.traces.formats.common.sqlite import DbFile, enum, ns, raw, text

# trace_view.json's device pids: (host pid << 10) | (process sort index << 5) | device id
_HW_SORT, _HCCL_SORT = 13, 15
# PYTORCH_API.type (ENUM_API_TYPE names, or their ids when the enum table is absent) -> the
# trace_view.json category of the same rows
_API_CATS = {
    "op": "cpu_op",
    "50001": "cpu_op",
    "trace": "python_function",
    "50003": "python_function",
    "mstx": "mstx",
    "50004": "mstx",
}
_QUEUE = {"queue", "50002"}
_HOST_TABLES = (("PYTORCH_API", "Python"), ("CANN_API", "CANN"), ("MSTX_EVENTS", "MSTX"))


def split_global_tid(g: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(pid, tid) of a ``globalTid`` column: pid << 32 | tid; a value below 2**32 is a bare
    tid (pid 0); an unreadable one is (0, 0)."""
    v = pd.to_numeric(g, errors="coerce").fillna(0).astype("int64").to_numpy()
    return v >> 32, v & 0xFFFFFFFF


def _category(table: str, kind: pd.Series, name: pd.Series) -> pd.Series:
    """trace_view.json's category of each host row (the table's name when its type is not
    known)."""
    fallback = table.lower()
    if table != "PYTORCH_API":
        return pd.Series(fallback, index=name.index)
    k = kind.astype(str)
    cat = k.map(_API_CATS).fillna(fallback)
    queue = k.isin(_QUEUE)
    cat[queue] = np.where(name[queue].str.startswith("Dequeue"), "dequeue", "enqueue")
    return cat


def host_events(db: DbFile) -> list[pd.DataFrame]:
    """PYTORCH_API, CANN_API and MSTX_EVENTS rows, one frame per table that has them."""
    out = []
    for table, proc in _HOST_TABLES:
        cols = db.columns(table)
        name_col = "name" if "name" in cols else ("message" if "message" in cols else None)
        if not ({"startNs", "endNs"} <= set(cols) and name_col):
            continue
        df = db.select(
            table,
            [
                ns("startNs", "s"),
                ns("endNs", "e"),
                text(name_col, "name"),
                raw("globalTid", "gtid"),
                enum("type", "ENUM_API_TYPE", "kind"),
            ],
        )
        df = df[df["s"].notna() & df["e"].notna()]
        pid, tid = split_global_tid(df["gtid"])
        name = df["name"].astype(str)
        out.append(
            pd.DataFrame(
                {
                    "name": name,
                    "cat": _category(table, df["kind"], name),
                    "ph": "X",
                    "pid": pid,
                    "tid": tid,
                    "process": proc,
                    "thread": ["Thread " + str(t) for t in tid],
                    "ts_ns": df["s"].astype("int64"),
                    "dur_ns": (df["e"] - df["s"]).astype("int64"),
                }
            )
        )
    return out


def host_pid(db: DbFile, host: list[pd.DataFrame]) -> int:
    """The training process's pid: TASK's globalPid, else the host rows' commonest pid."""
    if "globalPid" in db.columns("TASK"):
        p = db.query("SELECT globalPid FROM TASK LIMIT 1", what="TASK")
        if len(p) and pd.notna(p.iloc[0, 0]):
            return int(p.iloc[0, 0])
    pids = pd.concat([h["pid"] for h in host]) if host else pd.Series(dtype="int64")
    return int(pids.mode().iloc[0]) if len(pids) else 0


def device_events(kernels: pd.DataFrame, pid: int, device: int) -> pd.DataFrame:
    """The compute tasks (the kernels frame without its HCCL op rows) on their streams."""
    k = kernels[kernels["core"].astype(object) != "HCCL"]
    stream = k["stream"].astype("Int64")
    return pd.DataFrame(
        {
            "name": k["name"].astype(object),
            "cat": "device",
            "ph": "X",
            "pid": (pid << 10) | (_HW_SORT << 5) | device,
            "tid": stream.fillna(-1).astype("int64"),
            "process": "Ascend Hardware",
            "thread": ("Stream " + stream.astype(str)).where(stream.notna(), "Stream ?"),
            "ts_ns": k["start_ns"].astype("int64"),
            "dur_ns": k["duration_ns"].astype("int64"),
        }
    )


def comm_events(db: DbFile, pid: int, device: int) -> pd.DataFrame | None:
    """COMMUNICATION_OP rows on one "Group N Communication" lane per group (N in order of the
    group's first op), as trace_view.json's HCCL process has them."""
    if not db.has("COMMUNICATION_OP"):
        return None
    ops = ascend_db_comm.comm_ops(db).sort_values("start_ns", kind="stable")
    if ops.empty:
        return None
    grp = ops["grp"].astype(object).fillna("")
    idx = pd.Series(pd.factorize(grp)[0], index=ops.index)  # order of first appearance
    return pd.DataFrame(
        {
            "name": ops["name"].astype(object),
            "cat": "hccl",
            "ph": "X",
            "pid": (pid << 10) | (_HCCL_SORT << 5) | device,
            "tid": idx.astype("int64"),
            "process": "HCCL",
            "thread": "Group " + idx.astype(str) + " Communication",
            "ts_ns": ops["start_ns"].astype("int64"),
            "dur_ns": (ops["end_ns"] - ops["start_ns"]).astype("int64"),
        }
    )


def events(db: DbFile, kernels: pd.DataFrame | None, device: int | None) -> pd.DataFrame:
    """Host API rows, compute tasks (``kernels``, None when the db has no TASK table) and
    communication ops as one events frame, sorted by time."""
    ev = host_events(db)
    pid = host_pid(db, ev)
    dev = device if device is not None and device >= 0 else 0
    if kernels is not None:
        ev.append(device_events(kernels, pid, dev))
    comm = comm_events(db, pid, dev)
    if comm is not None:
        ev.append(comm)
    if not ev:
        return schema.empty("events")
    e = pd.concat(ev, ignore_index=True)
    for c in ("name", "cat", "ph", "process", "thread"):
        e[c] = e[c].astype("category")
    return e.sort_values("ts_ns", ignore_index=True, kind="stable")
