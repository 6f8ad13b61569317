"""Segment lifetime: the last process leaving a finished job removes its segment, a refused
request never creates one, a request waiting for its job is kept, a live job is never touched,
and ``dynprof jobs`` tidies quietly unless asked (``-v``). Real processes, real /dev/shm."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from jobutil import finish, spawn_rank, trace_steps, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.control.base import WindowRefused

DYNPROF = [sys.executable, "-m", "dynprof_nb.ui.cli"]


def _exists(job: str) -> bool:
    return os.path.exists(segment.segment_path(job))


@pytest.fixture
def job():
    name = unique_job("life")
    yield name
    segment.unlink(name)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DYNPROF, *args], capture_output=True, text=True, timeout=60)


def test_refused_request_from_the_cli_leaves_no_segment(job):
    bad = _cli("start", job, "10", "5")  # no such job
    # "no job named" (or, with another user's dynprof_nb on this machine, "no job of yours
    # named"): the words differ, the refusal and the name do not
    assert bad.returncode == 2 and "no job" in bad.stderr and f"named {job!r}" in bad.stderr
    assert not _exists(job)
    bad = _cli("start", job, "10", "5", "--create")  # a job prepared, but a bad window
    assert bad.returncode == 2 and "stop_step" in bad.stderr
    assert not _exists(job)
    bad = _cli("set", job, "profiler_level=Level9", "--create")
    assert bad.returncode == 2 and not _exists(job)


def test_refused_request_from_python_leaves_no_segment(job):
    control = dynprof_nb.attach(job, create=True)
    with pytest.raises(dynprof_nb.ConfigError):
        control.start(10, 5)
    with pytest.raises(dynprof_nb.ConfigError):
        control.set(profile_memory="maybe")
    assert control.status().empty and control.generation == 0  # looking creates nothing
    assert not _exists(job)
    control.close()
    assert not _exists(job)


def test_a_window_already_begun_is_refused_and_the_job_stays(job, tmp_path):
    rank = spawn_rank(job, 0, tmp_path, step_ms=2)
    control = dynprof_nb.attach(job, create=True)
    try:
        wait_until(lambda: [s for s in control.live_slots() if s.step > 3], what="rank up",
                   proc=rank)
        with pytest.raises(WindowRefused):
            control.start(1, 2)
        assert _exists(job)  # a live job's segment: refusing leaves it as it was
    finally:
        finish(rank)
        control.close()


def test_controller_leaves_first_then_the_last_rank_removes_the_segment(job, tmp_path):
    rank = spawn_rank(job, 0, tmp_path, step_ms=2)
    control = dynprof_nb.attach(job, create=True)
    wait_until(lambda: [s for s in control.live_slots() if s.step > 0], what="rank up",
               proc=rank)
    control.start("+20", "+24")
    control.wait(timeout=60, progress=False)
    window = control.windows().path.iloc[0]
    control.close()
    assert _exists(job)  # the rank is still training
    out, err = finish(rank)  # SIGTERM: the loop ends and closes its Monitor
    assert rank.returncode == 0 and "steps=" in out, err
    assert not _exists(job)
    assert len(trace_steps(window)) == 5


def test_ranks_finish_first_then_the_controller_removes_the_segment(job, tmp_path):
    ranks = [spawn_rank(job, r, tmp_path, step_ms=1, steps=300) for r in range(2)]
    control = dynprof_nb.attach(job, create=True)
    wait_until(lambda: len(control.slots()) == 2, what="both ranks up")
    for r in ranks:
        r.communicate(timeout=60)
    assert _exists(job)  # the controller is still attached
    assert list(control.status()["state"]) == ["closed", "closed"]
    control.close()
    assert not _exists(job)


def test_request_written_before_the_job_starts_waits_for_it(job, tmp_path):
    """``dynprof start JOB 5 9`` before training: the CLI exits, its request stays (it is not
    stale), the rank that comes records it, and once that rank is done nothing is left."""
    ok = _cli("start", job, "5", "9", "--memory", "--create")
    assert ok.returncode == 0, ok.stderr
    assert _exists(job)
    listed = dynprof_nb.jobs()
    assert list(listed["job"]) == [job] or job in set(listed["job"])
    rank = spawn_rank(job, 0, tmp_path, step_ms=1, steps=30)
    out, err = rank.communicate(timeout=60)
    assert "reclaiming" not in err and "steps=30" in out, err
    assert trace_steps(next(tmp_path.glob("rank0_start5_stop9*"))) == [5, 6, 7, 8, 9]
    assert not _exists(job)


def test_live_job_keeps_its_segment_whoever_leaves(job, tmp_path):
    rank = spawn_rank(job, 0, tmp_path, step_ms=2)
    try:
        for _ in range(3):  # controllers come and go
            control = dynprof_nb.attach(job, create=True)
            wait_until(lambda c=control: c.live_slots(), what="rank up", proc=rank)
            control.set(with_stack=True)
            control.close()
            assert _exists(job)
        again = dynprof_nb.attach(job, create=False)
        assert again.config.with_stack
        # a config the rank has not applied yet keeps the segment for ranks to come (by
        # design): under load the SIGTERM below could beat the rank to the last set()
        wait_until(lambda: again.live_slots()[0].applied == again.generation,
                   what="the rank to apply the last set", proc=rank)
        again.close()
    finally:
        finish(rank)
    assert not _exists(job)  # SIGTERM: the loop ends, Monitor.close(), last one out


def test_jobs_tidies_quietly_and_says_what_with_v(tmp_path):
    crashed, finished = unique_job("crashed"), unique_job("finished")
    code = textwrap.dedent("""
        import os, signal, sys
        from dynprof_nb.contract.segment import Segment
        from dynprof_nb.contract.slot import claim_slot
        seg = Segment.open(sys.argv[1]); claim_slot(seg, 0)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    try:
        for _ in range(2):  # two crashed jobs' segments (the kind `dynprof jobs` reclaims)
            subprocess.run([sys.executable, "-c", code, crashed], timeout=60)
            assert _exists(crashed)
            quiet = _cli("jobs")
            assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
            assert crashed not in quiet.stdout and not _exists(crashed)
        subprocess.run([sys.executable, "-c", code, crashed], timeout=60)
        loud = _cli("jobs", "-v")
        assert "reclaiming stale segment" in loud.stderr and crashed in loud.stderr
        assert not _exists(crashed)

        # a finished job whose last process did not get to leave cleanly (a rank holding a
        # closed slot, killed after Monitor.close while another process kept it open)
        holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
            import sys
            from dynprof_nb.contract.segment import Segment
            from dynprof_nb.contract.slot import claim_slot
            seg = Segment.open(sys.argv[1]); claim_slot(seg, 0).release()
            print("ready", flush=True); sys.stdin.readline()
        """), finished], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "ready"
        listed = _cli("jobs", "-v")
        assert finished in listed.stdout and _exists(finished)  # still open by the holder
        holder.send_signal(signal.SIGKILL)  # leaves without closing: the segment stays
        holder.wait()
        assert _exists(finished)
        loud = _cli("jobs", "-v")
        assert finished not in loud.stdout and not _exists(finished)
        assert finished in loud.stderr
    finally:
        segment.unlink(crashed)
        segment.unlink(finished)


LEAVER = """
    import fcntl, sys, time
    from dynprof_nb.contract import segment
    from dynprof_nb.contract.segment import Segment
    from dynprof_nb.contract.slot import claim_slot
    job, rank = sys.argv[1], int(sys.argv[2])
    real = segment._presence

    def slow_presence(fd, kind, wait=False):  # every leaver checks at about the same moment
        if kind == fcntl.F_WRLCK:
            time.sleep(0.3)
        return real(fd, kind, wait)

    segment._presence = slow_presence
    seg = Segment.open(job)
    slot = claim_slot(seg, rank)
    slot.set_applied(seg.generation)  # nothing pending
    print("up", flush=True)
    at = float(sys.stdin.readline())  # once every leaver is up: the same moment for all
    time.sleep(max(0.0, at - time.time()))
    slot.release()
    print(seg.close(), flush=True)
"""


def test_ranks_leaving_at_the_same_moment_still_remove_it():
    """Four ranks of a finished job leave at the same moment (each slowed down just before it
    looks whether it is alone): exactly one of them removes the segment, and it is gone."""
    import time

    for attempt in range(5):
        job = unique_job("together")
        procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(LEAVER), job, str(r)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for r in range(4)]
        try:
            assert [p.stdout.readline().strip() for p in procs] == ["up"] * 4
            at = time.time() + 0.5
            for p in procs:  # all told before any leaves
                p.stdin.write(f"{at}\n")
                p.stdin.flush()
            outs = [p.communicate(timeout=60)[0].split() for p in procs]
            assert [o[0] for o in outs].count("True") == 1, f"attempt {attempt}: {outs}"
            assert not _exists(job)
        finally:
            segment.unlink(job)
