"""TraceWindow: one profiling window (or several ranks' windows) as lazily loaded DataFrames.

Each frame is read on first access from the best source the window has, and ``sources`` records
which file fed it, what was repaired and what was missing. Several ranks parse in parallel
processes (the JSON decode holds the GIL, so threads would not help).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from . import ascend, ascend_db, derive, mindspore, schema
from .ascend_db import AscendDb
from .chrome import ChromeTrace, load_chrome_trace
from .discover import WindowFiles, find_window_files, job_rank, rank_windows
from .errors import IncompleteWindowWarning, TraceFormatError, TraceRepairWarning

FRAMES = ("events", "ops", "steps", "kernels", "memory", "communication")
MEMORY_CSVS = ("memory_record", "operator_memory", "npu_module_mem")


# what a reader raises on a file whose content is not what it expects (missing columns, empty
# arrays, wrong types): turned into a TraceFormatError naming the file, never a bare traceback
_CONTENT_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError,
                   ZeroDivisionError, EOFError, RecursionError)


class TraceWindow:
    """DataFrames of one window: ``events``, ``ops``, ``steps``, ``kernels``, ``memory``,
    ``communication``; each is loaded on first access and cached.

    Columns (see :mod:`dynprof_nb.traces.schema`):

    - events: name, cat, ph, pid, tid, process, thread, ts_ns, dur_ns, step (+ rank)
    - ops: name, count, total_us, self_us, avg_us, min_us, max_us, share
    - steps: step, start_ns, duration_us, computing_us, communication_us, overlapped_us, free_us
    - kernels: name, type, core, stream, start_ns, duration_us, wait_us, step
    - memory: ts_ns, device, allocated_bytes, reserved_bytes, active_bytes, delta_bytes, name, source
    - communication: step, name, group, start_ns, elapse_us, transit_us, wait_us,
      synchronization_us, idle_us, size_mb, bandwidth_gbps, source

    Times: ``*_ns`` are exact int64 nanoseconds; ``*_us`` are float microseconds.
    """

    def __init__(self, path: str | Path, files: WindowFiles | None = None, *,
                 single_file: Path | None = None):
        self.path = Path(path)
        self._files = files
        self._single = single_file
        self._cache: dict[str, pd.DataFrame] = {}
        self._chrome: list[ChromeTrace] | None = None
        self._adb: AscendDb | None = None
        self._links: pd.DataFrame | None = None
        self.sources: dict[str, dict[str, Any]] = {}
        self.tables: dict[str, pd.DataFrame] = {}  # files kept as read, with no frame of their own
        self.manifest: dict | None = files.manifest if files else None
        self.framework: str = files.framework_name if files else "unknown"
        self.rank: int | None = files.rank if files else None
        self.device: int | None = files.device if files else None
        self.start_step: int | None = files.start_step if files else None
        self.stop_step: int | None = files.stop_step if files else None

    # ---- frames -----------------------------------------------------------------------------
    @property
    def events(self) -> pd.DataFrame:
        """Every complete and instant event, one row each."""
        return self._frame("events")

    @property
    def ops(self) -> pd.DataFrame:
        """One row per host operation name: count, total/self/avg/min/max µs, share of self time."""
        return self._frame("ops")

    @property
    def steps(self) -> pd.DataFrame:
        """One row per step, with the compute/communication/free breakdown where known."""
        return self._frame("steps")

    @property
    def kernels(self) -> pd.DataFrame:
        """Device tasks (kernel_details.csv, the db, or device events)."""
        return self._frame("kernels")

    @property
    def memory(self) -> pd.DataFrame:
        """Memory records over time."""
        return self._frame("memory")

    @property
    def communication(self) -> pd.DataFrame:
        """Collective / p2p communication operations."""
        return self._frame("communication")

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
        if kind not in self._cache:
            try:
                frame = schema.conform(getattr(self, f"_load_{kind}")(), kind)
                if self.device is not None and "device" not in frame.columns:
                    frame["device"] = pd.array([self.device] * len(frame), dtype="Int64")
                self._cache[kind] = frame
            except (TraceFormatError, FileNotFoundError, MemoryError):
                raise
            except _CONTENT_ERRORS as exc:  # the file is not laid out as the reader expects
                raise TraceFormatError(
                    self._single or self.path, f"cannot read its {kind}: "
                    f"{type(exc).__name__}: {str(exc)[:200]}", hint="the file is damaged or not "
                    "in the layout this reader knows") from exc
        return self._cache[kind]

    def _note(self, kind: str, files: list | None = None, missing: str | None = None,
              notes: list[str] | None = None) -> None:
        fmt = "db" if any(str(f).endswith(".db") for f in files or []) else (
            "text" if files else None)
        self.sources[kind] = {"files": [str(f) for f in files or []], "missing": missing,
                              "notes": list(notes or []), "format": fmt}

    @property
    def format(self) -> str:
        """``"db"`` when the window has a profiler database (then every frame it holds is read
        from it, so all frames come from one export), else ``"text"``."""
        return "db" if self._db_file() is not None else "text"

    def _db_file(self) -> Path | None:
        if self._single is not None:
            return self._single if self._single.suffix == ".db" else None
        return self._files.db if self._files else None

    def _have(self) -> str:
        """What this window does have, for 'missing' notes on trimmed ranks."""
        f = self._files
        if f is None:
            return "nothing"
        have = [p.name for p in f.traces] + [p.name for p in f.csv.values()]
        have += [p.name for p in (f.communication, f.matrix, f.db, f.analysis_db) if p]
        return ", ".join(have) or "no profiler files"

    # ---- readers ----------------------------------------------------------------------------
    def _traces(self) -> list[ChromeTrace]:
        if self._chrome is None:
            paths = [self._single] if self._single else (self._files.traces if self._files else [])
            out = []
            for p in paths:
                if p is None or p.suffix == ".db" or p.name.endswith(".csv"):
                    continue
                tr = load_chrome_trace(p)
                if tr.repairs:
                    warnings.warn(TraceRepairWarning(f"{p}: " + "; ".join(tr.repairs)), stacklevel=4)
                out.append(tr)
            self._chrome = out
        return self._chrome

    def _dbreader(self) -> AscendDb | None:
        if self._adb is None and self._db_file() is not None:
            ana = self._files.analysis_db if self._files else None
            if ana is None and (self._db_file().parent / "analysis.db").is_file():
                ana = self._db_file().parent / "analysis.db"
            self._adb = AscendDb(self._db_file(), ana)
        return self._adb

    def _db_note(self, kind: str, frame: pd.DataFrame, tables: str) -> pd.DataFrame:
        adb = self._dbreader()
        files = [adb.path] + ([adb.analysis] if adb.analysis and kind in ("steps", "communication")
                              else [])
        if frame.empty:
            self._note(kind, missing=f"the database has no {tables} rows (this rank has: "
                                     f"{self._have()})")
        else:
            self._note(kind, files, notes=[f"from {tables}"] + adb.notes)
        return frame

    def _load_events(self) -> pd.DataFrame:
        adb = self._dbreader()
        traces = self._traces() if adb is None else []
        if adb is not None:
            ev = self._db_note("events", adb.api_events(), "PYTORCH_API, CANN_API and TASK")
            if ev.empty:
                return schema.empty("events")
        elif traces:
            frames = [t.events for t in traces]
            ev = frames[0] if len(frames) == 1 else concat_frames(frames)
            self._note("events", [t.path for t in traces], notes=[n for t in traces for n in t.repairs])
        elif self._files and "cpu_op_execute_timestamp" in self._files.framework:
            p = self._files.framework["cpu_op_execute_timestamp"]
            ev = mindspore.cpu_op_execute_timestamps(p)
            self._note("events", [p])
        else:
            self._note("events", missing="no trace file (trace.json, *.pt.trace.json, trace_view.json, .db)")
            return schema.empty("events")
        markers = self._files.step_markers if self._files else None
        if markers is not None:
            ev = concat_frames([schema.conform(ev, "events").drop(columns="step"),
                                mindspore.step_markers(markers)])
            self.sources["events"]["files"].append(str(markers))
            self.sources["events"]["notes"].append("step markers from dynprof_steps.csv")
        ev["step"] = derive.assign_steps(ev["ts_ns"].to_numpy("int64", na_value=0),
                                         derive.step_intervals(ev))
        return ev

    def _load_ops(self) -> pd.DataFrame:
        from dynprof_nb.analysis.summary import op_table

        ev = self.events
        if not ev.empty:
            self._note("ops", self.sources["events"]["files"],
                       notes=["computed from events (self time = duration minus children on the same thread)"])
            return op_table(ev)
        if self._files and "op_statistic" in self._files.csv:
            p = self._files.csv["op_statistic"]
            self._note("ops", [p], notes=["device op types from op_statistic.csv"])
            return ascend.op_statistic(p)
        if self._single and self._single.name.startswith("op_statistic"):
            self._note("ops", [self._single])
            return ascend.op_statistic(self._single)
        fw = self._files.framework if self._files else {}
        if "cpu_op_detail_info" in fw:
            self._note("ops", [fw["cpu_op_detail_info"]])
            return mindspore.cpu_op_detail(fw["cpu_op_detail_info"])
        if self._single and self._single.name.startswith("cpu_op_detail_info"):
            self._note("ops", [self._single])
            return mindspore.cpu_op_detail(self._single)
        self._note("ops", missing="no events and no op_statistic.csv / cpu_op_detail_info csv")
        return schema.empty("ops")

    def _csv(self, key: str) -> Path | None:
        if self._single is not None:
            return self._single if self._single.name.startswith(key) and self._single.suffix == ".csv" else None
        return self._files.csv.get(key) if self._files else None

    def _load_steps(self) -> pd.DataFrame:
        adb = self._dbreader()
        if adb is not None:
            return self._db_note("steps", adb.steps(), "analysis.db StepTraceTime / STEP_TIME")
        p = self._csv("step_trace_time")
        ev = self.events if (self._single is None or self._single.suffix != ".csv") else schema.empty("events")
        derived, how = derive.steps_from_events(ev)
        if p is not None:
            st = ascend.step_trace_time(p)
            if not derived.empty and "start_ns" in derived:
                starts = derived.set_index("step")["start_ns"]
                st["start_ns"] = st["step"].map(starts).astype("Int64")
            self._note("steps", [p], notes=["start_ns from step marker events" if not derived.empty else
                                            "step_trace_time.csv has no start times"])
            return st
        if derived.empty:
            self._note("steps", missing=how)
        else:
            self._note("steps", self.sources.get("events", {}).get("files"), notes=[how])
        return derived

    def _load_kernels(self) -> pd.DataFrame:
        p = self._csv("kernel_details")
        adb = self._dbreader()
        if adb is not None:
            return self._db_note("kernels", adb.kernels(), "TASK, COMPUTE_TASK_INFO and COMMUNICATION_OP")
        if p is not None:
            self._note("kernels", [p])
            return ascend.kernel_details(p)
        k = derive.kernels_from_events(self.events)
        if k.empty:
            self._note("kernels", missing="no kernel_details.csv and no device events (this rank "
                                          f"has: {self._have()})")
        else:
            self._note("kernels", self.sources["events"]["files"], notes=["device events"])
        return k

    def _load_memory(self) -> pd.DataFrame:
        adb = self._dbreader()
        if adb is not None:
            return self._db_note("memory", adb.memory(), "MEMORY_RECORD and OP_MEMORY")
        frames, files = [], []
        for key in MEMORY_CSVS:
            p = self._csv(key)
            if p is not None:
                frames.append(ascend.memory_csv(p))
                files.append(p)
        fw = self._files.framework if self._files else {}
        single = self._single
        if "cpu_ms_memory_record" in fw or (single and single.name.startswith("cpu_ms_memory_record")):
            p = fw.get("cpu_ms_memory_record", single)
            frames.append(mindspore.cpu_memory_record(p))
            files.append(p)
        if not frames and (single is None or single.suffix != ".csv"):
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
            self._note("memory", missing="no memory CSV, [memory] events or Memory counters "
                                         "(profile_memory was probably off)")
            return schema.empty("memory")
        self._note("memory", files)
        out = concat_frames([schema.conform(f, "memory") for f in frames])
        return out.sort_values("ts_ns", ignore_index=True)

    def _load_communication(self) -> pd.DataFrame:
        p = self._files.communication if self._files else None
        if self._single is not None and self._single.name.startswith(("communication", "cluster_communication")):
            p = self._single
        adb = self._dbreader()
        if adb is not None:
            return self._db_note("communication", adb.communication(),
                                 "COMMUNICATION_OP (or analysis.db CommAnalyzerTime)")
        if p is not None:
            self._note("communication", [p])
            return ascend.communication_json(p)
        c = derive.communication_from_events(self.events)
        if c.empty:
            self._note("communication", missing="no communication.json and no collective events "
                                                f"(this rank has: {self._have()})")
        else:
            self._note("communication", self.sources["events"]["files"], notes=["collective events"])
        return c

    def communication_links(self) -> pd.DataFrame:
        """Per communication op and link (src_rank -> dst_rank): transport, size_mb, transit_us,
        bandwidth_gbps; from communication_matrix.json, or the database's HCCL tasks."""
        if self._links is None:
            adb = self._dbreader()
            m = self._files.matrix if self._files else None
            if self._single is not None and "communication_matrix" in self._single.name:
                m = self._single
            if adb is not None:
                self._links = adb.links()
                self.sources["links"] = {"files": [str(adb.path)], "format": "db"}
            elif m is not None:
                self._links = ascend.communication_matrix_json(m)
                self.sources["links"] = {"files": [str(m)], "format": "text"}
            else:
                self._links = pd.DataFrame(columns=ascend.LINK_COLUMNS)
                self.sources["links"] = {"files": [], "missing": "no communication_matrix.json "
                                         f"or database (this rank has: {self._have()})"}
        return self._links

    # ---- cluster analyses (dynprof_nb.analysis.cluster) -------------------------------------
    def compute_ops(self, per_rank: bool = True, by_name: bool = False) -> pd.DataFrame:
        """Device time by op type and core, per rank (msprof-analyze compute_op_sum)."""
        from dynprof_nb.analysis.cluster import compute_ops

        return compute_ops(self, per_rank=per_rank, by_name=by_name)

    def communication_ops(self, per_rank: bool = True) -> pd.DataFrame:
        """Communication ops per rank: count, time, wait, transit, bandwidth (hccl_sum)."""
        from dynprof_nb.analysis.cluster import communication_ops

        return communication_ops(self, per_rank=per_rank)

    def step_breakdown(self) -> pd.DataFrame:
        """Per rank and step: computing, communication (not) overlapped, free (cluster_time_summary)."""
        from dynprof_nb.analysis.cluster import step_breakdown

        return step_breakdown(self)

    def communication_matrix(self, step: int | None = None) -> pd.DataFrame:
        """Bandwidth per link and transport type (communication_matrix / slow_link)."""
        from dynprof_nb.analysis.cluster import communication_matrix

        return communication_matrix(self, step=step)

    def slow_ranks(self) -> pd.DataFrame:
        """Per rank against the median rank, with a plain-language note (slow_rank)."""
        from dynprof_nb.analysis.cluster import slow_ranks

        return slow_ranks(self)

    def plot_rank_steps(self, **kw: Any) -> Any:
        from dynprof_nb.analysis.cluster_plots import rank_step_breakdown

        return rank_step_breakdown(self, **kw)

    def plot_bandwidth(self, **kw: Any) -> Any:
        from dynprof_nb.analysis.cluster_plots import bandwidth_heatmap

        return bandwidth_heatmap(self, **kw)

    # ---- views ------------------------------------------------------------------------------
    def summary(self) -> Any:
        """Header, top operations, step breakdown and plain-language notes (HTML and text)."""
        from dynprof_nb.analysis.summary import summarize

        return summarize(self)

    def plot_timeline(self, **kw: Any) -> Any:
        from dynprof_nb.analysis.plots import timeline

        return timeline(self, **kw)

    def plot_ops(self, **kw: Any) -> Any:
        from dynprof_nb.analysis.plots import top_ops

        return top_ops(self, **kw)

    def plot_steps(self, **kw: Any) -> Any:
        from dynprof_nb.analysis.plots import step_breakdown

        return step_breakdown(self, **kw)

    def plot_memory(self, **kw: Any) -> Any:
        from dynprof_nb.analysis.plots import memory_over_time

        return memory_over_time(self, **kw)

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


