"""Real torch_npu windows (tests/data/ascend_real): the .db reader against the raw SQL, the text
reader against its own CSV/JSON, rank and device identity, trimmed ranks and damaged databases."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import warnings
from pathlib import Path

import pandas as pd
import pytest
from ascend_variants import sql_rows
from testdata import fixtures_dir

import dynprof_nb
from dynprof_nb.traces import TraceFormatError, TraceRepairWarning

REAL = fixtures_dir() / "ascend_real"
DB = REAL / "db_level0"
TEXT = REAL / "text_level0"
CLUSTER = REAL / "cluster_2rank"


def _db(rank: int, root: Path = DB) -> Path:
    return (
        root
        / f"rank{rank}_ascend_pt"
        / "ASCEND_PROFILER_OUTPUT"
        / f"ascend_pytorch_profiler_{rank}.db"
    )


def test_db_window_loads_every_frame_from_the_db():
    w = dynprof_nb.load_window(DB)
    assert w.ranks == [0, 1] and w.devices == {0: 0, 1: 1} and w.format == "db"
    for kind in ("events", "kernels", "steps", "communication", "memory"):
        frame = getattr(w, kind)
        assert len(frame) and sorted(frame["rank"].unique()) == [0, 1], kind
        assert w.sources[kind]["format"] == ["db"], kind
        assert "device" in frame.columns, kind
    assert set(w.kernels["device"].dropna()) == {0, 1}


def test_db_kernels_are_the_raw_tasks_exactly():
    w = dynprof_nb.load_window(DB).rank_window(0)
    k = w.kernels
    raw = sql_rows(
        _db(0),
        "SELECT t.startNs, t.endNs, s.value FROM COMPUTE_TASK_INFO c JOIN TASK t "
        "ON t.globalTaskId = c.globalTaskId JOIN STRING_IDS s ON s.id = c.name "
        "ORDER BY t.startNs",
    )
    comp = k[k["core"] != "HCCL"]
    assert len(comp) == len(raw) == 187
    assert comp["start_ns"].tolist() == [r[0] for r in raw]  # exact int64 ns
    assert comp["duration_ns"].tolist() == [r[1] - r[0] for r in raw]
    assert comp["name"].astype(str).tolist() == [r[2] for r in raw]
    assert str(k["start_ns"].dtype) == "Int64" and str(k["name"].dtype) == "category"
    ops = sql_rows(_db(0), "SELECT count(*) FROM COMMUNICATION_OP")[0][0]
    assert (k["core"] == "HCCL").sum() == ops == 4
    assert set(k["step"].dropna()) == {50}


def test_text_integer_times_stay_exact():
    """PYTORCH_API stores startNs/endNs as TEXT: they must come out as exact int64."""
    assert sql_rows(_db(0), "SELECT DISTINCT typeof(startNs) FROM PYTORCH_API") == [("text",)]
    ev = dynprof_nb.load_window(DB).rank_window(0).events
    first = int(sql_rows(_db(0), "SELECT min(CAST(startNs AS INTEGER)) FROM PYTORCH_API")[0][0])
    py = ev[ev["process"] == "Python"]
    assert py["ts_ns"].min() == first and py["ts_ns"].dtype == "int64"


def test_db_and_text_frames_have_the_same_columns_and_dtypes():
    d, t = dynprof_nb.load_window(DB), dynprof_nb.load_window(TEXT)
    for kind in ("kernels", "steps", "communication", "memory", "events"):
        a, b = getattr(d, kind), getattr(t, kind)
        common = [c for c in a.columns if c in b.columns]
        assert len(common) >= 8, kind
        for c in common:
            assert str(a[c].dtype) == str(b[c].dtype) or {str(a[c].dtype), str(b[c].dtype)} <= {
                "object",
                "str",
                "category",
            }, (kind, c, a[c].dtype, b[c].dtype)


def test_db_steps_equal_analysis_db_and_the_tasks():
    w = dynprof_nb.load_window(DB)
    st = w.steps.set_index("rank")
    for r in (0, 1):
        ana = _db(r).parent / "analysis.db"
        row = sql_rows(
            ana,
            "SELECT step, computing, communication_not_overlapped, overlapped, "
            "communication, free FROM StepTraceTime",
        )[0]
        assert st.loc[r, "step"] == int(row[0])
        assert st.loc[r, "computing_us"] == pytest.approx(row[1])
        assert st.loc[r, "free_us"] == pytest.approx(row[5])
        start = sql_rows(_db(r), "SELECT startNs FROM STEP_TIME")[0][0]
        assert st.loc[r, "start_ns"] == start
    from dynprof_nb.analysis.ranks import step_breakdown_from_tasks

    mine = step_breakdown_from_tasks(w).set_index("rank")
    for col in ("computing_us", "communication_us", "overlapped_us", "free_us"):
        assert mine[col].to_numpy() == pytest.approx(st[col].to_numpy(), rel=1e-3), col


def test_text_kernels_and_steps_equal_their_csv():
    w = dynprof_nb.load_window(TEXT)
    for r in (0, 1):
        out = TEXT / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        raw = pd.read_csv(out / "kernel_details.csv")
        k = w.kernels[w.kernels["rank"] == r]
        assert len(k) == len(raw)
        assert k["duration_us"].sum() == pytest.approx(raw["Duration(us)"].sum())
        st = pd.read_csv(out / "step_trace_time.csv")
        mine = w.steps[w.steps["rank"] == r]
        assert mine["computing_us"].tolist() == pytest.approx(st["Computing"].tolist())
        assert mine["free_us"].tolist() == pytest.approx(st["Free"].tolist())


def test_cluster_text_window_equals_msprof_analyze_outputs_shipped_with_it():
    """cluster_2rank ships msprof-analyze's own cluster_analysis_output for 16 ranks; our two
    ranks' steps and communication ops must equal its rows for ranks 0 and 1."""
    w = dynprof_nb.load_window(CLUSTER)
    assert w.ranks == [0, 1]
    ref = pd.read_csv(CLUSTER / "cluster_analysis_output" / "cluster_step_trace_time.csv")
    ref = ref[ref["Type"] == "rank"].assign(rank=lambda f: f["Index"].astype(int)).set_index("rank")
    br = w.step_breakdown().set_index("rank")
    for r in (0, 1):
        for ours, theirs in (
            ("computing_us", "Computing"),
            ("free_us", "Free"),
            ("communication_not_overlapped_us", "Communication(Not Overlapped)"),
            ("overlapped_us", "Overlapped"),
        ):
            assert br.loc[r, ours] == pytest.approx(float(ref.loc[r, theirs]), rel=1e-9)
    cc = dynprof_nb.load_trace(CLUSTER / "cluster_analysis_output" / "cluster_communication.json")
    ref_c = cc.communication
    ours = w.communication[w.communication["name"].notna()]
    for r in (0, 1):
        a = ours[ours["rank"] == r].set_index(["step", "name"])["elapse_us"].sort_index()
        b = (
            ref_c[(ref_c["rank"] == r) & ref_c["name"].notna()]
            .set_index(["step", "name"])["elapse_us"]
            .sort_index()
        )
        assert len(b) > 0 and b.index.isin(a.index).all()  # the reference was trimmed upstream
        assert a.reindex(b.index).to_numpy() == pytest.approx(b.to_numpy())


