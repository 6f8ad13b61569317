"""Smoke, torch: a torch training process (examples/train_torch.py) with dynprof_nb's Monitor
records a window through torch.profiler and this process loads it, in this one venv (the
matrix's numpy 1.26 + torch environment: what torch_npu users have)."""

from __future__ import annotations

from pathlib import Path

import pytest
from framework_jobs import EXAMPLES, attached_job, spawn
from jobutil import recorded_window

pytestmark = pytest.mark.slow


def test_a_torch_window_is_recorded_and_loads(tmp_path: Path) -> None:
    start = lambda name: spawn(  # noqa: E731
        [EXAMPLES / "train_torch.py", "--job", name, "--output", tmp_path / "out"]
    )
    with attached_job("smoke-torch", start, 120, "the torch job") as (job, _proc):
        _path, manifest, first, last = recorded_window(job, "+20", "+22", 120)
        assert manifest["backend"] == "torch"
        w = job.load()
        assert (w.start_step, w.stop_step) == (first, last)
        assert {"forward", "backward"} <= set(w.ops.name)
        assert str(w.summary()).strip()
