"""Variants of the real torch_npu windows in tests/data/ascend_real, built in a temporary folder
the way the held-out windows differ from them: more ranks on devices that are not the ranks,
trimmed ranks (only communication and step data, as a trimmed MindSpeed upload keeps), and
databases of other profiler levels or CANN versions (optional tables absent, unknown tables and
columns added). Every variant is a copy of real files edited with plain SQL or file deletion;
no number is made up."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from testdata import fixtures_dir

REAL = fixtures_dir() / "ascend_real"
DB = REAL / "db_level0"
CLUSTER = REAL / "cluster_2rank"

# what a trimmed rank keeps: its communication ops, its steps, and what names and identifies them
TRIMMED_DB_KEEPS = frozenset(
    {"COMMUNICATION_OP", "STEP_TIME", "STRING_IDS", "RANK_DEVICE_MAP", "META_DATA", "NPU_INFO"}
)
TRIMMED_TEXT_KEEPS = frozenset(
    {"communication.json", "communication_matrix.json", "step_trace_time.csv"}
)


def sql(db: Path, script: str) -> None:
    con = sqlite3.connect(db)
    try:
        con.executescript(script)
        con.commit()
    finally:
        con.close()


def sql_rows(db: Path, query: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def db_file(rank_dir: Path) -> Path:
    return next((rank_dir / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler*.db"))


def _relabel(rank_dir: Path, rank: int) -> None:
    """profiler_info_N.json says the job's rank (msprof-analyze reads N from its name)."""
    info = next(rank_dir.glob("profiler_info*.json"))
    doc = json.loads(info.read_text())
    doc["rank_id"] = rank
    info.unlink()
    (rank_dir / f"profiler_info_{rank}.json").write_text(json.dumps(doc, indent=4))


def db_rank(src: Path, dst: Path, rank: int, device: int, trimmed: bool = False) -> Path:
    """A copy of one real db rank as the job's ``rank`` on NPU ``device``; ``trimmed`` keeps
    only the communication ops and steps (the kernel, host API and memory tables dropped)."""
    shutil.copytree(src, dst)
    _relabel(dst, rank)
    db = db_file(dst)
    db = db.rename(db.with_name(f"ascend_pytorch_profiler_{rank}.db"))
    script = [f"UPDATE RANK_DEVICE_MAP SET rankId = {rank}, deviceId = {device};"]
    con = sqlite3.connect(db)
    try:
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
            if trimmed and t not in TRIMMED_DB_KEEPS:
                script.append(f'DROP TABLE "{t}";')
            elif "deviceId" in cols and t != "RANK_DEVICE_MAP":
                script.append(f'UPDATE "{t}" SET deviceId = {device};')
        if "NPU_INFO" in [r[0] for r in con.execute("SELECT name FROM sqlite_master")]:
            script.append(f"UPDATE NPU_INFO SET id = {device};")
    finally:
        con.close()
    sql(db, "\n".join(script))
    sql(db, "VACUUM;")
    return dst


def text_rank(src: Path, dst: Path, rank: int, device: int, trimmed: bool = False) -> Path:
    """A copy of one real text rank as the job's ``rank`` on NPU ``device`` (its PROF_*/device_N
    folder); ``trimmed`` keeps only communication*.json and step_trace_time.csv."""
    shutil.copytree(src, dst)
    _relabel(dst, rank)
    (dst / "PROF_000001_20250109120000000_ABCDEFGHIJ" / f"device_{device}").mkdir(parents=True)
    if trimmed:
        for p in (dst / "ASCEND_PROFILER_OUTPUT").iterdir():
            if p.name not in TRIMMED_TEXT_KEEPS:
                p.unlink()
    return dst


def four_rank_job(root: Path, form: str, devices=(0, 1, 4, 5), trimmed=(2, 3)) -> Path:
    """A 4-rank MindSpeed-style job from the real 2-rank one: ranks 0-3 on ``devices``, the
    ``trimmed`` ranks reduced to communication and step data. Directory names carry a pid and
    timestamp, not the rank, as torch_npu names them."""
    root.mkdir(parents=True, exist_ok=True)
    for rank, device in enumerate(devices):
        name = f"node1_{4000 + rank}_2025010912000{rank}123_ascend_pt"
        if form == "db":
            db_rank(DB / f"rank{rank % 2}_ascend_pt", root / name, rank, device, rank in trimmed)
        else:
            text_rank(CLUSTER / f"test_rank_{rank % 2}", root / name, rank, device, rank in trimmed)
    return root


def one_rank(root: Path, rank: int = 0) -> tuple[Path, Path]:
    """A copy of one real db rank: (its folder, its profiler db)."""
    d = root / f"rank{rank}_ascend_pt"
    shutil.copytree(DB / f"rank{rank}_ascend_pt", d)
    return d, db_file(d)