def test_matrix_text_reader_equals_the_json():
    w = dynprof_nb.load_window(CLUSTER)
    links = w.communication_links()
    doc = json.loads(
        (
            CLUSTER / "test_rank_0" / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json"
        ).read_text()
    )
    n = sum(
        1
        for step in doc.values()
        for kind in step.values()
        for op, v in kind.items()
        if "@" in op
        for _ in v
    )
    assert (links["rank"] == 0).sum() == n
    m = w.communication_matrix()
    assert len(m) and (m["src_rank"] != m["dst_rank"]).all()
    assert set(m["transport"]) <= {"HCCS", "RDMA", "SDMA", "PCIE", "LOCAL"}


def _copy_rank(src: Path, dst: Path, rank: int, device: int) -> None:
    shutil.copytree(src, dst)
    for p in dst.glob("profiler_info*.json"):
        p.unlink()
    (dst / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}))
    (dst / "profiler_metadata.json").write_text(json.dumps({"distributed_args": {"rank": rank}}))
    (dst / "PROF_000001_20250109_ABC" / f"device_{device}").mkdir(parents=True)


def test_ranks_are_the_jobs_ranks_not_device_ids(tmp_path: Path):
    """A 4-rank job on devices 0, 1, 4, 5 shows 4 ranks (0-3) and a separate device column."""
    job = tmp_path / "job"
    job.mkdir()
    for rank, device in enumerate((0, 1, 4, 5)):
        _copy_rank(
            TEXT / f"rank{rank % 2}_ascend_pt", job / f"host_dev{device}_ascend_pt", rank, device
        )
    w = dynprof_nb.load_window(job)
    assert w.ranks == [0, 1, 2, 3]
    assert w.devices == {0: 0, 1: 1, 2: 4, 3: 5}
    st = w.steps
    assert sorted(st["rank"].unique()) == [0, 1, 2, 3]
    assert dict(zip(st["rank"], st["device"], strict=True)) == {0: 0, 1: 1, 2: 4, 3: 5}
    assert sorted(w.kernels["rank"].unique()) == [0, 1, 2, 3]