class MultiRankWindow(TraceWindow):
    """Several ranks' windows: frames are the ranks' frames concatenated with a ``rank`` column."""

    def __init__(self, path: Path, children: list[TraceWindow], skipped: list[str]):
        super().__init__(path)
        self.children = children
        self.skipped = skipped
        fw = {c.framework for c in children}
        self.framework = fw.pop() if len(fw) == 1 else "mixed"
        starts = {c.start_step for c in children}
        stops = {c.stop_step for c in children}
        self.start_step = starts.pop() if len(starts) == 1 else None
        self.stop_step = stops.pop() if len(stops) == 1 else None

    @property
    def ranks(self) -> list[int]:
        return [c.rank if c.rank is not None else i for i, c in enumerate(self.children)]

    @property
    def config(self) -> dict[str, Any] | None:
        """The ranks' config (they record one window with one config: the first rank's)."""
        return next((c.config for c in self.children if c.config is not None), None)

    def _frame(self, kind: str) -> pd.DataFrame:
        if kind not in self._cache:
            if kind == "events":
                _parallel_events(self.children)
            parts = []
            for r, c in zip(self.ranks, self.children, strict=True):
                f = c._frame(kind)
                f = f.assign(rank=r)
                if "device" not in f.columns:  # memory's device is its device string already
                    f["device"] = pd.array([c.device] * len(f), dtype="Int64")
                parts.append(f)
            frame = concat_frames(parts) if parts else schema.empty(kind).assign(rank=pd.Series(dtype="int64"))
            per = {r: c.sources.get(kind) for r, c in zip(self.ranks, self.children, strict=True)}
            self.sources[kind] = {
                "ranks": per, "skipped": self.skipped,
                "format": sorted({v.get("format") for v in per.values() if v and v.get("format")}),
                "missing": {r: v["missing"] for r, v in per.items() if v and v.get("missing")}}
            self._cache[kind] = frame
        return self._cache[kind]

    @property
    def format(self) -> str:
        fm = {c.format for c in self.children}
        return fm.pop() if len(fm) == 1 else "mixed"

    @property
    def devices(self) -> dict[int, int | None]:
        """rank -> device id (None where the window does not say)."""
        return dict(zip(self.ranks, [c.device for c in self.children], strict=True))

    def communication_links(self) -> pd.DataFrame:
        if self._links is None:
            parts = [c.communication_links().assign(rank=r)
                     for r, c in zip(self.ranks, self.children, strict=True)]
            self._links = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
            self.sources["links"] = {"ranks": {r: c.sources.get("links") for r, c in
                                               zip(self.ranks, self.children, strict=True)}}
        return self._links

    def rank_window(self, rank: int) -> TraceWindow:
        return self.children[self.ranks.index(rank)]


