"""Windows stay whole: Stop ends a running window on every rank at one step, and where ranks
still differ the window is one entry and ``load()`` says which ranks are missing."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest
from jobutil import finish, spawn_rank, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.control.base import latest_window
from dynprof_nb.ui.panel import window_groups


def test_stop_ends_a_running_window_on_every_rank_at_one_step(tmp_path: Path) -> None:
    name = unique_job("stopw")
    job = dynprof_nb.attach(name, create=True)
    # two ranks that step at different rates, so they are at different steps when stopped
    procs = [spawn_rank(name, r, tmp_path / "out", step_ms=ms) for r, ms in ((0, 8), (1, 13))]
    try:
        wait_until(lambda: len(job.live_slots()) == 2
                   and all(s.step > 20 for s in job.live_slots()), timeout=60,
                   what="2 ranks stepping")
        job.start("+10", "+100000")
        wait_until(lambda: all(s.state == "recording" for s in job.live_slots())
                   and min(s.step for s in job.live_slots()) > job.config.start_step + 5,
                   timeout=60, what="both ranks recording")
        job.stop()
        job.wait(timeout=60, progress=False)
        found = job.windows()
        assert sorted(found["rank"]) == [0, 1], found.to_string()
        assert (found.status == "complete").all(), found.to_string()
        assert len(set(zip(found.start, found.stop, strict=True))) == 1, found.to_string()
        groups = window_groups(found)
        assert len(groups) == 1 and "ranks 2/2 complete" in groups[0]["label"], groups
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no rank missing: nothing to warn about
            trace = job.load()
        assert sorted(trace.ranks) == [0, 1]
    finally:
        for p in procs:
            finish(p)
        job.close()
        segment.unlink(name)


def _frame(rows: list[tuple]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["rank", "start", "stop", "status", "path", "error",
                                        "reason"])
    frame["started_at"] = pd.Timestamp("2026-01-01 10:00:00")
    return frame


def test_ranks_that_ended_a_window_apart_are_one_entry_and_load_names_the_missing() -> None:
    frame = _frame([
        (0, 100, 433, "complete", "/w/rank0", None, "rank 1 steps 90-92 took ..."),
        (1, 100, 350, "complete", "/w/rank1", None, "rank 1 steps 90-92 took ..."),
        (2, 100, 100, "incomplete", "/w/rank2", "the process exited during the window", ""),
    ])
    groups = window_groups(frame)
    assert len(groups) == 1, groups
    label = groups[0]["label"]
    assert "100-433 (rank 0)" in label and "100-350 (rank 1)" in label, label
    assert "ranks 2/3" in label and "TRIGGERED: rank 1 steps 90-92" in label, label
    paths, missing = latest_window(frame)
    assert paths == ["/w/rank0", "/w/rank1"]
    assert missing == ["rank 2 (incomplete: the process exited during the window)"]


def test_load_warns_when_a_rank_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from dynprof_nb.control import job as jobmod

    frame = _frame([(0, 5, 9, "complete", "/w/r0", None, ""),
                    (1, 5, 9, "incomplete", "/w/r1", "disk full", "")])
    job = jobmod.Job("nothing-here", None)
    monkeypatch.setattr(jobmod.Job, "windows", lambda self: frame)
    monkeypatch.setattr("dynprof_nb.traces.load_window", lambda paths: paths)
    with pytest.warns(UserWarning, match=r"without rank 1 \(incomplete: disk full\)"):
        assert job.load() == "/w/r0"