def test_trimmed_rank_loads_what_it_has_and_says_what_is_missing(tmp_path: Path):
    job = tmp_path / "job"
    shutil.copytree(DB, job)
    trimmed = job / "rank2_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    trimmed.mkdir(parents=True)
    src = CLUSTER / "test_rank_1" / "ASCEND_PROFILER_OUTPUT"
    for name in ("step_trace_time.csv", "communication.json"):
        shutil.copy(src / name, trimmed / name)
    (trimmed.parent / "profiler_info_2.json").write_text(json.dumps({"rank_id": 2}))
    w = dynprof_nb.load_window(job)
    assert w.ranks == [0, 1, 2]
    assert sorted(w.steps["rank"].unique()) == [0, 1, 2]
    assert 2 in set(w.communication["rank"])
    k = w.kernels
    assert sorted(k["rank"].unique()) == [0, 1]
    missing = w.sources["kernels"]["missing"]
    assert list(missing) == [2] and "step_trace_time.csv" in missing[2]
    assert w.sources["kernels"]["format"] == ["db"]


# ---- damaged databases ---------------------------------------------------------------------
def _damaged(tmp_path: Path, sql: str | None = None) -> Path:
    d = tmp_path / "w"
    shutil.copytree(DB / "rank0_ascend_pt", d / "rank0_ascend_pt")
    db = _db(0, d)
    if sql:
        con = sqlite3.connect(db)
        con.executescript(sql)
        con.commit()
        con.close()
    return d


def test_truncated_db_is_a_clear_error(tmp_path: Path):
    d = _damaged(tmp_path)
    db = _db(0, d)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    with pytest.raises(TraceFormatError) as exc:
        dynprof_nb.load_window(d / "rank0_ascend_pt").kernels  # noqa: B018
    assert db.name in str(exc.value)
    db.write_bytes(data[:50])
    with pytest.raises(TraceFormatError, match="SQLite"):
        dynprof_nb.load_trace(db)


def test_missing_task_table_is_a_clear_error(tmp_path: Path):
    d = _damaged(tmp_path, "DROP TABLE TASK;")
    w = dynprof_nb.load_window(d / "rank0_ascend_pt")
    with pytest.raises(TraceFormatError, match="table TASK is missing"):
        w.kernels  # noqa: B018
    assert len(w.steps) == 1  # what does not need TASK still loads (analysis.db)


