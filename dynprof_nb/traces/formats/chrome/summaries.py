"""A Kineto window's ``ops``, ``steps`` and ``kernels`` in one pass over its decoded pieces,
without the ``events`` frame (issue 25: a 5 GB trace summarised in less memory than the file).

The Chrome reader's piece decoding (:class:`.reader.Columns`, fed by :mod:`.pieces`) runs as
usual, but each decoded piece is reduced at once and its columns dropped:

- host operations: per name exact int64 sums (count, total, min, max) and, to get self times,
  four narrow columns per row (thread, name, ts, dur: 29 bytes, about half the JSON text of an
  event), sorted by ts within the piece. Self time needs each op's direct children on its
  thread, which may sit in any piece: once the pass is done the rows are walked in ts windows
  (a slice of every piece each), with one open-op stack per thread carried from window to
  window, which is :func:`.ops.self_times`' walk in the same order, so the sums are the same
  (in numpy for properly nested threads, :func:`.ops.nested_parents`, as in memory);
- device rows and step markers (the steps' intervals and breakdown, the kernels frame and the
  kernel-to-step attribution by launch correlation, issue 18): kept as rows and built into a
  small frame of only those rows, which the same functions as the in-memory path
  (:mod:`..derived.from_events`) read;
- each launch's correlation and ts (to find a kernel's launch in any piece), and the span.

Every result is the in-memory one (tests/traces/test_stream.py compares them on every Kineto
fixture). A file this cannot read plainly (a repair, a layout the fast cut refuses) or an
Ascend/MindSpore trace (whose processes change which rows are ops) raises :class:`NotStreamable`
and is loaded whole instead.

When: every load of a window that is one Kineto trace (:mod:`.first_pass`, which also writes
the events to the frame cache from the same pass), unless ``DYNPROF_NB_STREAM=0``.
:func:`too_big` (the events frame would need more than half the memory a load may use,
:func:`.budget.load_memory`, estimated at ``FRAME_PER_BYTE`` times the JSON text) says when the
events go out of core instead (:mod:`.out_of_core`).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from dynprof_nb.contract.protocol import STEP_PREFIX, STEP_RE

from ... import schema, validate
from ...errors import TraceRepairWarning, warn
from ..common.timestamps import NA_NS
from ..derived import from_events as derive
from ..derived import op_table as ops
from ..derived import source as derived
from ..derived.from_events import DEVICE_CATS
from ..derived.op_table import GC_CAT, NON_OP_CATS, table_from_sums
from . import pieces as fastjson
from . import reader as chrome
from .streamed import (  # noqa: F401  (their home there)
    FRAME_PER_BYTE,
    STREAM_ENV,
    Streamed,
    streamable,
    too_big,
)

#: host rows per window of the self-time walk: bounds its sort and its arrays, which stay in
#: cache and in memory the allocator reuses (a third of the time of 2M-row windows)
WINDOW_ROWS = 100_000
# processes whose rows the in-memory ops/steps treat apart (Ascend, MindSpore): not streamed
_OTHER_PROCESSES = {
    "Ascend Hardware",
    "HCCL",
    "Overlap Analysis",
    "Scope Layer",
    "CANN",
    "CPU OP",
}


class NotStreamable(Exception):
    """This trace is loaded whole instead (the reason is the message)."""


def nothing() -> None:
    return None


def open_pieces(path: Path) -> tuple[fastjson.Top, Iterator[Any], Callable[[], None], list[str]]:
    """The trace's top object and its event pieces (read from the file as they are decoded;
    a gzip file is inflated first, within the reader's budgets)."""
    fh = open(path, "rb")  # noqa: SIM115 (closed by the returned close())
    size = os.fstat(fh.fileno()).st_size
    if fh.read(2) != b"\x1f\x8b":
        fh.seek(0)
        try:
            top, pieces = fastjson.file_pieces(fh, size)
        except BaseException:
            fh.close()
            raise
        return top, pieces, fh.close, []
    fh.close()
    data, notes = chrome.read_bytes(path)
    top, pieces = fastjson.event_pieces(data)
    return top, pieces, nothing, notes


