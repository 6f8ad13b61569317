"""The ``events`` frame of a trace too big for memory, as a Dask DataFrame over Parquet
partitions (issue 25 item 2).

One pass over the decoded pieces (:class:`.summaries.Reducer`, which also gives the window's
ops, steps and kernels when it has none yet) writes the piece columns as they come, as raw
codes, to Parquet files of ``PART_ROWS`` rows. What a row's final columns need from the whole
file is known only after the pass, and is small: the code tables (names, categories, process and
thread labels from the metadata events), the launches by correlation (``launch_ns``), the step
intervals (``step``) and which optional columns the file has. Each partition is built from its
Parquet file and these by :class:`_Partition` when Dask computes it, so ``ddf.compute()`` is
the in-memory events frame, column for column, dtype for dtype (categories included).

Where: ``<cache root>/events-parts/<key>/`` (the cache root is ``$DYNPROF_NB_CACHE``, else
``$XDG_CACHE_HOME/dynprof_nb``, else ``~/.cache/dynprof_nb``; the key names the file by path,
size, mtime, ctime and inode and the partitions' version:
:func:`dynprof_nb.traces.cache.keys.partition_key`; and by the load's host and pid:
:mod:`dynprof_nb.traces.cache.partitions`). A directory goes
when the frame built on it (and every frame derived from it) is collected, or at the next
load once its process has ended: another kernel's live frame keeps its files.

When: ``DYNPROF_NB_OUT_OF_CORE=1`` always, ``=0`` never; otherwise when the events frame would
not fit (:func:`.summaries.wanted`).
"""

from __future__ import annotations

import errno
import gc
import json
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from dynprof_nb.compat import categorical_from_codes

from ... import schema
from ...cache import partitions
from ..common.timestamps import NA_NS
from ..derived import from_events as derive
from ..derived.from_events import DEVICE_CATS
from . import pieces as fastjson
from . import reader as chrome
from . import streamed
from . import summaries as stream
from .streamed import OOC_ENV, wanted  # noqa: F401  (their home there)

PART_ROWS = 1_000_000


class PartitionsGone(RuntimeError):
    """An out-of-core frame's Parquet partition was removed or damaged after the load."""


_COLL_FLOATS = chrome.COLLECTIVE_NUMBERS
_COLL_TEXTS = chrome.COLLECTIVE_TEXTS
NOTE = (
    "out of core: a dask.dataframe over {n} Parquet partitions in {dir} (the trace's events "
    "would not fit in memory, or DYNPROF_NB_OUT_OF_CORE=1); reduce it before .compute(), "
    "e.g. ev.groupby('name', observed=True).dur_ns.sum().compute()"
)


class _Writer(stream.Reducer):
    """The reducer, also writing every piece's columns to Parquet partitions."""

    def __init__(self, base: Any, out: Path, host: bool) -> None:
        super().__init__(base, host=host)
        self.out = out
        self.part_rows = PART_ROWS
        self.buf: list[dict[str, np.ndarray]] = []
        self.buf_rows = 0
        self.parts: list[tuple[str, int, int]] = []  # (file, first row, rows)
        self.pairs: set[int] = set()  # (pid code << 32 | tid code) of the rows
        self.coll_cats: dict[str, set[str]] = {k: set() for k in _COLL_TEXTS}
        self.any_coll = False
        self.any_na_ts = False
        self.any_wait = False  # CUDA event syncs with their record (chrome._wait_columns)

    def piece(
        self,
        c: dict,
        ts: np.ndarray,
        corr: np.ndarray,
        stream_: np.ndarray,
        args: list,
        rows: np.ndarray,
    ) -> None:
        n = len(ts)
        cols = {k: c[k] for k in ("name", "cat", "ph", "pid", "tid", "dur")}
        cols["ts"] = ts
        cols["corr"] = corr
        cols["stream"] = stream_
        cols["wait_stream"], cols["wait_corr"] = np.full(n, np.nan), np.full(n, np.nan)
        waits = [i for i, a in enumerate(args) if a is not None and a.wait_on_corr is not None]
        if waits:
            self.any_wait = True
            for key, field in (("wait_stream", "wait_on_stream"), ("wait_corr", "wait_on_corr")):
                cols[key][rows[waits]] = [chrome.int_or_nan(getattr(args[i], field)) for i in waits]
        coll = [
            i
            for i, a in enumerate(args)
            if a is not None and (a.in_nelems is not None or a.out_nelems is not None)
        ]
        if coll:  # written only where there are some: filled at flush and at build
            self.any_coll = True
            sel = rows[coll]
            picked = [args[i] for i in coll]
            for name in _COLL_FLOATS:
                full = np.full(n, np.nan)
                full[sel] = [chrome.int_or_nan(getattr(a, name)) for a in picked]
                cols[name] = full
            for name in _COLL_TEXTS:
                obj = np.full(n, None, dtype=object)
                obj[sel] = chrome.collective_texts(picked, name)
                self.coll_cats[name].update(v for v in obj[sel] if v is not None)
                cols[name] = obj
        self.any_na_ts |= bool((ts == NA_NS).any())
        key = (c["pid"].astype(np.int64) << 32) | c["tid"].astype(np.int64)
        self.pairs.update(np.unique(key).tolist())
        self.buf.append(cols)
        self.buf_rows += n
        if self.buf_rows >= self.part_rows:
            self.flush()

    def flush(self) -> None:
        if not self.buf:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        keys = dict.fromkeys(k for b in self.buf for k in b)
        cols = {k: np.concatenate([_column(b, k) for b in self.buf]) for k in keys}
        first = self.parts[-1][1] + self.parts[-1][2] if self.parts else 0
        name = f"part-{len(self.parts):05d}.parquet"
        table = pa.table({k: pa.array(v) for k, v in cols.items()})
        pq.write_table(table, self.out / name, compression="lz4")
        self.parts.append((name, first, self.buf_rows))
        self.buf, self.buf_rows = [], 0