def test_missing_compute_info_is_a_repaired_load_with_a_warning(tmp_path: Path):
    d = _damaged(tmp_path, "DROP TABLE COMPUTE_TASK_INFO;")
    w = dynprof_nb.load_window(d / "rank0_ascend_pt")
    with pytest.warns(TraceRepairWarning, match="COMPUTE_TASK_INFO"):
        k = w.kernels
    assert len(k) > 0 and "COMPUTE_TASK_INFO" in " ".join(w.sources["kernels"]["notes"])


def test_renamed_column_is_a_clear_error(tmp_path: Path):
    d = _damaged(tmp_path, "ALTER TABLE TASK RENAME COLUMN startNs TO start_ns;")
    w = dynprof_nb.load_window(d / "rank0_ascend_pt")
    with pytest.raises(TraceFormatError, match="TASK has no column startNs"):
        w.kernels  # noqa: B018


def test_wal_db_in_a_read_only_folder_loads_and_writes_nothing(tmp_path: Path):
    d = _damaged(tmp_path, "PRAGMA journal_mode=WAL; CREATE TABLE _x(a); DROP TABLE _x;")
    out = _db(0, d).parent
    for extra in out.glob("*-wal"):
        extra.unlink()
    for extra in out.glob("*-shm"):
        extra.unlink()
    with open(_db(0, d), "rb") as fh:
        assert fh.read(20)[18:20] == b"\x02\x02"  # WAL mode in the header
    before = sorted(p.name for p in out.iterdir())
    os.chmod(out, 0o555)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            w = dynprof_nb.load_window(d / "rank0_ascend_pt").load_all()
        assert len(w.kernels) == 191
    finally:
        os.chmod(out, 0o755)
    assert sorted(p.name for p in out.iterdir()) == before  # no -wal / -shm written


def test_load_trace_reads_a_single_db_with_its_rank_and_device():
    w = dynprof_nb.load_trace(_db(1))
    assert (w.rank, w.device, w.format) == (1, 1, "db")
    assert len(w.kernels) == 191 and w.steps["step"].tolist() == [50]


def test_msprof_full_db_loads():
    w = dynprof_nb.load_trace(CLUSTER / "full_db" / "msprof_0.db")
    assert len(w.kernels) == 11 and w.device == 2
    assert w.kernels["start_ns"].notna().all()


def test_mindspore_db_layout_is_read(tmp_path: Path):
    """MindSpore 2.7 on an NPU moves msprof's msprof_*.db to
    ASCEND_PROFILER_OUTPUT/ascend_mindspore_profiler[_N].db (no _0 suffix on rank 0) beside
    communication_analyzer.db; on CPU it writes no database at all (docs/npu.md)."""
    out = tmp_path / "host_1_20250101_ascend_ms" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(CLUSTER / "full_db" / "msprof_0.db", out / "ascend_mindspore_profiler.db")
    w = dynprof_nb.load_window(tmp_path)
    assert w.framework == "mindspore" and w.format == "db"
    assert len(w.kernels) == 11 and w.sources["kernels"]["format"] == "db"
    assert list(out.iterdir()) == [out / "ascend_mindspore_profiler.db"]  # nothing written beside


def test_mixed_numeric_columns_are_not_truncated(tmp_path: Path):
    """NUMERIC columns can mix integers and reals row by row (COMMUNICATION_OP.count): none may
    be truncated to an integer because the first row happened to be one."""
    d = _damaged(tmp_path, "UPDATE COMMUNICATION_OP SET count = 2.5 WHERE opId = 2;")
    w = dynprof_nb.load_window(d / "rank0_ascend_pt")
    from dynprof_nb.traces.formats.ascend.db import AscendDb

    ops = AscendDb(_db(0, d))._comm_ops().set_index("op_id")
    assert ops.loc[2, "count"] == 2.5 and ops.loc[1, "count"] == 4097000
    assert len(w.communication) == 4
