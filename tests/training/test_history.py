"""history_steps=K: a built-in window begins with the K steps before it (the slow step a
trigger saw is in the window), bounded, and each window gets only its own history."""

from __future__ import annotations

import json

import pytest
from jobutil import trace_steps, unique_job

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.training import history


@pytest.fixture
def job(tmp_path):
    name = unique_job("hist")
    control = dynprof_nb.attach(name, create=True)
    yield name, control, tmp_path
    control.close()
    segment.unlink(name)


def steps(monitor: dynprof_nb.Monitor, n: int, ranges: int = 2) -> None:
    for _ in range(n):
        for _ in range(ranges):
            with dynprof_nb.range("work"):
                pass
        monitor.step()


def test_a_window_begins_with_the_steps_kept_before_it(job):
    name, control, out = job
    monitor = dynprof_nb.Monitor(job=name, rank=0, output_path=out, backend="builtin",
                                 history_steps=5)
    try:
        steps(monitor, 10)
        control.start(20, 24)
        steps(monitor, 30)
        control.start(50, 51)  # the second window's history is its own 5 steps, not the first's
        steps(monitor, 20)
        assert monitor.wait_saved(60)
        first = out / "rank0_start20_stop24"
        assert trace_steps(first) == list(range(15, 25))
        manifest = json.loads((first / "window.json").read_text())
        assert manifest["history_steps"] == [15, 19]
        assert (manifest["start_step"], manifest["stop_step"]) == (20, 24)
        events = json.loads((first / "trace.json").read_text())["traceEvents"]
        work = [e for e in events if e.get("name") == "work"]
        assert len(work) == 2 * 10  # the kept steps' ranges too, none lost, none twice
        assert min(e["ts"] for e in events if e.get("ph") == "X") >= 0
        assert trace_steps(out / "rank0_start50_stop51") == list(range(45, 52))
    finally:
        monitor.close()


def test_the_ring_is_bounded():
    ring = history.History(3)
    ring.attach()
    try:
        for n in range(1, 50):
            for _ in range(history.MAX_RANGES_PER_STEP + 5):
                with dynprof_nb.range("r"):
                    pass
            ring.step(n)
        kept = ring.take()
        assert [k[0] for k in kept] == [47, 48, 49]
        assert all(len(k[3]) == history.MAX_RANGES_PER_STEP for k in kept)
        assert ring.dropped == 49 * 5 and ring.take() == []
    finally:
        dynprof_nb.training.ranges.set_sink(None)
