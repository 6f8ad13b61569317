"""Held-out-like variants of the real torch_npu windows (built by ascend_variants.py from
tests/data/ascend_real): a 4-rank job on devices 0, 1, 4, 5 with two trimmed ranks, in db and text
form, and databases of other profiler levels and CANN versions. Each loads what it has, says
what it lacks in ``sources``, and agrees with msprof-analyze 26.2.0 where it runs on the files."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import ascend_variants as av
import msprof
import pandas as pd
import pytest

import dynprof_nb
from dynprof_nb.analysis.ranks import compare
from dynprof_nb.traces import TraceFormatError, TraceRepairWarning

pytestmark = pytest.mark.timeout(600)
FRAMES = ("events", "kernels", "steps", "communication", "memory")


def _oracle(root: Path) -> dict:
    """compute_op_sum and hccl_sum per rank, and the ClusterStepTraceTime of the default mode."""
    for recipe in ("compute_op_sum", "hccl_sum", None):
        msprof.run(root, recipe)
    out = root / "cluster_analysis_output"
    st = msprof.cluster_step_trace(root)
    st = st[st["type"] == "rank"].assign(
        rank=lambda f: f["index"].astype(int), step=lambda f: f["step"].astype(int)
    )
    return {
        "ops": pd.read_csv(
            out / "ComputeOpSum" / "rank_stats_by_optype.csv", keep_default_na=False
        ).rename(columns={"Rank": "rank", "OpType": "type", "TaskType": "core"}),
        "hccl": pd.read_csv(out / "HcclSum" / "rank_stats.csv", keep_default_na=False).rename(
            columns={"Rank": "rank", "OpType": "type"}
        ),
        "steps": st,
    }


def _agrees_with_msprof(w, oracle: dict, kernel_ranks: set[int], ranks: set[int]) -> None:
    """Kernels and communication counts exact and times within 0.1%, step breakdown within
    1% (the held-out criteria), on the ranks each side has."""
    ops = w.compute_ops()
    m = compare(
        ops, oracle["ops"], ["rank", "type", "core"], {"count": "Count", "sum_us": "Sum(Us)"}
    )
    assert len(m) == len(oracle["ops"]) == len(ops) and set(ops["rank"]) == kernel_ranks
    assert (m["count"] == m["count_msprof"]).all() and m["sum_us_rel_diff"].abs().max() < 1e-3
    hc = w.communication_ops()
    m = compare(
        hc, oracle["hccl"], ["rank", "type"], {"count": "Count", "sum_us": "Sum(Us)"}
    )
    assert len(m) == len(oracle["hccl"]) == len(hc) and set(hc["rank"]) == ranks
    assert (m["count"] == m["count_msprof"]).all() and m["sum_us_rel_diff"].abs().max() < 1e-3
    cols = {
        "computing_us": "computing",
        "communication_not_overlapped_us": "communication_not_overlapped",
        "overlapped_us": "overlapped",
        "free_us": "free",
    }
    m = compare(w.step_breakdown(), oracle["steps"], ["rank", "step"], cols)
    assert len(m) == len(oracle["steps"]) == len(ranks)
    assert m.filter(like="_rel_diff").abs().max().max() < 0.01, m


# ---- a 4-rank MindSpeed-style job with trimmed ranks ------------------------------------------
@pytest.fixture(scope="module")
def db_job(tmp_path_factory) -> Path:
    return av.four_rank_job(tmp_path_factory.mktemp("db4") / "job", "db")


def test_four_rank_db_job_lists_its_ranks_devices_and_what_is_missing(db_job: Path):
    w = dynprof_nb.load_window(db_job)
    assert w.format == "db" and w.ranks == [0, 1, 2, 3]
    assert w.devices == {0: 0, 1: 1, 2: 4, 3: 5}
    for kind in FRAMES:
        f = getattr(w, kind)
        assert "device" in f.columns and "rank" in f.columns, kind
        assert w.sources[kind]["format"] == ["db"], kind
    st = w.steps
    assert dict(zip(st["rank"], st["device"], strict=True)) == {0: 0, 1: 1, 2: 4, 3: 5}
    assert sorted(w.communication["rank"].unique()) == [0, 1, 2, 3]
    assert sorted(w.kernels["rank"].unique()) == [0, 1]
    missing = w.sources["kernels"]["missing"]
    assert sorted(missing) == [2, 3]
    assert "TASK" in missing[2] and "COMMUNICATION_OP" in missing[2].split("tables:")[1]
    assert sorted(w.sources["memory"]["missing"]) == [2, 3]


def test_four_rank_db_job_agrees_with_msprof_analyze(db_job: Path, tmp_path: Path):
    root = tmp_path / "job"
    shutil.copytree(db_job, root)
    oracle = _oracle(root)
    w = dynprof_nb.load_window(root)
    _agrees_with_msprof(w, oracle, kernel_ranks={0, 1}, ranks={0, 1, 2, 3})


def test_four_rank_text_job_loads_what_each_rank_has(tmp_path: Path):
    root = av.four_rank_job(tmp_path / "job", "text")
    w = dynprof_nb.load_window(root)
    assert w.format == "text" and w.ranks == [0, 1, 2, 3]
    assert w.devices == {0: 0, 1: 1, 2: 4, 3: 5}
    assert sorted(w.kernels["rank"].unique()) == [0, 1]
    missing = w.sources["kernels"]["missing"]
    assert sorted(missing) == [2, 3] and "step_trace_time.csv" in missing[2]
    for r in range(4):
        out = next(root.glob(f"*_{4000 + r}_*")) / "ASCEND_PROFILER_OUTPUT"
        st = pd.read_csv(out / "step_trace_time.csv")
        mine = w.steps[w.steps["rank"] == r]
        assert mine["computing_us"].tolist() == pytest.approx(st["Computing"].tolist())
        assert (mine["device"] == (0, 1, 4, 5)[r]).all()
        doc = json.loads((out / "communication.json").read_text())
        n = sum(
            len([op for op in step["collective"] if "@" in op])
            + len([op for op in step.get("p2p", {}) if "@" in op])
            for step in doc.values()
        )
        assert (w.communication["rank"] == r).sum() >= n > 0
    k = w.kernels
    for r in (0, 1):
        raw = pd.read_csv(
            next(root.glob(f"*_{4000 + r}_*")) / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
        )
        assert (k["rank"] == r).sum() == len(raw)


# ---- other profiler levels and CANN versions ------------------------------------------------
MEMORY_TABLES = "MEMORY_RECORD OP_MEMORY NPU_MEM NPU_MODULE_MEM NPU_OP_MEM".split()
VARIANTS = {
    # Level0 without the host API: no PYTORCH_API (with_stack/record_shapes off), no CANN_API
    "no_host_api": ("DROP TABLE PYTORCH_API; DROP TABLE CANN_API;", None),
    "no_memory": (" ".join(f"DROP TABLE {t};" for t in MEMORY_TABLES), None),
    "no_step_time": ("DROP TABLE STEP_TIME;", None),
    # a single-device run has no HCCL: no COMMUNICATION_OP / COMMUNICATION_TASK_INFO
    "no_communication": ("DROP TABLE COMMUNICATION_OP; DROP TABLE COMMUNICATION_TASK_INFO;", None),
    "analysis_without_step_trace": (None, "DROP TABLE StepTraceTime;"),
    # a newer CANN: unknown tables and columns, and TASK times stored as TEXT
    "newer_cann": (
        "CREATE TABLE FUTURE_TABLE (id INTEGER, value TEXT); "
        "INSERT INTO FUTURE_TABLE VALUES (1, 'x'); "
        "ALTER TABLE COMPUTE_TASK_INFO ADD COLUMN futureMetric REAL; "
        "ALTER TABLE COMMUNICATION_OP ADD COLUMN futureField TEXT; "
        "CREATE TABLE TASK_T AS SELECT CAST(startNs AS TEXT) AS startNs, "
        "CAST(endNs AS TEXT) AS endNs, deviceId, connectionId, globalTaskId, globalPid, "
        "taskType, contextId, streamId, taskId, modelId, 7 AS futureColumn FROM TASK; "
        "DROP TABLE TASK; ALTER TABLE TASK_T RENAME TO TASK;",
        "ALTER TABLE StepTraceTime ADD COLUMN future_stage REAL;",
    ),
}


def _variant(tmp_path: Path, name: str, rank: int = 0) -> tuple[Path, Path]:
    d, db = av.one_rank(tmp_path / name, rank)
    prof_sql, ana_sql = VARIANTS[name]
    if prof_sql:
        av.sql(db, prof_sql)
    if ana_sql:
        av.sql(db.parent / "analysis.db", ana_sql)
    return d, db


def _load_all(d: Path) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = dynprof_nb.load_window(d)
        for kind in FRAMES:
            getattr(w, kind)
        w.communication_links()
    return w, [str(c.message) for c in caught]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_optional_tables_absent_or_unknown_load_what_is_there(tmp_path: Path, name: str):
    d, db = _variant(tmp_path, name)
    w, _ = _load_all(d)
    base = dynprof_nb.load_window(av.DB / "rank0_ascend_pt")
    assert (w.rank, w.device) == (0, 0)
    kernels = w.kernels[w.kernels["core"] != "HCCL"]
    ref = base.kernels[base.kernels["core"] != "HCCL"]
    # the compute tasks do not depend on any optional table: exact, whatever else is absent
    assert kernels["start_ns"].tolist() == ref["start_ns"].tolist()
    assert kernels["duration_ns"].tolist() == ref["duration_ns"].tolist()
    assert kernels["name"].astype(str).tolist() == ref["name"].astype(str).tolist()
    src = w.sources
    if name == "no_host_api":
        assert set(w.events["process"].astype(str)) == {"Ascend Hardware", "HCCL"}
    if name == "no_memory":
        assert w.memory.empty and "MEMORY_RECORD" in src["memory"]["missing"]
    if name == "no_step_time":
        assert w.kernels["step"].isna().all() and w.steps["step"].tolist() == [50]
        assert w.steps["computing_us"].tolist() == base.steps["computing_us"].tolist()
    if name == "no_communication":
        assert w.communication.empty and "COMMUNICATION_OP" in src["communication"]["missing"]
        assert (w.kernels["core"] != "HCCL").all() and w.communication_links().empty
    if name == "analysis_without_step_trace":
        st, ref_st = w.steps.iloc[0], base.steps.iloc[0]
        assert "StepTraceTime" in " ".join(src["steps"]["notes"])
        for c in ("computing_us", "communication_not_overlapped_us", "overlapped_us"):
            assert st[c] == pytest.approx(ref_st[c], rel=0.01), c
    if name == "newer_cann":
        assert str(w.kernels["start_ns"].dtype) == "Int64"
        assert w.communication["elapse_us"].tolist() == base.communication["elapse_us"].tolist()
        assert w.steps["computing_us"].tolist() == base.steps["computing_us"].tolist()


def test_other_levels_and_cann_versions_agree_with_msprof_analyze(tmp_path: Path):
    """A 2-rank window whose rank 0 is a newer-CANN db (unknown tables and columns, TEXT task
    times) and whose rank 1 lacks the host API, memory, STEP_TIME and COMPUTE_TASK_INFO tables:
    msprof-analyze and dynprof_nb read the same numbers from it (compute_op_sum has no row for
    rank 1, whose kernels are the raw TASK rows, and neither has compute_ops)."""
    root = tmp_path / "job"
    d0, _ = _variant(tmp_path / "v0", "newer_cann", 0)
    d1, db1 = _variant(tmp_path / "v1", "no_host_api", 1)
    av.sql(
        db1,
        " ".join(f"DROP TABLE {t};" for t in MEMORY_TABLES)
        + " DROP TABLE STEP_TIME; DROP TABLE COMPUTE_TASK_INFO;",
    )
    root.mkdir()
    shutil.move(d0, root / d0.name)
    shutil.move(d1, root / d1.name)
    oracle = _oracle(root)
    with pytest.warns(TraceRepairWarning, match="COMPUTE_TASK_INFO"):
        w = dynprof_nb.load_window(root)
        _agrees_with_msprof(w, oracle, kernel_ranks={0}, ranks={0, 1})
    assert sorted(w.kernels["rank"].unique()) == [0, 1]  # rank 1: the raw TASK rows


# ---- damaged analysis.db and a trimmed rank without analysis.db -----------------------------
def test_truncated_analysis_db_is_set_aside_with_a_warning(tmp_path: Path):
    d, db = av.one_rank(tmp_path)
    ana = db.parent / "analysis.db"
    ana.write_bytes(ana.read_bytes()[:100])
    w, caught = _load_all(d)
    assert any("analysis.db set aside" in c for c in caught), caught
    base = dynprof_nb.load_window(av.DB / "rank0_ascend_pt").steps
    assert w.steps["computing_us"].iloc[0] == pytest.approx(base["computing_us"].iloc[0], rel=0.01)
    assert "analysis.db set aside" in " ".join(w.sources["steps"]["notes"])


def test_trimmed_db_rank_without_analysis_db_has_step_durations_only(tmp_path: Path):
    d = av.db_rank(av.DB / "rank1_ascend_pt", tmp_path / "r5", 5, 7, trimmed=True)
    (d / "ASCEND_PROFILER_OUTPUT" / "analysis.db").unlink()
    w, _ = _load_all(d)
    assert (w.rank, w.device) == (5, 7)
    st = w.steps
    assert st["step"].tolist() == [50] and st["computing_us"].isna().all()
    raw = av.sql_rows(av.db_file(d), "SELECT startNs, endNs FROM STEP_TIME")[0]
    assert st["duration_us"].iloc[0] == (raw[1] - raw[0]) / 1000.0
    assert "STEP_TIME duration only" in " ".join(w.sources["steps"]["notes"])
    assert w.kernels.empty and len(w.communication) == 4


def test_compute_info_without_task_is_still_a_clear_error(tmp_path: Path):
    """A trimmed rank drops both kernel tables; COMPUTE_TASK_INFO without TASK is damage."""
    d, db = av.one_rank(tmp_path)
    av.sql(db, "DROP TABLE TASK;")
    with pytest.raises(TraceFormatError, match="table TASK is missing"):
        dynprof_nb.load_window(d).kernels  # noqa: B018


def test_renamed_communication_column_names_table_and_column(tmp_path: Path):
    d, db = av.one_rank(tmp_path)
    av.sql(db, "ALTER TABLE COMMUNICATION_OP RENAME COLUMN opName TO op_name;")
    with pytest.raises(TraceFormatError, match="COMMUNICATION_OP has no column opName") as e:
        dynprof_nb.load_window(d).communication  # noqa: B018
    assert db.name in str(e.value)


def test_missing_compute_info_warns_once_per_load(tmp_path: Path):
    d, db = av.one_rank(tmp_path)
    av.sql(db, "DROP TABLE COMPUTE_TASK_INFO;")
    with pytest.warns(TraceRepairWarning, match="COMPUTE_TASK_INFO"):
        k = dynprof_nb.load_window(d).kernels
    assert len(k) > 191  # every TASK row, HCCL tasks included
