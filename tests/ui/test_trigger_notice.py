"""The magic's notice: one line each time the armed trigger fires a window, none after it is
disarmed or armed anew (a fake job's ``triggers``: this tests the watcher alone)."""

from __future__ import annotations

import time

from jobutil import wait_until

from dynprof_nb.ui import triggercmd
from dynprof_nb.ui.triggercmd import FireNotices


class FakeJob:
    name = "fake"

    def __init__(self) -> None:
        self.triggers = {"armed": True, "armed_at": 1.0, "fired": 0, "last_reason": ""}


def test_one_line_per_window_fired_and_none_once_disarmed(monkeypatch) -> None:
    monkeypatch.setattr(triggercmd, "NOTICE_POLL_S", 0.01)
    job, said = FakeJob(), []
    FireNotices(job, said.append)
    time.sleep(0.05)
    assert said == []
    job.triggers = dict(job.triggers, fired=1, last_reason="rank 1 steps 5-9 took 20 ms")
    wait_until(lambda: said, timeout=5, what="the notice")
    time.sleep(0.05)
    assert said == ["dynprof_nb: job fake: the trigger fired a window: rank 1 steps 5-9 took 20 ms"]
    job.triggers = {"armed": False}
    time.sleep(0.05)
    job.triggers = {"armed": True, "armed_at": 1.0, "fired": 2, "last_reason": "x"}
    time.sleep(0.05)
    assert len(said) == 1  # the watcher ended with the trigger it watched