def _events_worker(path: str, single: bool) -> tuple[dict, dict, list, list]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = load_trace(path) if single else _load_one_window(Path(path), explicit=False)
        ev = w.events
    return {"events": ev}, w.sources, w._chrome or [], [(str(c.message), c.category) for c in caught]


def _parallel_events(children: list[TraceWindow]) -> None:
    todo = [c for c in children if "events" not in c._cache]
    workers = min(len(todo), os.cpu_count() or 1)
    if len(todo) < 2 or workers < 2:
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futs = [pool.submit(_events_worker, str(c._single or c.path), c._single is not None) for c in todo]
        for c, fut in zip(todo, futs, strict=True):
            cache, sources, chrome, caught = fut.result()
            c._cache.update(cache)
            c.sources.update(sources)
            c._chrome = chrome
            for msg, cat in caught:
                warnings.warn(cat(msg), stacklevel=4)


def concat_frames(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate keeping categoricals categorical (pandas falls back to object otherwise)."""
    frames = [f for f in frames if f is not None]
    if not frames:
        return pd.DataFrame()
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    cat_cols = [c for c in frames[0].columns
                if all(c in f.columns and isinstance(f[c].dtype, pd.CategoricalDtype) for f in frames)]
    if cat_cols:
        frames = [f.copy() for f in frames]
        for c in cat_cols:
            cats = pd.Index([])
            for f in frames:
                cats = cats.union(f[c].cat.categories.astype(object), sort=False)
            for f in frames:
                f[c] = f[c].cat.set_categories(cats)
    return pd.concat(frames, ignore_index=True)


# ---- entry points -------------------------------------------------------------------------------
_SINGLE_READERS: dict[str, Callable] = {}


def load_trace(path: str | Path) -> TraceWindow:
    """One file: Chrome trace JSON (.json/.gz, object or array), an Ascend CSV,
    communication.json, a MindSpore FRAMEWORK file or an Ascend .db."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file (load_window reads directories)")
    w = TraceWindow(p, WindowFiles(root=p.parent), single_file=p)
    name = p.name
    w.framework = "pytorch" if ".pt.trace.json" in name else ("ascend" if p.suffix in (".csv", ".db") else "chrome")
    try:
        _read_single(w, p, name)
    except (TraceFormatError, FileNotFoundError, MemoryError):
        raise
    except _CONTENT_ERRORS as exc:
        raise TraceFormatError(p, f"cannot read it: {type(exc).__name__}: {str(exc)[:200]}",
                               hint="the file is damaged or not in the layout this reader "
                                    "knows") from exc
    return w


