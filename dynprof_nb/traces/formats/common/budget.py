"""Limits on what one read may cost, so a small hostile file cannot take the notebook down.

Trace files come from other machines and other people: a 4 MB ``.json.gz`` can inflate to
4 GiB, a 0.6 MB SQLite file can compute 64 MiB per value. Every limit here stops the read with a
:class:`TraceFormatError` that names the file, the limit and the environment variable that
raises it (read at each load, so ``os.environ[...] = ...`` in a notebook takes effect at once):

``DYNPROF_NB_GZIP_RATIO`` (default 50)
    a ``.gz`` may inflate to at most this many times its own size (real traces: 5-20x);
``DYNPROF_NB_MAX_TEXT`` (default 8 GiB, or half the memory when less)
    and to at most this many bytes, whatever its size;
``DYNPROF_NB_DB_MAX_VALUE`` (default 16 MiB)
    the longest string or blob read from a database (SQLite's own length limit on the
    connection); a row holds at most the columns the reader selects (16 at most) times this;
``DYNPROF_NB_LOAD_MEMORY`` (default: the memory available when the load starts)
    what the text and tables held at once by one load may take.

Sizes accept a plain byte count or a suffix: ``512M``, ``16G``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from dynprof_nb.traces.errors import TraceFormatError

SNIFF_BYTES = 1 << 20  # binary data is looked for in the first megabyte
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes from ``"123"``, ``"500M"``, ``"2GB"``, ``"2GiB"`` (any case); ValueError for
    anything else, ``inf``, ``nan`` and negative sizes included."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    number = float(t[: len(t) - len(unit)].strip())
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"not a size: {text!r}")
    return int(number * _UNITS[unit])


def _env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = parse_size(raw)
    except ValueError:
        return default
    return value if value > 0 else default


def _available() -> int:
    """Memory a load may use: MemAvailable on Linux, else physical memory."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def gzip_ratio() -> int:
    return _env("DYNPROF_NB_GZIP_RATIO", 50)


def max_text() -> int:
    return _env("DYNPROF_NB_MAX_TEXT", min(8 << 30, max(_available() // 2, 1 << 30)))


def db_max_value() -> int:
    return _env("DYNPROF_NB_DB_MAX_VALUE", 16 << 20)


def load_memory() -> int:
    return _env("DYNPROF_NB_LOAD_MEMORY", _available())


def human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def inflate_limit(path: str | Path, compressed: int) -> tuple[int, str]:
    """The most bytes ``path`` (``compressed`` bytes of gzip) may inflate to, and the words of
    the limit that sets it, for the error."""
    ratio, cap = gzip_ratio(), max_text()
    by_ratio = max(compressed, 1) * ratio
    if by_ratio <= cap:
        return by_ratio, (
            f"{ratio}x its size of {human(compressed)} (set DYNPROF_NB_GZIP_RATIO to raise it)"
        )
    return cap, f"{human(cap)} (set DYNPROF_NB_MAX_TEXT to raise it)"


def too_big(path: str | Path, what: str, limit_words: str) -> TraceFormatError:
    return TraceFormatError(
        path,
        f"{what}: over the limit of {limit_words}",
        hint="a file this large for its kind is damaged or hostile",
    )


def check_memory(path: str | Path, need: int, what: str) -> None:
    """Refuse a load that would hold ``need`` bytes at once, beyond the load memory budget."""
    budget = load_memory()
    if need > budget:
        raise TraceFormatError(
            path,
            f"{what} would take about {human(need)} of memory, over the load budget of "
            f"{human(budget)}",
            hint="set DYNPROF_NB_LOAD_MEMORY (e.g. 32G) to raise it, or free memory",
        )
