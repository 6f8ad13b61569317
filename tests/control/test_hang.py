"""``job.hang_report()`` on real processes: a torchrun gloo job with one hung rank, whose Flight
Recorder dumps and stacks name the rank and where its main thread is; and a rank without a
recorder, whose report is its stacks, saying why."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jobutil import finish, running_ranks, unique_job, wait_until

from dynprof_nb import segment
from dynprof_nb.control.job import Job
from dynprof_nb.flight_recorder.analysis import culprits

REPO = Path(__file__).resolve().parents[2]
FR_JOB = REPO / "tests" / "fr_hang_job.py"
HANG_STEP = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def hung_job(tmp_path):
    """torchrun, 4 ranks, gloo, flight_recorder=True; rank 3 sleeps 60 s at step HANG_STEP."""
    name = unique_job("frhang")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(FR_JOB),
           "--job", name, "--out", str(tmp_path), "--steps", "8", "--hang-step",
           str(HANG_STEP), "--hang-s", "60"]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    job = Job.open(name)
    try:
        yield job, proc
    finally:
        finish(proc, timeout=60)
        job.close()
        segment.unlink(name)


def test_the_report_names_the_hung_rank_and_its_main_thread_within_10_s(hung_job, tmp_path):
    job, proc = hung_job

    def at_the_hang():
        live = job.live_slots()
        return len(live) == 4 and all(s.step == HANG_STEP - 1 for s in live)

    wait_until(at_the_hang, 180, "the four ranks to reach the hang", proc)
    time.sleep(1.0)  # ranks 0-2 are now inside their all-reduces, rank 3 in its sleep

    t0 = time.monotonic()
    report = job.hang_report(keep=tmp_path / "dumps")
    took = time.monotonic() - t0
    assert took < 10.0, took
    assert sorted(report.dumps) == [0, 1, 2, 3] and report.notes == {}
    assert culprits(report.analysis) == [3]
    text = str(report)
    assert "rank 3 never called all_reduce #5 (PG 2 PAIR_B); its main thread is in rank3_sleeps" \
        in text, text
    assert report.verdict.startswith("PG 2 PAIR_B all_reduce #5 64 Float: 1 of 2 ranks arrived")
    assert "MainThread [ranks 0-3]" in text  # the stacks tree follows
    kept = sorted(p.name for p in (tmp_path / "dumps").iterdir())
    assert kept == ["_dump_0", "_dump_1", "_dump_2", "_dump_3"]

    # when status() names the stall, the report is taken by itself, once
    assert job.last_hang_report is None
    job.hang_after, job.hang_min_s = 20.0, 1.0
    wait_until(lambda: job.status().error.str.contains(f"stalled since step {HANG_STEP - 1}")
               .all(), 20, "the stall to be named")
    auto = job.last_hang_report
    assert auto is not None and culprits(auto.analysis) == [3]
    assert job.last_stacks is auto.stacks


def test_without_a_recorder_the_report_is_the_stacks_saying_why(tmp_path):
    with running_ranks(unique_job("frnone"), tmp_path, ranks=1, step_ms=5.0) as (job, _procs):
        report = job.hang_report(timeout=3.0)
    assert report.analysis is None and report.dumps == {}
    assert report.verdict.startswith("No Flight Recorder dump (flight_recorder is off")
    assert "the stacks alone" in report.verdict
    assert "MainThread [rank 0]" in str(report)
