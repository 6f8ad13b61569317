"""Hung is hung: a rank that stops stepping is ``stalled`` in ``status()``, by its own steps.

Two real ranks at ~10 ms a step. Rank 1 hangs first, rank 0 a little later (as a rank waiting
for it in a collective would): each row names its own last step and how long ago it ended,
rank 1 is named as the first to stop, ``slow`` says stalled rather than "-33%", and the heat
map keeps rank 1's row (drawn as stalled). A rank that ``exec``s is named at once.
"""

from __future__ import annotations

import time
from pathlib import Path

from jobutil import finish, spawn_rank, unique_job, wait_until

import dynprof_nb
from dynprof_nb.analysis.steptimes import plot_step_times, step_grid
from dynprof_nb.contract import segment
from dynprof_nb.control.asks import current_step
from dynprof_nb.control.stacks import last_stacks_path


def _state(job: dynprof_nb.Job) -> dict[int, dict]:
    return job.status().set_index("rank").to_dict("index")


def test_a_hung_rank_is_stalled_by_its_own_steps_and_the_first_is_named(tmp_path: Path) -> None:
    name = unique_job("stall")
    job = dynprof_nb.attach(name, create=True)
    job.hang_min_s = 1.0  # the floor (5 s by default), lowered to keep the test short
    hang = {r: tmp_path / f"hang{r}" for r in (0, 1)}
    procs = [spawn_rank(name, r, tmp_path / "out", step_ms=10,
                        extra=["--hang-file", str(hang[r])]) for r in (0, 1)]
    try:
        wait_until(lambda: len(job.live_slots()) == 2
                   and all(s.step > 30 for s in job.live_slots()), timeout=60,
                   what="2 ranks stepping")
        hang[1].touch()
        at1 = int(wait_until(lambda: Path(f"{hang[1]}.at").exists()
                             and Path(f"{hang[1]}.at").read_text(), what="rank 1 hung"))
        touched = time.monotonic()
        state = wait_until(lambda: (st := _state(job))[1]["state"] == "stalled" and st,
                           timeout=20, what="rank 1 stalled")
        waited = time.monotonic() - touched
        assert state[0]["state"] == "idle" and state[0]["alive"], state[0]
        assert f"stalled since step {at1} (" in state[1]["error"], state[1]["error"]
        assert state[1]["slow"] == "stalled" and state[1]["alive"], state[1]
        assert "first rank" not in state[1]["error"]  # alone: nothing to compare with
        assert waited < 1.0 + 2.0, waited  # its bound (1 s here) plus a status read or two

        # step_times() gives status()'s answer: the same rule on the same kind of snapshot
        # (the slots, then the clock; stall.named), read afresh, with no wait
        stalled = job.step_times(last=100).attrs["stalled"].get(1)
        assert stalled and stalled["step"] == at1, stalled
        wait_until(lambda: job.live_slots()[0].step > at1 + 120, timeout=30,
                   what="rank 0 100 steps further on")
        frame = job.step_times(last=100)
        grid, _ = step_grid(frame)
        assert 1 in grid.index  # not dropped, though its steps are older than those shown
        figure = plot_step_times(frame)
        labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
        assert any("rank 1 STALLED at" in x for x in labels), labels

        hang[0].touch()
        at0 = int(wait_until(lambda: Path(f"{hang[0]}.at").exists()
                             and Path(f"{hang[0]}.at").read_text(), what="rank 0 hung"))
        state = wait_until(lambda: (st := _state(job))[0]["state"] == "stalled" and st,
                           timeout=20, what="rank 0 stalled")
        assert f"stalled since step {at0} (" in state[0]["error"]
        assert f"stalled since step {at1} (" in state[1]["error"]
        assert "the first rank to stop" in state[1]["error"], state[1]["error"]
        assert "the first rank to stop" not in state[0]["error"], state[0]["error"]
        # nothing extrapolates a stalled rank: start +5 asks for 5 after where it stopped
        assert current_step(job.segment(), job.live_slots()) in (at0 + 1, at0)
        # the stall's stacks are kept for a notebook that attaches later, while the job lives
        wait_until(lambda: last_stacks_path(name).exists(), timeout=20,
                   what="the stall's stacks kept in the stacks directory")
    finally:
        for p in procs:
            finish(p)
        job.close()
        kept_after_close = last_stacks_path(name).exists()
        segment.unlink(name)
    # the last to leave the ended job removed its segment, and the kept stacks went with it
    assert not kept_after_close, last_stacks_path(name)


def test_a_rank_that_execs_is_no_longer_alive(tmp_path: Path) -> None:
    name = unique_job("exec")
    job = dynprof_nb.attach(name, create=True)
    # a stall bound below the 1 s a lost Monitor takes to be named: by then the rank is past
    # it, and status() and step_times() must still agree that it is dead, not stalled
    job.hang_after, job.hang_min_s = 1.0, 0.5
    flag = tmp_path / "exec"
    proc = spawn_rank(name, 0, tmp_path / "out", step_ms=10, extra=["--exec-file", str(flag)])
    try:
        wait_until(lambda: job.live_slots() and job.live_slots()[0].step > 10, timeout=60,
                   what="rank 0 stepping")
        flag.touch()
        row = wait_until(lambda: (st := _state(job))[0]["state"] == "dead" and st[0],
                         timeout=10, what="the exec'd rank named")
        assert not row["alive"] and "exec'd" in row["error"], row
        assert job.step_times().attrs["stalled"] == {}  # dead in both, stalled in neither
        assert _state(job)[0]["state"] == "dead"
    finally:
        finish(proc)
        job.close()
        segment.unlink(name)
