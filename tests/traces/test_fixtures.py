"""Every real fixture loads, event counts match the raw files, timestamps are exact."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from testdata import fixtures_dir, write_builtin_window

import dynprof_nb
from dynprof_nb.traces.errors import IncompleteWindowWarning

CHROME_FILES = sorted(
    [p for p in (fixtures_dir() / "kineto").glob("*.json.gz")]
    + list((fixtures_dir() / "torch_cpu").glob("*.json"))
    + [fixtures_dir() / "ascend" / "torch_npu_trace_view.json"]
    + list((fixtures_dir() / "mindspore_cpu").glob("*/*/ASCEND_PROFILER_OUTPUT/trace_view.json")),
    key=str)


def _raw_events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def test_fixture_list_is_complete():
    assert len(CHROME_FILES) == 12  # 9 Kineto + torch CPU + torch_npu + MindSpore trace_view


@pytest.mark.parametrize("path", CHROME_FILES, ids=lambda p: p.name[:40])
def test_chrome_fixture_counts_match_raw(path: Path):
    raw = _raw_events(path)
    w = dynprof_nb.load_trace(path)
    ev = w.events
    assert list(ev.columns[:10]) == ["name", "cat", "ph", "pid", "tid", "process", "thread",
                                     "ts_ns", "dur_ns", "step"]
    for ph in ("X", "i"):
        assert (ev["ph"] == ph).sum() == sum(1 for e in raw if e.get("ph") == ph), ph
    assert isinstance(ev["name"].dtype, pd.CategoricalDtype)
    assert ev["ts_ns"].dtype == "int64"


def test_ascend_string_timestamps_are_exact(fixtures: Path):
    w = dynprof_nb.load_trace(fixtures / "ascend" / "torch_npu_trace_view.json")
    ev = w.events
    first = ev[(ev["name"] == "aten::empty")].iloc[0]
    assert first["ts_ns"] == 1704161511420306491  # "ts": "1704161511420306.491"
    assert first["dur_ns"] == 13080
    # every string ts in the file maps exactly
    raw = [e for e in _raw_events(fixtures / "ascend" / "torch_npu_trace_view.json") if e["ph"] == "X"]
    exact = sorted(int(e["ts"].replace(".", "")) for e in raw if len(e["ts"].split(".")[1]) == 3)
    got = set(ev["ts_ns"].tolist())
    assert all(t in got for t in exact)
    assert set(ev["process"].unique()) >= {"Python", "CANN", "Ascend Hardware", "Overlap Analysis"}


def test_ascend_overlap_analysis_gives_step_breakdown(fixtures: Path):
    st = dynprof_nb.load_trace(fixtures / "ascend" / "torch_npu_trace_view.json").steps
    assert st["step"].tolist() == [1]
    row = st.iloc[0]
    assert row["start_ns"] == 1704161511420289011
    assert row["computing_us"] > 0 and row["free_us"] > 0
    assert row["computing_us"] + row["free_us"] <= row["duration_us"] + 1e-6


@pytest.mark.parametrize("name", ["kernel_details_newer.csv", "kernel_details_older.csv"])
def test_kernel_details(fixtures: Path, name: str):
    w = dynprof_nb.load_trace(fixtures / "ascend" / name)
    k = w.kernels
    raw = pd.read_csv(fixtures / "ascend" / name, dtype=str)
    assert len(k) == len(raw)
    assert k["start_ns"].notna().all()
    if name.endswith("newer.csv"):
        assert k["start_ns"].iloc[0] == 1736413971558972912  # "1736413971558972.912\t"
    else:
        assert k["start_ns"].iloc[0] == 1699529622790614800
        assert pd.isna(k["stream"].iloc[1])  # N/A
    assert w.sources["kernels"]["files"] == [str(fixtures / "ascend" / name)]


def test_cluster_outputs(fixtures: Path):
    st = dynprof_nb.load_trace(fixtures / "ascend" / "cluster_step_trace_time.csv").steps
    assert st["rank"].dropna().astype(int).tolist() == list(range(8))
    assert st.loc[0, "computing_us"] == pytest.approx(80309.68717187493)
    comm = dynprof_nb.load_trace(fixtures / "ascend" / "cluster_communication.json").communication
    assert len(comm) > 0 and set(comm["rank"].dropna()) == {0, 1}
    assert comm["name"].str.startswith("hcom_").all()
    assert comm["elapse_us"].iloc[0] == pytest.approx(121.73694384375 * 1000)


def test_mindspore_cpu_window_matches_its_own_csv(fixtures: Path):
    w = dynprof_nb.load_window(fixtures / "mindspore_cpu" / "rank0_start5_stop8")
    assert (w.rank, w.start_step, w.stop_step, w.framework) == (0, 5, 8, "mindspore")
    ops = w.ops.set_index("name")
    ref = pd.read_csv(next((fixtures / "mindspore_cpu").glob("*/*/FRAMEWORK/cpu_op_detail_info_0.csv")))
    for _, r in ref.iterrows():
        o = ops.loc[r["full_op_name"]]
        assert o["count"] == r["op_occurrences"], r["full_op_name"]
        # the CSV rounds to 6 significant digits
        assert o["total_us"] == pytest.approx(r["op_total_time(ms)"] * 1000, rel=1e-5)
        assert o["self_us"] == pytest.approx(o["total_us"])  # CPU ops do not nest here
    assert "Default" not in ops.index  # the Scope Layer lane is not an operation
    mem = w.memory
    assert len(mem) == 248 and mem["allocated_bytes"].max() > 0
    assert w.sources["memory"]["files"][0].endswith("cpu_ms_memory_record_0.txt")
    assert w.steps.empty and w.sources["steps"]["missing"]


def test_mindspore_events_fall_back_to_framework_timestamps(tmp_path: Path, fixtures: Path):
    src = fixtures / "mindspore_cpu" / "rank0_start5_stop8"
    dst = tmp_path / "rank0_start5_stop8"
    shutil.copytree(src, dst)
    for p in dst.glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json"):
        p.chmod(0o644)
        p.unlink()
    w = dynprof_nb.load_window(dst)
    assert len(w.events) == 80  # cpu_op_execute_timestamp lines: every op execution
    assert w.events["ts_ns"].iloc[0] == 1795968803999070628
    assert w.events["dur_ns"].iloc[0] == 26239  # 0.026239 ms, exact


def test_torch_cpu_fixture(fixtures: Path):
    w = dynprof_nb.load_trace(next((fixtures / "torch_cpu").glob("*.pt.trace.json")))
    assert w.steps["step"].tolist() == [2, 3, 4]
    # baseTimeNanoseconds + relative ts: absolute epoch ns
    assert w.steps["start_ns"].iloc[0] > 1_700_000_000 * 10**9
    assert len(w.memory) == 127 and (w.memory["source"] == "[memory] events").all()
    assert w.events["step"].notna().sum() > 0


def test_kineto_gpu_trace_kernels_and_collectives(fixtures: Path):
    w = dynprof_nb.load_trace(fixtures / "kineto" / "hta__nccl_parser_config__nccl_data.json.gz")
    assert w.rank == 0
    assert len(w.kernels) == 2700 + 960 + 114  # kernel + gpu_memcpy + gpu_memset
    assert len(w.communication) > 0 and w.communication["name"].str.contains("nccl").all()
    st = w.steps
    assert (st["computing_us"] > 0).all() and (st["communication_us"] > 0).all()


def test_builtin_window(tmp_path: Path):
    d = write_builtin_window(tmp_path, rank=2, start=1, stop=4)
    w = dynprof_nb.load_window(d)
    assert (w.rank, w.start_step, w.stop_step) == (2, 1, 4)
    assert w.manifest["backend"] == "builtin"
    assert w.steps["step"].tolist() == [1, 2, 3, 4]
    assert w.steps["start_ns"].notna().all()  # joined from ProfilerStep events
    assert w.steps["computing_us"].iloc[0] == pytest.approx(900.0)
    # python_function frames are not operations and do not eat their children's time
    ops = w.ops.set_index("name")
    assert "train.py(10): train_step" not in ops.index
    assert ops.loc["ProfilerStep*", "self_us"] == pytest.approx(4 * (1000 - 400 - 500), rel=1e-6)
    assert ops.loc["forward", "count"] == 4
    assert len(w.memory) == 4 and w.memory["allocated_bytes"].tolist() == [1e6, 2e6, 3e6, 4e6]
    assert set(w.sources) >= {"events", "ops", "steps"} or w.load_all()


def test_several_ranks_combine_with_rank_column(tmp_path: Path):
    for r in range(3):
        write_builtin_window(tmp_path, rank=r, slow_factor=1.0 + 0.2 * r, slow_step=2)
    write_builtin_window(tmp_path / "x", rank=3)  # keep the root clean
    shutil.move(str(tmp_path / "x" / "rank3_start1_stop3"), tmp_path / "rank3_start1_stop3.tmp")
    bad = write_builtin_window(tmp_path / "y", rank=4, status="incomplete")
    shutil.move(str(bad), tmp_path / "rank4_start1_stop3")
    with pytest.warns(IncompleteWindowWarning, match="rank4_start1_stop3"):
        w = dynprof_nb.load_window(tmp_path)
    assert w.ranks == [0, 1, 2]
    ev = w.events
    assert sorted(ev["rank"].unique()) == [0, 1, 2]
    assert isinstance(ev["name"].dtype, pd.CategoricalDtype)
    assert len(ev) == 3 * 12  # 3 steps x 4 complete events, per rank
    assert sorted(w.steps["rank"].unique()) == [0, 1, 2]
    skipped = " ".join(w.sources["events"]["skipped"])
    assert "rank4_start1_stop3:" in skipped and "rank3_start1_stop3.tmp:" in skipped


def test_incomplete_window_loads_when_asked(tmp_path: Path):
    d = write_builtin_window(tmp_path, status="incomplete")
    with pytest.warns(IncompleteWindowWarning, match="incomplete"):
        w = dynprof_nb.load_window(d)
    assert len(w.events) == 12


def test_sqlite_db(tmp_path: Path):
    import sqlite3

    db = tmp_path / "ascend_pytorch_profiler_0.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE STRING_IDS(id INTEGER, value TEXT);
        CREATE TABLE TASK(startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,
            globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER,
            streamId INTEGER, taskId INTEGER, modelId INTEGER);
        CREATE TABLE COMPUTE_TASK_INFO(name INTEGER, globalTaskId INTEGER, blockNum INTEGER, opType INTEGER);
        CREATE TABLE COMMUNICATION_OP(opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER,
            groupName INTEGER, opId INTEGER, opType INTEGER, deviceId INTEGER);
        CREATE TABLE STEP_TIME(id INTEGER, startNs INTEGER, endNs INTEGER);
        CREATE TABLE PYTORCH_API(startNs INTEGER, endNs INTEGER, globalTid INTEGER, connectionId INTEGER, name INTEGER);
        INSERT INTO STRING_IDS VALUES (1,'MatMulV2'),(2,'aclnnMatmul'),(3,'hcom_allReduce_'),(4,'group0'),(5,'aten::mm');
        INSERT INTO TASK VALUES (1736413971558972912, 1736413971559158416, 0, 1, 7, 1, 0, 0, 2, 5, 0);
        INSERT INTO COMPUTE_TASK_INFO VALUES (2, 7, 16, 1);
        INSERT INTO COMMUNICATION_OP VALUES (3, 1736413971559200000, 1736413971559300000, 2, 4, 1, 3, 0);
        INSERT INTO STEP_TIME VALUES (19, 1736413971558000000, 1736413971560000000);
        INSERT INTO PYTORCH_API VALUES (1736413971558900000, 1736413971558950000, 77, 1, 5);
    """)
    con.commit()
    con.close()
    w = dynprof_nb.load_trace(db)
    assert w.kernels["start_ns"].iloc[0] == 1736413971558972912
    assert w.kernels["name"].iloc[0] == "aclnnMatmul"
    assert w.kernels["duration_us"].iloc[0] == pytest.approx(185.504)
    assert w.steps["step"].tolist() == [19] and w.steps["duration_us"].iloc[0] == 2000.0
    assert w.communication["name"].tolist() == ["hcom_allReduce_"]
    # host API rows, the compute task and the communication op (as kernel_details.csv has it)
    assert set(w.events["name"]) == {"aclnnMatmul", "aten::mm", "hcom_allReduce_"}
    assert w.events["step"].isna().all()  # no ProfilerStep events in the db's API tables
