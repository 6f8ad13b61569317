"""The recent-steps record on real ranks: kept on demand and when the trigger fires.

Two built-in-backend ranks at ~10 ms a step; rank 1 has a 5-step hiccup (60 ms each) inside
its ``dynprof_nb.range("work")``. The trigger (confirm=5) fires on the 5th slow step, so the
hiccup is over before the window it fires starts; the record each rank keeps holds the 5 slow
steps, and ``explain()`` of the records names rank 1 and the range that grew.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from jobutil import finish, spawn_rank, unique_job, wait_until

import dynprof_nb
from dynprof_nb.analysis.recent_explain import slow_steps
from dynprof_nb.contract import segment, window_dirs
from dynprof_nb.control.loading import OtherRunWarning

SLOW_RANK = 1
SLOW_STEPS = 5


def test_a_hiccup_is_kept_by_the_trigger_and_explained(tmp_path: Path) -> None:
    name = unique_job("recent")
    job = dynprof_nb.attach(name, create=True)
    slow = tmp_path / "slow"
    extra = ["--slow-file", str(slow), "--slow-ms", "60", "--slow-steps", str(SLOW_STEPS)]
    procs = [
        spawn_rank(name, r, tmp_path / "out", step_ms=10,
                   extra=extra if r == SLOW_RANK else None)
        for r in range(2)
    ]  # fmt: skip
    try:
        wait_until(lambda: len(job.live_slots()) == 2
                   and all(s.step > 80 for s in job.live_slots()), timeout=60,
                   what="2 ranks stepping", proc=procs[0])  # fmt: skip

        # on demand: each rank's last 50 steps, loaded together, not taken for a window
        asked = job.recent(50, timeout=30)
        assert sorted(asked.ranks) == [0, 1]
        per_rank = asked.steps.groupby("rank").size() if "rank" in asked.steps else None
        assert per_rank is None or (per_rank == 50).all(), per_rank
        listed = job.windows()
        assert set(listed["recent"]) == {"asked"}, listed.to_string()

        armed = job.trigger(slowdown=3.0, steps=8, confirm=SLOW_STEPS)
        assert armed["armed"]
        slow.touch()
        done = Path(f"{slow}.done")
        wait_until(done.exists, 60, "the slow rank's 5 slow steps", proc=procs[SLOW_RANK])
        first_slow, last_slow = map(int, done.read_text().split())
        assert last_slow - first_slow + 1 == SLOW_STEPS

        def kept() -> bool:
            w = job.windows()
            done = w[w.status == "complete"]
            return (done["recent"] == "trigger").sum() == 2 and (done["recent"] == "").sum() == 2

        wait_until(kept, 60, "each rank's record and the window the trigger fired")
        listed = job.windows()
        shown = listed[["rank", "start", "stop", "recent", "reason", "paired"]].to_string()
        records = listed[listed["recent"] == "trigger"].sort_values("rank")
        windows = listed[listed["recent"] == ""].sort_values("rank")
        # the hiccup was over before the full window started: only the record has it
        assert (windows["start"] > last_slow).all(), shown
        assert (records["stop"] >= last_slow).all() and (records["start"] < first_slow).all()
        # each record ends at the step before its rank's window: none of the window's steps
        assert (records["stop"].values == windows["start"].values - 1).all(), shown
        # each record is paired with its rank's window (written as the window starts, it may
        # land after a window of a few short steps has ended: its steps are what it promises)
        assert list(records["paired"]) == list(windows["path"]), shown
        manifest = window_dirs.read_manifest(records["path"].iloc[SLOW_RANK])
        assert manifest["recent"]["kind"] == "trigger"
        assert f"rank {SLOW_RANK}" in manifest["reason"], manifest["reason"]

        w = dynprof_nb.load_window(list(records["path"]))
        steps = w.steps
        mine = steps[(steps["rank"] == SLOW_RANK) & steps.step.between(first_slow, last_slow)]
        assert len(mine) == SLOW_STEPS, steps.to_string()
        normal = steps[(steps["rank"] == SLOW_RANK) & (steps.step < first_slow)]
        assert mine.duration_us.min() > 3 * normal.duration_us.median(), mine.to_string()
        gc_or_ranges = set(w.events["name"])
        assert "work" in gc_or_ranges

        judged = slow_steps(w.steps[["rank", "step", "duration_us"]])
        hiccup = judged[(judged["rank"] == SLOW_RANK) & judged.step.between(first_slow, last_slow)]
        assert hiccup["slow"].all(), hiccup.to_string()
        why = w.explain()
        assert why.rank == SLOW_RANK, why.text
        assert why.cause == "range: work", why.text
        assert f"rank {SLOW_RANK}" in why.text and "work" in why.text
        print(why.text)
        job.trigger(None)
    finally:
        for p in procs:
            finish(p)
        job.close()
        segment.unlink(name)


def test_a_restarted_job_is_given_its_own_record_not_the_dead_runs(tmp_path: Path) -> None:
    """A job ended and started again under its name, in the same folder, counts its requests
    from 1 again: ``job.recent()`` must load the live run's record, not the record the dead
    run wrote for its own request 1 (a new user got the dead run's 100 steps for 50 asked)."""
    name = unique_job("recent-rerun")
    out = tmp_path / "out"
    first = spawn_rank(name, 0, out, step_ms=5)
    job = dynprof_nb.attach(name, create=True)
    try:
        wait_until(lambda: [s for s in job.live_slots() if s.step > 60], 60,
                   "the first run stepping", proc=first)  # fmt: skip
        old = job.recent(40, timeout=30)
        assert len(old.steps) == 40
        job.start("+5", "+8")
        job.wait(timeout=60)
    finally:
        finish(first)
        job.close()
    wait_until(lambda: name not in segment.list_jobs(), 30, "the first run's segment gone")
    second = spawn_rank(name, 0, out, step_ms=5)
    job = dynprof_nb.attach(name, create=True)
    try:
        wait_until(lambda: [s for s in job.live_slots() if s.step > 60], 60,
                   "the second run stepping", proc=second)  # fmt: skip
        new = job.recent(25, timeout=30)
        assert len(new.steps) == 25, new.steps.to_string()
        manifest = window_dirs.read_manifest(str(new.path))
        assert manifest["pid"] == second.pid, (manifest["pid"], first.pid, second.pid)
        assert manifest["recent"]["request"] == 1  # the dead run's record had number 1 too

        # both runs are "run 1" (the segment was made anew); their start tells them apart, and
        # the latest window, the dead run's, is loaded with a word that it is not this run's
        listed = job.windows()
        assert listed["run_started_at"].nunique() == 2, listed.to_string()
        with pytest.warns(OtherRunWarning, match="is of an earlier run"):
            w = job.load()
        assert window_dirs.read_manifest(str(w.path))["pid"] == first.pid
    finally:
        finish(second)
        job.close()
        segment.unlink(name)
