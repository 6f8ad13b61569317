"""A hung rank's recent steps are kept with its stacks, on real ranks.

Two built-in-backend ranks at ~10 ms a step inside ``dynprof_nb.range("work")``; rank 1 then
blocks inside ``dynprof_nb.range("allreduce")`` (as a rank waiting in a collective does: the
GIL released). When ``status()`` names the stall, the controller takes the stacks and asks
every rank for its record: rank 1's holds its steps up to the hang, says how long ago its last
step ended and that it sits in 'allreduce'; the kept stacks say where the records are.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from jobutil import finish, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment, window_dirs

REPO = Path(__file__).resolve().parents[2]
HUNG = 1
RANK = """
import os, signal, sys, time, dynprof_nb
job, rank, out, hang = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
m = dynprof_nb.Monitor(job=job, rank=rank, output_path=out)
n = 0
while not stop:
    n += 1
    if rank == 1 and os.path.exists(hang):
        with open(hang + ".at", "w") as fh:
            fh.write(str(n - 1))
        with dynprof_nb.range("allreduce"):  # blocked, as in a collective no peer joins
            while not stop:
                time.sleep(0.05)
        break
    with dynprof_nb.range("work"):
        time.sleep(0.01)
    m.step()
m.close()
"""


def test_a_hung_ranks_steps_are_kept_with_its_stacks(tmp_path: Path) -> None:
    name = unique_job("recenthang")
    job = dynprof_nb.attach(name, create=True)
    job.hang_min_s = 1.0  # the floor (5 s by default), lowered to keep the test short
    hang = tmp_path / "hang"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [
        subprocess.Popen([sys.executable, "-c", RANK, name, str(r), str(tmp_path / "out"),
                          str(hang)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=env)
        for r in range(2)
    ]  # fmt: skip
    try:
        wait_until(lambda: len(job.live_slots()) == 2
                   and all(s.step > 40 for s in job.live_slots()), 60, "2 ranks stepping",
                   proc=procs[0])  # fmt: skip
        assert job.windows().empty
        hang.touch()
        at = int(wait_until(lambda: Path(f"{hang}.at").exists() and Path(f"{hang}.at").read_text(),
                            30, "rank 1 hung", proc=procs[HUNG]))  # fmt: skip
        wait_until(lambda: job.status().set_index("rank").loc[HUNG, "state"] == "stalled", 30,
                   "rank 1 named stalled (its stacks taken)")  # fmt: skip

        def kept() -> bool:
            w = job.windows()
            return ((w["recent"] == "hang") & (w["status"] == "complete")).sum() == 2

        wait_until(kept, 30, "each rank's record kept at the stall")
        rows = job.windows().set_index("rank")
        paths = rows["path"].to_dict()
        assert rows.loc[HUNG, "stop"] == at, rows.to_string()  # up to the hang, its last step
        assert rows.loc[HUNG, "reason"].startswith("kept at a stall"), rows.to_string()
        manifest = window_dirs.read_manifest(paths[HUNG])
        reason = manifest["reason"]
        assert reason.startswith(f"kept at a stall: its last step ({at}) ended "), reason
        assert "in 'allreduce' for" in reason, reason
        assert [o["name"] for o in manifest["recent"]["open"]] == ["allreduce"]
        w = job.load(paths[HUNG])
        steps = w.steps
        assert steps.step.max() == at and len(steps) > 30, steps.to_string()
        assert list(steps.step) == list(range(steps.step.min(), at + 1)), "no step missing"
        assert "work" in set(w.events["name"])

        stacks = job.last_stacks  # kept with the stall's stacks, and said there
        assert stacks is not None
        assert "recent == 'hang'" in stacks.attrs["recent"], stacks.attrs
        assert "steps before the hang: each live rank keeps" in stacks.tree().text()
        # the stall is captured once: a later status() asks for no second record
        job.status()
        assert len(job.windows()) == 2
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            finish(p)
        job.close()
        segment.unlink(name)
