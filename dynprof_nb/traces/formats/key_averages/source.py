"""PyTorch's ``prof.key_averages().table()`` saved as text (``*key_averages*.txt``): the ops
frame, one row per operator, from the table's Self CPU, CPU total and # of Calls columns.

The whole format is this module and its line in the registry (the worked example of
``docs/architecture.md``, "Adding a format"): it finds its files in a window directory itself
(:attr:`Source.find`), reads the ops frame from them (:attr:`Source.frames`, below the events'
and the Ascend and MindSpore tables' ops), and reads a lone file (:attr:`Source.read_file`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ...discover import WindowFiles
from ...errors import TraceFormatError
from ..base import Provides, Read, ReadContext, Source

_UNITS_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
_TIME = re.compile(r"^([0-9.]+)(ns|us|ms|s)$")


def _owns(p: Path) -> bool:
    return "key_averages" in p.name and p.suffix == ".txt"


def _find(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*key_averages*.txt") if p.is_file())


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
