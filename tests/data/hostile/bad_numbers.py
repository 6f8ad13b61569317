"""Windows with impossible numbers (issue 42 item 3): timestamps and durations that are NaN,
infinite, negative, beyond int64 ns or days away from the rest, and a repeated step id, in
each format a reader reads. ``python tests/data/hostile/bad_numbers.py OUT`` writes them;
tests import :func:`make` (tests/traces/test_bad_numbers.py).

The two Kineto traces are committed beside this file (a few KB, written by
:func:`kineto_events`); the other cases are copies of real fixtures from tests/data, damaged
here (sqlite for the .db), so nothing large is committed.

Each case says how many rows of each frame must go (``dropped``) and which words the
warning must hold (``words``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent
T0 = 1669783687464181  # µs, a real Kineto trace's first ts
#: the committed Kineto traces
NONSTANDARD = HERE / "bad_numbers_nonstandard.pt.trace.json"  # NaN/Infinity tokens: repaired
PLAIN = HERE / "bad_numbers_plain.pt.trace.json"  # valid JSON: the streamed pass takes it


@dataclass
class Case:
    name: str
    path: Path  # a file (load_trace) or a window folder (load_window)
    dropped: dict[str, int]  # frame -> rows that must go
    words: list[str] = field(default_factory=list)  # in the warning's text
    rows: dict[str, int] = field(default_factory=dict)  # frame -> rows that must stay


def kineto_events(nonstandard: bool) -> list[dict]:
    """50 ops in one step (and the step's marker twice), with 6 impossible rows."""
    evs: list[dict] = [
        {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 3}", "pid": 1, "tid": 1,
         "ts": T0 + 10 * i, "dur": 5}
        for i in range(50)
    ]
    marker = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
              "tid": 1, "ts": T0, "dur": 600}
    evs += [marker, dict(marker)]  # a repeated step marker
    evs[3]["ts"] = 1e300  # beyond int64 ns
    evs[4]["ts"] = float("nan") if nonstandard else -5  # NaN / negative
    evs[5]["ts"] = float("inf") if nonstandard else T0 + 10**13  # inf / 116 days later
    evs[6]["dur"] = -7
    evs[7]["dur"] = float("inf") if nonstandard else 1e300
    evs[8]["dur"] = float("nan") if nonstandard else 10**12  # NaN / 11.6 days
    return evs


def write_kineto() -> None:
    """(Re)write the two committed Kineto traces."""
    NONSTANDARD.write_text(json.dumps({"traceEvents": kineto_events(True)}))
    PLAIN.write_text(json.dumps({"traceEvents": kineto_events(False)}))


def builtin_window(out: Path) -> Path:
    """A built-in backend window (trace.json with otherData) holding the plain trace's rows."""
    d = out / "builtin" / "rank0_start1_stop2"
    d.mkdir(parents=True, exist_ok=True)
    doc = {"traceEvents": kineto_events(False), "otherData": {"backend": "builtin"}}
    (d / "trace.json").write_text(json.dumps(doc))
    return d


def db_window(out: Path) -> Path:
    """A real torch_npu .db window with a repeated STEP_TIME row and infinite times in TASK,
    PYTORCH_API and COMMUNICATION_OP (sqlite stores NaN as NULL; inf CASTs to int64's ends)."""
    src = DATA / "ascend_real" / "db_level0" / "rank0_ascend_pt"
    d = out / "db" / "rank0_ascend_pt"
    shutil.copytree(src, d)
    db = d / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    con = sqlite3.connect(db)
    con.executescript("""
        INSERT INTO STEP_TIME SELECT * FROM STEP_TIME;
        UPDATE TASK SET startNs = 9e999 WHERE rowid IN (SELECT rowid FROM TASK LIMIT 3);
        UPDATE TASK SET endNs = -9e999
            WHERE rowid IN (SELECT rowid FROM TASK LIMIT 2 OFFSET 10);
        UPDATE PYTORCH_API SET startNs = 9e999
            WHERE rowid IN (SELECT rowid FROM PYTORCH_API LIMIT 2);
        UPDATE COMMUNICATION_OP SET endNs = 9e999
            WHERE rowid IN (SELECT rowid FROM COMMUNICATION_OP LIMIT 1);
    """)
    con.commit()
    con.close()
    return d


def text_window(out: Path) -> Path:
    """A real torch_npu text window whose kernel_details.csv holds an infinite, a NaN and a
    negative duration and a start of 1e300, and whose step_trace_time.csv repeats its step."""
    src = DATA / "ascend_real" / "text_level0" / "rank0_ascend_pt"
    d = out / "text" / "rank0_ascend_pt"
    shutil.copytree(src, d)
    o = d / "ASCEND_PROFILER_OUTPUT"
    lines = (o / "kernel_details.csv").read_text().splitlines(keepends=True)
    for i, (col, value) in enumerate(((5, "inf"), (5, "nan"), (5, "-5"), (4, "1e300"))):
        cells = lines[2 + i].split(",")
        cells[col] = value
        lines[2 + i] = ",".join(cells)
    (o / "kernel_details.csv").write_text("".join(lines))
    steps = (o / "step_trace_time.csv").read_text().splitlines(keepends=True)
    (o / "step_trace_time.csv").write_text("".join([*steps, steps[1]]))
    return d


def mindspore_window(out: Path) -> Path:
    """A real MindSpore CPU window whose trace_view.json (MindSpore writes every ts and dur as
    text) holds a negative and an infinite dur and a ts of 1e300."""
    src = DATA / "mindspore_cpu" / "rank0_start5_stop8"
    d = out / "mindspore" / "rank0_start5_stop8"
    shutil.copytree(src, d)
    [trace] = d.glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json")
    doc = json.loads(trace.read_text())
    ops = [e for e in doc if e.get("ph") == "X"]
    ops[0]["dur"], ops[1]["ts"], ops[2]["dur"] = "-3", "1e300", "inf"
    trace.write_text(json.dumps(doc))
    return d


def make(out: Path) -> list[Case]:
    """Every case, written under ``out`` (the Kineto traces: the committed files)."""
    out.mkdir(parents=True, exist_ok=True)
    kin = ["bad_numbers_", "events:", "dropped 6 rows"]
    return [
        Case("kineto_nonstandard", NONSTANDARD, {"events": 6}, kin + ["ts_ns", "dur_ns"],
             {"events": 46}),
        Case("kineto_plain", PLAIN, {"events": 6}, kin + ["implausible", "dur_ns"],
             {"events": 46}),
        Case("builtin", builtin_window(out), {"events": 6}, ["trace.json", "dropped 6 rows"],
             {"events": 46}),
        Case("db", db_window(out), {"events": 6, "kernels": 4, "communication": 1},
             ["ascend_pytorch_profiler_0.db", "STEP_TIME", "repeated a step"]),
        Case("text", text_window(out), {"kernels": 4, "steps": 1},
             ["kernel_details.csv", "duration_us", "repeated a step"]),
        Case("mindspore", mindspore_window(out), {"events": 3},
             ["trace_view.json", "events:", "dropped 3 rows"], {"events": 78}),
    ]


if __name__ == "__main__":
    write_kineto()
    for case in make(Path(sys.argv[1])):
        print(case.name, case.path)
