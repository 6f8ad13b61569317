"""Smoke, MindSpore: a MindSpore 2.7 training process with dynprof_nb's Monitor records a window
and this process loads it. In the matrix's MindSpore environment both are one venv (what a
MindSpore user has: ``pip install dynprof_nb mindspore==2.7.0``); in the main venv the training
runs in ``.venv/ms`` (``DYNPROF_MINDSPORE_PYTHON``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from framework_jobs import attached_job, spawn_mindspore
from jobutil import recorded_window

pytestmark = pytest.mark.slow


def test_a_mindspore_window_is_recorded_and_loads(tmp_path: Path) -> None:
    start = lambda name: spawn_mindspore(  # noqa: E731
        "--job", name, "--output", tmp_path / "out", "--mode", "graph", "--step-sleep", "0.01"
    )
    with attached_job("smoke-ms", start, 180, "the MindSpore job") as (job, _proc):
        _path, manifest, first, last = recorded_window(
            job, "+5", "+7", 180, activities=["CPU"], analyse=True
        )
        assert manifest["backend"] == "mindspore"
        w = job.load()
        assert w.framework == "mindspore"
        assert (w.start_step, w.stop_step) == (first, last)
        assert len(w.ops) and str(w.summary()).strip()
