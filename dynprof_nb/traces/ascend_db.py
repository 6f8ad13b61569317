"""Reader for the Ascend SQLite profiler databases into the same frames as the text reader.

Covers torch_npu ``ascend_pytorch_profiler_N.db`` + ``analysis.db``, MindSpore
``ascend_mindspore_profiler_N.db`` and msprof ``msprof_*.db``. What real files do that a naive
reader trips on: integer times stored as TEXT (cast in SQL, so they stay exact int64 ns), names
stored as ids into ``STRING_IDS``, and WAL mode (opened with ``immutable=1``, so sqlite never
writes ``-wal``/``-shm`` files beside the file and a read-only folder works).
"""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from dynprof_nb.traces import schema
from dynprof_nb.traces.errors import TraceFormatError, TraceRepairWarning

SQLITE_MAGIC = b"SQLite format 3\x00"
# query columns that hold STRING_IDS ids (see AscendDb._query)
TEXT_ALIASES = frozenset(
    {
        "name",
        "type",
        "core",
        "task_type",
        "input_shapes",
        "grp",
        "alg_type",
        "comp",
        "info_task",
        "task",
    }
)
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


def connect(path: str | Path) -> sqlite3.Connection:
    """Open read-only and immutable (never writes beside the file, works in read-only folders)."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise TraceFormatError(p, f"cannot open it: {exc}", offset=0) from exc
    if head != SQLITE_MAGIC:
        raise TraceFormatError(
            p,
            "not a SQLite database (bad header)",
            offset=0,
            hint="the profiler may still be writing it, or it is not a .db",
        )
    uri = "file:" + urllib.parse.quote(str(p.resolve())) + "?immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True, check_same_thread=False)
        con.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(
            p,
            f"not a readable SQLite database ({exc})",
            offset=0,
            hint="the file is truncated or damaged; re-export it",
        ) from exc
    return con


class AscendDb:
    """One rank's profiler database (plus its analysis.db, if any), read table by table.

    Each method opens its own immutable connection, so the object pickles and many can be
    read in parallel.
    """

    def __init__(self, path: str | Path, analysis: str | Path | None = None):
        self.path = Path(path)
        self.analysis = Path(analysis) if analysis else None
        self._tables: dict[str, list[str]] | None = None
        self._strings: dict[int, str] | None = None
        self._step_time: pd.DataFrame | None = None
        self.notes: list[str] = []

    # ---- plumbing -------------------------------------------------------------------------
    def _query(self, sql: str, path: Path | None = None, what: str = "") -> pd.DataFrame:
        """Rows of ``sql`` as a frame; the columns named in TEXT_ALIASES hold STRING_IDS ids and
        come back as strings (resolved here, once per distinct id: far faster than a join)."""
        p = path or self.path
        con = connect(p)
        try:
            cur = con.execute(sql)
            cols = [d[0] for d in cur.description]
            df = _frame(cur.fetchall(), cols)
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(
                p,
                f"cannot read {what or 'a table'}: {exc}",
                hint="the database is truncated, damaged or of an unknown "
                "schema version; re-export it",
            ) from exc
        finally:
            con.close()
        if p == self.path and "STRING_IDS" in self.tables:
            for c in cols:
                if c in TEXT_ALIASES:
                    df[c] = self._resolve(df[c])
        return df

    def _resolve(self, ids: pd.Series) -> pd.Series:
        if self._strings is None:
            con = connect(self.path)
            try:
                self._strings = dict(con.execute("SELECT id, value FROM STRING_IDS").fetchall())
            except sqlite3.DatabaseError as exc:
                raise TraceFormatError(
                    self.path,
                    f"cannot read STRING_IDS: {exc}",
                    hint="the database is truncated or damaged",
                ) from exc
            finally:
                con.close()
        codes, uniq = pd.factorize(ids, use_na_sentinel=True)
        names = np.array(
            [self._strings.get(u, None if u is None else str(u)) for u in uniq] + [None],
            dtype=object,
        )
        return pd.Series(names[codes], index=ids.index, dtype=object)

    @property
    def tables(self) -> dict[str, list[str]]:
        if self._tables is None:
            self._tables = _table_columns(self.path)
        return self._tables

    def _require(self, table: str, cols: tuple[str, ...]) -> None:
        have = self.tables.get(table)
        if have is None:
            raise TraceFormatError(
                self.path,
                f"table {table} is missing",
                hint=f"tables present: {', '.join(sorted(self.tables)) or 'none'}",
            )
        lost = [c for c in cols if c not in have]
        if lost:
            raise TraceFormatError(
                self.path,
                f"table {table} has no column {', '.join(lost)} (it has {', '.join(have)})",
                hint="an unknown schema version, or a damaged export",
            )

    def _col(self, table: str, alias: str, col: str, as_name: str, text: bool = False) -> str:
        """``alias.col`` (via STRING_IDS when ``text``) or NULL when the column is absent."""
        if col not in self.tables.get(table, []):
            return f"NULL AS {as_name}"
        assert not text or as_name in TEXT_ALIASES, as_name  # resolved by _query
        return f"{alias}.{col} AS {as_name}"

    def _enum(self, table: str, alias: str, col: str, enum: str, as_name: str) -> str:
        if col in self.tables.get(table, []) and enum in self.tables:
            return f"(SELECT name FROM {enum} WHERE id = {alias}.{col}) AS {as_name}"
        return self._col(table, alias, col, as_name)

    def has(self, *tables: str) -> bool:
        return all(t in self.tables for t in tables)

    # ---- identity ---------------------------------------------------------------------------
    def rank_device(self) -> tuple[int | None, int | None]:
        """(rank, device) from RANK_DEVICE_MAP, else (None, the device of the tasks)."""
        if self.has("RANK_DEVICE_MAP"):
            df = self._query("SELECT rankId, deviceId FROM RANK_DEVICE_MAP", what="RANK_DEVICE_MAP")
            if len(df) == 1:
                r, d = df.iloc[0]
                return (_int_or_none(r), _int_or_none(d))
        if "deviceId" in self.tables.get("TASK", []):
            df = self._query("SELECT DISTINCT deviceId FROM TASK LIMIT 2", what="TASK")
            if len(df) == 1:
                return None, _int_or_none(df.iloc[0, 0])
        return None, None

    # ---- frames -----------------------------------------------------------------------------
    def step_time(self) -> pd.DataFrame:
        """STEP_TIME as step, start_ns, end_ns (empty if the table is absent)."""
        if self._step_time is None:
            self._step_time = self._read_step_time()
        return self._step_time

    def _read_step_time(self) -> pd.DataFrame:
        if not self.has("STEP_TIME"):
            return pd.DataFrame(
                {
                    "step": pd.Series(dtype="int64"),
                    "start_ns": pd.Series(dtype="int64"),
                    "end_ns": pd.Series(dtype="int64"),
                }
            )
        self._require("STEP_TIME", ("id", "startNs", "endNs"))
        df = self._query(
            "SELECT CAST(id AS INTEGER) AS step, CAST(startNs AS INTEGER) AS start_ns, "
            "CAST(endNs AS INTEGER) AS end_ns FROM STEP_TIME ORDER BY 2",
            what="STEP_TIME",
        )
        return df.astype({"step": "int64", "start_ns": "int64", "end_ns": "int64"})

    def kernels(self) -> pd.DataFrame:
        """Compute tasks (TASK x COMPUTE_TASK_INFO, one row per task as compute_op_sum counts
        them) plus one ``core == "HCCL"`` row per communication op, as kernel_details.csv has."""
        self._require("TASK", ("startNs", "endNs", "globalTaskId"))
        tk = "TASK"
        if self.has("COMPUTE_TASK_INFO"):
            self._require("COMPUTE_TASK_INFO", ("globalTaskId",))
            ci = "COMPUTE_TASK_INFO"
            # two plain scans joined in pandas: twice as fast as sqlite's per-row join
            info = self._query(
                "SELECT c.globalTaskId AS global_task_id, "
                f"{self._col(ci, 'c', 'name', 'name', True)}, "
                f"{self._col(ci, 'c', 'opType', 'type', True)}, "
                f"{self._col(ci, 'c', 'taskType', 'core', True)}, "
                f"{self._col(ci, 'c', 'blockDim', 'block_dim')}, "
                f"{self._col(ci, 'c', 'inputShapes', 'input_shapes', True)} "
                "FROM COMPUTE_TASK_INFO c",
                what="COMPUTE_TASK_INFO",
            )
            # one device per rank db: read it once rather than per row
            devs = (
                self._query("SELECT DISTINCT deviceId FROM TASK", what="TASK")
                if "deviceId" in self.tables[tk]
                else pd.DataFrame({"deviceId": []})
            )
            one = len(devs) <= 1
            task = self._query(
                "SELECT t.globalTaskId AS global_task_id, CAST(t.startNs AS INTEGER) AS start_ns, "
                "CAST(t.endNs AS INTEGER) AS end_ns, "
                f"{self._col(tk, 't', 'streamId', 'stream')}, "
                + ("" if one else f"{self._col(tk, 't', 'deviceId', 'device')}, ")
                + f"{self._col(tk, 't', 'taskType', 'task_type', True)}, "
                f"{self._col(tk, 't', 'taskId', 'task_id')} FROM TASK t",
                what="TASK",
            )
            if one:
                task["device"] = devs.iloc[0, 0] if len(devs) else None
            sql = None
            k = task.merge(info, on="global_task_id", how="inner")
        else:
            self.notes.append(
                "no COMPUTE_TASK_INFO table: kernels are every TASK row, named by their task type"
            )
            warnings.warn(
                TraceRepairWarning(
                    f"{self.path}: no COMPUTE_TASK_INFO table; kernels "
                    "are the raw TASK rows named by task type"
                ),
                stacklevel=4,
            )
            sql = (
                "SELECT CAST(t.startNs AS INTEGER) AS start_ns, "
                "CAST(t.endNs AS INTEGER) AS end_ns, "
                f"{self._col(tk, 't', 'taskType', 'name', True)}, NULL AS type, NULL AS core, "
                f"{self._col(tk, 't', 'streamId', 'stream')}, "
                f"{self._col(tk, 't', 'deviceId', 'device')}, "
                f"{self._col(tk, 't', 'taskType', 'task_type', True)}, "
                f"{self._col(tk, 't', 'taskId', 'task_id')}, NULL AS block_dim, "
                "NULL AS input_shapes, t.globalTaskId AS global_task_id FROM TASK t"
            )
        if sql is not None:
            k = self._query(sql, what="the tasks (TASK)")
        k = k[k["start_ns"].notna() & k["end_ns"].notna()]
        comm = self._comm_ops() if self.has("COMMUNICATION_OP") else None
        if comm is not None and len(comm):
            dev = k["device"].dropna()
            k = pd.concat(
                [
                    k,
                    pd.DataFrame(
                        {
                            "start_ns": comm["start_ns"],
                            "end_ns": comm["end_ns"],
                            "name": comm["name"],
                            "type": comm["type"],
                            "core": "HCCL",
                            "stream": pd.NA,
                            "device": dev.iloc[0] if len(dev) else pd.NA,
                            "task_type": "HCCL",
                        }
                    ),
                ],
                ignore_index=True,
            )
        k = k.sort_values(["start_ns", "end_ns"], ignore_index=True, kind="stable")
        start = k["start_ns"].to_numpy("int64")
        end = k["end_ns"].to_numpy("int64")
        out = pd.DataFrame(
            {
                "name": k["name"].astype(str).where(k["name"].notna(), "N/A"),
                "type": k["type"],
                "core": k["core"],
                "stream": pd.array(k["stream"], dtype="Int64"),
                "start_ns": pd.array(start, dtype="Int64"),
                "duration_us": (end - start) / 1000.0,
                "wait_us": _stream_wait(k["stream"], start, end),
                "step": _steps_of(start, self.step_time()),
                "duration_ns": end - start,
                "device": pd.array(k["device"], dtype="Int64"),
                "task_type": k["task_type"],
                "task_id": pd.array(k["task_id"], dtype="Int64"),
                "block_dim": pd.array(
                    pd.to_numeric(k["block_dim"], errors="coerce"), dtype="Int64"
                ),
                "input_shapes": k["input_shapes"],
            }
        )
        for c in ("task_type", "input_shapes"):
            out[c] = out[c].astype("category")
        return schema.conform(out, "kernels")

    def _comm_ops(self) -> pd.DataFrame:
        self._require("COMMUNICATION_OP", ("opName", "startNs", "endNs"))
        t = "COMMUNICATION_OP"
        sql = (
            f"SELECT CAST(o.startNs AS INTEGER) AS start_ns, CAST(o.endNs AS INTEGER) AS end_ns, "
            f"{self._col(t, 'o', 'opName', 'name', True)}, "
            f"{self._col(t, 'o', 'opType', 'type', True)}, "
            f"{self._col(t, 'o', 'groupName', 'grp', True)}, "
            f"{self._col(t, 'o', 'opId', 'op_id')}, "
            f"{self._col(t, 'o', 'connectionId', 'connection_id')}, "
            f"{self._enum(t, 'o', 'dataType', 'ENUM_HCCL_DATA_TYPE', 'data_type')}, "
            f"{self._col(t, 'o', 'algType', 'alg_type', True)}, "
            f"{self._col(t, 'o', 'count', 'count')} FROM COMMUNICATION_OP o"
        )
        df = self._query(sql, what="COMMUNICATION_OP")
        return df[df["start_ns"].notna() & df["end_ns"].notna()].astype(
            {"start_ns": "int64", "end_ns": "int64"}
        )

    def comm_tasks(self) -> pd.DataFrame:
        """COMMUNICATION_TASK_INFO x TASK: one row per HCCL task (links, sizes, durations)."""
        if not self.has("COMMUNICATION_TASK_INFO", "TASK"):
            return pd.DataFrame(
                columns=[
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
            )
        ct = "COMMUNICATION_TASK_INFO"
        sql = (
            f"SELECT {self._col(ct, 'c', 'opId', 'op_id')}, "
            f"{self._col(ct, 'c', 'taskType', 'info_task', True)}, "
            f"{self._col('TASK', 't', 'taskType', 'task', True)}, "
            "CAST(t.startNs AS INTEGER) AS start_ns, CAST(t.endNs AS INTEGER) AS end_ns, "
            f"{self._col(ct, 'c', 'srcRank', 'src_rank')}, "
            f"{self._col(ct, 'c', 'dstRank', 'dst_rank')}, "
            f"{self._enum(ct, 'c', 'transportType', 'ENUM_HCCL_TRANSPORT_TYPE', 'transport')}, "
            f"{self._enum(ct, 'c', 'linkType', 'ENUM_HCCL_LINK_TYPE', 'link')}, "
            f"{self._col(ct, 'c', 'size', 'size_bytes')} "
            "FROM COMMUNICATION_TASK_INFO c JOIN TASK t ON t.globalTaskId = c.globalTaskId"
        )
        df = self._query(sql, what="the communication tasks (COMMUNICATION_TASK_INFO, TASK)")
        # the task kind is on TASK in torch_npu dbs (COMMUNICATION_TASK_INFO says N/A at Level0)
        info = df.pop("info_task")
        df["task"] = df["task"].where(df["task"].notna() & (df["task"] != "N/A"), info)
        return df

    def communication(self) -> pd.DataFrame:
        """One row per communication op, with the columns of the communication.json reader.

        analysis.db ``CommAnalyzerTime``/``CommAnalyzerBandwidth`` when present (the same
        numbers as communication.json); otherwise COMMUNICATION_OP with wait (Notify Wait
        tasks) and transit (data-moving tasks) summed from its HCCL tasks.
        """
        ana = self._analysis_comm()
        if ana is not None:
            return ana
        ops = self._comm_ops()
        if ops.empty:
            return schema.empty("communication")
        tasks = self.comm_tasks()
        wait = transit = size = pd.Series(dtype="float64")
        if len(tasks) and tasks["op_id"].notna().any():
            kind = tasks["task"].astype(str)
            is_wait = kind.isin(WAIT_TASKS)
            moves = ~is_wait & ~kind.isin(SIGNAL_TASKS)
            wait = _union_by(tasks[is_wait])
            transit = _union_by(tasks[moves])
            sz = pd.to_numeric(tasks["size_bytes"], errors="coerce")
            ok = moves & (sz > 0)
            size = (sz[ok] / 1e6).groupby(tasks["op_id"][ok]).sum()
        op = ops["op_id"]
        transit_us = op.map(transit).astype("float64")
        size_mb = op.map(size).astype("float64")
        out = pd.DataFrame(
            {
                "step": _steps_of(ops["start_ns"].to_numpy("int64"), self.step_time()),
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
                "source": self.path.name,
                "type": ops["type"],
                "op_id": ops["op_id"],
                "end_ns": ops["end_ns"],
                "data_type": ops["data_type"],
                "alg_type": ops["alg_type"],
            }
        )
        return schema.conform(out.sort_values("start_ns", ignore_index=True), "communication")

    def _analysis_comm(self) -> pd.DataFrame | None:
        if self.analysis is None:
            return None
        tabs = _table_columns(self.analysis)
        cols = tabs.get("CommAnalyzerTime")
        if not cols or "hccl_op_name" not in cols:
            return None
        t = self._query("SELECT * FROM CommAnalyzerTime", self.analysis, "CommAnalyzerTime")
        bw = tabs.get("CommAnalyzerBandwidth") or []
        size = pd.Series(dtype="float64")
        if {"hccl_op_name", "transit_size"} <= set(bw):
            b = self._query(
                "SELECT * FROM CommAnalyzerBandwidth", self.analysis, "CommAnalyzerBandwidth"
            )
            key = (
                "transport_type"
                if "transport_type" in b
                else ("band_type" if "band_type" in b else None)
            )
            if key:
                b = b[b[key].astype(str).isin(["SDMA", "RDMA"])]
            size = (
                pd.to_numeric(b["transit_size"], errors="coerce").groupby(b["hccl_op_name"]).sum()
            )

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
                "source": self.analysis.name,
            }
        )
        out["bandwidth_gbps"] = out["size_mb"] / (out["transit_us"] / 1000.0)
        if "type" in t:
            out["kind"] = t["type"]
        return schema.conform(out, "communication")

    def links(self) -> pd.DataFrame:
        """Per communication op and link (src -> dst rank, transport): size, transit time,
        bandwidth, from analysis.db CommAnalyzerMatrix or the HCCL tasks."""
        if self.analysis is not None:
            tabs = _table_columns(self.analysis)
            if {"src_rank", "dst_rank", "transit_size"} <= set(tabs.get("CommAnalyzerMatrix", [])):
                m = self._query(
                    "SELECT * FROM CommAnalyzerMatrix", self.analysis, "CommAnalyzerMatrix"
                )
                return _links_frame(
                    m.get("step"),
                    m.get("hccl_op_name"),
                    m.get("group_name"),
                    m["src_rank"],
                    m["dst_rank"],
                    m.get("transport_type"),
                    pd.to_numeric(m["transit_size"], errors="coerce"),
                    pd.to_numeric(m.get("transit_time"), errors="coerce") * 1000.0,
                )
        tasks = self.comm_tasks()
        sz = pd.to_numeric(tasks.get("size_bytes"), errors="coerce")
        ok = (sz > 0) & tasks["src_rank"].notna() & (pd.to_numeric(tasks["src_rank"]) < 2**31)
        tasks = tasks[ok]
        if tasks.empty:
            return _links_frame(*([pd.Series(dtype=object)] * 8))
        ops = self._comm_ops().set_index("op_id")
        g = (
            tasks.assign(dur=(tasks["end_ns"] - tasks["start_ns"]) / 1000.0, mb=sz[ok] / 1e6)
            .groupby(["op_id", "src_rank", "dst_rank", "transport"], dropna=False)
            .agg(size_mb=("mb", "sum"), transit_us=("dur", "sum"))
            .reset_index()
        )
        steps = _steps_of(
            g["op_id"].map(ops["start_ns"]).fillna(0).to_numpy("int64"), self.step_time()
        )
        return _links_frame(
            steps,
            g["op_id"].map(ops["name"]),
            g["op_id"].map(ops["grp"]),
            g["src_rank"],
            g["dst_rank"],
            g["transport"],
            g["size_mb"],
            g["transit_us"],
        )

    def step_trace(self) -> pd.DataFrame | None:
        """analysis.db StepTraceTime as the steps frame (None without analysis.db)."""
        if self.analysis is None:
            return None
        tabs = _table_columns(self.analysis)
        if "StepTraceTime" not in tabs:
            return None
        if "computing" not in tabs["StepTraceTime"]:
            raise TraceFormatError(
                self.analysis,
                "table StepTraceTime has no column computing "
                f"(it has {', '.join(tabs['StepTraceTime'])})",
            )
        raw = self._query("SELECT * FROM StepTraceTime", self.analysis, "StepTraceTime")

        def num(c: str) -> pd.Series:
            return (
                pd.to_numeric(raw[c], errors="coerce")
                if c in raw
                else pd.Series(np.nan, index=raw.index)
            )

        comp, not_ov, free = num("computing"), num("communication_not_overlapped"), num("free")
        out = pd.DataFrame(
            {
                "step": num("step").fillna(-1).astype("int64"),
                "duration_us": comp + not_ov.fillna(0) + free.fillna(0),
                "computing_us": comp,
                "communication_us": num("communication"),
                "overlapped_us": num("overlapped"),
                "free_us": free,
                "communication_not_overlapped_us": not_ov,
            }
        )
        for c in ("stage", "bubble", "preparing"):
            if c in raw:
                out[c + "_us"] = num(c)
        st = self.step_time()
        if len(st):
            out["start_ns"] = out["step"].map(st.set_index("step")["start_ns"]).astype("Int64")
        return schema.conform(out, "steps")

    def steps(self) -> pd.DataFrame:
        """StepTraceTime when analysis.db has it, else STEP_TIME with the breakdown computed
        from the device tasks (the same rule torch_npu's analysis applies)."""
        st = self.step_trace()
        if st is not None:
            return st
        raw = self.step_time()
        if raw.empty:
            return schema.empty("steps")
        self.notes.append(
            "no analysis.db StepTraceTime: duration from STEP_TIME, breakdown "
            "computed from the device tasks (free = duration - computing - "
            "communication not overlapped)"
        )
        k = self.kernels()
        rows = []
        for s, a, b in raw[["step", "start_ns", "end_ns"]].itertuples(index=False):
            br = overlap_breakdown(k[(k["step"] == s)])
            br["stage_us"] = br["duration_us"]
            br["duration_us"] = (b - a) / 1000.0
            br["free_us"] = (
                br["duration_us"] - br["computing_us"] - br["communication_not_overlapped_us"]
            )
            rows.append({"step": s, "start_ns": a, **br})
        return schema.conform(pd.DataFrame(rows), "steps")

    def api_events(self) -> pd.DataFrame:
        """PYTORCH_API and CANN_API (host) plus the device tasks as events rows."""
        ev = []
        for table, proc in (
            ("PYTORCH_API", "Python"),
            ("CANN_API", "CANN"),
            ("MSTX_EVENTS", "MSTX"),
        ):
            cols = self.tables.get(table, [])
            name_col = "name" if "name" in cols else ("message" if "message" in cols else None)
            if not ({"startNs", "endNs"} <= set(cols) and name_col):
                continue
            tid = "globalTid" if "globalTid" in cols else "0"
            df = self._query(
                f"SELECT CAST(startNs AS INTEGER) AS s, CAST(endNs AS INTEGER) AS e, "
                f"{self._col(table, table, name_col, 'name', True)}, {tid} AS tid "
                f"FROM {table}",
                what=table,
            )
            df = df[df["s"].notna() & df["e"].notna()]
            tidv = pd.to_numeric(df["tid"], errors="coerce").fillna(0).astype("int64")
            ev.append(
                pd.DataFrame(
                    {
                        "name": df["name"].astype(str),
                        "cat": table.lower(),
                        "ph": "X",
                        "pid": 0,
                        "tid": tidv,
                        "process": proc,
                        "thread": tidv.astype(str),
                        "ts_ns": df["s"].astype("int64"),
                        "dur_ns": (df["e"] - df["s"]).astype("int64"),
                    }
                )
            )
        if "TASK" in self.tables:
            k = self.kernels()
            ev.append(
                pd.DataFrame(
                    {
                        "name": k["name"].astype(object),
                        "cat": "device",
                        "ph": "X",
                        "pid": 1,
                        "tid": k["stream"].fillna(-1).astype("int64"),
                        "process": "Ascend Hardware",
                        "thread": "Stream " + k["stream"].astype(str),
                        "ts_ns": k["start_ns"].astype("int64"),
                        "dur_ns": k["duration_ns"].astype("int64"),
                    }
                )
            )
        if not ev:
            return schema.empty("events")
        e = pd.concat(ev, ignore_index=True)
        for c in ("name", "cat", "ph", "process", "thread"):
            e[c] = e[c].astype("category")
        return e.sort_values("ts_ns", ignore_index=True, kind="stable")

    def memory(self) -> pd.DataFrame:
        """MEMORY_RECORD (framework allocator totals) and OP_MEMORY (per-op alloc/release)."""
        frames = []
        cols = self.tables.get("MEMORY_RECORD", [])
        if {"timestamp", "totalAllocated"} <= set(cols):
            m = self._query(
                "SELECT CAST(timestamp AS INTEGER) AS ts, "
                f"{self._col('MEMORY_RECORD', 'm', 'component', 'comp', True)}, "
                f"{self._col('MEMORY_RECORD', 'm', 'deviceId', 'dev')}, "
                "totalAllocated, "
                f"{self._col('MEMORY_RECORD', 'm', 'totalReserved', 'res')}, "
                f"{self._col('MEMORY_RECORD', 'm', 'totalActive', 'act')} "
                "FROM MEMORY_RECORD m",
                what="MEMORY_RECORD",
            )
            frames.append(
                pd.DataFrame(
                    {
                        "ts_ns": pd.array(m["ts"], dtype="Int64"),
                        "device": _npu(m["dev"]),
                        "allocated_bytes": pd.to_numeric(m["totalAllocated"], errors="coerce"),
                        "reserved_bytes": pd.to_numeric(m["res"], errors="coerce"),
                        "active_bytes": pd.to_numeric(m["act"], errors="coerce"),
                        "delta_bytes": np.nan,
                        "name": m["comp"],
                        "source": "MEMORY_RECORD",
                    }
                )
            )
        cols = self.tables.get("OP_MEMORY", [])
        if {"allocationTime", "size"} <= set(cols):
            o = self._query(
                "SELECT CAST(allocationTime AS INTEGER) AS a, CAST(releaseTime AS INTEGER) "
                f"AS r, size, {self._col('OP_MEMORY', 'o', 'name', 'name', True)}, "
                f"{self._col('OP_MEMORY', 'o', 'deviceId', 'dev')}, "
                "allocationTotalAllocated, allocationTotalReserved, allocationTotalActive, "
                "releaseTotalAllocated, releaseTotalReserved, releaseTotalActive "
                "FROM OP_MEMORY o",
                what="OP_MEMORY",
            )
            size = pd.to_numeric(o["size"], errors="coerce")
            for ts, sign, pre in (("a", 1, "allocation"), ("r", -1, "release")):
                frames.append(
                    pd.DataFrame(
                        {
                            "ts_ns": pd.array(o[ts], dtype="Int64"),
                            "device": _npu(o["dev"]),
                            "allocated_bytes": pd.to_numeric(
                                o[pre + "TotalAllocated"], errors="coerce"
                            ),
                            "reserved_bytes": pd.to_numeric(
                                o[pre + "TotalReserved"], errors="coerce"
                            ),
                            "active_bytes": pd.to_numeric(o[pre + "TotalActive"], errors="coerce"),
                            "delta_bytes": sign * size,
                            "name": o["name"],
                            "source": "OP_MEMORY",
                        }
                    )
                )
        if not frames:
            return schema.empty("memory")
        out = pd.concat(frames, ignore_index=True)
        out = out[out["ts_ns"].notna()].astype({"ts_ns": "int64"})
        return schema.conform(out.sort_values("ts_ns", ignore_index=True, kind="stable"), "memory")


# ---- helpers ---------------------------------------------------------------------------------
def _frame(rows: list[tuple], cols: list[str]) -> pd.DataFrame:
    """Rows to columns: int64 where a column holds only integers, float64 where it holds only
    numbers, else object (several times faster than DataFrame.from_records)."""
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    data = {}
    for c, vals in zip(cols, zip(*rows, strict=True), strict=True):
        try:
            arr = np.array(vals)
        except (OverflowError, ValueError):
            arr = np.array(vals, dtype=object)
        if arr.dtype.kind not in "if" or (  # None, text: keep the values
            arr.dtype.kind == "f" and np.nanmax(np.abs(arr)) >= 2**53  # ints a float would round
        ):
            arr = np.array(vals, dtype=object)
        data[c] = arr
    return pd.DataFrame(data, copy=False)


def _table_columns(path: Path) -> dict[str, list[str]]:
    con = connect(path)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: [r[1] for r in con.execute(f'PRAGMA table_info("{n}")')] for n in names}
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(
            path,
            f"cannot read its table list: {exc}",
            hint="the database is truncated or damaged; re-export it",
        ) from exc
    finally:
        con.close()