def _column(cols: dict[str, np.ndarray], k: str) -> np.ndarray:
    """Column ``k`` of a piece's (or a part's) raw columns; a collective column it lacks (no
    collective in it) as all NaN / None."""
    if k in cols:
        return cols[k]
    n = len(cols["ts"])
    return np.full(n, None, dtype=object) if k in _COLL_TEXTS else np.full(n, np.nan)


class _Partition:
    """Builds one partition of the events frame from its Parquet file (the columns
    chrome.events_frame, chrome._link_columns and window._load_events give)."""

    def __init__(self, w: _Writer, iv: pd.DataFrame) -> None:
        self.dir = w.out
        self.iv = iv
        self.dropped = w.dropped_note  # (rows, warning) the pass dropped as impossible, or None
        self.cats: dict[str, tuple[np.ndarray, pd.Index]] = {}
        for col, table in (("name", w.name_t), ("cat", w.cat_t), ("ph", w.ph_t)):
            labels = [stream.label_of(k) for k in table]
            uniq, inverse = np.unique(np.array(labels, dtype=object), return_inverse=True)
            self.cats[col] = (inverse.astype(np.int32).reshape(-1), pd.Index(uniq, dtype=object))
        self.pid = chrome.table_ids(np.arange(len(w.pid_t)), w.pid_t)
        self.tid = chrome.table_ids(np.arange(len(w.tid_t)), w.tid_t)
        proc_names, thread_names = chrome.metadata_labels(w.meta_rows)
        # process: a label per pid code; thread: per (pid, tid) pair that occurs
        pids = list(w.pid_t)
        ptext = np.array([proc_names.get(p, str(p)) for p in pids], dtype=object)
        self.proc_cats = pd.Index(np.unique(ptext) if len(ptext) else [], dtype=object)
        self.proc_code = self.proc_cats.get_indexer(ptext).astype(np.int32)
        tids = list(w.tid_t)
        pairs = np.array(sorted(w.pairs), dtype=np.int64)
        ttext = np.array(
            [
                thread_names.get((pids[k >> 32], tids[k & 0xFFFFFFFF]), str(tids[k & 0xFFFFFFFF]))
                for k in pairs.tolist()
            ],
            dtype=object,
        )
        self.pairs = pairs
        self.thread_cats = pd.Index(np.unique(ttext) if len(ttext) else [], dtype=object)
        self.thread_code = self.thread_cats.get_indexer(ttext).astype(np.int32)
        self.pid_cats = None if self.pid.dtype == np.int64 else pd.Categorical(self.pid).categories
        self.tid_cats = None if self.tid.dtype == np.int64 else pd.Categorical(self.tid).categories
        self.any_stream, self.any_corr, self.any_coll = w.any_stream, w.any_corr, w.any_coll
        self.any_wait = w.any_wait
        self.any_na_ts = w.any_na_ts
        self.coll_cats = {k: sorted(v) for k, v in w.coll_cats.items()}
        self.launch_keys = self.launch_ts = np.empty(0, np.int64)
        if w.launch:
            keys = np.concatenate([k for k, _ in w.launch])
            ts = np.concatenate([t for _, t in w.launch])
            self.launch_keys, first = np.unique(keys, return_index=True)
            self.launch_ts = ts[first]
        self.dev_cats = np.isin(self.cats["cat"][1].to_numpy(), list(DEVICE_CATS))
        # per raw ph code: whether it is "X" (the codes' labels, as the categories spell them)
        self.ph_x = np.array([stream.label_of(k) == "X" for k in w.ph_t], bool)

    def _cat(self, col: str, codes: np.ndarray) -> pd.Categorical:
        remap, cats = self.cats[col]
        return categorical_from_codes(remap[codes] if len(codes) else codes, categories=cats)

    def _id(self, ids: np.ndarray, codes: np.ndarray, cats: pd.Index | None) -> Any:
        v = ids[codes] if len(codes) else ids[:0]
        return v if cats is None else pd.Categorical(v, categories=cats)

    def __call__(self, part: tuple[str, int, int]) -> pd.DataFrame:
        import pyarrow.parquet as pq

        name, first, n = part
        if n:
            try:
                t = pq.ParquetFile(self.dir / name).read()  # (no pyarrow.dataset, no pandas)
            except (OSError, ValueError) as exc:  # removed or damaged under a live frame
                raise PartitionsGone(
                    f"the out-of-core events' partition {self.dir / name} cannot be read "
                    f"({exc.__class__.__name__}: {exc}); it was removed or damaged after the "
                    "load (by hand, a cleaner of the cache directory): load the trace again"
                ) from exc
            col = {k: t.column(k).to_numpy() for k in t.column_names}
        else:  # the meta: no rows, every dtype
            col = {k: np.empty(0, np.int32) for k in ("name", "cat", "ph", "pid", "tid")}
            col.update(
                ts=np.empty(0, np.int64),
                dur=np.empty(0, np.int64),
                corr=np.empty(0, np.int64),
                stream=np.empty(0, np.float64),
                wait_stream=np.empty(0, np.float64),
                wait_corr=np.empty(0, np.float64),
            )
        key = (col["pid"].astype(np.int64) << 32) | col["tid"].astype(np.int64)
        pair = np.searchsorted(self.pairs, key)
        ev = pd.DataFrame(
            {
                "name": self._cat("name", col["name"]),
                "cat": self._cat("cat", col["cat"]),
                "ph": self._cat("ph", col["ph"]),
                "pid": self._id(self.pid, col["pid"], self.pid_cats),
                "tid": self._id(self.tid, col["tid"], self.tid_cats),
                "process": categorical_from_codes(
                    self.proc_code[col["pid"]], categories=self.proc_cats
                ),
                "thread": categorical_from_codes(
                    self.thread_code[pair], categories=self.thread_cats
                ),
                "ts_ns": col["ts"],
                "dur_ns": col["dur"],
            },
            index=pd.RangeIndex(first, first + n),
        )
        if self.any_na_ts:
            ev["ts_ns"] = ev["ts_ns"].astype("Int64").mask(ev["ts_ns"] == NA_NS)
        if self.any_stream:
            ev["stream_arg"] = chrome.whole_numbers(col["stream"])
        if self.any_corr:
            corr = col["corr"]
            c = pd.array(corr, dtype="Int64")
            c[corr < 0] = pd.NA
            ev["correlation"] = c
            is_dev = self.dev_cats[self.cats["cat"][0][col["cat"]]] if n else np.zeros(0, bool)
            is_dev &= self.ph_x[col["ph"]] if n else np.zeros(0, bool)
            dev = is_dev & (corr >= 0)
            out = np.full(n, -1, np.int64)
            if len(self.launch_keys) and dev.any():
                pos = np.minimum(
                    np.searchsorted(self.launch_keys, corr[dev]), len(self.launch_keys) - 1
                )
                found = np.where(self.launch_keys[pos] == corr[dev], self.launch_ts[pos], -1)
                out[np.flatnonzero(dev)] = np.where(found == NA_NS, -1, found)
            lc = pd.array(out, dtype="Int64")
            lc[out < 0] = pd.NA
            ev["launch_ns"] = lc
        if self.any_wait:
            for key, name in (("wait_stream", "wait_on_stream"), ("wait_corr", "wait_on_corr")):
                ev[name] = chrome.whole_numbers(col[key])
        if self.any_coll:
            for k in _COLL_FLOATS:
                ev[k] = _column(col, k)
            for k in _COLL_TEXTS:
                ev[k] = pd.Categorical(_column(col, k), categories=self.coll_cats[k])
        steps = derive.assign_steps(ev["ts_ns"].to_numpy("int64", na_value=0), self.iv)
        ev["step"] = derive.device_steps(ev, self.iv, steps)
        return schema.conform(ev, "events")


