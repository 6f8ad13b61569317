"""The MindSpore backend against real MindSpore 2.7 on CPU: a real training process (in the
MindSpore venv) driven from this process, in step() and Model.train callback styles."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from framework_jobs import (
    EXAMPLES,
    attached_job,
    marked_steps,
    mindspore_op_times,
    mindspore_python,
    spawn_mindspore,
)
from jobutil import recorded_window, run_script

pytestmark = pytest.mark.slow


@pytest.fixture(params=["step", "callback"])
def ms_job(request, tmp_path: Path):
    """examples/train_mindspore.py with our Monitor, in one call style, and a Job on it."""
    with attached_job(f"ms-{request.param}", lambda name: spawn_mindspore(
            "--job", name, "--output", tmp_path / "out", "--style", request.param, "--mode",
            "graph", "--step-sleep", "0.01"), 180, "the MindSpore job") as pair:
        yield pair


@pytest.mark.parametrize("analyse_mode", [0, 1])
def test_window_records_exactly_its_steps(ms_job, analyse_mode: int) -> None:
    job, proc = ms_job
    path, manifest, first, last = recorded_window(
        job, "+50", "+53", 180, activities=["CPU"], analyse=True, analyse_mode=analyse_mode,
        profile_memory=True, record_shapes=True)
    assert manifest["backend"] == "mindspore" and manifest["status"] == "complete"
    # MindSpore's own output is inside the window, analysed before it was published
    (ms_dir,) = path.glob("*_ascend_ms")
    assert (ms_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").is_file()
    assert set(manifest["files"]) >= {"dynprof_steps.csv", "thread_cpu.json",
                                      str((ms_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
                                          .relative_to(path))}

    steps = marked_steps(path)
    assert sorted(steps) == list(range(first, last + 1))
    begin, end = steps[first][0], steps[last][1]
    ops = mindspore_op_times(path)
    n = last - first + 1
    assert ops and all(len(times) == n for times in ops.values()), \
        {k: len(v) for k, v in ops.items()}  # each op of the graph ran once per step
    assert all(begin <= t <= end for times in ops.values() for t in times)

    loaded = job.load()
    assert loaded.framework == "mindspore"
    # every thread of the process (MindSpore's operators run on their own), over the window
    (cpu,) = loaded.thread_cpu().to_dict("records")
    assert cpu["missing"] is None and cpu["steps"] == last - first + 1, cpu
    assert cpu["threads"] == "process" and cpu["on_cpu_ns"] > 0, cpu
    assert (loaded.start_step, loaded.stop_step) == (first, last)
    assert len(loaded.ops) and set(loaded.ops.name) >= set(ops)
    # the steps frame comes from the backend's step markers; every op lands in its step
    assert list(loaded.steps.step) == list(range(first, last + 1))
    op_steps = loaded.events[loaded.events.name.isin(list(ops))].groupby("step").size()
    assert list(op_steps.index) == list(range(first, last + 1))
    assert "ProfilerStep*" not in set(loaded.ops.name)
    assert proc.poll() is None  # training went on


def test_config_maps_onto_profiler_arguments() -> None:
    """Every key reaches its real MindSpore type (checked in the MindSpore venv)."""
    script = """
import json
import os
from dynprof_nb.training.backends.mindspore import profiler_kwargs, analysis_mode
from dynprof_nb.contract.config import ProfilerConfig
cfg = ProfilerConfig(profiler_level="Level2", activities=["CPU", "NPU"], aic_metrics="L2Cache",
                     export_type=["text", "db"], host_sys=["cpu", "mem"], mstx=True,
                     mstx_domain_include=["d"], with_stack=True, data_simplification=False,
                     analyse=True, analyse_mode=1)
kw = profiler_kwargs(cfg, "/tmp/x")
out = {k: (repr(v) if not isinstance(v, (bool, str, list)) else
           [repr(i) for i in v] if isinstance(v, list) else v) for k, v in kw.items()}
out["mode"] = analysis_mode(cfg)
out["no_analysis"] = analysis_mode(cfg.update(analyse=False))
print(json.dumps(out))
"""
    got = json.loads(run_script([mindspore_python(), "-c", script], timeout=120, check=True,
                                cwd=EXAMPLES.parent).stdout.strip().splitlines()[-1])
    assert got["profiler_level"] == "<ProfilerLevel.Level2: 'Level2'>"
    assert got["activities"] == ["<ProfilerActivity.CPU: 'CPU'>",
                                 "<ProfilerActivity.NPU: 'NPU'>"]
    assert got["aic_metrics"].startswith("<AicoreMetrics.L2Cache")
    assert got["export_type"] == ["<ExportType.Text: 'text'>", "<ExportType.Db: 'db'>"]
    assert got["host_sys"] == ["<HostSystem.CPU: 'cpu'>", "<HostSystem.MEM: 'mem'>"]
    assert got["mstx"] is True and got["mstx_domain_include"] == ["'d'"]
    assert got["with_stack"] is True and got["data_simplification"] is False
    assert got["output_path"] == "/tmp/x"
    assert (got["mode"], got["no_analysis"]) == ("async", None)


def test_a_hung_analysis_holds_training_once_not_at_every_window(tmp_path: Path) -> None:
    """While the previous window's analysis has not ended, a start waits for it (MindSpore's
    documented example needs that), but only the first: once one waited BUSY_WAIT_S in vain,
    the next is refused at once, until the analysis ends and frees the profiler."""
    script = f"""