def _read_single(w: TraceWindow, p: Path, name: str) -> None:
    if name.endswith(".csv") or name.endswith(".txt"):
        _load_table_file(w, p)
    elif p.suffix == ".db":
        _identify_db(w, AscendDb(p))
    elif name.startswith(("profiler_info", "profiler_metadata")) and name.endswith(".json"):
        _metadata_only(w, p)
    elif "communication_matrix" in name and name.endswith(".json"):
        w._chrome = []
        w.communication_links()
    elif name == "communication_group.json":
        _metadata_only(w, p)
    elif name.startswith(("communication", "cluster_communication")) and name.endswith(".json"):
        w._files.communication = p
        w._cache["communication"] = w.communication
        w._chrome = []
    else:
        w._files.traces = [p]
        w._single = None
        w.events  # noqa: B018  (parse now so a bad file raises here, not on first access)
        _rank_from_trace(w)


def _load_table_file(w: TraceWindow, p: Path) -> None:
    name = p.name
    w._chrome = []
    if name.startswith("kernel_details"):
        w._files.csv["kernel_details"] = p
        w.kernels  # noqa: B018
    elif name.startswith("op_statistic"):
        w.ops  # noqa: B018
    elif "step_trace_time" in name:
        w._files.csv["step_trace_time"] = p
        w._cache["steps"] = schema.conform(ascend.step_trace_time(p), "steps")
        w._note("steps", [p])
    elif name.startswith(MEMORY_CSVS):
        w._files.csv[name.rsplit(".", 1)[0].split("_rank")[0]] = p
        w.memory  # noqa: B018
    elif name.startswith("cpu_op_detail_info"):
        w._files.framework["cpu_op_detail_info"] = p
        w._cache["events"] = schema.empty("events")
        w._note("events", missing="cpu_op_detail_info has aggregates only")
        w.ops  # noqa: B018
    elif name.startswith("cpu_op_execute_timestamp"):
        w._files.framework["cpu_op_execute_timestamp"] = p
        w._single = None
        w.events  # noqa: B018
    elif name.startswith("cpu_ms_memory_record"):
        w.memory  # noqa: B018
    elif name.startswith(OTHER_ASCEND_CSVS):
        # known Ascend tables with no frame of their own: parsed (so damage is reported), kept
        # as-is in ``w.tables``
        w.tables[p.stem] = ascend.read_csv(p)
        for kind in FRAMES:
            w._cache[kind] = schema.empty(kind)
            w._note(kind, missing=f"{name} holds no {kind}")
    else:
        raise TraceFormatError(p, "unrecognised file name", offset=0,
                               hint="expected kernel_details / op_statistic / step_trace_time / memory "
                                    "CSVs, communication.json, a Chrome trace JSON or an Ascend .db")