def stream_trace(path: str | Path, comm_patterns: Any = None) -> Streamed:
    """One pass over a Kineto trace file: its ops, steps and kernels frames, as the in-memory
    window would give them (``comm_patterns`` as :func:`.derive.steps_from_events` takes)."""
    path = Path(path)
    gc_was = gc.isenabled()
    gc.disable()
    try:
        close: Callable[[], None] = nothing
        try:
            top, pieces, close, notes = open_pieces(path)
            acc = Reducer(top.baseTimeNanoseconds)
            for piece in pieces:
                acc.add(piece)
        except (fastjson.NotFast, msgspec.DecodeError) as exc:
            raise NotStreamable(f"{path}: not laid out plainly ({exc})") from exc
        finally:
            close()
    finally:
        if gc_was:
            gc.enable()
    return acc.result(path, top, notes, comm_patterns)


def label_of(key: Any) -> str:
    """A table key as the events frame's categories spell it (chrome._categorical)."""
    return "" if key is None else str(key)


class _Lut:
    """A per-code boolean of a growing code table (codes are the table's insertion order)."""

    def __init__(self, test: Callable[[str], bool]) -> None:
        self.test = test
        self.values = np.zeros(0, bool)

    def __call__(self, table: dict) -> np.ndarray:
        if len(self.values) < len(table):
            new = [self.test(label_of(k)) for k in list(table)[len(self.values) :]]
            self.values = np.concatenate([self.values, np.asarray(new, bool)])
        return self.values


def _grow(a: np.ndarray, n: int, fill: int) -> np.ndarray:
    return a if len(a) >= n else np.concatenate([a, np.full(n - len(a), fill, a.dtype)])


class _HostSums:
    """Per name code: count, total, min, max (exact int64 ns) and first row, of one row class."""

    def __init__(self) -> None:
        self.count = np.zeros(0, np.int64)
        self.total = np.zeros(0, np.int64)
        self.min = np.zeros(0, np.int64)
        self.max = np.zeros(0, np.int64)
        self.first = np.zeros(0, np.int64)

    def add(self, names: np.ndarray, dur: np.ndarray, rows: np.ndarray, n_codes: int) -> None:
        big = np.iinfo(np.int64).max
        self.count = _grow(self.count, n_codes, 0)
        self.total = _grow(self.total, n_codes, 0)
        self.min = _grow(self.min, n_codes, big)
        self.max = _grow(self.max, n_codes, -big - 1)
        self.first = _grow(self.first, n_codes, big)
        self.count += np.bincount(names, minlength=n_codes)
        if len(dur) and int(np.abs(dur).max()) * len(dur) < 2**53:  # float sums exact here
            self.total += np.rint(np.bincount(names, dur, n_codes)).astype(np.int64)
        else:
            np.add.at(self.total, names, dur)
        np.minimum.at(self.min, names, dur)
        np.maximum.at(self.max, names, dur)
        np.minimum.at(self.first, names, rows)


