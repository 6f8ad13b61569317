"""Bad numbers are named, not fatal (issue 42): the one check every reader's frames pass.

A row whose time cannot be drawn or summed (a timestamp or duration that is NaN, infinite,
negative, beyond what int64 ns hold, or past any plausible span of a profiling window) is
dropped from its frame, and a key that must be unique (a step id) keeps its first row. What was
dropped is said in ONE :class:`BadValuesWarning` per frame, naming how many rows, which field
and which file, and kept in ``sources[kind]["dropped"]`` (so the window's repr and a cached
load say it too). Every analysis and both timelines then work on the rest.

Plausible (docs/definitions.md, "Impossible values"): a timestamp lies within
:data:`PLAUSIBLE_SPAN_NS` (7 days) of the anchor, the median of the frame's good timestamps
(a profiling window lasts seconds to hours); a duration is at most that long. Missing values
stay where a frame allows them (a step or kernel with no known start, NaN breakdowns): only a
value that is there and impossible is dropped, and an event or memory row without a readable
timestamp (``ts_ns`` NA: it cannot be placed on any axis).

All vectorised: one numpy mask per checked column, no Python work per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .errors import TraceRepairWarning, warn

#: the longest a profiling window may plausibly span, and so any duration in it (7 days, ns)
PLAUSIBLE_SPAN_NS = 7 * 24 * 3600 * 10**9
#: the largest possible step id (2**53: a float64 still holds it exactly; a job at a step a
#: second would take 285 million years to reach it), and memory total (2**63 bytes: 8 EiB)
MAX_STEP = 2**53
MAX_BYTES = 2**63
_NS_PER = {"ns": 1, "us": 1_000}


class BadValuesWarning(TraceRepairWarning):
    """Rows of a frame held impossible times (NaN, inf, negative, implausible) or repeated a
    unique key; they were dropped and the frame loaded without them."""


@dataclass(frozen=True)
class Check:
    """One frame's checks: its timestamp column (``ts``; whether a missing one drops the row:
    ``ts_required``), its duration columns, the columns that must not be infinite (``finite``)
    and its unique key (``checks[kind]``: a frame's kind, or a raw table a reader reads first,
    as the .db's ``STEP_TIME``)."""

    ts: str | None = None
    ts_required: bool = False
    durations: tuple[str, ...] = ()
    finite: tuple[str, ...] = ()
    key: tuple[str, ...] = ()
    end: str | None = None  # an end time (same unit as ``ts``): end - ts is a duration
    dur_required: bool = False  # a missing (NaN) duration drops the row too
    ids: tuple[str, ...] = ()  # ids that must not pass MAX_STEP (a step id; -1: none known)
    sizes: tuple[str, ...] = ()  # byte totals: in [0, MAX_BYTES] (or missing)
    deltas: tuple[str, ...] = ()  # byte changes: in [-MAX_BYTES, MAX_BYTES] (or missing)


CHECKS: dict[str, Check] = {
    "events": Check("ts_ns", True, ("dur_ns",)),
    "memory": Check(
        "ts_ns",
        True,
        sizes=("allocated_bytes", "reserved_bytes", "active_bytes"),
        deltas=("delta_bytes",),
    ),
    "kernels": Check("start_ns", False, ("duration_us",), dur_required=True),
    "steps": Check("start_ns", False, ("duration_us",), key=("step",), ids=("step",)),
    "communication": Check("start_ns", False, ("elapse_us",)),
    "ops": Check(None, False, ("total_us",), finite=("self_us", "avg_us", "min_us", "max_us")),
    # the .db's step table, before any frame assigns rows to its steps
    "STEP_TIME": Check("start_ns", True, key=("step",), end="end_ns", ids=("step",)),
}


@dataclass
class Dropped:
    """What :func:`clean` dropped from one frame: ``counts[(column, why)]`` rows, and the rows
    that repeated a unique key."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    duplicates: int = 0
    key: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        return sum(self.counts.values()) + self.duplicates

    def message(self, kind: str, where: str) -> str:
        parts = [
            f"{n} {'row' if n == 1 else 'rows'} had {why} {column}"
            for (column, why), n in self.counts.items()
        ]
        if self.duplicates:
            parts.append(
                f"{self.duplicates} repeated a {'/'.join(self.key)} already seen (kept the first)"
            )
        return (
            f"{where}: {kind}: {'; '.join(parts)}; dropped {self.rows} "
            f"{'row' if self.rows == 1 else 'rows'}, the analyses use the rest "
            "(docs/definitions.md, Impossible values)"
        )


def _as_ns(values: np.ndarray, unit: str) -> np.ndarray:
    """A float view of ``values`` in ns (NaN where missing)."""
    return values.astype(np.float64, copy=False) * _NS_PER[unit]


def _unit(column: str) -> str:
    return "ns" if column.endswith("_ns") else "us"


def _numbers(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The column as float64 (exact enough for the bounds) and where it is missing."""
    if s.dtype == np.int64:
        a = s.to_numpy()
        return a.astype(np.float64), np.zeros(len(a), bool)
    if isinstance(s.dtype, pd.api.extensions.ExtensionDtype):
        missing = s.isna().to_numpy()
        return s.to_numpy(np.float64, na_value=np.nan), missing
    a = pd.to_numeric(s, errors="coerce").to_numpy(np.float64)
    return a, np.isnan(a)


def bad_times(
    ts_ns: np.ndarray | None,
    dur_ns: np.ndarray | None,
    anchor_ns: float | None = None,
    ts_missing: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Masks of the impossible rows, by reason: ``ts`` (negative, inf, or farther than
    :data:`PLAUSIBLE_SPAN_NS` from ``anchor_ns``), ``ts_missing`` (where given), ``dur``
    (negative, inf, or longer than the span). Float ns in, NaN where missing (a missing
    duration is not impossible). The one rule every reader uses (the frames' :func:`clean` and
    the streamed Kineto pass, which drops rows before it sums them)."""
    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore"):
        if ts_ns is not None:
            bad = (ts_ns < 0) | np.isinf(ts_ns)
            if anchor_ns is not None:
                bad |= np.abs(ts_ns - anchor_ns) > PLAUSIBLE_SPAN_NS
            out["ts"] = bad
            if ts_missing is not None:
                out["ts_missing"] = ts_missing
        if dur_ns is not None:
            out["dur"] = (dur_ns < 0) | (dur_ns > PLAUSIBLE_SPAN_NS)  # inf is > the span
    return out


def anchor_of(ts_ns: np.ndarray) -> float | None:
    """The median of the finite, non-negative timestamps (None without any)."""
    with np.errstate(invalid="ignore"):
        good = ts_ns[np.isfinite(ts_ns) & (ts_ns >= 0)]
    return float(np.median(good)) if len(good) else None


WHY = {
    "ts": "an impossible (negative, inf or implausible: >7 days from the median)",
    "ts_missing": "no readable (missing, NaN, inf or beyond 2262)",
    "dur": "an impossible (negative, NaN/inf or longer than 7 days)",
    "finite": "an infinite",
    "id": "an impossible (beyond 2**53)",
    "size": "an impossible (negative, inf or beyond 2**63 bytes)",
    "delta": "an impossible (inf or beyond ±2**63 bytes)",
}


def clean(frame: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, Dropped]:
    """``frame`` (of ``kind``) without its impossible rows and repeated keys, and what went
    (``frame`` itself, not a copy, when nothing did)."""
    check = CHECKS.get(kind)
    dropped = Dropped(key=check.key if check else ())
    if check is None or not isinstance(frame, pd.DataFrame) or not len(frame):
        return frame, dropped
    bad = np.zeros(len(frame), bool)
    if check.ts is not None and check.ts in frame.columns:
        ts, missing = _numbers(frame[check.ts])
        ts_ns = _as_ns(ts, _unit(check.ts))
        masks = bad_times(ts_ns, None, anchor_of(ts_ns), missing if check.ts_required else None)
        for why, mask in masks.items():
            _count(dropped, check.ts, why, mask & ~bad)
            bad |= mask
    if check.end is not None and check.ts in frame.columns and check.end in frame.columns:
        end, _ = _numbers(frame[check.end])
        ts, _ = _numbers(frame[check.ts])
        unit = _unit(check.ts)
        mask = bad_times(None, _as_ns(end - ts, unit))["dur"] | np.isnan(end)
        mask |= bad_times(_as_ns(end, unit), None, anchor_of(_as_ns(ts, unit)))["ts"]
        _count(dropped, f"{check.end} - {check.ts}", "dur", mask & ~bad)
        bad |= mask
    for col in check.durations:
        if col in frame.columns:
            d, missing = _numbers(frame[col])
            mask = bad_times(None, _as_ns(d, _unit(col)))["dur"]
            if check.dur_required:  # a kernel without a duration cannot be drawn or summed
                mask |= missing
            if col == "dur_ns":  # int64 ns: the readers' mark for a dur they could not hold
                mask |= d == float(np.iinfo(np.int64).min)
            _count(dropped, col, "dur", mask & ~bad)
            bad |= mask
    for col in check.ids:
        if col in frame.columns:
            s = frame[col]  # int64 ids compared as ints: 2**53 + 1 is no float64
            ids = s.to_numpy() if s.dtype == np.int64 else _numbers(s)[0]
            with np.errstate(invalid="ignore"):
                mask = ids > MAX_STEP
            _count(dropped, col, "id", mask & ~bad)
            bad |= mask
    for cols, why in ((check.sizes, "size"), (check.deltas, "delta")):
        for col in cols:
            if col in frame.columns:
                b, _ = _numbers(frame[col])  # NaN: not known, kept
                with np.errstate(invalid="ignore"):
                    mask = np.abs(b) > MAX_BYTES  # inf is beyond it
                    if why == "size":
                        mask |= b < 0
                _count(dropped, col, why, mask & ~bad)
                bad |= mask
    for col in check.finite:
        if col in frame.columns:
            mask = np.isinf(_numbers(frame[col])[0])
            _count(dropped, col, "finite", mask & ~bad)
            bad |= mask
    keys = [c for c in check.key if c in frame.columns]
    if keys:
        if "rank" in frame.columns:
            keys = ["rank", *keys]
        good = np.flatnonzero(~bad)  # the first of the rows kept: a bad row is no first
        rest = frame[keys].iloc[good]
        dup = np.zeros(len(frame), bool)
        dup[good] = rest.duplicated(keep="first").to_numpy() & ~rest.isna().any(axis=1).to_numpy()
        dropped.duplicates = int(dup.sum())
        dropped.key = tuple(keys)
        bad |= dup
    if not bad.any():
        return frame, dropped
    out = frame[~bad]
    if isinstance(frame.index, pd.RangeIndex):
        out = out.reset_index(drop=True)
    if check.ts_required and str(out[check.ts].dtype) == "Int64":  # NA only where dropped:
        out = out.assign(**{check.ts: out[check.ts].astype("int64")})  # the schema's int64
    out.attrs = dict(frame.attrs)
    return out, dropped


def first_rows(ids: np.ndarray) -> np.ndarray | None:
    """Where each row holds the first of its id (a mask), None when no id repeats: a
    reader's raw table whose unique key (the .db's TASK ``globalTaskId``) a copied row
    repeats keeps the first."""
    if len(ids) < 2:
        return None
    _, first = np.unique(ids, return_index=True)
    if len(first) == len(ids):
        return None
    keep = np.zeros(len(ids), bool)
    keep[first] = True
    return keep


def repeated(ids: pd.Series) -> np.ndarray:
    """Where a row repeats an id an earlier row had (a missing id repeats nothing)."""
    return (ids.duplicated(keep="first") & ids.notna()).to_numpy()


def said_repeats(table: str, key: str, n: int, where: str) -> str:
    """The one :class:`BadValuesWarning` for ``n`` rows of a reader's raw ``table`` that
    repeated its unique ``key`` (and were dropped): said, and returned for the notes."""
    msg = Dropped(duplicates=n, key=(key,)).message(table, where)
    warn(BadValuesWarning(msg), stacklevel=5)
    return msg


def _count(dropped: Dropped, column: str, why: str, mask: np.ndarray) -> None:
    n = int(mask.sum())
    if n:
        dropped.counts[(column, WHY[why])] = n


def checked(frame: pd.DataFrame, kind: str, sources: dict[str, Any], where: Any) -> pd.DataFrame:
    """:func:`clean` for a window's frame: the frame without its bad rows, their count said in
    one :class:`BadValuesWarning` naming ``where`` (the files that fed it, else the window)
    and kept in ``sources[kind]["dropped"]`` (and its notes)."""
    note = sources.setdefault(kind, {"files": [], "missing": None, "notes": []})
    files = note.get("files") or [str(where)]
    out, msg, rows = checked_table(frame, kind, ", ".join(str(f) for f in files))
    if rows:
        note["dropped"] = note.get("dropped", 0) + rows
        note["notes"] = [*note.get("notes", []), msg]
    return out


def checked_table(frame: pd.DataFrame, kind: str, where: str) -> tuple[pd.DataFrame, str, int]:
    """:func:`clean` for a reader's table or frame: the rest, the one :class:`BadValuesWarning`
    said (``""`` when nothing went) and how many rows went."""
    out, dropped = clean(frame, kind)
    if not dropped.rows:
        return out, "", 0
    msg = dropped.message(kind, where)
    warn(BadValuesWarning(msg), stacklevel=5)
    return out, msg, dropped.rows