OTHER_ASCEND_CSVS = ("operator_details", "l2_cache", "static_op_mem", "api_statistic",
                     "op_summary", "task_time", "data_preprocess", "hccl_statistic",
                     "compute_op_sum", "hccl_sum")  # the last two: msprof-analyze outputs


def _metadata_only(w: TraceWindow, p: Path) -> None:
    """profiler_info_N.json / profiler_metadata.json / communication_group.json: no frames, but
    the rank (they are what says which rank a window is)."""
    doc = ascend_db.read_profiler_info(p)
    if not doc and p.stat().st_size:
        raise TraceFormatError(p, "not a JSON object", offset=0,
                               hint="expected an Ascend profiler_info / profiler_metadata JSON")
    w.rank, src = job_rank(p.parent)
    w.tables[p.stem] = pd.json_normalize(doc) if doc else pd.DataFrame()
    w._chrome = []
    for kind in FRAMES:
        w._cache[kind] = schema.empty(kind)
        w._note(kind, missing=f"{p.name} is metadata only (rank from {src})")


def _identify_db(w: TraceWindow, adb: AscendDb) -> None:
    """Fill rank/device from RANK_DEVICE_MAP / TASK (reading the table list validates the file)."""
    _ = adb.tables
    rank, device = adb.rank_device()
    if w.rank is None:
        w.rank = rank
    if w.device is None:
        w.device = device