import json, time
from pathlib import Path
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.training.backends import mindspore as b
b.BUSY_WAIT_S = 1.0
hung = b.MindSporeBackend()
b._in_use.acquire(); hung._holding = True   # the analysis that does not end
took = []
for i in range(2):
    t0 = time.monotonic()
    try:
        b.MindSporeBackend().start(Path({str(tmp_path)!r}) / str(i), ProfilerConfig(), 1)
    except b.BackendError as exc:
        took.append([round(time.monotonic() - t0, 3), str(exc)])
hung._release()                               # it ends at last
later = b.MindSporeBackend()
t0 = time.monotonic()
later.start(Path({str(tmp_path)!r}) / "later", ProfilerConfig(activities=["CPU"]), 1)
took.append([round(time.monotonic() - t0, 3), "started"])
later.stop()
print(json.dumps(took))
"""
    run = run_script([mindspore_python(), "-c", script], timeout=120, cwd=EXAMPLES.parent,
                     env=dict(os.environ, GLOG_v="3"))
    assert run.returncode == 0, run.stderr[-3000:]
    (first, second, later) = json.loads(run.stdout.strip().splitlines()[-1])
    assert first[0] >= 1.0 and "still busy with the previous window" in first[1], first
    assert second[0] < 0.2 and "still busy" in second[1], second
    assert later[1] == "started", later


def test_a_failed_analysis_loses_its_window_only(tmp_path: Path) -> None:
    """MindSpore's analysis of one window fails (a fresh-clone run saw its multiprocessing
    Manager's connection reset under load): that window says so, and MindSpore's process-wide
    profiler is reset anyway, so the next window starts, records and is analysed. Before, the
    singleton kept the failed window's state and the next start raised "framework_path has
    not been set" (MindSpore's documented two-window example lost both)."""
    script = """
import json, sys
from pathlib import Path
import numpy as np
import mindspore as ms
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.training.backends import mindspore as b
root, real, calls = Path(sys.argv[1]), b.ProfilerInterface.analyse, []
def analyse(*args, **kwargs):
    calls.append(1)
    if len(calls) == 1:
        raise ConnectionResetError(104, "Connection reset by peer")
    return real(*args, **kwargs)
b.ProfilerInterface.analyse = analyse
x, out = ms.Tensor(np.ones((64, 64), np.float32)), []
for i in range(2):
    backend, where = b.MindSporeBackend(), root / f"w{i}"
    where.mkdir()
    try:
        backend.start(where, ProfilerConfig(activities=["CPU"], analyse=True), 1)
        for step in range(1, 4):
            ms.ops.matmul(x, x).asnumpy()
            backend.step(step)
        backend.stop()
        files = backend.save()
        out.append(["saved", sum(f.endswith("trace_view.json") for f in files)])
    except Exception as exc:
        out.append([type(exc).__name__, str(exc)])
print(json.dumps(out))
"""
    run = run_script([mindspore_python(), "-c", script, str(tmp_path)], timeout=180,
                     cwd=tmp_path, env=dict(os.environ, GLOG_v="3"))
    assert run.returncode == 0, run.stderr[-3000:]
    failed, second = json.loads(run.stdout.strip().splitlines()[-1])
    assert failed == ["ConnectionResetError", "[Errno 104] Connection reset by peer"], failed
    assert second == ["saved", 1], second  # started, recorded and analysed by MindSpore


def test_memory_budget_and_the_analysis_cost_are_reported() -> None:
    """In real MindSpore: a window of 1e9 steps on a job that grows 1 MB a step ends at its
    16 MB budget (RSS growth, checked every 16 steps as for torch), saved with its reason in
    the manifest and the status; a window analysed after its end says in its manifest what
    it cost the training thread (MindSpore's stop there; the CPU time its analysis took on
    the window-I/O thread, which bounds how long it held the GIL, under the save's wall
    time)."""
    run = run_script([mindspore_python(), EXAMPLES.parent / "benchmarks" / "mindspore_cost.py",
                      "--budget-mb", "16", "--grow-mb", "1", "--steps", "10"], timeout=300,
                     check=True, env={**os.environ, "GLOG_v": "3"}, cwd=EXAMPLES.parent)
    got = json.loads(run.stdout.strip().splitlines()[-1])
    budget, analyse = got["budget"], got["analyse"]
    assert budget["ended_by_budget"] and budget["steps"] < 100, budget
    assert "memory budget reached (16 MB of growth" in budget["stop_reason"]
    assert "memory budget reached" in budget["status_error"]
    assert budget["rss_growth_over_budget"] < 2.5  # the budget + 16 steps' growth at most
    assert analyse["status"] == "complete"
    thread_s = analyse["training_thread_s"]
    assert {"profiler_start_s", "profiler_stop_s", "save_gil_s"} <= set(thread_s)
    assert 0 < thread_s["save_gil_s"] <= analyse["save_s"] + 0.01
