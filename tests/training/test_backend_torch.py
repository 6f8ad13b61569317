"""The PyTorch backend against real torch: a real training process, windows asked for from
this (another) process, traces checked for exactly the window's steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from framework_jobs import (
    EXAMPLES,
    attached_job,
    chrome_step_numbers,
    spawn,
    unique_job,
    wait_until,
)
from jobutil import recorded_window

import dynprof_nb
from dynprof_nb.contract import segment, window_dirs
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.training.backends import BackendError, resolve_backend
from dynprof_nb.training.backends.torch import TorchBackend, profiler_kwargs

pytestmark = pytest.mark.slow


def _trace(window_dir: str | Path) -> Path:
    traces = sorted(Path(window_dir).glob("*.pt.trace.json"))
    assert len(traces) == 1, f"expected one *.pt.trace.json in {window_dir}, got {traces}"
    return traces[0]


@pytest.fixture
def torch_job(tmp_path: Path):
    """examples/train_torch.py running in the background, with a Job attached to it."""
    with attached_job("torch", lambda name: spawn([EXAMPLES / "train_torch.py", "--job", name,
                                                   "--output", tmp_path / "out"]),
                      120, "the torch job") as pair:
        yield pair


def test_window_from_another_process_records_exactly_its_steps(torch_job) -> None:
    job, proc = torch_job
    # well ahead: a loaded machine lags
    path, manifest, first, last = recorded_window(job, "+100", "+104", 120, record_shapes=True)
    assert path.name == f"rank0_start{first}_stop{last}"
    assert manifest["backend"] == "torch" and manifest["status"] == "complete"
    trace = _trace(path)
    assert sorted(manifest["files"]) == sorted([trace.name, "thread_cpu.json"])

    assert chrome_step_numbers(trace) == list(range(first, last + 1))
    data = json.loads(trace.read_text())
    names = {e.get("name") for e in data["traceEvents"]}
    assert {"forward", "backward"} <= names  # dynprof_nb.range via record_function
    shaped = [e for e in data["traceEvents"] if e.get("name") == "aten::conv2d"]
    assert shaped and all(e["args"].get("Input Dims") for e in shaped)  # record_shapes
    assert data["distributedInfo"]["rank"] == 0

    loaded = job.load()
    assert list(loaded.steps.step) == list(range(first, last + 1))
    # the training thread's CPU and run-queue time over exactly the window's steps
    (cpu,) = loaded.thread_cpu().to_dict("records")
    assert cpu["missing"] is None and cpu["steps"] == last - first + 1, cpu
    assert 0 < cpu["on_cpu_ns"] <= cpu["wall_ns"] + 10e6, cpu
    ops = set(loaded.ops.name)
    assert {"aten::conv2d", "aten::convolution_backward"} <= ops
    assert proc.poll() is None  # training went on


def test_stop_ends_the_window_at_a_whole_step(torch_job) -> None:
    job, _ = torch_job
    job.start("+100", "+100000")
    first = job.config.start_step
    wait_until(lambda: any(s.state == "recording" and s.step >= first + 3
                           for s in job.live_slots()), 120, "the window to record 3 steps")
    job.stop()
    job.wait(timeout=120, progress=False)

    found = job.windows()
    assert list(found.status) == ["complete"], job.status().to_string()
    last = int(found.stop.iloc[0])
    assert first + 2 <= last < 100000
    manifest = window_dirs.read_manifest(found.path.iloc[0])
    assert manifest["stopped_early"] is True
    # the step that was open when the stop arrived never ended: it is not claimed
    assert chrome_step_numbers(_trace(found.path.iloc[0])) == list(range(first, last + 1))


def test_backend_in_process_numbers_steps_globally_and_drops_an_unfinished_one(
        tmp_path: Path) -> None:
    backend = TorchBackend()
    backend.start(tmp_path, ProfilerConfig(start_step=7, stop_step=20, activities=["CPU"]), 7)
    x = torch.randn(16, 16)
    for step in (7, 8, 9):
        with dynprof_nb.range("mm"):
            x = (x @ x).tanh()
        backend.step(step)
    x = x @ x  # step 10 begins, then a stop arrives before it ends
    backend.stop()
    files = backend.save()
    assert len(files) == 2 and files[0].endswith(".pt.trace.json")
    assert files[1] == "thread_cpu.json"  # the training thread's CPU and run-queue time
    assert chrome_step_numbers(tmp_path / files[0]) == [7, 8, 9]


def test_config_maps_onto_profile_arguments() -> None:
    kwargs, notes = profiler_kwargs(ProfilerConfig(
        activities=["CPU", "NPU"], record_shapes=True, profile_memory=True, with_stack=True,
        profiler_level="Level2"))
    assert kwargs["activities"] == [torch.profiler.ProfilerActivity.CPU]
    assert any("NPU dropped" in n for n in notes)  # no device here: noted, not fatal
    assert kwargs["record_shapes"] and kwargs["profile_memory"] and kwargs["with_stack"]
    assert kwargs["with_flops"] and kwargs["with_modules"]
    level0, _ = profiler_kwargs(ProfilerConfig(activities=["CPU"], profiler_level="Level0"))
    assert not level0["with_flops"] and not level0["with_modules"]
    with pytest.raises(BackendError, match="add 'CPU'"):
        profiler_kwargs(ProfilerConfig(activities=["NPU"]))


def test_auto_picks_torch_when_torch_is_imported() -> None:
    assert resolve_backend("auto") == "torch"


def test_a_rank_never_reads_idle_between_stop_and_save(tmp_path: Path, monkeypatch) -> None:
    """torch's stop() takes milliseconds; a controller polling then must not see the rank idle
    (with the window not yet saved), or wait() returns before the window exists."""
    name = unique_job("torch-edge")
    job = dynprof_nb.attach(name, create=True)
    seen: list[str] = []
    original = TorchBackend.stop

    def stop_and_look(self: TorchBackend) -> None:
        original(self)
        seen.append(job.status().state.iloc[0])  # what a controller sees during the stop

    monkeypatch.setattr(TorchBackend, "stop", stop_and_look)
    try:
        with dynprof_nb.Monitor(job=name, output_path=tmp_path, backend="torch") as monitor:
            job.start(3, 4, activities=["CPU"])
            for _ in range(6):
                torch.randn(8, 8).sum()
                monitor.step()
            job.wait(timeout=60, progress=False)
            assert list(job.windows().status) == ["complete"]
        assert seen == ["recording"]
    finally:
        job.close()
        segment.unlink(name)
