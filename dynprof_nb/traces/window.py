"""TraceWindow: one profiling window (or several ranks' windows) as lazily loaded DataFrames.

Each frame is read on first access from the best source the window has, and ``sources`` records
which file fed it, what was repaired and what was missing. Several ranks parse in parallel
processes (the JSON decode holds the GIL, so threads would not help).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from . import ascend, ascend_bandwidth, cache, comm, derive, mindspore, schema
from .ascend_db import AscendDb
from .chrome import ChromeTrace, load_chrome_trace
from .discover import (
    MEMORY_CSVS,
    WindowFiles,
    find_file,
    find_window_files,
    job_rank,
    read_json_object,
)
from .errors import IncompleteWindowWarning, TraceFormatError, TraceRepairWarning, warn
from .lazyframe import LazyFrame
from .ops import op_table
from .shortcuts import WindowShortcuts
from .sources import Source, lone_file_reader, source_of

FRAMES = ("events", "ops", "steps", "kernels", "memory", "communication")


# what a reader raises on a file whose content is not what it expects (missing columns, empty
# arrays, wrong types): turned into a TraceFormatError naming the file, never a bare traceback
_CONTENT_ERRORS = (
    KeyError,
    IndexError,
    TypeError,
    ValueError,
    AttributeError,
    OverflowError,
    ZeroDivisionError,
    EOFError,
    RecursionError,
)


class TraceWindow(WindowShortcuts):
    """DataFrames of one window: ``events``, ``ops``, ``steps``, ``kernels``, ``memory``,
    ``communication``; each is loaded on first access and cached.

    Columns (see :mod:`dynprof_nb.traces.schema`):

    - events: name, cat, ph, pid, tid, process, thread, ts_ns, dur_ns, step (+ rank)
    - ops: name, count, total_us, self_us, avg_us, min_us, max_us, share
    - steps: step, start_ns, duration_us, computing_us, communication_us, overlapped_us, free_us
    - kernels: name, type, core, stream, start_ns, duration_us, wait_us, step
    - memory: ts_ns, device, allocated_bytes, reserved_bytes, active_bytes, delta_bytes, name,
      source
    - communication: step, name, group, start_ns, elapse_us, transit_us, wait_us,
      synchronization_us, idle_us, size_mb, bandwidth_gbps, source

    Times: ``*_ns`` are exact int64 nanoseconds; ``*_us`` are float microseconds.

    Its summary, plots and cluster analyses (``summary()``, ``plot_timeline()``, ...) are
    :class:`~dynprof_nb.traces.shortcuts.WindowShortcuts`, provided by the analysis side.

    Which kernels and ranges count as communication (in ``steps`` and ``communication`` when
    they are derived from events) is ``comm_patterns``, fixed when the window is loaded
    (see :mod:`dynprof_nb.traces.comm`).
    """

    def __init__(
        self,
        path: str | Path,
        files: WindowFiles | None = None,
        *,
        comm_patterns: comm.PatternSpec = None,
    ):
        self.path = Path(path)
        self.comm_patterns: tuple[str, ...] = comm.resolve(comm_patterns)
        files = files or WindowFiles(root=self.path)
        self._files = files
        self._cache: dict[str, pd.DataFrame] = {}
        self._chrome: list[ChromeTrace] | None = None
        self._adb: AscendDb | None = None
        self._links: pd.DataFrame | None = None
        self._bandwidth: pd.DataFrame | None = None
        self.sources: dict[str, dict[str, Any]] = {}
        self.tables: dict[str, pd.DataFrame] = {}  # files kept as read, with no frame of their own
        self.manifest: dict | None = files.manifest
        self.framework: str = files.framework_name
        self.rank: int | None = files.rank
        self.device: int | None = files.device
        self.start_step: int | None = files.start_step
        self.stop_step: int | None = files.stop_step

    # ---- frames (each is ``self._frame(<name>)``) -----------------------------------------------
    events = LazyFrame[pd.DataFrame]("Every complete and instant event, one row each.")
    ops = LazyFrame[pd.DataFrame](
        "One row per host operation name: count, total/self/avg/min/max µs, share of self time."
    )
    steps = LazyFrame[pd.DataFrame](
        "One row per step, with the compute/communication/free breakdown where known."
    )
    kernels = LazyFrame[pd.DataFrame](
        "Device tasks (kernel_details.csv, the db, or device events)."
    )
    memory = LazyFrame[pd.DataFrame]("Memory records over time.")
    communication = LazyFrame[pd.DataFrame]("Collective / p2p communication operations.")

    @property
    def ranks(self) -> list[int]:
        return [self.rank] if self.rank is not None else []

    @property
    def config(self) -> dict[str, Any] | None:
        """The profiler config the window was recorded with (its ``window.json``), or None for
        a window no Monitor wrote. ``windows.config_delta`` picks what differs from defaults."""
        config = (self.manifest or {}).get("config")
        return dict(config) if isinstance(config, dict) else None

    def _frame(self, kind: str) -> pd.DataFrame:
        if kind not in self._cache:  # the columnar cache's entry, else read and stored there
            self._cache[kind] = cache.through(self, kind, lambda: self._build(kind))
        return self._cache[kind]

    def _build(self, kind: str) -> pd.DataFrame:
        try:
            frame = schema.conform(_LOADERS[kind](self), kind)
            self._provenance(kind)
            if self.device is not None and "device" not in frame.columns:
                frame["device"] = schema.constant_int(self.device, len(frame))
            return frame
        except (TraceFormatError, FileNotFoundError, MemoryError):
            raise
        except _CONTENT_ERRORS as exc:  # the file is not laid out as the reader expects
            raise TraceFormatError(
                self.path,
                f"cannot read its {kind}: {type(exc).__name__}: {str(exc)[:200]}",
                hint="the file is damaged or not in the layout this reader knows",
            ) from exc

    def frame(self, kind: str) -> pd.DataFrame:
        """Frame ``kind`` (one of ``FRAMES``), read on first use (the :class:`Window` protocol)."""
        if kind not in _LOADERS:
            raise KeyError(f"no frame {kind!r}; a window has {', '.join(FRAMES)}")
        return self._frame(kind)

    def _provenance(self, kind: str) -> None:
        """Say in ``sources[kind]`` which registered source built the frame and how: ``read``
        from a file of a source that provides it, ``derived`` from the events (ops computed
        from a trace) or from a source that does not provide the frame."""
        note = self.sources.get(kind)
        if not note or not note.get("files"):
            return
        src = source_of(note["files"][0])
        if src is not None:
            note["source"] = src.name
            from_events = kind != "events" and note["files"] == self.sources.get("events", {}).get(
                "files"
            )
            note["path"] = "derived" if from_events or kind not in src.frames else "read"

    def _note(
        self,
        kind: str,
        files: list | None = None,
        missing: str | None = None,
        notes: list[str] | None = None,
    ) -> None:
        fmt = (
            "db"
            if any(str(f).endswith(".db") for f in files or [])
            else ("text" if files else None)
        )
        self.sources[kind] = {
            "files": [str(f) for f in files or []],
            "missing": missing,
            "notes": list(notes or []),
            "format": fmt,
        }

    @property
    def format(self) -> str:
        """``"db"`` when the window has a profiler database (then every frame it holds is read
        from it, so all frames come from one export), else ``"text"``."""
        return "db" if self._files.db is not None else "text"

    def _have(self) -> str:
        """What this window does have, for 'missing' notes on trimmed ranks."""
        f = self._files
        have = [p.name for p in f.traces] + [p.name for p in f.csv.values()]
        have += [p.name for p in (f.communication, f.matrix, f.db, f.analysis_db) if p]
        return ", ".join(have) or "no profiler files"

    # ---- readers ----------------------------------------------------------------------------
    def _traces(self) -> list[ChromeTrace]:
        if self._chrome is None:
            out = []
            for p in self._files.traces:
                tr = load_chrome_trace(p)
                if tr.repairs:
                    warn(TraceRepairWarning(f"{p}: " + "; ".join(tr.repairs)), stacklevel=4)
                out.append(tr)
            self._chrome = out
        return self._chrome

    def _dbreader(self) -> AscendDb | None:
        db = self._files.db
        if self._adb is None and db is not None:
            ana = self._files.analysis_db
            if ana is None and (db.parent / "analysis.db").is_file():
                ana = db.parent / "analysis.db"
            self._adb = AscendDb(db, ana)
        return self._adb

    def _db_note(self, kind: str, frame: pd.DataFrame, tables: str) -> pd.DataFrame:
        adb = self._dbreader()
        files = [adb.path] + (
            [adb.analysis] if adb.analysis and kind in ("steps", "communication") else []
        )
        if frame.empty:
            self._note(
                kind,
                missing=f"the database has no {tables} rows (this rank has: {self._have()}; "
                f"its database's tables: {', '.join(sorted(adb.tables))})",
                notes=adb.notes,
            )
        else:
            self._note(kind, files, notes=[f"from {tables}"] + adb.notes)
        return frame

    def _load_events(self) -> pd.DataFrame:
        adb = self._dbreader()
        traces = self._traces() if adb is None else []
        if adb is not None:
            ev = self._db_note(
                "events", adb.api_events(), "PYTORCH_API, CANN_API, TASK and COMMUNICATION_OP"
            )
            if ev.empty:
                return schema.empty("events")
        elif traces:
            frames = [t.events for t in traces]
            ev = frames[0] if len(frames) == 1 else schema.concat_frames(frames)
            self._note(
                "events", [t.path for t in traces], notes=[n for t in traces for n in t.repairs]
            )
        elif "cpu_op_execute_timestamp" in self._files.framework:
            p = self._files.framework["cpu_op_execute_timestamp"]
            ev = mindspore.cpu_op_execute_timestamps(p)
            self._note("events", [p])
        else:
            self._note(
                "events",
                missing="no trace file (trace.json, *.pt.trace.json, trace_view.json, .db)",
            )
            return schema.empty("events")
        markers = self._files.step_markers
        if markers is not None:
            ev = schema.concat_frames(
                [schema.conform(ev, "events").drop(columns="step"), mindspore.step_markers(markers)]
            )
            self.sources["events"]["files"].append(str(markers))
            self.sources["events"]["notes"].append("step markers from dynprof_steps.csv")
        iv = derive.step_intervals(ev)
        steps = derive.assign_steps(ev["ts_ns"].to_numpy("int64", na_value=0), iv)
        ev["step"] = derive.device_steps(ev, iv, steps)
        return ev

    def _load_ops(self) -> pd.DataFrame:
        ev = self.events
        if not ev.empty:
            self._note(
                "ops",
                self.sources["events"]["files"],
                notes=[
                    "computed from events (self time = duration minus children on the same thread)"
                ],
            )
            return op_table(ev)
        if "op_statistic" in self._files.csv:
            p = self._files.csv["op_statistic"]
            self._note("ops", [p], notes=["device op types from op_statistic.csv"])
            return ascend.op_statistic(p)
        fw = self._files.framework
        if "cpu_op_detail_info" in fw:
            self._note("ops", [fw["cpu_op_detail_info"]])
            return mindspore.cpu_op_detail(fw["cpu_op_detail_info"])
        self._note("ops", missing="no events and no op_statistic.csv / cpu_op_detail_info csv")
        return schema.empty("ops")

    def _load_steps(self) -> pd.DataFrame:
        adb = self._dbreader()
        if adb is not None:
            return self._db_note("steps", adb.steps(), "analysis.db StepTraceTime / STEP_TIME")
        p = self._files.csv.get("step_trace_time")
        derived, how = derive.steps_from_events(self.events, self.comm_patterns)
        if p is not None:
            st = ascend.step_trace_time(p)
            if not derived.empty and "start_ns" in derived:
                starts = derived.set_index("step")["start_ns"]
                st["start_ns"] = st["step"].map(starts).astype("Int64")
            self._note(
                "steps",
                [p],
                notes=[
                    "start_ns from step marker events"
                    if not derived.empty
                    else "step_trace_time.csv has no start times"
                ],
            )
            return st
        if derived.empty:
            self._note("steps", missing=how)
        else:
            self._note("steps", self.sources.get("events", {}).get("files"), notes=[how])
        return derived

    def _load_kernels(self) -> pd.DataFrame:
        p = self._files.csv.get("kernel_details")
        adb = self._dbreader()
        if adb is not None:
            return self._db_note(
                "kernels", adb.kernels(), "TASK, COMPUTE_TASK_INFO and COMMUNICATION_OP"
            )
        if p is not None:
            self._note("kernels", [p])
            return ascend.kernel_details(p)
        k = derive.kernels_from_events(self.events)
        if k.empty:
            self._note(
                "kernels",
                missing="no kernel_details.csv and no device events (this rank "
                f"has: {self._have()})",
            )
        else:
            self._note("kernels", self.sources["events"]["files"], notes=["device events"])
        return k

    def _load_memory(self) -> pd.DataFrame:
        adb = self._dbreader()
        if adb is not None:
            return self._db_note("memory", adb.memory(), "MEMORY_RECORD and OP_MEMORY")
        frames, files = [], []
        for key in MEMORY_CSVS:
            p = self._files.csv.get(key)
            if p is not None:
                frames.append(ascend.memory_csv(p))
                files.append(p)
        p = self._files.framework.get("cpu_ms_memory_record")
        if p is not None:
            frames.append(mindspore.cpu_memory_record(p))
            files.append(p)
        if not frames:
            self.events  # noqa: B018  (loads the traces)
            for t in self._traces():
                if not t.memory.empty:
                    frames.append(t.memory)
                    files.append(t.path)
                m = derive.memory_from_counters(t.counters)
                if not m.empty:
                    frames.append(m)
                    files.append(t.path)
        if not frames:
            self._note(
                "memory",
                missing="no memory CSV, [memory] events or Memory counters "
                "(profile_memory was probably off)",
            )
            return schema.empty("memory")
        self._note("memory", files)
        out = schema.concat_frames([schema.conform(f, "memory") for f in frames])
        return out.sort_values("ts_ns", ignore_index=True)

    def _load_communication(self) -> pd.DataFrame:
        p = self._files.communication
        adb = self._dbreader()
        if adb is not None:
            return self._db_note(
                "communication",
                adb.communication(),
                "COMMUNICATION_OP (or analysis.db CommAnalyzerTime)",
            )
        if p is not None:
            self._note("communication", [p])
            return ascend.communication_json(p)
        c = derive.communication_from_events(self.events, self.comm_patterns)
        if c.empty:
            self._note(
                "communication",
                missing="no communication.json and no event matched the "
                "communication patterns (dynprof_nb.traces.comm; "
                f"this rank has: {self._have()})",
            )
        else:
            self._note(
                "communication",
                self.sources["events"]["files"],
                notes=[f"{c['source'].iloc[0]} matching the communication patterns"],
            )
        return c

    def communication_links(self) -> pd.DataFrame:
        """Per communication op and link (src_rank -> dst_rank): transport, size_mb, transit_us,
        bandwidth_gbps; from communication_matrix.json, or the database's HCCL tasks."""
        if self._links is None:
            adb = self._dbreader()
            m = self._files.matrix
            if adb is not None:
                self._links = adb.links()
                self.sources["links"] = {"files": [str(adb.path)], "format": "db"}
            elif m is not None:
                self._links = ascend.communication_matrix_json(m)
                self.sources["links"] = {"files": [str(m)], "format": "text"}
            else:
                self._links = pd.DataFrame(columns=ascend.LINK_COLUMNS)
                self.sources["links"] = {
                    "files": [],
                    "missing": "no communication_matrix.json "
                    f"or database (this rank has: {self._have()})",
                }
        return self._links

    def communication_bandwidth(self) -> pd.DataFrame:
        """Per communication op and transport (HCCS, PCIE, SIO, SDMA = their total, RDMA):
        size_mb, transit_us, bandwidth_gbps, large_packet_ratio, Ascend's "Communication
        Bandwidth Info"; from communication.json, analysis.db or the database's HCCL tasks.
        The communication frame's size_mb / bandwidth_gbps are its SDMA + RDMA rows."""
        if self._bandwidth is None:
            adb = self._dbreader()
            p = self._files.communication
            if adb is not None:
                self._bandwidth = adb.bandwidth()
                self.sources["bandwidth"] = {"files": [str(adb.path)], "format": "db"}
            elif p is not None:
                self._bandwidth = ascend.communication_bandwidth_json(p)
                self.sources["bandwidth"] = {"files": [str(p)], "format": "text"}
            else:
                self._bandwidth = ascend_bandwidth.frame(
                    pd.DataFrame(columns=ascend_bandwidth.COLUMNS)
                )
                self.sources["bandwidth"] = {
                    "files": [],
                    "missing": f"no communication.json or database (this rank has: {self._have()})",
                }
        return self._bandwidth

    def memory_copies(self) -> pd.DataFrame:
        """The device's asynchronous memory copies (MEMCPY_ASYNC tasks: start_ns, end_ns,
        step) of a database window; empty for other formats."""
        adb = self._dbreader()
        if adb is not None:
            return adb.memory_copies()
        return pd.DataFrame(
            {
                "start_ns": pd.Series(dtype="int64"),
                "end_ns": pd.Series(dtype="int64"),
                "step": pd.Series(dtype="Int64"),
            }
        )

    # ---- reading ----------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | Path, *, comm_patterns: comm.PatternSpec = None) -> TraceWindow:
        """One file: Chrome trace JSON (.json/.gz, object or array), an Ascend CSV,
        communication.json, a MindSpore FRAMEWORK file or an Ascend .db. It is a window of one
        file, filed by :func:`~dynprof_nb.traces.discover.find_file` where a directory holds it."""
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such file (load_window reads directories)")
        own = lone_file_reader(p)
        try:
            if own is not None:
                return cls._from_source_file(p, own, comm_patterns)
            w = cls(p, find_file(p), comm_patterns=comm_patterns)
            w._read_lone_file()
        except (TraceFormatError, FileNotFoundError, MemoryError):
            raise
        except _CONTENT_ERRORS as exc:
            raise TraceFormatError(
                p,
                f"cannot read it: {type(exc).__name__}: {str(exc)[:200]}",
                hint="the file is damaged or not in the layout this reader knows",
            ) from exc
        return w

    @classmethod
    def _from_source_file(
        cls, p: Path, src: Source, comm_patterns: comm.PatternSpec
    ) -> TraceWindow:
        """A lone file of a registered source that reads its own frames."""
        w = cls(p, WindowFiles(root=p.parent, framework_name=src.name), comm_patterns=comm_patterns)
        frames, path = src.read_file(p)
        for kind in FRAMES:
            if kind in frames:
                w._cache[kind] = schema.conform(frames[kind], kind)
                w.sources[kind] = {
                    "files": [str(p)],
                    "missing": None,
                    "notes": [],
                    "format": "text",
                    "source": src.name,
                    "path": path,
                }
            else:
                w._cache[kind] = schema.empty(kind)
                w._note(kind, missing=f"{p.name} ({src.name}) holds no {kind}")
        return w

    @classmethod
    def from_directory(
        cls, root: Path, explicit: bool = True, comm_patterns: comm.PatternSpec = None
    ) -> TraceWindow:
        """One rank's window directory; ``explicit``: the user named it (warn if incomplete)."""
        files = find_window_files(root)
        if files.incomplete and explicit:
            warnings.warn(
                IncompleteWindowWarning(
                    f"{root}: loading an incomplete window because "
                    f"{files.incomplete}; some data may be missing"
                ),
                stacklevel=3,
            )
        if not (files.traces or files.csv or files.framework or files.db or files.communication):
            raise TraceFormatError(
                root,
                "no trace files found in this directory",
                offset=None,
                hint="expected trace.json, *.pt.trace.json, *_ascend_ms/ or "
                "ASCEND_PROFILER_OUTPUT/",
            )
        w = cls(root, files, comm_patterns=comm_patterns)
        if files.db is not None:
            w._identify_db(w._dbreader())
        elif files.traces:  # parsed for the rank, unless the cache has it from an earlier parse
            cache.identify(w, lambda: (w._traces(), w._rank_from_trace()))
            w.framework = files.framework_name if files.framework_name != "unknown" else w.framework
        return w

    def _read_lone_file(self) -> None:
        """Read now the frame a one-file window's file feeds, so a damaged file raises at load
        (the other frames say on first access that the window has no file for them)."""
        f = self._files
        if f.db is not None:
            self._identify_db(self._dbreader())
        elif f.traces:
            cache.identify(self, lambda: (self.events, self._rank_from_trace()))
            self.events  # noqa: B018  (from the cache when identify did not read it)
        elif f.metadata is not None:
            self._read_metadata(f.metadata)
        elif f.table is not None:  # parsed (so damage is reported), kept as-is in ``tables``
            self.tables[f.table.stem] = ascend.read_csv(f.table)
            for kind in FRAMES:
                self._cache[kind] = schema.empty(kind)
                self._note(kind, missing=f"{f.table.name} holds no {kind}")
        elif f.matrix is not None:
            self.communication_links()
        elif f.communication is not None:
            self.communication  # noqa: B018
        elif "step_trace_time" in f.csv:  # alone it has no step start times to look for
            p = f.csv["step_trace_time"]
            self._cache["steps"] = schema.conform(ascend.step_trace_time(p), "steps")
            self._note("steps", [p])
        elif "cpu_op_detail_info" in f.framework:
            self._cache["events"] = schema.empty("events")
            self._note("events", missing="cpu_op_detail_info has aggregates only")
            self.ops  # noqa: B018
        elif "kernel_details" in f.csv:
            self.kernels  # noqa: B018
        elif "op_statistic" in f.csv:
            self.ops  # noqa: B018
        elif "cpu_op_execute_timestamp" in f.framework:
            self.events  # noqa: B018
        else:  # a memory CSV or cpu_ms_memory_record
            self.memory  # noqa: B018

    def _read_metadata(self, p: Path) -> None:
        """profiler_info_N.json / profiler_metadata.json / communication_group.json: no frames, but
        the rank (they are what says which rank a window is)."""
        doc = read_json_object(p)
        if not doc and p.stat().st_size:
            raise TraceFormatError(
                p,
                "not a JSON object",
                offset=0,
                hint="expected an Ascend profiler_info / profiler_metadata JSON",
            )
        self.rank, src = job_rank(p.parent)
        self.tables[p.stem] = pd.json_normalize(doc) if doc else pd.DataFrame()
        for kind in FRAMES:
            self._cache[kind] = schema.empty(kind)
            self._note(kind, missing=f"{p.name} is metadata only (rank from {src})")

    def _identify_db(self, adb: AscendDb) -> None:
        """Fill rank/device from RANK_DEVICE_MAP / TASK (reading the table list validates the
        file)."""
        _ = adb.tables
        rank, device = adb.rank_device()
        if self.rank is None:
            self.rank = rank
        if self.device is None:
            self.device = device

    def _rank_from_trace(self) -> None:
        """Rank and framework from what a Chrome trace says about itself."""
        for t in self._chrome or []:
            info = t.meta.get("distributedInfo")
            if isinstance(info, dict) and isinstance(info.get("rank"), int) and self.rank is None:
                self.rank = info["rank"]
            if isinstance(t.meta.get("otherData"), dict) and self.framework == "chrome":
                self.framework = "builtin"
            procs = set(t.events["process"].cat.categories) if len(t.events) else set()
            if self.framework == "chrome" and procs & {"Ascend Hardware", "CANN", "CPU OP"}:
                self.framework = "ascend"

    def loaded(self, kind: str) -> bool:
        """Whether frame ``kind`` has been read already."""
        return kind in self._cache

    def adopt_events(
        self, events: pd.DataFrame, sources: dict[str, Any], traces: list[ChromeTrace]
    ) -> None:
        """Take the events another process parsed for this window (the parallel loader)."""
        self._cache["events"] = events
        self.sources.update(sources)
        self._chrome = traces or None  # none when they came from the cache: parsed if needed

    def load_all(self) -> TraceWindow:
        """Load every frame now (e.g. before pickling or timing)."""
        for f in FRAMES:
            self._frame(f)
        return self

    def __repr__(self) -> str:
        loaded = ", ".join(f"{k}[{len(v)}]" for k, v in self._cache.items()) or "nothing loaded yet"
        r = f" rank={self.rank}" if self.rank is not None else ""
        s = f" steps {self.start_step}..{self.stop_step}" if self.start_step is not None else ""
        return f"<TraceWindow {self.framework}{r}{s} {self.path}: {loaded}>"


# frame kind -> the method that reads it (explicit, so "find usages" reaches each loader)
_LOADERS: dict[str, Callable[[TraceWindow], pd.DataFrame]] = {
    "events": TraceWindow._load_events,
    "ops": TraceWindow._load_ops,
    "steps": TraceWindow._load_steps,
    "kernels": TraceWindow._load_kernels,
    "memory": TraceWindow._load_memory,
    "communication": TraceWindow._load_communication,
}