def _rank_from_trace(w: TraceWindow) -> None:
    for t in w._chrome or []:
        info = t.meta.get("distributedInfo")
        if isinstance(info, dict) and isinstance(info.get("rank"), int) and w.rank is None:
            w.rank = info["rank"]
        if isinstance(t.meta.get("otherData"), dict) and w.framework == "chrome":
            w.framework = "builtin"
        procs = set(t.events["process"].cat.categories) if len(t.events) else set()
        if w.framework == "chrome" and procs & {"Ascend Hardware", "CANN", "CPU OP"}:
            w.framework = "ascend"


def _load_one_window(root: Path, explicit: bool) -> TraceWindow:
    files = find_window_files(root)
    if files.incomplete and explicit:
        warnings.warn(IncompleteWindowWarning(f"{root}: loading an incomplete window because "
                                              f"{files.incomplete}; some data may be missing"), stacklevel=3)
    if not (files.traces or files.csv or files.framework or files.db or files.communication):
        raise TraceFormatError(root, "no trace files found in this directory", offset=None,
                               hint="expected trace.json, *.pt.trace.json, *_ascend_ms/ or ASCEND_PROFILER_OUTPUT/")
    w = TraceWindow(root, files)
    if files.db is not None:
        _identify_db(w, w._dbreader())
    elif files.traces:
        w._traces()
        _rank_from_trace(w)
        w.framework = files.framework_name if files.framework_name != "unknown" else w.framework
    return w