class DiskFull(RuntimeError):
    """The partitions do not fit where they go (ENOSPC, EDQUOT): the directory, what is free
    there and about what the load needs, in the message; never pyarrow's raw ``OSError``."""

    def __init__(self, directory: Path, path: Path, exc: BaseException) -> None:
        try:
            free = shutil.disk_usage(directory if directory.exists() else directory.parent).free
        except OSError:
            free = -1
        try:
            need = path.stat().st_size
        except OSError:
            need = -1
        self.directory, self.free, self.need = directory, free, need
        super().__init__(
            f"the out-of-core partitions of {path} do not fit in {directory} "
            f"({_why_full(exc)}; {_mb(free)} free there, the load needs about {_mb(need)}: "
            f"the trace file's size). Free space there, or set DYNPROF_NB_CACHE to a directory "
            "on a disk with room."
        )


def _mb(n: int) -> str:
    return "? MB" if n < 0 else f"{n / 1e6:.1f} MB"


def _why_full(exc: BaseException) -> str:
    return (
        "disk quota exceeded"
        if getattr(exc, "errno", None) == errno.EDQUOT
        else ("no space left on device")
    )


def write_partitions(path: Path, with_summaries: bool, comm: Any = None) -> tuple[Any, Any]:
    """Decode ``path`` once into Parquet partitions: (the Dask frame, the streamed summaries
    or None). Raises :class:`.summaries.NotStreamable` where the trace must be read whole,
    and :class:`DiskFull` when the partitions do not fit (nothing of them is left behind)."""
    from ...errors import disk_full

    out = None
    try:
        out = partitions.new_dir(path)
        return _write_partitions(path, out, with_summaries, comm)
    except OSError as exc:
        if not disk_full(exc):
            raise
        if out is None:  # not even the directory could be made
            raise DiskFull(partitions.root(), path, exc) from None
        elsewhere = out.parent.name.startswith("dynprof_nb-parts-")  # _elsewhere's, this load's
        shutil.rmtree(out.parent if elsewhere else out, ignore_errors=True)
        raise DiskFull(out.parent, path, exc) from None


