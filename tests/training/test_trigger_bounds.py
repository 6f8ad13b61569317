"""Bounds at arm time, failures in the status (issue 28, deliverable 4).

* A trigger whose window no rank could use (``steps=10**30``) is refused when armed.
* A rank-side failure of the watcher is the rank's status error; re-arming resets it.
* ``fired`` counts windows recorded; windows a rank refused are counted apart.
"""

from __future__ import annotations

import time

import pytest
from jobutil import unique_job, wait_until, windows_only

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.control.base import JobError
from dynprof_nb.training import steptimes


@pytest.fixture
def job(tmp_path):
    name = unique_job("tbound")
    control = dynprof_nb.attach(name, create=True)
    yield name, control, tmp_path
    control.close()
    segment.unlink(name)


def _steps(monitor: dynprof_nb.Monitor, n: int, ms: float) -> None:
    for _ in range(n):
        time.sleep(ms / 1000)
        monitor.step()


def test_values_no_rank_could_use_are_refused_when_armed(job) -> None:
    _, control, _ = job
    with pytest.raises(JobError, match="stop_step"):
        control.trigger(steps=10**30)
    with pytest.raises(JobError, match="slowdown"):
        control.trigger(slowdown=1.0)
    with pytest.raises(JobError):
        control.trigger(confirm=0)
    assert control.triggers == {"armed": False}


def test_a_watch_failure_is_the_ranks_error_until_re_armed(job, monkeypatch) -> None:
    name, control, out = job
    monitor = dynprof_nb.Monitor(job=name, rank=0, output_path=out, backend="builtin")
    try:
        _steps(monitor, 80, 5)
        control.trigger(slowdown=4, confirm=1, cooldown_s=0)

        def broken(*args, **kwargs):
            raise RuntimeError("the window request could not be written")

        monkeypatch.setattr(steptimes, "fire", broken)
        _steps(monitor, 3, 60)  # slow steps: the trigger tries to fire and fails
        row = wait_until(lambda: (r := control.status().iloc[0].to_dict())["error"] and r,
                         timeout=10, what="the failure in the rank's status")
        assert "step times and the trigger stopped" in row["error"], row["error"]
        assert "could not be written" in row["error"]
        monkeypatch.undo()
        control.trigger(slowdown=4, confirm=1, cooldown_s=0)  # re-armed: the watch starts afresh
        _steps(monitor, 5, 5)
        wait_until(lambda: not control.status().iloc[0]["error"], timeout=10,
                   what="the error cleared by re-arming")
        _steps(monitor, 60, 5)
        _steps(monitor, 2, 60)
        wait_until(lambda: control.triggers["fired"] >= 1, timeout=10,
                   what="the re-armed trigger firing")
    finally:
        monitor.close()


def test_windows_a_rank_refused_are_counted_apart(job) -> None:
    name, control, out = job
    monitor = dynprof_nb.Monitor(job=name, rank=0, output_path=out, backend="builtin",
                                 max_windows_per_minute=1)
    try:
        _steps(monitor, 80, 5)
        control.trigger(slowdown=4, confirm=1, cooldown_s=0, steps=2, max_windows=3)
        for fired in (1, 2):
            _steps(monitor, 2, 60)
            _steps(monitor, 30, 5)  # the window (or its refusal) happens here
            wait_until(lambda f=fired: control.triggers["fired"]
                       + control.triggers["refused"] >= f, timeout=10, what=f"fire {fired}")
        _steps(monitor, 30, 5)  # the rank reaches the last window asked for (and refuses it)
        state = control.triggers
        # one window a minute on this rank: the first is recorded, the others refused
        assert state["fired"] == 1 and state["refused"] >= 1, state
        assert len(windows_only(control.windows())) == 1
        assert "refused" in control.status().iloc[0]["error"]
    finally:
        monitor.close()


def test_the_confirm_th_slow_step_trips_while_it_runs(job, monkeypatch) -> None:
    """With ``confirm=2`` the second slow step in a row trips the trigger once it has run past
    the bound, not only once it ends: a running step's time only grows, so it trips on the same
    steps, a slow step sooner (test_trigger.py's window must end within 30 steps). A step not
    slow yet, or a first slow step with ``confirm=2``, trips nothing; the step that tripped
    while it ran is not counted again when it ends."""
    name, control, _ = job
    control.trigger(slowdown=3.0, confirm=2, steps=8, cooldown_s=0)
    fired: list[str] = []
    monkeypatch.setattr(steptimes, "fire", lambda seg, gen, d, text, reason: fired.append(reason)
                        or "fired")
    seg = segment.Segment.open(name)
    try:
        watch = steptimes.TriggerWatch(seg, 0, 2, 0.02)
        median, spread = 10e6, 1e6  # 10 ms steps, 1 ms of noise
        assert watch.beat(100, [], "idle", (100, 45e6, median), spread) is None  # 1st: not yet
        assert watch.beat(100, [(100, 60e6, median)], "idle", None, spread) is None
        assert watch.beat(100, [], "idle", (101, 25e6, median), spread) is None  # under 3x yet
        assert watch.beat(100, [], "idle", (101, 35e6, median), spread) == "fired"
        assert fired == ["rank 2 steps 100-101 took 60, 35 ms = 4.8x its median 10.0 ms (over "
                         "its last 64 steps; step 101 so far, still running)"], fired
        assert watch.beat(101, [(101, 60e6, median)], "idle", None, spread) is None
        assert watch.beat(102, [(102, 60e6, median)], "idle", None, spread) is None
        assert len(fired) == 1  # 101 is not counted again: 102 alone is one slow step
    finally:
        seg.close()