def load_window(path: str | Path | Sequence[str | Path]) -> TraceWindow:
    """A window directory ``rank{r}_start{s}_stop{e}/`` (built-in, MindSpore, torch_npu, PyTorch),
    a folder of several ranks' windows, or a list of window directories (one per rank); with
    several ranks the frames get a ``rank`` column."""
    if isinstance(path, (list, tuple)):
        subs = [Path(p) for p in path]
        if not subs:
            raise ValueError("load_window() got an empty list of windows")
        if len(subs) == 1:
            return load_window(subs[0])
        missing = [str(p) for p in subs if not p.exists()]
        if missing:
            raise FileNotFoundError(f"no such window: {', '.join(missing)}")
        return _combine_windows(Path(os.path.commonpath(subs)), subs)
    root = Path(path)
    if root.is_file():
        return load_trace(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such directory")
    subs = rank_windows(root)
    if not subs:
        return _load_one_window(root, explicit=True)
    return _combine_windows(root, subs)


def _combine_windows(root: Path, subs: list[Path]) -> TraceWindow:
    """Several ranks' windows (directories or single trace files) as one MultiRankWindow."""
    children, skipped = [], []
    for s in subs:
        if s.is_file():
            children.append(TraceWindow(s, WindowFiles(root=s.parent), single_file=s))
            children[-1].framework = "pytorch"
            continue
        files = find_window_files(s)
        if files.incomplete:
            skipped.append(f"{s.name}: {files.incomplete}")
            continue
        children.append(TraceWindow(s, files))
        if files.db is not None:
            _identify_db(children[-1], children[-1]._dbreader())
    if skipped:
        warnings.warn(IncompleteWindowWarning(f"{root}: skipped incomplete windows: " + "; ".join(skipped)),
                      stacklevel=2)
    if not children:
        raise TraceFormatError(root, "no complete window in this folder", hint="; ".join(skipped) or None)
    if len(children) == 1:
        return children[0]
    taken = {c.rank for c in children if c.rank is not None}
    free = (i for i in range(len(children) + len(taken)) if i not in taken)
    for c in children:
        if c.rank is None:
            c.rank = next(free)
    ranks = [c.rank for c in children]
    if len(set(ranks)) != len(ranks):
        raise TraceFormatError(root, f"two windows claim the same rank ({sorted(ranks)})",
                               hint="load each rank's window directory once")
    return MultiRankWindow(root, children, skipped)
