"""A recent-steps record says which parts it saw and which it could not, on real ranks.

Two built-in-backend ranks at ~10 ms a step: rank 0 marks its data-loader wait
(``category="dataloader"``) and its all-reduce (``category="communication"``), rank 1 marks
neither (its loader is not wrapped, and it does not use PyTorch: no Flight Recorder). A window
records a few steps in between (its trace, not the record, has their ranges). The record asked for
afterwards says all of it in ``window.json``, ``w.summary()`` and ``w.explain()``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from jobutil import finish, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment, window_dirs

REPO = Path(__file__).resolve().parents[2]
RANK = """
import signal, sys, time, dynprof_nb
job, rank, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
m = dynprof_nb.Monitor(job=job, rank=rank, output_path=out, backend="builtin")
while not stop:
    if rank == 0:
        with dynprof_nb.range("next batch", category="dataloader"):
            time.sleep(0.002)
    with dynprof_nb.range("work"):
        time.sleep(0.008)
    if rank == 0:
        with dynprof_nb.range("allreduce", category="communication"):
            time.sleep(0.001)
    m.step()
m.close()
"""


def test_a_record_says_what_it_saw_and_what_it_could_not(tmp_path: Path) -> None:
    name = unique_job("recentparts")
    job = dynprof_nb.attach(name, create=True)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [
        subprocess.Popen([sys.executable, "-c", RANK, name, str(r), str(tmp_path / "out")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for r in range(2)
    ]  # fmt: skip
    try:
        wait_until(lambda: len(job.live_slots()) == 2
                   and all(s.step > 20 for s in job.live_slots()), 60, "2 ranks stepping",
                   proc=procs[0])  # fmt: skip
        job.start("+5", "+9")
        job.wait(timeout=60, progress=False)
        windows = job.windows()
        start, stop = int(windows["start"].iloc[0]), int(windows["stop"].iloc[0])
        wait_until(lambda: all(s.step > stop + 20 for s in job.live_slots()), 60,
                   "20 steps after the window")  # fmt: skip

        w = job.recent(200, timeout=30)
        records = job.windows()
        records = records[records["recent"] == "asked"].set_index("rank")
        got = {
            r: window_dirs.read_manifest(records.loc[r, "path"])["recent"]["parts"]
            for r in (0, 1)
        }
        assert got[0]["seen"] == [
            "steps", "ranges", "GC pauses", "data-loader waits", "collectives (marked ranges)",
        ], got[0]  # fmt: skip
        assert got[1]["seen"] == ["steps", "ranges", "GC pauses"], got[1]
        assert "the loader is not wrapped" in got[1]["unseen"]["data-loader waits"]
        assert "does not use PyTorch (no Flight Recorder)" in got[1]["unseen"]["collectives"]
        assert "collectives" not in got[0]["unseen"] and "data-loader waits" not in got[0]["unseen"]
        for r in (0, 1):  # the window's steps: their ranges are in the window's trace
            assert got[r]["unseen"]["ranges"] == (
                f"in steps {start}-{stop} a window recorded them (its trace has them)"
            ), got[r]
        events = w.events
        inside = events[events["step"].between(start, stop) & (events["name"] == "work")]
        assert inside.empty, "the record has no range of the window's steps"

        line = str(w.summary())
        assert "record saw: steps, ranges, GC pauses, data-loader waits (rank 0)" in line, line
        assert "could not see: ranges: in steps" in line, line
        assert "data-loader waits (rank 1): no range of category 'dataloader'" in line, line
        assert "collectives (rank 1): this rank does not use PyTorch" in line, line
        why = w.explain()
        assert any(n.startswith("record saw: ") for n in why.notes), why.notes
    finally:
        for p in procs:
            finish(p)
        job.close()
        segment.unlink(name)
