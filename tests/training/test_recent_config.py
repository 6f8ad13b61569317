"""How many steps the recent-steps record keeps: the job's config key ``recent_steps``, read
when a rank's Monitor starts; ``DYNPROF_NB_RECENT_STEPS`` and ``Monitor(recent_steps=)`` win.

Real ranks on a job whose config says 40: one started plainly keeps 40 steps, one started
with the environment variable at 60 keeps 60, one started after the config is set to 0 keeps
none (``job.recent`` names it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from jobutil import finish, spawn_rank, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.contract.config import ConfigError, ProfilerConfig
from dynprof_nb.training import recent


def test_the_argument_then_the_environment_then_the_config(monkeypatch) -> None:
    monkeypatch.setenv(recent.ENV, "60")
    assert recent.steps_asked(25) == 25  # Monitor(recent_steps=25) wins
    assert recent.steps_asked(0) == 0
    assert recent.steps_asked(None) == 60  # then the environment
    monkeypatch.delenv(recent.ENV)
    assert recent.steps_asked(None) is None  # then the job's config, when the rank joins
    with pytest.raises(ConfigError, match="recent_steps"):
        ProfilerConfig(recent_steps=recent.MAX_STEPS + 1)
    assert ProfilerConfig().recent_steps == recent.DEFAULT_STEPS


def test_the_jobs_config_sizes_the_record_of_a_rank_that_starts(tmp_path: Path,
                                                               monkeypatch) -> None:
    name = unique_job("recentcfg")
    job = dynprof_nb.attach(name, create=True)
    procs = []
    try:
        job.set(recent_steps=40)
        monkeypatch.setenv(recent.ENV, "60")
        procs.append(spawn_rank(name, 1, tmp_path / "out", step_ms=10))
        monkeypatch.delenv(recent.ENV)
        procs.append(spawn_rank(name, 0, tmp_path / "out", step_ms=10))
        wait_until(lambda: len(job.live_slots()) == 2
                   and all(s.step > 90 for s in job.live_slots()), 60, "2 ranks stepping",
                   proc=procs[0])  # fmt: skip
        w = job.recent(100, timeout=30)
        sizes = w.steps.groupby("rank").size().to_dict()
        assert sizes == {0: 40, 1: 60}, sizes

        job.set(recent_steps=0)  # a rank that starts now keeps none
        procs.append(spawn_rank(name, 2, tmp_path / "out", step_ms=10))
        wait_until(lambda: len(job.live_slots()) == 3
                   and all(s.step > 10 for s in job.live_slots()), 60, "rank 2 stepping",
                   proc=procs[-1])  # fmt: skip
        with pytest.warns(UserWarning, match="rank 2"):
            w = job.recent(100, timeout=3)
        assert sorted(w.ranks) == [0, 1]
    finally:
        for p in procs:
            finish(p)
        job.close()
        segment.unlink(name)