def _union_by(tasks: pd.DataFrame) -> pd.Series:
    """Per op_id, the union length (µs) of its tasks' intervals (tasks on parallel planes
    overlap, so a plain sum would exceed the op's own duration)."""
    out = {}
    for op, g in tasks.groupby("op_id"):
        out[op] = union_us(g["start_ns"].to_numpy("int64"), g["end_ns"].to_numpy("int64"))[0]
    return pd.Series(out, dtype="float64")


def _int_or_none(v: object) -> int | None:
    try:
        return None if v is None or v != v else int(v)
    except (TypeError, ValueError):
        return None


def _npu(dev: pd.Series) -> pd.Series:
    d = pd.to_numeric(dev, errors="coerce")
    return ("NPU:" + d.astype("Int64").astype(str)).where(d.notna(), "NPU")


def _steps_of(start: np.ndarray, steps: pd.DataFrame) -> pd.arrays.IntegerArray:
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


def _stream_wait(stream: pd.Series, start: np.ndarray, end: np.ndarray) -> np.ndarray:
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


def _intersect_us(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> float:
    total, i, j = 0, 0, 0
    while i < len(a0) and j < len(b0):
        lo, hi = max(a0[i], b0[j]), min(a1[i], b1[j])
        if hi > lo:
            total += hi - lo
        if a1[i] < b1[j]:
            i += 1
        else:
            j += 1
    return total / 1000.0


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
    ov = _intersect_us(c0, c1, m0, m1)
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


def _links_frame(step, name, group, src, dst, transport, size_mb, transit_us) -> pd.DataFrame:
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


def read_profiler_info(path: Path) -> dict:
    """profiler_info_N.json / profiler_metadata.json as a dict ({} if unreadable)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
