"""Exact conversion of trace timestamps (µs, as int, float or decimal string) to int64 ns.

Ascend writes ``"ts": "1704161511420306.491"``; a float64 at 1.7e15 µs has a 0.25 µs grid, so
strings are parsed digit by digit and never pass through float64.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import numpy as np

NA_NS = np.iinfo(np.int64).min  # sentinel for "no timestamp" inside int64 arrays
_NA_TEXT = {"", "N/A", "NA", "n/a", "nan", "NaN", "None", "null", "-", "inf", "-inf", "Infinity"}
# Above 2**43 µs a float64 cannot hold 3 decimal digits exactly.
FLOAT_EXACT_LIMIT_US = float(2**43)


def str_us_to_ns(text: str | bytes) -> int | None:
    """'1704161511420306.491' (µs) -> 1704161511420306491 (ns), exactly; None when not a number."""
    return parse_scaled(text, 3)


def parse_scaled(text: str | bytes, digits: int) -> int | None:
    """Decimal text times 10**digits as an exact int (digits=3: µs->ns, 6: ms->ns)."""
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("ascii", "replace")
    s = text.strip().strip('"').strip()
    if s in _NA_TEXT:
        return None
    neg = s.startswith("-")
    body = s[1:] if neg or s.startswith("+") else s
    whole, _, frac = body.partition(".")
    if (whole.isdigit() or (whole == "" and frac)) and (frac == "" or frac.isdigit()):
        ns = int(whole or "0") * 10**digits + int((frac + "0" * digits)[:digits] or "0")
        if len(frac) > digits and frac[digits] >= "5":  # round half up
            ns += 1
        return -ns if neg else ns
    try:
        value = Decimal(s) * 10**digits
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    return int(value.to_integral_value())


def _floats_to_ns(a: np.ndarray) -> np.ndarray:
    bad = ~np.isfinite(a)
    if bad.any():
        a = np.where(bad, 0.0, a)
    whole = np.floor(a)
    ns = whole.astype(np.int64) * 1000 + np.rint((a - whole) * 1000).astype(np.int64)
    if bad.any():
        ns[bad] = NA_NS
    return ns


def _one_to_ns(v: object) -> int:
    if v is None or isinstance(v, bool):
        return NA_NS
    if isinstance(v, int):
        return v * 1000
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return NA_NS
        return int(_floats_to_ns(np.array([v]))[0])
    if isinstance(v, str | bytes):
        r = str_us_to_ns(v)
        return NA_NS if r is None else r
    return NA_NS


def us_values_to_ns(values: list) -> tuple[np.ndarray, bool]:
    """Convert a list of µs values to int64 ns (NA_NS where missing).

    Returns ``(ns, lossy)``: ``lossy`` is True when large decimal numbers came in as float64 and
    may have lost their nanosecond digits, so the caller can re-read them as raw text.
    """
    if not values:
        return np.empty(0, dtype=np.int64), False
    try:
        a = np.asarray(values)
    except (ValueError, OverflowError):
        a = np.asarray(values, dtype=object)
    kind = a.dtype.kind
    if kind in "iu":
        return a.astype(np.int64) * 1000, False
    if kind == "f":
        finite = a[np.isfinite(a)]
        lossy = bool(finite.size) and float(np.abs(finite).max()) >= FLOAT_EXACT_LIMIT_US
        return _floats_to_ns(a), lossy
    return np.fromiter((_one_to_ns(v) for v in values), dtype=np.int64, count=len(values)), False
