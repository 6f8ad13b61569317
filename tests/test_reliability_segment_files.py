"""Reliability matrix, the segment file under attack: ``truncate -s 0``, ``rm``, a file moved
over it, ``chmod 000``, done to the live ``/dev/shm`` segment while real training ranks run.

A mapping of a truncated file raises SIGBUS in whoever reads it, which used to kill every rank of
the job. Each rank here is a real ``tests/train_loop.py`` process: it must train to its last step
and exit 0, republish the segment (config kept), and a notebook's Job must drive the job again
(a window recorded on both ranks) without being told anything. See docs/reliability.md.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from jobutil import finish, spawn_rank, trace_steps, unique_job, wait_until

import dynprof_nb
from dynprof_nb import segment

pytestmark = pytest.mark.timeout(180)

STEPS = 2500


def _truncate(path: str) -> None:
    subprocess.run(["truncate", "-s", "0", path], check=True)


def _unlink(path: str) -> None:
    os.unlink(path)


def _replace(path: str) -> None:
    other = path + ".other"
    with open(other, "wb") as fh:  # a whole-size file of another program
        fh.write(os.urandom(segment.SEGMENT_BYTES))
    os.chmod(other, 0o600)
    os.rename(other, path)


def _chmod(path: str) -> None:
    os.chmod(path, 0)


@pytest.mark.parametrize("operation", [_truncate, _unlink, _replace, _chmod],
                         ids=["truncate", "unlink", "replace", "chmod000"])
def test_ranks_survive_any_operation_on_their_segment_file(tmp_path: Path, operation) -> None:
    job = unique_job("segfile")
    path = segment.SHM_DIR + segment.segment_name(job)
    control = dynprof_nb.attach(job, create=True)
    procs = [spawn_rank(job, r, tmp_path, step_ms=1.0, steps=STEPS) for r in range(2)]
    try:
        wait_until(lambda: len(control.live_slots()) == 2
                   and all(s.step > 0 for s in control.live_slots()),
                   what="two ranks stepping", proc=procs[0])
        control.set(with_stack=True)  # a standing config the ranks must keep
        gen = control.generation
        wait_until(lambda: all(s.applied == gen for s in control.live_slots()),
                   what="the config applied")
        before = os.stat(path).st_ino
        operation(path)

        def republished() -> bool:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                return False
            if (operation is not _chmod and st.st_ino == before) or st.st_mode & 0o777 != 0o600:
                return False
            slots = control.live_slots()
            return len(slots) == 2 and all(s.step > 0 for s in slots)

        wait_until(republished, timeout=30, what="the ranks to republish their segment",
                   proc=procs[0])
        assert control.config.with_stack, "the republished segment lost the standing config"
        control.start("+20", "+30")
        first, last = control.config.start_step, control.config.stop_step
        control.wait(timeout=60, progress=False)
        found = control.windows()
        assert sorted(found[found.status == "complete"]["rank"]) == [0, 1], control.status()
        for window in found.path:
            assert trace_steps(window) == list(range(first, last + 1))
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, f"rank died ({proc.returncode}):\n{err[-3000:]}"
            assert f"steps={STEPS}" in out, out
    finally:
        for proc in procs:
            finish(proc)
        control.close()
        segment.unlink(job)
