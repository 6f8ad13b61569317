"""Reader for the Ascend SQLite profiler databases into the same frames as the text reader.

Covers torch_npu ``ascend_pytorch_profiler_N.db`` + ``analysis.db``, MindSpore
``ascend_mindspore_profiler_N.db`` and msprof ``msprof_*.db``. The SQL plumbing (immutable
opening, TEXT-stored times, STRING_IDS, absent tables and columns) is in ``dbfile``; the
communication frames in ``ascend_db_comm``; this module says what the kernels, steps, host API
and memory frames are made of.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dynprof_nb.traces import schema, validate
from dynprof_nb.traces.errors import TraceFormatError, TraceRepairWarning, warn
from dynprof_nb.traces.formats.ascend import (
    db_comm as ascend_db_comm,
)
from dynprof_nb.traces.formats.ascend import (
    db_events as ascend_db_events,
)
from dynprof_nb.traces.formats.ascend import (
    db_kernels as ascend_db_kernels,
)
from dynprof_nb.traces.formats.common.sqlite import DbFile, connect, int_or_none, ns, raw, text
from dynprof_nb.traces.intervals import overlap_breakdown, steps_of, stream_wait

__all__ = ["AscendDb", "connect", "overlap_breakdown"]


#: the unique key of each table the readers read whose copied row would count a task or an op
#: twice: the rows past a key's first are dropped, said once (:meth:`AscendDb.unique_rows`)
UNIQUE_KEYS = {
    "TASK": "globalTaskId",
    "COMPUTE_TASK_INFO": "globalTaskId",
    "COMMUNICATION_TASK_INFO": "globalTaskId",
    "COMMUNICATION_OP": "opId",
}


class AscendDb:
    """One rank's profiler database (plus its analysis.db, if any), read table by table.

    Each read opens its own immutable connection, so the object pickles and many can be read
    in parallel. ``notes`` collects what was repaired or derived, for the window's ``sources``;
    ``read_paths`` which of a frame's equivalent paths its last read took (kernels: ``fast``,
    the column-wise :mod:`.ascend_db_kernels`; ``generic``, row-wise; ``repaired``, the raw TASK
    rows where COMPUTE_TASK_INFO is absent; ``trimmed``, no task table. steps:
    ``StepTraceTime``, ``STEP_TIME+tasks``, ``STEP_TIME``, ``none``).
    """

    def __init__(self, path: str | Path, analysis: str | Path | None = None):
        self.path = Path(path)
        self.analysis = Path(analysis) if analysis else None
        self.db = DbFile(self.path)
        self._ana = DbFile(self.analysis) if self.analysis else None
        self._step_time: pd.DataFrame | None = None
        self.notes: list[str] = []
        self.read_paths: dict[str, str] = {}
        self._said: set[tuple[str, str]] = set()  # the unique keys checked (unique_rows)

    @property
    def ana(self) -> DbFile | None:
        """analysis.db, or None when there is none or it cannot be read: it only repeats what
        torch_npu derived from the profiler db, so a damaged one is set aside with a warning
        and the frames are computed from the profiler db instead."""
        if self._ana is not None:
            try:
                _ = self._ana.tables
            except TraceFormatError as exc:
                self._note_repair(f"analysis.db set aside ({exc}); frames from the profiler db")
                self._ana = None
        return self._ana

    def _note_repair(self, note: str) -> None:
        self.notes.append(note)
        warn(TraceRepairWarning(f"{self.path}: {note}"), stacklevel=4)

    @property
    def tables(self) -> dict[str, list[str]]:
        return self.db.tables

    def has(self, *tables: str) -> bool:
        return self.db.has(*tables)

    # ---- identity ---------------------------------------------------------------------------
    def rank_device(self) -> tuple[int | None, int | None]:
        """(rank, device) from RANK_DEVICE_MAP, else (None, the device of the tasks)."""
        if self.has("RANK_DEVICE_MAP"):
            df = self.db.select(
                "RANK_DEVICE_MAP", [raw("rankId", "rankId"), raw("deviceId", "deviceId")]
            )
            if len(df) == 1:
                r, d = df.iloc[0]
                return (int_or_none(r), int_or_none(d))
        if "deviceId" in self.db.columns("TASK"):
            df = self.db.query("SELECT DISTINCT deviceId FROM TASK LIMIT 2", what="TASK")
            if len(df) == 1:
                return None, int_or_none(df.iloc[0, 0])
        return None, None

    def unique_rows(self) -> None:
        """Say once per file how many rows of TASK and COMMUNICATION_OP repeat their unique key
        (``globalTaskId``, ``opId``: a copied row would count a task or op twice); the readers
        keep each key's first row (:func:`.validate.first_rows`, :func:`.validate.repeated`)."""
        for table, key in UNIQUE_KEYS.items():
            if (table, key) in self._said or not self.has(table):
                continue
            self._said.add((table, key))
            if key not in self.db.columns(table):
                continue
            sql = f"SELECT count({key}) - count(DISTINCT {key}) FROM {table}"
            n = int(self.db.query(sql, what=table).iloc[0, 0] or 0)
            if n:
                self.notes.append(validate.said_repeats(table, key, n, str(self.path)))

    # ---- steps ------------------------------------------------------------------------------
    def step_time(self) -> pd.DataFrame:
        """STEP_TIME as step, start_ns, end_ns (empty if the table is absent)."""
        if self._step_time is None:
            if not self.has("STEP_TIME"):
                self._step_time = pd.DataFrame(
                    {c: pd.Series(dtype="int64") for c in ("step", "start_ns", "end_ns")}
                )
            else:
                df = self.db.select(
                    "STEP_TIME",
                    [ns("id", "step"), ns("startNs", "start_ns"), ns("endNs", "end_ns")],
                    order="start_ns",
                )
                # a repeated step id or an impossible time would break every frame that
                # assigns rows to steps: dropped here, with a word (issue 42)
                df, msg, _ = validate.checked_table(df, "STEP_TIME", str(self.path))
                if msg:
                    self.notes.append(msg)
                self._step_time = df.astype(
                    {"step": "int64", "start_ns": "int64", "end_ns": "int64"}
                )
        return self._step_time

    def step_trace(self) -> pd.DataFrame | None:
        """analysis.db StepTraceTime as the steps frame (None without analysis.db)."""
        if self.ana is None or not self.ana.has("StepTraceTime"):
            return None
        self.ana.require("StepTraceTime", ["computing"])
        raw_ = self.ana.read_all("StepTraceTime")

        def num(c: str) -> pd.Series:
            return (
                pd.to_numeric(raw_[c], errors="coerce")
                if c in raw_
                else pd.Series(np.nan, index=raw_.index)
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
            if c in raw_:
                out[c + "_us"] = num(c)
        st = self.step_time()
        if len(st):
            by = st.set_index("step")
            out["start_ns"] = out["step"].map(by["start_ns"]).astype("Int64")
            out["span_us"] = out["step"].map((by["end_ns"] - by["start_ns"]) / 1000.0)
        return schema.conform(out, "steps")

    def steps(self) -> pd.DataFrame:
        """StepTraceTime when analysis.db has it, else STEP_TIME with the breakdown computed
        from the device tasks (the same rule torch_npu's analysis applies)."""
        st = self.step_trace()
        if st is not None:
            self.read_paths["steps"] = "StepTraceTime"
            return st
        st_raw = self.step_time()
        if st_raw.empty:
            self.read_paths["steps"] = "none"
            return schema.empty("steps")
        self.notes.append(
            "no analysis.db StepTraceTime: duration from STEP_TIME, breakdown "
            "computed from the device tasks (free = duration - computing - "
            "communication not overlapped)"
        )
        if not self.has_tasks():
            self.read_paths["steps"] = "STEP_TIME"
            self.notes.append(
                "no TASK table (kernel data trimmed or not exported): the steps have their "
                "STEP_TIME duration only, no breakdown"
            )
            return schema.conform(
                pd.DataFrame(
                    {
                        "step": st_raw["step"],
                        "start_ns": pd.array(st_raw["start_ns"], dtype="Int64"),
                        "duration_us": (st_raw["end_ns"] - st_raw["start_ns"]) / 1000.0,
                    }
                ),
                "steps",
            )
        k = self.kernels()
        self.read_paths["steps"] = "STEP_TIME+tasks"
        rows = []
        for s, a, b in st_raw[["step", "start_ns", "end_ns"]].itertuples(index=False):
            br = overlap_breakdown(k[(k["step"] == s)])
            br["stage_us"] = br["duration_us"]
            br["duration_us"] = br["span_us"] = (b - a) / 1000.0
            ks = k.loc[k["step"] == s, "start_ns"]
            br["preparing_us"] = (int(ks.min()) - a) / 1000.0 if len(ks) else np.nan
            br["free_us"] = (
                br["duration_us"] - br["computing_us"] - br["communication_not_overlapped_us"]
            )
            rows.append({"step": s, "start_ns": a, **br})
        return schema.conform(pd.DataFrame(rows), "steps")

    def memory_copies(self) -> pd.DataFrame:
        """The device's MEMCPY_ASYNC tasks (start_ns, end_ns, step by their start), which
        msprof-analyze's cluster_time_summary counts as Memory and takes out of Free."""
        cols = ("start_ns", "end_ns")
        if not self.has("TASK", "STRING_IDS"):
            return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols}).assign(
                step=pd.array([], dtype="Int64")
            )
        df = self.db.query(
            "SELECT CAST(startNs AS INTEGER) AS start_ns, CAST(endNs AS INTEGER) AS end_ns "
            "FROM TASK WHERE taskType = "
            "(SELECT id FROM STRING_IDS WHERE value = 'MEMCPY_ASYNC') ORDER BY startNs",
            what="the memory copy tasks (TASK)",
        ).astype({"start_ns": "int64", "end_ns": "int64"})
        st = self.step_time()
        step = pd.array([pd.NA] * len(df), dtype="Int64")
        for s, a, b in st[["step", "start_ns", "end_ns"]].itertuples(index=False):
            inside = ((df["start_ns"] >= a) & (df["start_ns"] <= b)).to_numpy()
            step[inside] = s
        return df.assign(step=step)

    # ---- kernels ----------------------------------------------------------------------------
    def _tasks(self) -> pd.DataFrame:
        """The compute tasks: TASK x COMPUTE_TASK_INFO (one row per task, as compute_op_sum
        counts them), or every TASK row named by its task type when COMPUTE_TASK_INFO is
        absent (a repaired load: warned and noted)."""
        self.db.require("TASK", ("startNs", "endNs", "globalTaskId"))
        task_cols = [
            raw("globalTaskId", "global_task_id"),
            ns("startNs", "start_ns"),
            ns("endNs", "end_ns"),
            raw("streamId", "stream"),
            text("taskType", "task_type"),
            raw("taskId", "task_id"),
        ]
        if not self.has("COMPUTE_TASK_INFO"):
            self.notes.append(
                "no COMPUTE_TASK_INFO table: kernels are every TASK row, named by their task type"
            )
            warn(
                TraceRepairWarning(
                    f"{self.path}: no COMPUTE_TASK_INFO table; kernels "
                    "are the raw TASK rows named by task type"
                ),
                stacklevel=5,
            )
            k = self.db.select("TASK", [*task_cols, raw("deviceId", "device")], what="the tasks")
            k = k[~validate.repeated(k["global_task_id"])]
            return k.assign(
                name=k["task_type"], type=None, core=None, block_dim=None, input_shapes=None
            )
        # two plain scans joined in pandas: twice as fast as sqlite's per-row join
        info = self.db.select(
            "COMPUTE_TASK_INFO",
            [
                raw("globalTaskId", "global_task_id", required=True),
                text("name", "name"),
                text("opType", "type"),
                text("taskType", "core"),
                raw("blockDim", "block_dim"),
                text("inputShapes", "input_shapes"),
            ],
        )
        # one device per rank db: read it once rather than per row
        devs = (
            self.db.query("SELECT DISTINCT deviceId FROM TASK", what="TASK")
            if "deviceId" in self.db.columns("TASK")
            else pd.DataFrame({"deviceId": []})
        )
        one = len(devs) <= 1
        task = self.db.select("TASK", task_cols + ([] if one else [raw("deviceId", "device")]))
        if one:
            task["device"] = devs.iloc[0, 0] if len(devs) else None
        task = task[~validate.repeated(task["global_task_id"])]
        info = info[~validate.repeated(info["global_task_id"])]
        return task.merge(info, on="global_task_id", how="inner")

    def has_tasks(self) -> bool:
        """Whether the db holds device tasks at all: a trimmed rank (only communication and
        steps kept) has neither TASK nor COMPUTE_TASK_INFO; COMPUTE_TASK_INFO without TASK is a
        damaged db, and reading its kernels raises."""
        return self.has("TASK") or self.has("COMPUTE_TASK_INFO")

    def kernels(self) -> pd.DataFrame:
        """Compute tasks plus one ``core == "HCCL"`` row per communication op, as
        kernel_details.csv has them (empty, with a note, when the db has no device tasks)."""
        if not self.has_tasks():
            self.read_paths["kernels"] = "trimmed"
            self.notes.append(
                "no TASK or COMPUTE_TASK_INFO table: the kernel data was trimmed or not exported"
            )
            return schema.empty("kernels")
        self.unique_rows()
        comm = ascend_db_comm.comm_ops(self.db) if self.has("COMMUNICATION_OP") else None
        fast = ascend_db_kernels.kernels(self.db, comm, self.step_time())
        if fast is not None:
            self.read_paths["kernels"] = "fast"
            return fast
        out = self.kernels_generic(comm)
        self.read_paths["kernels"] = "generic" if self.has("COMPUTE_TASK_INFO") else "repaired"
        return out

    def kernels_generic(self, comm: pd.DataFrame | None) -> pd.DataFrame:
        """``kernels`` read row-wise (any file; ``ascend_db_kernels`` is the fast path for the
        files it covers, and must give the same frame)."""
        k = self._tasks()
        k = k[k["start_ns"].notna() & k["end_ns"].notna()]
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
                "wait_us": stream_wait(k["stream"], start, end),
                "step": steps_of(start, self.step_time()),
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

    # ---- communication ----------------------------------------------------------------------
    def _comm_ops(self) -> pd.DataFrame:
        return ascend_db_comm.comm_ops(self.db)

    def comm_tasks(self) -> pd.DataFrame:
        """COMMUNICATION_TASK_INFO x TASK: one row per HCCL task (links, sizes, durations)."""
        return ascend_db_comm.comm_tasks(self.db)

    def communication(self) -> pd.DataFrame:
        """One row per communication op (see ``ascend_db_comm.communication``)."""
        self.unique_rows()
        return ascend_db_comm.communication(self.db, self.ana, self.step_time(), self.notes)

    def links(self) -> pd.DataFrame:
        """Per communication op and link: size, transit time, bandwidth."""
        return ascend_db_comm.links(self.db, self.ana, self.step_time())

    def bandwidth(self) -> pd.DataFrame:
        """Per communication op and transport: size, transit time, bandwidth."""
        return ascend_db_comm.bandwidth(self.db, self.ana, self.step_time())

    # ---- host API and memory ----------------------------------------------------------------
    def api_events(self) -> pd.DataFrame:
        """PYTORCH_API, CANN_API and MSTX_EVENTS (host), the compute tasks and the
        communication ops as events rows, with trace_view.json's processes, threads and
        categories (see ``ascend_db_events``)."""
        k = self.kernels() if "TASK" in self.tables else None
        return ascend_db_events.events(self.db, k, self.rank_device()[1])

    def memory(self) -> pd.DataFrame:
        """MEMORY_RECORD (framework allocator totals) and OP_MEMORY (per-op alloc/release)."""
        frames = []
        if {"timestamp", "totalAllocated"} <= set(self.db.columns("MEMORY_RECORD")):
            m = self.db.select(
                "MEMORY_RECORD",
                [
                    ns("timestamp", "ts"),
                    text("component", "comp"),
                    raw("deviceId", "dev"),
                    raw("totalAllocated", "alloc"),
                    raw("totalReserved", "res"),
                    raw("totalActive", "act"),
                ],
            )
            frames.append(
                pd.DataFrame(
                    {
                        "ts_ns": pd.array(m["ts"], dtype="Int64"),
                        "device": _npu(m["dev"]),
                        "allocated_bytes": pd.to_numeric(m["alloc"], errors="coerce"),
                        "reserved_bytes": pd.to_numeric(m["res"], errors="coerce"),
                        "active_bytes": pd.to_numeric(m["act"], errors="coerce"),
                        "delta_bytes": np.nan,
                        "name": m["comp"],
                        "source": "MEMORY_RECORD",
                    }
                )
            )
        if {"allocationTime", "size"} <= set(self.db.columns("OP_MEMORY")):
            totals = [p + t for p in ("allocation", "release") for t in _TOTALS]
            o = self.db.select(
                "OP_MEMORY",
                [
                    ns("allocationTime", "a"),
                    ns("releaseTime", "r", required=False),
                    raw("size", "size"),
                    text("name", "name"),
                    raw("deviceId", "dev"),
                    *(raw(c, c) for c in totals),
                ],
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


_TOTALS = ("TotalAllocated", "TotalReserved", "TotalActive")


def _npu(dev: pd.Series) -> pd.Series:
    d = pd.to_numeric(dev, errors="coerce")
    return ("NPU:" + d.astype("Int64").astype(str)).where(d.notna(), "NPU")
