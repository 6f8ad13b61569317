"""The recent-steps record on a real PyTorch DDP job: the culprit, not the rank that waits.

Two DDP ranks (gloo, the torch backend; tests/ddp_recent_job.py): rank 1's forward takes 80 ms
longer for 5 steps, and rank 0 waits for it in DDP's all-reduce inside its backward pass, so
both ranks' steps are slow by the same time. The trigger (confirm=5) fires on the 5th slow
step, after the hiccup; the record kept holds the 5 slow steps, and ``explain()`` names rank 1
and its forward, not rank 0, whose backward grew by waiting.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import jobutil
import pytest
from jobutil import finish, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment, window_dirs

JOB = Path(__file__).resolve().parents[1] / "ddp_recent_job.py"
REPO = JOB.parents[1]
SLOW_RANK = 1
SLOW_STEPS = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("how", ["ranges", "flight-recorder"])
def test_a_ddp_hiccup_names_the_slow_rank_not_the_one_that_waits(tmp_path: Path, how: str) -> None:
    """``ranges``: the forward and backward are ranges, and the order of their ends names the
    culprit. ``flight-recorder``: the forward is in no range; the record holds the collectives
    (torch's Flight Recorder), and the last rank to enter them is the culprit."""
    name = unique_job("recent-ddp")
    job = dynprof_nb.attach(name, create=True)
    slow = tmp_path / "slow"
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", PYTHONPATH=str(REPO),
                   # torch records collectives by default: off, only the ranges order the ranks
                   TORCH_FR_BUFFER_SIZE="0" if how == "ranges" else "2000")
        procs.append(jobutil.start_script(
            [sys.executable, str(JOB), "--job", name, "--out", str(tmp_path / "out"),
             "--slow-file", str(slow), "--slow-rank", str(SLOW_RANK),
             "--slow-steps", str(SLOW_STEPS),
             *(["--flight-recorder", "--unmarked"] if how == "flight-recorder" else [])],
            env=env))
    try:
        wait_until(lambda: len(job.live_slots()) == 2
                   and all(s.step > 60 for s in job.live_slots()), timeout=120,
                   what="2 DDP ranks stepping", proc=procs[0])  # fmt: skip
        job.trigger(slowdown=3.0, steps=8, confirm=SLOW_STEPS)
        slow.touch()
        done = Path(f"{slow}.done")
        wait_until(done.exists, 120, "the slow rank's 5 slow steps", proc=procs[SLOW_RANK])
        first_slow, last_slow = map(int, done.read_text().split())

        def kept() -> bool:
            w = job.windows()
            ok = w[w.status == "complete"]
            return (ok["recent"] == "trigger").sum() == 2 and (ok["recent"] == "").sum() == 2

        wait_until(kept, 120, "each rank's record and the window the trigger fired")
        listed = job.windows()
        records = listed[listed["recent"] == "trigger"].sort_values("rank")
        w = dynprof_nb.load_window(list(records["path"]))
        steps = w.steps
        shown = steps.to_string()
        for r in (0, 1):  # both ranks' steps were slow: rank 0 waited for rank 1
            mine = steps[(steps["rank"] == r) & steps.step.between(first_slow, last_slow)]
            normal = steps[(steps["rank"] == r) & (steps.step < first_slow)]
            assert len(mine) == SLOW_STEPS, shown
            # each slow step holds most of the 80 ms (a loaded machine adds to every step)
            assert mine.duration_us.min() > normal.duration_us.median() + 40_000, shown
        why = w.explain()
        print(why.text)
        assert why.rank == SLOW_RANK, why.text
        waited = [n for n in why.notes if n.startswith("rank 0 was slow in the same steps")]
        assert waited, why.notes
        if how == "ranges":
            assert why.cause == "range: forward", why.text
            assert "range: backward" in waited[0], why.notes
        else:  # its delay is in no range: the collectives name it, and say how long 0 waited
            assert why.cause is None and "outside any range" in why.text, why.text
            assert "entered their collectives" in waited[0], why.notes
            ms = float(waited[0].split("collectives ")[1].split(" ms")[0])
            assert 60 < ms < 100, waited[0]  # the 80 ms hiccup
            seen = window_dirs.read_manifest(records["path"].iloc[0])["recent"]["parts"]
            assert "collectives (Flight Recorder)" in seen["seen"], seen
        job.trigger(None)
    finally:
        for p in procs:
            finish(p)
        job.close()
        segment.unlink(name)
