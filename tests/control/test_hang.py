"""``job.hang_report()`` on real processes: a torchrun gloo job with one hung rank, whose Flight
Recorder dumps and stacks name the rank and where its main thread is; and a rank without a
recorder, whose report is its stacks, saying why."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jobutil import finish, main_threads, running_ranks, unique_job, wait_until

from dynprof_nb.contract import segment
from dynprof_nb.control.job import Job
from dynprof_nb.flight_recorder.analysis import culprits

REPO = Path(__file__).resolve().parents[2]
FR_JOB = REPO / "tests" / "fr_hang_job.py"
HANG_STEP = 5
GIL_STEP = 7


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tmp_path: Path, *extra: str) -> tuple[Job, subprocess.Popen]:
    """torchrun, 4 ranks, gloo, flight_recorder=True; rank 3 sleeps 60 s at step HANG_STEP."""
    name = unique_job("frhang")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(FR_JOB),
           "--job", name, "--out", str(tmp_path), "--steps", "8", "--hang-step",
           str(HANG_STEP), "--hang-s", "60", *extra]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    return Job.open(name), proc


def stop(job: Job, proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # rank 3 may sit in C for a minute: no clean exit
    finish(proc, timeout=60)
    job.close()
    segment.unlink(job.name)


@pytest.fixture
def hung_job(tmp_path):
    """Rank 3 sleeps at step HANG_STEP until tmp_path/wake appears, then, at step GIL_STEP,
    sleeps in C holding the GIL."""
    job, proc = start(tmp_path, "--wake-file", str(tmp_path / "wake"), "--gil-step",
                      str(GIL_STEP))
    try:
        yield job, proc
    finally:
        stop(job, proc)


def at_the_hang(job: Job, proc: subprocess.Popen, step: int = HANG_STEP) -> None:
    """Ranks 0-2 at the step they cannot pass without rank 3 (rank 3's own slot may show the
    step before: its heartbeat thread publishes the step, and cannot while it holds the GIL)."""
    def there():
        live = job.live_slots()
        return len(live) == 4 and all(s.step == step - 1 for s in live if s.rank != 3)

    wait_until(there, 180, "the four ranks to reach the hang", proc)

    def inside():  # what the stacks show, not a guess at how long it takes to get there
        main = main_threads(job.stacks())
        return (all("all_reduce" in main.get(r, []) for r in range(3))
                and main.get(3, [])[-1:] == ["rank3_sleeps"] and main)

    wait_until(inside, 60, "ranks 0-2 inside their all-reduces and rank 3 in its sleep", proc)


def test_the_report_names_the_hung_rank_and_its_main_thread_within_10_s(hung_job, tmp_path):
    job, proc = hung_job
    at_the_hang(job, proc)

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
    assert auto is not None
    if auto.analysis is None:  # on a loaded machine no rank answered in time: it says so
        assert auto.notes and all("no dump within" in n for n in auto.notes.values()), auto.notes
        assert "rank3_sleeps" in str(auto)  # the stacks alone still show where rank 3 is
    else:
        assert culprits(auto.analysis) == [3]
    assert job.last_stacks is auto.stacks

    # rank 3 goes on, then hangs holding the GIL: no thread of it can answer, yet it is named
    (tmp_path / "wake").touch()
    at_the_hang(job, proc, GIL_STEP)
    t0 = time.monotonic()
    report = job.hang_report()
    assert time.monotonic() - t0 < 10.0
    assert sorted(report.dumps) == [0, 1, 2] and "no dump within 5 s" in report.notes[3]
    assert culprits(report.analysis) == [3]
    assert "rank 3 never called all_reduce #7 (PG 2 PAIR_B); its main thread is in " \
        "rank3_sleeps" in str(report), str(report)


def test_without_a_recorder_the_report_is_the_stacks_saying_why(tmp_path):
    with running_ranks(unique_job("frnone"), tmp_path, ranks=1, step_ms=5.0) as (job, _procs):
        report = job.hang_report(timeout=3.0)
    assert report.analysis is None and report.dumps == {}
    assert report.verdict.startswith("No Flight Recorder dump (flight_recorder is off")
    assert "the stacks alone" in report.verdict
    assert "MainThread [rank 0]" in str(report)
