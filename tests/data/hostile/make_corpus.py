"""Generate the hostile-input corpus (issue 20) into a folder: nothing large is committed.

Small files that cost a naive reader gigabytes or minutes, each paired with what the reader
must do with it. ``python tests/data/hostile/make_corpus.py OUT`` writes them and prints the
list; tests import :func:`make` (see tests/test_reliability_hostile.py). On disk it takes about
130 MB (the 2 GB file is sparse, the bombs are compressed).

Each case: the path to load (a file or a window folder), ``expect`` ("error": a
TraceFormatError whose message matches ``match``; "load": a loaded window; "either"), the
environment the load runs under (a budget set low so a small file crosses it) and ``secret``:
text of a file outside the window that no error may quote.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parents[1]
REAL_DB = (DATA / "ascend_real" / "db_level0" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
           / "ascend_pytorch_profiler_0.db")
EVENT = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1669783687464181,"dur":5}'
SECRET = "SECRET-CONTENT-9f3a"


@dataclass
class Case:
    name: str
    path: Path
    expect: str  # "error", "load" or "either"
    match: str = ""  # regex the TraceFormatError message must match
    env: dict = field(default_factory=dict)
    secret: str = ""  # must not appear in any message
    size_mb: float = 0.0  # of the text a reader would parse (for the linearity check)


def _db(out: Path, name: str) -> Path:
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    p = d / REAL_DB.name
    shutil.copyfile(REAL_DB, p)
    return p


def db_generated_strings(out: Path) -> Case:
    """0.6 MB whose STRING_IDS.value is a generated column: printf to 64 MiB, 40 rows (23.5 GB
    of RSS before the OOM killer in the issue)."""
    p = _db(out, "db_generated_strings")
    con = sqlite3.connect(p)
    con.executescript("""
        DROP TABLE STRING_IDS;
        CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, n INTEGER,
                                 value TEXT GENERATED ALWAYS AS (printf('%.*c', n, 'x')) VIRTUAL);
    """)
    con.executemany("INSERT INTO STRING_IDS (id, n) VALUES (?, ?)",
                    [(i, 64 << 20) for i in range(40)])
    con.commit()
    con.close()
    return Case("db_generated_strings", p, "error", "generated column")


def db_long_value(out: Path) -> Case:
    """A stored 3 MiB string in STRING_IDS, read under a 1 MiB value budget."""
    p = _db(out, "db_long_value")
    con = sqlite3.connect(p)
    sid = con.execute("SELECT min(id) FROM STRING_IDS").fetchone()[0]
    con.execute("UPDATE STRING_IDS SET value = ? WHERE id = ?", ("y" * (3 << 20), sid))
    con.commit()
    con.close()
    return Case("db_long_value", p, "error", r"longer than the limit of 1\.0 MiB.*"
                "DYNPROF_NB_DB_MAX_VALUE", env={"DYNPROF_NB_DB_MAX_VALUE": "1M"})


def db_wal(out: Path) -> tuple[Case, Path]:
    """A WAL-mode database copied with its -wal, which holds a committed delete of half the
    TASK rows (and a reference: the same delete, checkpointed into a plain file)."""
    work = out / "_wal_work"
    work.mkdir(parents=True, exist_ok=True)
    live = work / REAL_DB.name
    shutil.copyfile(REAL_DB, live)
    con = sqlite3.connect(live)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("DELETE FROM TASK WHERE rowid % 2 = 0")
    con.commit()
    d = out / "db_wal"
    d.mkdir(exist_ok=True)
    shutil.copyfile(live, d / live.name)  # copied while the writer holds it: WAL not merged
    shutil.copyfile(live.with_name(live.name + "-wal"), d / (live.name + "-wal"))
    con.close()
    ref = out / "db_wal_reference"
    ref.mkdir(exist_ok=True)
    shutil.copyfile(live, ref / live.name)  # closed: the delete is in the file itself now
    shutil.rmtree(work)
    return Case("db_wal", d / live.name, "load"), ref / live.name


def _member(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def gz_bomb(out: Path) -> Case:
    """A ~4 MB .json.gz that inflates to 4 GiB of valid JSON (whitespace inside traceEvents),
    made of gzip members so it is written in a second."""
    p = out / "gz_bomb.json.gz"
    block = _member(b" " * (64 << 20))
    with open(p, "wb") as fh:
        fh.write(_member(b'{"traceEvents":[' + EVENT))
        for _ in range(64):
            fh.write(block)
        fh.write(_member(b"]}"))
    return Case("gz_bomb", p, "error", r"inflates: over the limit of 50x.*DYNPROF_NB_GZIP_RATIO")


def gz_zeros(out: Path) -> Case:
    """1 GiB of zero bytes, gzipped to ~1 MB and named .json.gz."""
    p = out / "gz_zeros.json.gz"
    block = _member(b"\x00" * (64 << 20))
    with open(p, "wb") as fh:
        for _ in range(16):
            fh.write(block)
    return Case("gz_zeros", p, "error", "binary data")


def sparse_zeros(out: Path) -> Case:
    """A 2 GB sparse file of zeros named .json (no disk used)."""
    p = out / "sparse_zeros.json"
    with open(p, "wb") as fh:
        fh.truncate(2 << 30)
    return Case("sparse_zeros", p, "error", "binary data")


def whitespace(out: Path, where: str, mb: int) -> Case:
    """Valid JSON with ``mb`` MB of whitespace in the event array: before the first event,
    between events (4 KB gaps), or after the last one."""
    p = out / f"ws_{where}_{mb}.json"
    n = mb << 20
    with open(p, "wb") as fh:
        fh.write(b'{"traceEvents": [')
        if where == "lead":
            fh.write(b" " * n + EVENT)
        elif where == "tail":
            fh.write(EVENT + b" " * n)
        else:
            fh.write(EVENT)
            gap = b" \n\t" * 1365
            for _ in range(n // (len(gap) + len(EVENT) + 1)):
                fh.write(gap + b"," + EVENT)
        fh.write(b"]}")
    return Case(f"ws_{where}_{mb}", p, "load", size_mb=p.stat().st_size / 2**20)


GAP_SIDES = {  # where one long whitespace run sits between (or inside) two events
    "before": (EVENT, b",", EVENT),  # } <run> , {   (the layout of issue 32)
    "after": (EVENT + b",", b"", EVENT),  # } , <run> {
    "both": (EVENT, b"\n,", EVENT),  # } <run> , <run> {
    "inside": (EVENT + b',{"ph":"X",', b"", EVENT[10:]),  # {"ph":"X", <run> "cat": ...}
}


def whitespace_gap(out: Path, mb: float, side: str = "before") -> Case:
    """Valid JSON with one run of ``mb`` MB of whitespace between two events (``side``: see
    :data:`GAP_SIDES`; "both" splits it around the comma). A reader that searches the run
    again for each block it reads takes time quadratic in ``mb`` (58 s at 256 MB)."""
    p = out / f"ws_gap_{side}_{mb:g}.json"
    first, mid, last = GAP_SIDES[side]
    run = b" \n\t\r" * (int(mb * (1 << 20)) // 4)
    with open(p, "wb") as fh:
        fh.write(b'{"traceEvents": [' + first)
        if side == "both":
            fh.write(run[: len(run) // 2] + mid + run[len(run) // 2 :])
        else:
            fh.write(run + mid)
        fh.write(last.replace(b"464181", b"464191") + b"]}")
    return Case(f"ws_gap_{side}_{mb:g}", p, "load", size_mb=p.stat().st_size / 2**20)


def deep_nesting(out: Path) -> Case:
    """One event whose args nest a million arrays deep (valid JSON)."""
    p = out / "deep_nesting.json"
    depth = 1_000_000
    with open(p, "wb") as fh:
        fh.write(b'{"traceEvents":[' + EVENT + b',{"ph":"X","name":"deep","ts":1,"dur":1,'
                 b'"args":' + b"[" * depth + b"]" * depth + b"}]}")
    return Case("deep_nesting", p, "either", "nest|recursion|depth")


def long_name(out: Path) -> Case:
    """One event whose name is a 32 MiB string."""
    p = out / "long_name.json"
    with open(p, "wb") as fh:
        fh.write(b'{"traceEvents":[' + EVENT + b',{"ph":"X","name":"' + b"n" * (32 << 20)
                 + b'","ts":2,"dur":1}]}')
    return Case("long_name", p, "load", size_mb=32)


def symlink_out(out: Path) -> Case:
    """A window whose trace.json is a symlink to a file outside it (a valid trace whose event
    names, and a text that looks like /etc/passwd, must never be read or quoted)."""
    outside = out / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.json").write_text(json.dumps(
        {"traceEvents": [{"ph": "X", "name": SECRET, "ts": 1, "dur": 1, "pid": 1, "tid": 1}]}))
    (outside / "passwd").write_text(f"root:x:0:0:{SECRET}:/root:/bin/sh\n")
    win = out / "symlink_window" / "rank0_start1_stop2"
    (win / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True, exist_ok=True)
    for link, target in ((win / "trace.json", outside / "secret.json"),
                         (win / "ASCEND_PROFILER_OUTPUT" / "trace_view.json",
                          outside / "passwd")):
        if link.is_symlink():
            link.unlink()
        os.symlink(target, link)
    return Case("symlink_out", win, "error", "no trace files found", secret=SECRET)


def make(out: Path) -> tuple[list[Case], Path]:
    """Write the corpus into ``out``; returns the cases and the WAL reference database."""
    out.mkdir(parents=True, exist_ok=True)
    wal, wal_ref = db_wal(out)
    cases = [db_generated_strings(out), db_long_value(out), wal, gz_bomb(out), gz_zeros(out),
             sparse_zeros(out), deep_nesting(out), long_name(out), symlink_out(out)]
    cases += [whitespace(out, where, mb) for where in ("lead", "between", "tail")
              for mb in (8, 32)]
    cases += [whitespace_gap(out, mb) for mb in (8, 32)]
    return cases, wal_ref


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py OUT_DIR")
    made, _ = make(Path(sys.argv[1]))
    for c in made:
        print(f"{c.name:22s} {c.expect:6s} {c.path}")
