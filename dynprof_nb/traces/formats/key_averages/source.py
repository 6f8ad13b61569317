"""PyTorch's ``prof.key_averages().table()`` saved as text, under any name: the ops frame, one
row per operator, from the table's Self CPU, CPU total and # of Calls columns.

A file is this format's by its content (a ``----`` rule line over a header naming ``Name``,
``Self CPU``, ``CPU total`` and ``# of Calls``, in its first KiB), not its name: people save
the table as ``ops.txt`` or ``prof.log``. A ``*key_averages*.txt`` is claimed whatever it holds,
so that a damaged one is an error about the table rather than "no source reads this file".

The whole format is this module and its line in the registry (the worked example of
``docs/architecture.md``, "Adding a format"): it finds its files in a window directory itself
(:attr:`Source.find`), reads the ops frame from them (:attr:`Source.frames`, below the events'
and the Ascend and MindSpore tables' ops), and reads a lone file (:attr:`Source.read_file`).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pandas as pd

from ...discover import WindowFiles
from ...errors import TraceFormatError
from ..base import Provides, Read, ReadContext, Source

_UNITS_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
_TIME = re.compile(r"^([0-9.]+)(ns|us|ms|s)$")


_HEADER = ("Name", "Self CPU", "CPU total", "# of Calls")
#: the table's rule and header are its first two lines; a KiB holds them at any column width
#: torch prints (and a planted huge file costs one small read)
_SNIFF_BYTES = 4096
_RULE = re.compile(r"^-+( +-+)+ *$")


def _named_as_table(p: Path) -> bool:
    return "key_averages" in p.name and p.suffix == ".txt"


def _is_table(p: Path) -> bool:
    """Whether ``p`` is a regular file that starts as a key_averages() table does. A FIFO or
    device is never opened (a read could block); unreadable is not a table."""
    try:
        if not stat.S_ISREG(os.stat(p).st_mode):
            return False
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            head = os.read(fd, _SNIFF_BYTES)
        finally:
            os.close(fd)
    except OSError:
        return False
    lines = head.decode("utf-8", "replace").splitlines()[:8]
    return any(
        _RULE.match(rule) is not None and all(name in header for name in _HEADER)
        for rule, header in zip(lines, lines[1:], strict=False)
    )


def _owns(p: Path) -> bool:
    return _named_as_table(p) or _is_table(p)


#: files of the other formats (and of none), never sniffed: a window directory holds many
_NOT_TABLES = {".json", ".gz", ".db", ".csv", ".parquet", ".pb", ".png", ".npy", ".so", ".wal"}
#: the most files of one directory sniffed (its top level, by name), so that loading a huge
#: folder by mistake costs a bounded number of small reads
_MAX_SNIFFED = 256


def _find(root: Path) -> list[Path]:
    """The window directory's saved tables, whatever their names (its top level only)."""
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    candidates = [
        p for p in entries if not p.name.startswith(".") and p.suffix.lower() not in _NOT_TABLES
    ]
    return [p for p in candidates[:_MAX_SNIFFED] if _owns(p) and p.is_file()]


def _detect(files: WindowFiles) -> bool:
    return bool(files.found.get("key_averages"))


def _us(text: str) -> float:
    m = _TIME.match(text.strip())
    if m is None:
        raise ValueError(f"not a time: {text!r}")
    return float(m.group(1)) * _UNITS_US[m.group(2)]


def _columns(rule: str) -> list[tuple[int, int]]:
    """The character spans of the table's columns, from its ``----  ----`` rule line."""
    return [m.span() for m in re.finditer(r"-+", rule)]


def read(path: Path) -> tuple[dict[str, pd.DataFrame], str]:
    """``({"ops": frame}, "table")`` from a saved key_averages table."""
    lines = path.read_text(errors="replace").splitlines()
    rules = [
        i
        for i, line in enumerate(lines)
        if line.startswith("-") and set(line.strip()) <= {"-", " "}
    ]
    if len(rules) < 3:
        raise TraceFormatError(
            path,
            "not a key_averages() table (no ---- rule lines)",
            hint="save str(prof.key_averages().table(row_limit=-1))",
        )
    spans = _columns(lines[rules[0]])
    header = [lines[rules[0] + 1][a:b].strip() for a, b in spans]
    need = ("Name", "Self CPU", "CPU total", "# of Calls")
    missing = [c for c in need if c not in header]
    if missing:
        raise TraceFormatError(
            path,
            f"the table has no {', '.join(missing)} column",
            hint="a CPU key_averages() table has Name, Self CPU, CPU total",
        )
    rows = []
    for line in lines[rules[1] + 1 : rules[2]]:
        cells = dict(zip(header, (line[a:b].strip() for a, b in spans), strict=True))
        rows.append(
            {
                "name": cells["Name"],
                "count": int(cells["# of Calls"]),
                "total_us": _us(cells["CPU total"]),
                "self_us": _us(cells["Self CPU"]),
            }
        )
    ops = pd.DataFrame(rows, columns=["name", "count", "total_us", "self_us"])
    ops["avg_us"] = ops["total_us"] / ops["count"].where(ops["count"] > 0)
    ops["min_us"] = float("nan")
    ops["max_us"] = float("nan")
    total_self = ops["self_us"].sum()
    ops["share"] = ops["self_us"] / total_self if total_self > 0 else float("nan")
    ops = ops.sort_values("self_us", ascending=False, ignore_index=True)
    return {"ops": ops}, "table"


def _ops(w: ReadContext) -> Read:
    """A window directory's table (the first, by name): the ops frame where neither the events
    nor an Ascend or MindSpore table give it."""
    p = w.files.found["key_averages"][0]
    frames, path = read(p)
    w.note("ops", [p], notes=["from a saved key_averages() table"])
    return frames["ops"], path


SOURCE = Source(
    name="key_averages",
    detect=_detect,
    owns=_owns,
    frames={"ops": Provides(4, _ops)},
    identity="none: a table of one process (rank and device unknown)",
    read_file=read,
    find=_find,
)
