"""The demo's ranks exchange gradients every step (a real allreduce through rank 0), so they keep
in step like DDP ranks: a window closes at the same time on every rank, and a rank that leaves
does not hang the others. Real rank processes, real sockets, real shared memory."""

from __future__ import annotations

import os
import signal
import time

from jobutil import unique_job, wait_until

import dynprof_nb
from dynprof_nb.ui.demo import start_ranks, stop_ranks, wait_for_ranks


def steps(job: dynprof_nb.Job) -> list[int]:
    return [s.step for s in sorted(job.live_slots(), key=lambda s: s.rank)]


SLACK = 5  # steps; see the first assertion


def test_demo_ranks_keep_in_step_and_survive_a_lost_rank(tmp_path):
    name = unique_job("barrier")
    procs = start_ranks(name, str(tmp_path / "out"), ranks=2)
    job = None
    try:
        job = dynprof_nb.attach(name, create=True)  # its ranks may not be up yet
        wait_for_ranks(job, 2, timeout=120)
        # each rank leads its own session: a Ctrl-C in the kernel that started it never reaches it
        assert all(os.getsid(p.pid) == p.pid != os.getsid(0) for p in procs)

        first = steps(job)
        gaps = []
        for _ in range(40):
            s = steps(job)
            if len(s) == 2:
                gaps.append(max(s) - min(s))
            time.sleep(0.05)
        # the slots publish steps every 20 ms, a few steps of a fast loop: within SLACK steps
        # means in step (without the allreduce the ranks drift thousands apart)
        assert len(gaps) >= 30 and max(gaps) <= SLACK, gaps
        assert min(steps(job)) > max(first)  # and they do train

        job.start("+5", "+9")
        cfg = job.config
        job.wait(timeout=180)
        w = job.windows()
        assert sorted(w["rank"]) == [0, 1]
        assert set(w["start"]) == {cfg.start_step} and set(w["stop"]) == {cfg.stop_step}
        now = steps(job)
        assert min(now) >= cfg.stop_step and max(now) - min(now) <= SLACK, now

        procs[1].send_signal(signal.SIGKILL)  # a rank lost mid-training: rank 0 goes on alone
        procs[1].wait(timeout=30)
        at = job.slots()[0].step
        wait_until(lambda: any(s.rank == 0 and s.step >= at + 20 for s in job.slots()),
                   timeout=60, what="rank 0 to keep training after rank 1 was killed")
        assert procs[0].poll() is None
    finally:
        stop_ranks(procs)
        if job is not None:
            job.close()
    assert procs[0].returncode == 0
