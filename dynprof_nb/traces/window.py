"""TraceWindow: one profiling window (or several ranks' windows) as lazily loaded DataFrames.

Each frame is read on first access from the best source the window has (the registered sources
of :mod:`dynprof_nb.traces.formats` declare which frames they provide, at which priority, and
read them), and ``sources`` records which source and which of its paths built it, which file
fed it, what was repaired and what was missing. Several ranks parse in parallel
processes (the JSON decode holds the GIL, so threads would not help).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from . import cache, comm, schema, validate
from .discover import (
    WindowFiles,
    find_file,
    find_window_files,
    job_rank,
    read_json_object,
)
from .errors import (
    IncompleteWindowWarning,
    LibraryError,
    TraceFormatError,
    TraceRepairWarning,
    library_error,
    library_fault,
    library_faults,
    warn,
)
from .formats import (
    FINDERS,
    SOURCES,
    Source,
    lone_file_reader,
    missing,
    providers,
    read_table,
    source_of,
)
from .formats.chrome.first_pass import first_pass
from .formats.chrome.streamed import Streamed
from .lazyframe import LazyFrame
from .shortcuts import WindowShortcuts

if TYPE_CHECKING:  # the readers are imported where they read (a cached load imports neither)
    from .formats.ascend.db import AscendDb
    from .formats.chrome.reader import ChromeTrace

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

    ``sources[kind]`` says where frame ``kind`` came from: ``files`` (what fed it), ``missing``
    (why it is empty), ``notes`` (what was repaired or derived), ``format`` (``"db"`` or
    ``"text"``), and who built it: ``provider`` (the registered source whose reader gave it,
    ``"derived"`` for a frame computed from another), ``path`` (which of that reader's paths
    ran: a Chrome trace's ``"pieces"``, ``"streaming"``, ``"split"``, ``"+loose"``,
    ``"repaired+..."``; the .db kernels' ``"fast"``, ``"generic"``, ``"repaired"``; ``"csv"``,
    ``"op_table"``, ...; see docs/architecture.md) and, where files fed it, ``source`` (the
    format of those files). E.g. ``w.sources["events"]``: ``{"provider": "kineto", "path":
    "pieces", "source": "kineto", "files": [...], ...}``.

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
        self._side: dict[str, pd.DataFrame] = {}  # the side tables read (links, ...)
        self.sources: dict[str, dict[str, Any]] = {}
        self.tables: dict[str, pd.DataFrame] = {}  # files kept as read, with no frame of their own
        self.manifest: dict | None = files.manifest
        self.framework: str = files.framework_name
        self.rank: int | None = files.rank
        self.device: int | None = files.device
        self.start_step: int | None = files.start_step
        self.stop_step: int | None = files.stop_step
        # which iterations the steps above are, when the profiler that wrote the window counts
        # them otherwise (MindSpore's own monitor, see control/filemode.py); in the repr
        self.step_note = ""
        self.streamed: Streamed | None = None  # set when ops/steps/kernels came in one pass

    # ---- frames (each is ``self.frame(<name>)``) ------------------------------------------------
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

    def frame(self, kind: str) -> pd.DataFrame:
        """Frame ``kind`` (one of ``FRAMES``), read on first use (the :class:`Window` protocol)."""
        if kind not in FRAMES:
            raise KeyError(f"no frame {kind!r}; a window has {', '.join(FRAMES)}")
        if kind not in self._cache:  # the columnar cache's entry, else read and stored there
            self._cache[kind] = cache.through(self, kind, lambda: self._read(kind))
        return self._cache[kind]

    def _read(self, kind: str) -> pd.DataFrame:
        """Frame ``kind`` from the best of the window's sources that has it: each provider
        (:func:`~dynprof_nb.traces.formats.providers`, best first) is asked in turn, the first
        that gives a frame wins, and ``sources[kind]`` says which and by which path."""
        try:
            for src in providers(self._files, kind):
                got = src.frames[kind].read(self)
                if got is not None:
                    break
            else:
                src, got = None, (schema.empty(kind), "none")
                self.note(kind, missing=missing(kind))
            frame = schema.conform(got[0], kind)
            provenance(self.sources, kind, src, got[1])
            frame = validate.checked(frame, kind, self.sources, self.path)
            if self.device is not None and "device" not in frame.columns:
                frame["device"] = schema.constant_int(self.device, len(frame))
            return frame
        except (TraceFormatError, FileNotFoundError, MemoryError, LibraryError):
            raise
        except (*_CONTENT_ERRORS, ImportError) as exc:  # not laid out as the reader expects
            lib = library_fault(exc)
            if lib:  # or a library of this environment, not the file, failed
                raise library_error(self.path, f"its {kind}", exc, lib) from exc
            raise TraceFormatError(
                self.path,
                f"cannot read its {kind}: {type(exc).__name__}: {str(exc)[:200]}",
                hint="the file is damaged or not in the layout this reader knows",
            ) from exc

    def adopt_frame(
        self, kind: str, frame: pd.DataFrame, provider: Source | None = None, path: str = ""
    ) -> None:
        """Take frame ``kind`` as read (a lone file's, read at load), its note said already;
        its impossible rows dropped (:mod:`.validate`)."""
        if provider is not None:
            provenance(self.sources, kind, provider, path)
        frame = schema.conform(frame, kind)
        self._cache[kind] = validate.checked(frame, kind, self.sources, self.path)

    def note(
        self,
        kind: str,
        files: list | None = None,
        missing: str | None = None,
        notes: list[str] | None = None,
    ) -> None:
        """What ``sources[kind]`` says: the files that fed the frame, what is missing, notes
        (for a source's reader, which says it once it knows)."""
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
    def files(self) -> WindowFiles:
        """The window's files, by role (what discovery found)."""
        return self._files

    @property
    def format(self) -> str:
        """``"db"`` when the window has a profiler database (then every frame it holds is read
        from it, so all frames come from one export), else ``"text"``."""
        return "db" if self._files.db is not None else "text"

    def have(self) -> str:
        """What this window does have, for 'missing' notes on trimmed ranks."""
        f = self._files
        have = [p.name for p in f.traces] + [p.name for p in f.csv.values()]
        have += [p.name for p in (f.communication, f.matrix, f.db, f.analysis_db) if p]
        return ", ".join(have) or "no profiler files"

    # ---- the readers the sources share (one parse of each file, kept) ------------------------
    def chrome_traces(self) -> list[ChromeTrace]:
        """The window's Chrome traces, parsed once (a repaired one warns)."""
        if self._chrome is None:
            from .formats.chrome.reader import load_chrome_trace

            out = []
            for p in self._files.traces:
                tr = load_chrome_trace(p)
                if tr.repairs:
                    warn(TraceRepairWarning(f"{p}: " + "; ".join(tr.repairs)), stacklevel=4)
                out.append(tr)
            self._chrome = out
        return self._chrome

    def database(self) -> AscendDb | None:
        """The window's profiler database reader (None without a .db)."""
        db = self._files.db
        if self._adb is None and db is not None:
            from .formats.ascend.db import AscendDb

            ana = self._files.analysis_db
            if ana is None and (db.parent / "analysis.db").is_file():
                ana = db.parent / "analysis.db"
            self._adb = AscendDb(db, ana)
        return self._adb

    def communication_links(self) -> pd.DataFrame:
        """Per communication op and link (src_rank -> dst_rank): transport, size_mb, transit_us,
        bandwidth_gbps; from communication_matrix.json, or the database's HCCL tasks."""
        return _side_table(self, self._side, "links")

    def communication_bandwidth(self) -> pd.DataFrame:
        """Per communication op and transport (HCCS, PCIE, SIO, SDMA = their total, RDMA):
        size_mb, transit_us, bandwidth_gbps, large_packet_ratio, Ascend's "Communication
        Bandwidth Info"; from communication.json, analysis.db or the database's HCCL tasks.
        The communication frame's size_mb / bandwidth_gbps are its SDMA + RDMA rows."""
        return _side_table(self, self._side, "bandwidth")

    def memory_copies(self) -> pd.DataFrame:
        """The device's asynchronous memory copies (MEMCPY_ASYNC tasks: start_ns, end_ns,
        step) of a database window; empty for other formats."""
        return _side_table(self, self._side, "memory_copies")

    # ---- reading ----------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | Path, *, comm_patterns: comm.PatternSpec = None) -> TraceWindow:
        """One file: Chrome trace JSON (.json/.gz, object or array), an Ascend CSV,
        communication.json, a MindSpore FRAMEWORK file or an Ascend .db. It is a window of one
        file, filed by :func:`~dynprof_nb.traces.discover.find_file` where a directory holds it;
        the source it belongs to reads the frame it feeds now (``Source.open_file``), so a
        damaged file raises at load."""
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such file (load_window reads directories)")
        own = lone_file_reader(p)
        try:
            if own is not None:
                return _from_source_file(p, own, comm_patterns)
            w = cls(p, find_file(p), comm_patterns=comm_patterns)
            if not any(s.open_file(w) for s in SOURCES if s.open_file is not None):
                raise TraceFormatError(p, "no registered source reads this file", offset=0)
        except (TraceFormatError, FileNotFoundError, MemoryError, LibraryError):
            raise
        except (*_CONTENT_ERRORS, ImportError) as exc:
            lib = library_fault(exc)
            if lib:
                raise library_error(p, "it", exc, lib) from exc
            raise TraceFormatError(
                p,
                f"cannot read it: {type(exc).__name__}: {str(exc)[:200]}",
                hint="the file is damaged or not in the layout this reader knows",
            ) from exc
        return w

    @classmethod
    def from_directory(
        cls, root: Path, explicit: bool = True, comm_patterns: comm.PatternSpec = None
    ) -> TraceWindow:
        """One rank's window directory; ``explicit``: the user named it (warn if incomplete)."""
        files = find_window_files(root, FINDERS)
        if files.incomplete and explicit:
            warnings.warn(
                IncompleteWindowWarning(
                    f"{root}: loading an incomplete window because "
                    f"{files.incomplete}; some data may be missing"
                ),
                stacklevel=3,
            )
        if not (
            files.traces
            or files.csv
            or files.framework
            or files.db
            or files.communication
            or any(files.found.values())
        ):
            raise TraceFormatError(
                root,
                "no trace files found in this directory",
                offset=None,
                hint="expected trace.json, *.pt.trace.json, *_ascend_ms/ or "
                "ASCEND_PROFILER_OUTPUT/",
            )
        w = cls(root, files, comm_patterns=comm_patterns)
        with library_faults(root, "it"):
            if files.db is not None:
                w.identify_db()
            elif files.traces:
                # one Kineto trace: its summaries in one pass, without its events (which that
                # pass writes to the frame cache); else parsed for the rank, unless the frame
                # cache has the rank from an earlier parse
                if not first_pass(w, files, source_of(files.traces[0])):
                    cache.identify(w, lambda: (w.chrome_traces(), w.identify_trace()))
            w.framework = files.framework_name if files.framework_name != "unknown" else w.framework
        return w

    def keep_table(self, path: Path, table: pd.DataFrame, why: str = "holds no {kind}") -> None:
        """A lone file with no frame of its own: kept as read in ``tables``; every frame is
        empty and says why (``why``, with ``{kind}`` for the frame's name)."""
        self.tables[path.stem] = table
        for kind in FRAMES:
            self.note(kind, missing=f"{path.name} " + why.format(kind=kind))
            self.adopt_frame(kind, schema.empty(kind))

    def read_metadata(self, p: Path) -> None:
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
        self.keep_table(
            p,
            pd.json_normalize(doc) if doc else pd.DataFrame(),
            f"is metadata only (rank from {src})",
        )

    def identify_db(self) -> None:
        """Fill rank/device from RANK_DEVICE_MAP / TASK (reading the table list validates the
        file)."""
        adb = self.database()
        _ = adb.tables
        rank, device = adb.rank_device()
        if self.rank is None:
            self.rank = rank
        if self.device is None:
            self.device = device

    def identify_trace(self) -> None:
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

    def parsed_events(self) -> tuple[pd.DataFrame, dict[str, Any], list[ChromeTrace]]:
        """Read the events here and return what :meth:`adopt_events` takes in another process:
        the frame, the sources and the parsed traces (the parallel loader's worker side)."""
        return self.frame("events"), self.sources, self._chrome or []

    def events_input_bytes(self) -> int:
        """Bytes the events parse reads (the trace files and the database), so the parallel
        loader can share ranks out evenly among processes."""
        total = 0
        for p in [*self._files.traces, self._files.db]:
            try:
                total += p.stat().st_size if p else 0
            except OSError:
                pass
        return total

    def forget(self, kind: str) -> None:
        """Drop frame ``kind`` if it was read (a parallel worker, once it handed the frame over,
        holds one rank's frame at a time); the next use reads it again."""
        self._cache.pop(kind, None)

    def load_all(self) -> TraceWindow:
        """Load every frame now (e.g. before pickling or timing)."""
        for f in FRAMES:
            self.frame(f)
        return self

    def __repr__(self) -> str:
        loaded = ", ".join(
            f"{k}[{len(v)}]" if isinstance(v, pd.DataFrame) else f"{k}[out of core]"
            for k, v in self._cache.items()
        )
        # a frame is read on first use: say so, not that something failed to load
        loaded = loaded or "frames read when first used (w.summary(), w.events, ...)"
        bad = [k for k in self._cache if self.sources.get(k, {}).get("dropped")]
        if bad:  # what :mod:`.validate` dropped: named where the window is shown, too
            loaded += f"; rows with impossible values dropped from {', '.join(bad)} (sources)"
        r = f" rank={self.rank}" if self.rank is not None else ""
        s = f" steps {self.start_step}..{self.stop_step}" if self.start_step is not None else ""
        return f"<TraceWindow {self.framework}{r}{s}{self.origin()} {self.path}: {loaded}>"

    @property
    def run(self) -> int | None:
        """The job's run the window was recorded in (``window.json``; None when it does not
        say): a job restarted under its name is a new run, whose steps count again."""
        run = (self.manifest or {}).get("run")
        return run if isinstance(run, int) and run > 0 else None

    def origin(self) -> str:
        """`` of run 2`` and, when the steps recorded are not the steps asked (a window file
        mode moved), `` (asked 44..48)``: what the repr adds to the steps."""
        m = self.manifest or {}
        asked = (m.get("requested_start_step"), m.get("requested_stop_step"))
        moved = None not in asked and asked != (self.start_step, self.stop_step)
        run = f" of run {self.run}" if self.run else ""
        note = f" [{self.step_note}]" if self.step_note else ""
        return run + (f" (asked {asked[0]}..{asked[1]})" if moved else "") + note


def provenance(
    sources: dict[str, dict[str, Any]], kind: str, provider: Source | None, path: str
) -> None:
    """Say in a window's ``sources[kind]`` who built the frame: ``provider``, the registered source
    whose reader gave it (``derived`` for a frame computed from another); ``path``, the
    way that reader took (a Chrome trace's decode path, the .db kernels' ``fast`` /
    ``generic`` / ``repaired``, ``csv``, ...); and, where files fed it, ``source``, the
    format those files are (for ops derived from a Kineto trace: ``kineto``)."""
    note = sources.setdefault(kind, {"files": [], "missing": None, "notes": []})
    note["provider"] = provider.name if provider is not None else None
    note["path"] = path
    if note.get("files"):
        first = Path(note["files"][0])
        owner = provider if provider is not None and provider.owns(first) else None
        owner = owner or source_of(first)
        note["source"] = owner.name if owner is not None else note["provider"]


def _side_table(w: TraceWindow, read: dict[str, pd.DataFrame], kind: str) -> pd.DataFrame:
    """Side table ``kind``, read once (kept in ``read``, the window's side tables) by the
    format that has it (``Source.tables``: the Ascend formats,
    :mod:`~dynprof_nb.traces.formats.ascend.links`), through the frame cache as a frame is."""
    if kind not in read:
        read[kind] = cache.through(w, kind, lambda: read_table(w, kind))
    return read[kind]


def _from_source_file(p: Path, src: Source, comm_patterns: comm.PatternSpec) -> TraceWindow:
    """A lone file of a registered source that reads its own frames."""
    w = TraceWindow(
        p, WindowFiles(root=p.parent, framework_name=src.name), comm_patterns=comm_patterns
    )
    frames, path = src.read_file(p)
    for kind in FRAMES:
        if kind in frames:
            w.note(kind, [p])
            w.adopt_frame(kind, frames[kind], src, path)
        else:
            w.note(kind, missing=f"{p.name} ({src.name}) holds no {kind}")
            w.adopt_frame(kind, schema.empty(kind))
    return w