class Reducer(chrome.Columns):
    """The Chrome reader's piece decoding, each piece reduced as soon as it is decoded."""

    def __init__(self, base: Any, host: bool = True) -> None:
        super().__init__()
        self.keep_host = host  # False: no ops (the out-of-core events pass of a window that has)
        self.keep_memory = False  # True: the [memory] and counter events too (first_pass.py)
        self.on_piece: Callable[..., None] | None = None  # sees each piece's columns (ooc.py)
        self.iv: pd.DataFrame | None = None  # the step intervals, once the pass is done
        ok = isinstance(base, int) and not isinstance(base, bool) and 0 < base < 2**62
        self.base = base if ok else 0
        self.is_dev = _Lut(DEVICE_CATS.__contains__)
        self.is_nonop = _Lut(NON_OP_CATS.__contains__)
        self.is_pyf = _Lut("python_function".__eq__)
        self.is_gc = _Lut(GC_CAT.__eq__)
        self.is_marker = _Lut(lambda s: STEP_RE.match(s) is not None)
        self.is_stepname = _Lut(lambda s: s.startswith(STEP_PREFIX))
        self.ops, self.pyfuncs = _HostSums(), _HostSums()
        self.nonstep_op = False  # an op row that is not a step marker (host_ops' special case)
        self.host: list[tuple[np.ndarray, ...]] = []  # per piece: ts, thread, name, dur, is_pyf
        self.lean: dict[str, list[np.ndarray]] = {k: [] for k in (*self.cols, "corr", "stream")}
        self.launch: list[tuple[np.ndarray, np.ndarray]] = []  # (correlation, ts) of host rows
        self.any_corr = self.any_stream = False
        self.lo, self.hi = None, None
        self.anchor: float | None = None  # the timestamps' plausible centre (validate.py)
        self.dropped: list[tuple[str, str, int]] = []  # rows dropped: column, why, how many
        self.dropped_note: tuple[int, str] | None = None  # their count and warning, at the end

    def add(self, piece: bytes | memoryview) -> None:
        start, n_link_rows, n_rare = self.n_rows, len(self.link_rows), len(self.rare_rows)
        n_args = len(self.rare_args)
        super().add(piece)
        if not self.keep_memory:  # no memory or counter frames: free their args at once
            self.memory_parts.clear()
            self.counter_parts.clear()
        n = self.n_rows - start
        if not n:
            return
        c = {k: v.pop() for k, v in self.cols.items()}
        corr = np.full(n, -1, np.int64)
        stream = np.full(n, np.nan)
        if len(self.link_rows) > n_link_rows:  # the piece's link rows: kept here, not there
            rows = self.link_rows.pop() - start
            cv, sv = self.link_corr.pop(), self.link_stream.pop()
            ok = ~np.isnan(cv)
            corr[rows[ok]] = cv[ok].astype(np.int64)
            stream[rows] = sv
            self.any_corr |= bool(ok.any())
            self.any_stream |= bool((~np.isnan(sv)).any())
        args: list = []  # the args of its collectives and CUDA event syncs, at rows
        rows = np.empty(0, np.int64)
        if len(self.rare_rows) > n_rare:
            rows = self.rare_rows.pop() - start
            args = self.rare_args[n_args:]
            del self.rare_args[n_args:]
        ts = c["ts"]
        if self.base:
            ts = np.where(ts == NA_NS, NA_NS, ts + self.base)
        keep = self._possible(ts, c["dur"])
        if keep is not None:  # impossible rows go before anything sums them (issue 42)
            sel = np.flatnonzero(keep)
            c = {k: v[sel] for k, v in c.items()}
            ts, corr, stream = ts[sel], corr[sel], stream[sel]
            if len(rows):
                at = np.full(n, -1, np.int64)
                at[sel] = np.arange(len(sel))
                rows = at[rows]
                args = [a for a, ok in zip(args, (rows >= 0).tolist(), strict=True) if ok]
                rows = rows[rows >= 0]
            n = len(sel)
            self.n_rows = start + n  # the rows numbered as kept (the out-of-core parts)
            if not n:
                return
        timed = ts != NA_NS
        if timed.any():
            lo, hi = int(ts[timed].min()), int((ts[timed] + c["dur"][timed]).max())
            self.lo = lo if self.lo is None else min(self.lo, lo)
            self.hi = hi if self.hi is None else max(self.hi, hi)
        if self.on_piece is not None:
            self.on_piece(c, ts, corr, stream, args, rows)
        x = c["ph"] == self.ph_t["X"] if "X" in self.ph_t else np.zeros(n, bool)
        dev = x & self.is_dev(self.cat_t)[c["cat"]]
        if self.keep_host:
            self._host(c, ts, x & ~self.is_nonop(self.cat_t)[c["cat"]], start)
        lean = np.flatnonzero(dev | (x & self.is_marker(self.name_t)[c["name"]]))
        if len(lean):
            for k in self.cols:
                self.lean[k].append(ts[lean] if k == "ts" else c[k][lean])
            self.lean["corr"].append(corr[lean])
            self.lean["stream"].append(stream[lean])
        hl = np.flatnonzero(~dev & (corr >= 0))
        if len(hl):
            self.launch.append((corr[hl], ts[hl]))

    def _possible(self, ts: np.ndarray, dur: np.ndarray) -> np.ndarray | None:
        """Which of a piece's rows :func:`~dynprof_nb.traces.validate.bad_times` keeps (the
        anchor: the median of the first piece with good times), None when all; the others are
        counted for the one warning :meth:`result` gives."""
        tsf = ts.astype(np.float64)
        missing = ts == NA_NS
        tsf[missing] = np.nan
        if self.anchor is None:
            self.anchor = validate.anchor_of(tsf)
        masks = validate.bad_times(tsf, dur.astype(np.float64), self.anchor, missing)
        masks["dur"] |= dur == NA_NS
        bad = np.zeros(len(ts), bool)
        for why, mask in masks.items():
            mask = mask & ~bad
            if mask.any():
                column = "ts_ns" if why.startswith("ts") else "dur_ns"
                self.dropped.append((column, why, int(mask.sum())))
                bad |= mask
        return ~bad if bad.any() else None

    def _host(self, c: dict, ts: np.ndarray, host: np.ndarray, start: int) -> None:
        """Sums per name and the narrow rows of the piece's host operations (ops.host_ops)."""
        idx = np.flatnonzero(host)
        if not len(idx):
            return
        names, dur = c["name"][idx].astype(np.int64), c["dur"][idx]
        pyf = self.is_pyf(self.cat_t)[c["cat"][idx]]
        n_codes = len(self.name_t)
        for sums, sel in ((self.ops, ~pyf), (self.pyfuncs, pyf)):
            if sel.any():
                sums.add(names[sel], dur[sel], idx[sel] + start, n_codes)
        gc_ = self.is_gc(self.cat_t)[c["cat"][idx]]  # GC pauses, like steps, are not the user's
        if (~self.is_stepname(self.name_t)[names[~pyf & ~gc_]]).any():
            self.nonstep_op = True
        key = (c["pid"][idx].astype(np.int64) << 32) | c["tid"][idx].astype(np.int64)
        t = np.where(ts[idx] == NA_NS, 0, ts[idx])  # ops.self_times reads NA as 0
        order = np.argsort(t, kind="stable")
        self.host.append(
            (t[order], key[order], names[order].astype(np.int32), dur[order], pyf[order])
        )

    # ---- after the pass -----------------------------------------------------------------------
    def processes(self) -> set[str]:
        labels = {label_of(k) for k in self.pid_t}
        labels |= {str(label) for kind, _, _, label in self.meta_rows if kind == "process_name"}
        return labels

    def result(self, path: Path, top: fastjson.Top, notes: list[str], comm: Any) -> Streamed:
        procs = self.processes()
        other = procs & _OTHER_PROCESSES
        if other:
            raise NotStreamable(f"{path}: has {', '.join(sorted(other))} rows (not Kineto)")
        # ops first, then the rows of its self-time walk go (about 30 bytes per host event:
        # on a 1.7 GB trace a few hundred MB that the frames built next would sit on top of)
        ops = self._ops()
        self.host = []
        lean = self.lean_frame()
        self.lean = {k: [] for k in self.lean}  # now in ``lean``
        iv = self.iv = derive.step_intervals(lean)
        lean["step"] = derive.device_steps(
            lean, iv, derive.assign_steps(lean["ts_ns"].to_numpy("int64", na_value=0), iv)
        )
        steps, how = derive.steps_from_events(lean, comm)
        meta = {
            "distributedInfo": top.distributedInfo,
            "baseTimeNanoseconds": top.baseTimeNanoseconds,
            "displayTimeUnit": top.displayTimeUnit,
            "otherData": top.otherData,
            "deviceProperties": top.deviceProperties,
        }
        if self.bad_ts:
            notes = [*notes, chrome.bad_ts_note(self.bad_ts, self.bad_ts_example)]
        dropped = None
        if self.dropped:
            gone = validate.Dropped()
            for column, why, n in self.dropped:
                key = (column, validate.WHY[why])
                gone.counts[key] = gone.counts.get(key, 0) + n
            dropped = (gone.rows, gone.message("events", str(path)))
            warn(validate.BadValuesWarning(dropped[1]), stacklevel=4)
            self.dropped_note = dropped
        span = None if self.lo is None else (self.hi - self.lo) / 1e6
        return Streamed(
            ops,
            steps,
            how,
            derive.kernels_from_events(lean),
            span,
            meta,
            notes,
            procs,
            chrome.memory_and_counters(self, self.base) if self.keep_memory else None,
            dropped,
        )

    def lean_frame(self) -> pd.DataFrame:
        """The device rows and step markers as events rows, with the link columns the whole
        frame would have (chrome._link_columns; a launch found in any piece)."""
        cat = {k: (np.concatenate(v) if v else np.empty(0, np.int64)) for k, v in self.lean.items()}
        ev = chrome.events_frame(cat, self, cat["ts"])
        if self.any_stream:
            ev["stream_arg"] = chrome.whole_numbers(cat["stream"])  # as the whole frame's
        if self.any_corr:
            corr = cat["corr"]
            col = pd.array(corr, dtype="Int64")
            col[corr < 0] = pd.NA
            ev["correlation"] = col
            dev = derive.device_mask(ev).to_numpy() & (corr >= 0)
            out = np.full(len(ev), -1, np.int64)
            if self.launch:
                keys = np.concatenate([k for k, _ in self.launch])
                ts = np.concatenate([t for _, t in self.launch])
                keys, first = np.unique(keys, return_index=True)  # the first launch of an id
                ts = ts[first]
                pos = np.searchsorted(keys, corr[dev])
                pos = np.minimum(pos, len(keys) - 1)
                hit = keys[pos] == corr[dev]
                found = np.where(hit, ts[pos], -1)
                out[np.flatnonzero(dev)] = np.where(found == NA_NS, -1, found)
            lcol = pd.array(out, dtype="Int64")
            lcol[out < 0] = pd.NA
            ev["launch_ns"] = lcol
        return ev

    def _ops(self) -> pd.DataFrame:
        """ops.op_table from the sums and the self-time walk."""
        with_pyf = self.pyfuncs.count.any() and not self.nonstep_op
        parts = [self.ops, self.pyfuncs] if with_pyf else [self.ops]
        n = len(self.name_t)
        count = sum(_grow(p.count, n, 0) for p in parts)
        if not np.any(count):
            return schema.empty("ops")
        big = np.iinfo(np.int64).max
        first = np.min([_grow(p.first, n, big) for p in parts], axis=0)
        self_ns = self._self_times(n, with_pyf)
        codes = np.flatnonzero(count)
        codes = codes[np.argsort(first[codes], kind="stable")]
        labels = np.array([label_of(k) for k in self.name_t], dtype=object)
        per_code = pd.DataFrame(
            {
                "count": count[codes],
                "total_ns": sum(_grow(p.total, n, 0) for p in parts)[codes],
                "self_ns": self_ns[codes],
                "min_ns": np.min([_grow(p.min, n, big) for p in parts], axis=0)[codes],
                "max_ns": np.max([_grow(p.max, n, -big - 1) for p in parts], axis=0)[codes],
            }
        )
        t = per_code.groupby(labels[codes], sort=False).agg(
            count=("count", "sum"),
            total_ns=("total_ns", "sum"),
            self_ns=("self_ns", "sum"),
            min_ns=("min_ns", "min"),
            max_ns=("max_ns", "max"),
        )
        return table_from_sums(t)

    def _self_times(self, n_codes: int, with_pyf: bool) -> np.ndarray:
        """Self time summed per name code: ops.self_times' walk (rows by thread, ts, longest
        first, then file order), done window by window of ts with each thread's open ops kept."""
        out = np.zeros(n_codes, np.int64)
        host = self.host
        if not with_pyf:  # piece by piece in place: never a second copy of all the rows
            for i, p in enumerate(host):
                if p[4].any():
                    host[i] = tuple(a[~p[4]] for a in p)
        total = sum(len(p[0]) for p in host)
        if not total:
            return out
        sample = np.concatenate([p[0][:: max(1, len(p[0]) // 64)] for p in host if len(p[0])])
        k = max(1, -(-total // WINDOW_ROWS))
        bounds = np.unique(np.quantile(sample, np.linspace(0, 1, k + 1)[1:-1]).astype(np.int64))
        # edges[i, w]: where window w begins in piece i (window 0 at 0, the last one ends at
        # the piece's end)
        edges = np.zeros((len(host), len(bounds) + 2), np.int64)
        for i, p in enumerate(host):
            edges[i, 1:-1] = np.searchsorted(p[0], bounds, side="left")
            edges[i, -1] = len(p[0])
        walk = _SelfWalk(out)
        for w in range(len(bounds) + 1):
            a, b = edges[:, w], edges[:, w + 1]
            sl = [tuple(x[a[i] : b[i]] for x in host[i][:4]) for i in np.flatnonzero(b > a)]
            if sl:
                walk.add(*(np.concatenate([s[i] for s in sl]) for i in range(4)))
        walk.finish()
        return out


class _SelfWalk:
    """:func:`.ops.self_times` over windows of rows by ts, summing self time per name code.

    Each window's rows, with the ops still open from the windows before (their ts is earlier
    than any of the window's), go through :func:`.ops.nested_parents`; the ops it leaves open
    are carried to the next window, with their children's time so far. A thread it cannot
    decide (not properly nested) is walked in Python (:func:`_walk`) from then on, its open
    ops handed over as that walk's stack."""

    def __init__(self, out: np.ndarray) -> None:
        self.out = out
        empty = np.zeros(0, np.int64)
        self.open = (empty, empty, empty, empty, empty)  # thread, ts, dur, name, children's
        self.walked: set[int] = set()
        self.stacks: dict[int, list[list[int]]] = {}

    def _sum(self, names: np.ndarray, selfs: np.ndarray) -> None:
        np.add.at(self.out, np.asarray(names, np.int64), np.asarray(selfs, np.int64))

    def add(self, ts: np.ndarray, th: np.ndarray, nm: np.ndarray, du: np.ndarray) -> None:
        o_th, o_ts, o_du, o_nm, o_ch = self.open
        n_open = len(o_th)
        th = np.concatenate([o_th, th])
        ts = np.concatenate([o_ts, ts])
        du = np.concatenate([o_du, du])
        nm = np.concatenate([o_nm, nm.astype(np.int64)])
        carried = np.concatenate([o_ch, np.zeros(len(th) - n_open, np.int64)])
        order = np.lexsort((-du, ts, th))  # stable: carried ops stay first, in stack order
        th, ts, du, nm, carried = th[order], ts[order], du[order], nm[order], carried[order]
        was_open = order < n_open
        walked = np.isin(th, np.fromiter(self.walked, np.int64, len(self.walked)))
        vec = np.flatnonzero(~walked)
        parent, undecided, still = ops.nested_parents(th[vec], ts[vec], du[vec])
        if undecided.any():  # hand these threads' open ops to the walk
            for i in vec[undecided & was_open[vec]].tolist():
                entry = [int(ts[i] + du[i]), int(nm[i]), int(du[i]), int(carried[i])]
                self.stacks.setdefault(int(th[i]), []).append(entry)
            self.walked.update(np.unique(th[vec[undecided]]).tolist())
            walked[vec[undecided]] = True
        child = carried[vec] + ops.child_sums(
            parent, np.where(was_open[vec] | undecided, 0, du[vec]), len(vec)
        )
        done = ~still & ~undecided
        self._sum(nm[vec][done], du[vec][done] - child[done])
        keep = vec[still]
        self.open = (th[keep], ts[keep], du[keep], nm[keep], child[still])
        at = np.flatnonzero(walked & ~was_open)
        if len(at):
            self._sum(*_walk(th[at], ts[at], du[at], nm[at], self.stacks))

    def finish(self) -> None:
        """Add the self time of the ops open at the end."""
        _, _, du, nm, child = self.open
        self._sum(nm, du - child)
        names = [e[1] for st in self.stacks.values() for e in st]
        selfs = [e[2] - e[3] for st in self.stacks.values() for e in st]
        self._sum(np.asarray(names, np.int64), np.asarray(selfs, np.int64))


def _walk(
    th: np.ndarray, st: np.ndarray, du: np.ndarray, nm: np.ndarray, stacks: dict
) -> tuple[list[int], list[int]]:
    """The stack walk of :func:`.ops.self_times` over sorted rows; each thread's open ops
    (``[end, name, duration, children's time]`` each) stay in ``stacks`` for the next window.
    Returns the closed ops' names and self times."""
    out_n: list[int] = []
    out_s: list[int] = []
    cur = None
    stack: list[list[int]] = []
    for t, s, d, n in zip(th.tolist(), st.tolist(), du.tolist(), nm.tolist(), strict=True):
        if t != cur:
            cur = t
            stack = stacks.setdefault(t, [])
        while stack and stack[-1][0] <= s:
            top = stack.pop()
            out_n.append(top[1])
            out_s.append(top[2] - top[3])
        if stack:
            stack[-1][3] += d
        stack.append([s + d, n, d, 0])
    return out_n, out_s


def adopt(w: Any, s: Streamed, path: Path, provider: Any) -> None:
    """Cache the streamed frames in window ``w`` (as its ``_frame`` would), with their notes;
    ``w.sources[kind]`` names ``provider`` (the kineto source) and the path ``stream``."""

    if s.repairs:
        warn(TraceRepairWarning(f"{path}: " + "; ".join(s.repairs)), stacklevel=5)
    w.streamed = s
    frames = {"ops": s.ops, "steps": s.steps, "kernels": s.kernels}
    # the notes the frames derived from a whole parse's events have (the path says "stream")
    notes = {"ops": derived.OPS_NOTE, "steps": s.steps_how, "kernels": derived.KERNELS_NOTE}
    empty = {"ops": derived.NO_OPS, "steps": s.steps_how, "kernels": derived.no_kernels(w)}
    for kind, frame in frames.items():
        frame = schema.conform(frame, kind)
        if w.device is not None and "device" not in frame.columns:
            frame["device"] = schema.constant_int(w.device, len(frame))
        if frame.empty:
            w.note(kind, missing=empty[kind])
        else:
            w.note(kind, [path], notes=[notes[kind]])
        if s.dropped:  # derived from events without the impossible rows: say so where it shows
            w.sources[kind]["notes"].append(s.dropped[1])
            w.sources[kind]["dropped"] = s.dropped[0]
        w.adopt_frame(kind, frame, provider, "stream")
    info = s.meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int) and w.rank is None:
        w.rank = info["rank"]
    if isinstance(s.meta.get("otherData"), dict) and w.framework == "chrome":
        w.framework = "builtin"
