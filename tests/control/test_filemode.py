"""File mode: an unmodified MindSpore job (their DynamicProfilerMonitor) profiled through
``attach(cfg_path=...)``, the drop-in switched by one import line, and FileJob's contract."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from framework_jobs import (
    finish,
    marked_steps,
    mindspore_op_times,
    spawn_mindspore,
)

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.contract.config import ConfigError
from dynprof_nb.control.base import JobError
from dynprof_nb.control.filemode import FileJob
from dynprof_nb.control.status import STATUS_COLUMNS
from dynprof_nb.training.dropin import job_name_for


@pytest.mark.slow
def test_unmodified_mindspore_monitor_is_profiled_from_file_job(tmp_path: Path) -> None:
    cfg, prof = tmp_path / "cfg", tmp_path / "prof"
    job = dynprof_nb.attach(cfg_path=cfg, prof_path=prof)
    assert isinstance(job, FileJob)
    # no live step in file mode: the window is asked for before the job reaches it
    job.start(30, 33, activities=["CPU"], analyse=True)
    on_disk = json.loads((cfg / "profiler_config.json").read_text())
    assert (on_disk["start_step"], on_disk["stop_step"], on_disk["prof_path"]) == \
        (30, 33, str(prof))
    proc = spawn_mindspore("--monitor", "mindspore", "--cfg-path", cfg, "--output",
                           tmp_path / "unused", "--style", "callback", "--mode", "graph",
                           "--step-sleep", "0.05", cwd=tmp_path)
    try:
        status = job.wait(timeout=180)
        assert list(status.state) == ["written"]
        found = job.windows()
        assert list(found.status) == ["complete"]
        assert found.backend.iloc[0] == "mindspore (own monitor)"
        path = Path(found.path.iloc[0])
        assert path == prof / "rank0_start30_stop33"
        # MindSpore's callback mode records start..stop: each graph op ran 4 times
        ops = mindspore_op_times(path)
        assert ops and all(len(t) == 4 for t in ops.values()), {k: len(v) for k, v in ops.items()}
        loaded = job.load()
        assert (loaded.start_step, loaded.stop_step) == (30, 33)
        assert len(loaded.ops) and len(loaded.events)
    finally:
        output = finish(proc)
    assert proc.returncode == 0, output


@pytest.mark.slow
def test_dropin_switches_a_script_with_one_import(tmp_path: Path) -> None:
    cfg, prof = tmp_path / "cfg", tmp_path / "prof"
    name = job_name_for(cfg)
    job = dynprof_nb.attach(cfg_path=cfg, prof_path=prof)
    job.start(30, 33, activities=["CPU"], analyse=True, analyse_mode=1)
    proc = spawn_mindspore("--monitor", "dropin", "--cfg-path", cfg, "--output",
                           tmp_path / "unused", "--style", "step", "--mode", "graph",
                           "--step-sleep", "0.05", cwd=tmp_path)
    live = dynprof_nb.attach(name, create=True)
    try:
        job.wait(timeout=180)
        found = job.windows()
        assert list(found.status) == ["complete"] and found.backend.iloc[0] == "mindspore"
        path = Path(found.path.iloc[0])
        # exact in step() mode too (the original records 31..34 here)
        assert sorted(marked_steps(path)) == [30, 31, 32, 33]
        assert all(len(t) == 4 for t in mindspore_op_times(path).values())
        # ... and the job is a live dynprof_nb job, with the file's relay in its status
        status = live.status()
        assert list(status.columns) == STATUS_COLUMNS
        ranks = status[status["rank"] == 0]
        assert len(ranks) == 1 and bool(ranks.alive.iloc[0])
        relay = status[status["rank"] == -1]
        assert list(relay.state) == ["relay"] and list(relay.error) == [""]
    finally:
        output = finish(proc)
        live.close()
        segment.unlink(name)
    assert proc.returncode == 0, output


def test_file_job_validates_before_writing_and_writes_atomically(tmp_path: Path) -> None:
    job = dynprof_nb.attach(cfg_path=tmp_path)
    assert job.config.to_dict() == dynprof_nb.ProfilerConfig().to_dict()  # no file yet
    job.start(10, 12, profile_memory=True)
    path = tmp_path / "profiler_config.json"
    before = path.read_text()
    with pytest.raises(ConfigError, match="start_step"):
        job.set(start_step="20")  # MindSpore would silently read this as "no window"
    with pytest.raises(ConfigError, match="did you mean 'record_shapes'"):
        job.set(record_shape=True)
    with pytest.raises(ConfigError, match="no live step"):
        job.start("+5", "+8")
    with pytest.raises(JobError, match="same start/stop pair"):
        job.start(10, 12)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profiler_config.json"]  # no temp
    job.stop()
    cfg = dynprof_nb.ProfilerConfig.load(path)
    assert (cfg.start_step, cfg.stop_step, cfg.profile_memory) == (-1, -1, True)


def test_file_job_status_says_only_what_it_knows(tmp_path: Path) -> None:
    job = dynprof_nb.attach(cfg_path=tmp_path, prof_path=tmp_path / "prof")
    job.start(5, 8)
    status = job.status()
    assert list(status.columns) == STATUS_COLUMNS and status.empty
    assert "no live status" in repr(job)
    # a window MindSpore is still writing, then one that has settled
    ms = tmp_path / "prof" / "rank0_start5_stop8" / "host_1_2_ascend_ms" / "FRAMEWORK"
    ms.mkdir(parents=True)
    (ms / "cpu_op_type_info_0.csv").write_text("op_type\n")
    assert list(job.status().state) == ["writing"]
    job.settle_s = 0.0
    row = job.status().iloc[0]
    assert (row["rank"], row.state, row.window) == (0, "written", "5-8")
    assert row.pid is pd.NA and row.alive is pd.NA  # unknown, not made up
    with pytest.raises(TimeoutError, match="cannot see the ranks"):
        job.wait(timeout=0.3, ranks=2)