def _write_partitions(path: Path, out: Path, with_summaries: bool, comm: Any) -> tuple[Any, Any]:
    import dask.dataframe as dd

    summaries, build, parts_ = decode_to_parts(path, out, with_summaries, comm)
    # every frame derived from this one holds ``build`` in its graph: the files go with the last
    own = out.parent if out.parent.name.startswith("dynprof_nb-parts-") else out  # _elsewhere's
    weakref.finalize(build, shutil.rmtree, own, True)
    (out / "parts.json").write_text(json.dumps({"file": str(path), "parts": parts_}))
    parts = parts_ or [("", 0, 0)]
    meta = build(("", 0, 0))
    divisions = [p[1] for p in parts] + [max(parts[-1][1] + parts[-1][2] - 1, 0)]
    ddf = dd.from_map(build, parts, meta=meta, divisions=divisions, enforce_metadata=False)
    ddf = _out_of_core(ddf, out)
    ddf.dynprof_dropped = build.dropped
    return ddf, (summaries if with_summaries else None)


def decode_to_parts(
    path: Path,
    out: Path,
    with_summaries: bool,
    comm: Any,
    part_rows: int | None = None,
    memory: bool = False,
) -> tuple[Any, _Partition, list[tuple[str, int, int]]]:
    """One pass over ``path``: its raw columns written to Parquet files of ``part_rows`` rows
    in ``out``; returns the streamed summaries (None without ``with_summaries``; with
    ``memory``, their ``memory`` too), the builder of each part's events rows and the parts
    (file, first row, rows). Raises :class:`.summaries.NotStreamable` (``out`` removed) where
    the trace must be read whole."""
    gc_was = gc.isenabled()
    gc.disable()
    close: Callable[[], None] = stream.nothing
    try:
        top, pieces, close, notes = stream.open_pieces(path)
        acc = _Writer(top.baseTimeNanoseconds, out, host=with_summaries)
        acc.part_rows = part_rows or PART_ROWS
        acc.keep_memory = memory
        acc.on_piece = acc.piece
        for piece in pieces:
            acc.add(piece)
        acc.flush()
    except (fastjson.NotFast, msgspec.DecodeError) as exc:
        shutil.rmtree(out, ignore_errors=True)
        raise stream.NotStreamable(f"{path}: not laid out plainly ({exc})") from exc
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        close()
        if gc_was:
            gc.enable()
    try:
        summaries = acc.result(path, top, notes, comm)  # NotStreamable for Ascend files
    except stream.NotStreamable:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return (summaries if with_summaries else None), _Partition(acc, acc.iv), acc.parts


