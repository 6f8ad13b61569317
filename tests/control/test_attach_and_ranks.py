"""No silent surprises from the controller: ``attach`` of an unknown name refuses (listing the
live jobs) and creates nothing unless asked; two live processes claiming one rank are named in
``status()`` and by the second Monitor; a rank that dies without closing is reported with the
step it was at. Real training processes on a real segment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest
from jobutil import finish, running_ranks, spawn_rank, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.control.base import JobError, RankClaimedTwice


def test_attach_of_an_unknown_name_refuses_and_creates_nothing(tmp_path):
    with running_ranks(unique_job("live"), tmp_path) as (control, _):
        typo = control.name[:-1] + "x"
        with pytest.raises(JobError) as info:
            dynprof_nb.attach(typo)
        message = str(info.value)
        assert f"no job named {typo!r}" in message and control.name in message
        assert f"Did you mean {control.name!r}" in message and "create=True" in message
        assert typo not in segment.list_jobs()


def test_attach_create_prepares_a_job_before_its_ranks(tmp_path):
    name = unique_job("early")
    job = dynprof_nb.attach(name, create=True)
    try:
        job.start(30, 31)
        assert name in segment.list_jobs()
        again = dynprof_nb.attach(name)  # it exists now: no create needed
        assert again.config.start_step == 30
        again.close()
    finally:
        job.close()
        segment.unlink(name)


def test_cli_refuses_an_unknown_job_without_create(tmp_path):
    name = unique_job("clityp")
    cmd = [sys.executable, "-m", "dynprof_nb.ui.cli", "start", name, "10", "20"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert done.returncode == 2 and f"no job named {name!r}" in done.stderr
    assert "--create" in done.stderr and name not in segment.list_jobs()


def test_two_live_processes_with_one_rank_are_reported(tmp_path):
    with running_ranks(unique_job("dup"), tmp_path) as (control, procs):
        extra = spawn_rank(control.name, 0, tmp_path)  # the setup cell run twice
        try:
            wait_until(lambda: len(control.live_slots()) == 2, proc=extra,
                       what="the second rank 0")
            status = control.status()
            rows = status[status["rank"] == 0]
            assert len(rows) == 2
            assert all("rank 0 is claimed by 2 live processes" in e for e in rows.error)
            assert set(control.duplicate_ranks()[0]) == set(rows.pid)
            newer = next(s for s in control.live_slots() if s.pid == extra.pid)
            assert f"also claimed by live pid {procs[0].pid}" in newer.error
            # a window asked now goes to both: start() says so, naming both pids
            with pytest.warns(RankClaimedTwice, match=r"rank 0 by 2 live processes \(pid "):
                control.start("+1000", "+1001")
            control.stop()
        finally:
            finish(extra)
        wait_until(lambda: not control.duplicate_ranks(), what="the extra rank to leave")
        status = control.status()
        assert not any("claimed by" in e for e in status[status.alive == True].error)  # noqa: E712


def test_a_rank_that_vanishes_is_reported_with_its_last_step(tmp_path, capsys):
    with running_ranks(unique_job("gone"), tmp_path, ranks=2) as (control, procs):
        control.start("+100000", "+100009")
        target = control.generation
        wait_until(lambda: all(s.applied == target for s in control.live_slots()),
                   what="both ranks armed")
        threading.Timer(0.5, os.kill, (procs[1].pid, signal.SIGKILL)).start()
        with pytest.raises(TimeoutError):
            control.wait(timeout=3)
        err = capsys.readouterr().err
        assert "rank 1 (pid" in err and "exited without closing: heartbeat lost at step" in err
        status = control.status()
        dead = status[status["rank"] == 1].iloc[0]
        assert dead.state == "dead" and not dead.alive
        assert dead.error.startswith("exited without closing: heartbeat lost at step ")
        control.stop()


def _only_jobs_named(monkeypatch, prefix):
    """Scope ``dynprof status``'s look at the machine's jobs to this test's (other tests and
    helpers run jobs of the same uid beside it); the listing itself is the real one."""
    from dynprof_nb.control import registry

    real = registry.jobs
    monkeypatch.setattr(registry, "jobs", lambda verbose=False: (
        lambda frame: frame[frame.job.str.startswith(prefix)])(real(verbose)))


def test_cli_status_without_a_name_uses_the_one_running_job(tmp_path, monkeypatch, capsys):
    from dynprof_nb.ui.cli import main

    prefix = unique_job("solo")
    _only_jobs_named(monkeypatch, prefix)
    assert main(["status"]) == 2  # none running yet: said, with what to type
    assert "no job is running" in capsys.readouterr().err
    with running_ranks(prefix + "-a", tmp_path) as (control, _):
        assert main(["status"]) == 0
        assert control.name in capsys.readouterr().out
        with running_ranks(prefix + "-b", tmp_path / "b") as (other, _):
            assert main(["status"]) == 0  # several: one row each, and how to see one
            out = capsys.readouterr().out
            assert "2 jobs are running" in out and control.name in out and other.name in out
            assert f"dynprof status {control.name}" in out


def _job_row(out: str, name: str) -> dict[str, str]:
    """``name``'s row of the several-jobs table, by the header's column names."""
    lines = out.splitlines()
    header = next(line for line in lines if line.split()[:2] == ["job", "ranks"]).split()
    row = next(line for line in lines if line.split()[:1] == [name]).split()
    assert len(row) == len(header), (header, row)
    return dict(zip(header, row, strict=True))


def test_cli_status_of_several_jobs_is_one_row_per_job(tmp_path):
    """The real command, in its own process, beside two real jobs: one of two ranks with one
    killed and a window armed, one of one rank with another window. Each job is one row with
    the facts ``dynprof status JOB`` gives for it, condensed."""
    with running_ranks(unique_job("twoa"), tmp_path, ranks=2) as (a, procs), \
            running_ranks(unique_job("twob"), tmp_path / "b") as (b, _):
        a.start("+100000", "+100009")
        b.start("+200000", "+200004")
        for job in (a, b):
            target = job.generation
            wait_until(lambda job=job, target=target: all(
                s.applied == target and s.state == "armed" for s in job.live_slots()),
                what=f"{job.name}'s ranks armed")
        os.kill(procs[1].pid, signal.SIGKILL)
        wait_until(lambda: (a.status().state == "dead").sum() == 1, what="rank 1 of a dead",
                   timeout=30)
        window_a = a.status().window.iloc[0]
        window_b = b.status().window.iloc[0]
        runs = {job.name: str(job.status().run.iloc[0]) for job in (a, b)}
        done = subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", "status"],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=os.getcwd()))
        assert done.returncode == 0, done.stderr
        row_a, row_b = _job_row(done.stdout, a.name), _job_row(done.stdout, b.name)
        assert row_a["ranks"] == "1/2" and row_a["armed"] == "1" and row_a["dead"] == "1"
        assert row_b["ranks"] == "1/1" and row_b["armed"] == "1" and row_b["dead"] == "0"
        for row in (row_a, row_b):
            assert row["recording"] == row["idle"] == row["stalled"] == "0"
            assert 0 <= float(row["last_heartbeat_s"]) < 30
        assert (row_a["window"], row_b["window"]) == (window_a, window_b)
        assert row_a["run"] == runs[a.name] and row_b["run"] == runs[b.name]
        assert "one job's ranks in full: dynprof status " in done.stdout
        a.stop()
        b.stop()
