"""The magic's notice: one line each time the armed trigger fires a window, none after it is
disarmed or armed anew (a fake job's ``triggers``: this tests the watcher alone)."""

from __future__ import annotations

from jobutil import wait_until

from dynprof_nb.ui import triggercmd
from dynprof_nb.ui.triggercmd import FireNotices


class FakeJob:
    """``triggers`` counts its reads: a test waits for the watcher's next look (a fact)
    rather than sleeping a few poll periods."""

    name = "fake"

    def __init__(self) -> None:
        self.value = {"armed": True, "armed_at": 1.0, "fired": 0, "last_reason": ""}
        self.reads = 0

    @property
    def triggers(self) -> dict:
        value = self.value  # the value this read returns, whatever is set after it
        self.reads += 1
        return value

    @triggers.setter
    def triggers(self, value: dict) -> None:
        self.value = value

    def looked(self) -> None:
        """Wait until the watcher has read what is set now (one read after this call)."""
        seen = self.reads
        wait_until(lambda: self.reads > seen, timeout=5, what="the watcher's next look")


def test_one_line_per_window_fired_and_none_once_disarmed(monkeypatch) -> None:
    monkeypatch.setattr(triggercmd, "NOTICE_POLL_S", 0.01)
    job, said = FakeJob(), []
    FireNotices(job, said.append)
    job.looked()
    assert said == []
    job.triggers = dict(job.value, fired=1, last_reason="rank 1 steps 5-9 took 20 ms")
    wait_until(lambda: said, timeout=5, what="the notice")
    job.looked()  # a later look at the same count says nothing more
    assert said == ["dynprof_nb: job fake: the trigger fired a window: rank 1 steps 5-9 took 20 ms"]
    job.triggers = {"armed": False}
    job.looked()  # the watcher saw it disarmed, and returned
    job.triggers = {"armed": True, "armed_at": 1.0, "fired": 2, "last_reason": "x"}
    assert len(said) == 1  # the watcher ended with the trigger it watched