def events_out_of_core(w: Any, files: Any, provider: Any) -> Any:
    """Window ``w``'s events as an out-of-core Dask frame, for a window whose one Kineto trace
    goes out of core (:func:`.streamed.goes_out_of_core`, which the caller asked), filling its
    ops/steps/kernels from the same pass if it has none; None (nothing done) where the trace
    cannot stream or the disk is full and it fits in memory: the events load into memory."""
    path = files.traces[0]
    need = not all(w.loaded(k) for k in ("ops", "steps", "kernels"))
    try:
        ddf, s = write_partitions(path, need, w.comm_patterns)
    except stream.NotStreamable:
        return None
    except DiskFull as full:
        if streamed.too_big(files.traces):
            raise  # it would not fit in memory either: say where and how much, plainly
        from ...cache import CacheWarning
        from ...errors import warn

        warn(CacheWarning(f"{full} Loading the events into memory instead."), stacklevel=4)
        return None
    if s is not None:
        stream.adopt(w, s, path, provider)
    ddf.dynprof_note = NOTE.format(n=ddf.npartitions, dir=ddf.dynprof_dir)
    w.note("events", [path], notes=[ddf.dynprof_note])
    dropped = getattr(ddf, "dynprof_dropped", None)
    if dropped:  # the pass dropped rows with impossible times (said once, by the pass)
        w.sources["events"]["notes"].append(dropped[1])
        w.sources["events"]["dropped"] = dropped[0]
    return ddf


def _out_of_core(ddf: Any, out: Path, note: str = "") -> Any:
    """Dask frame ``ddf`` over the partitions in ``out``, as an :class:`OutOfCoreEvents`."""
    ddf = _out_of_core_class(type(ddf))(ddf.expr)
    ddf.dynprof_dir = out
    ddf.dynprof_note = note
    return ddf


class OutOfCoreEvents:
    """Mixed into dask's DataFrame class (:func:`_out_of_core_class`): the repr starts with
    the out-of-core note, and a pickled frame comes back as one, note included."""

    dynprof_note = ""
    dynprof_dir: Path | None = None
    dynprof_dropped: tuple[int, str] | None = None  # rows the pass dropped, and its warning

    def __repr__(self) -> str:
        return f"{self.dynprof_note}\n{super().__repr__()}"

    def _repr_html_(self) -> str:
        from dynprof_nb.safetext import escape

        return f"<p><b>{escape(self.dynprof_note)}</b></p>" + super()._repr_html_()

    def __reduce__(self) -> tuple:
        return _unpickle, (self._expr, self.dynprof_dir, self.dynprof_note)


def _unpickle(expr: Any, out: Path, note: str) -> Any:
    from dask._collections import new_collection

    return _out_of_core(new_collection(expr), out, note)


_CLASSES: dict[type, type] = {}


def _out_of_core_class(base: type) -> type:
    """``base`` (dask's DataFrame class) with :class:`OutOfCoreEvents` mixed in."""
    if base not in _CLASSES:
        _CLASSES[base] = type("OutOfCoreEvents", (OutOfCoreEvents, base), {})
    return _CLASSES[base]
