"""What a person meets around a job handle's life: a closed handle says so in one line, a job
prepared under a typo says it has no rank and goes when its last handle closes, re-attaching
reuses the handle, stop with nothing to stop writes nothing, status rows agree with the
header, and ``ranks=`` naming no live rank is refused. Real segments, real ranks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from jobutil import running_ranks, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.control.base import JobError


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    with running_ranks(unique_job("handles"), tmp_path_factory.mktemp("handles"), ranks=2,
                       step_ms=3) as (control, _):
        wait_until(lambda: len(control.live_slots()) == 2, what="two ranks up")
        yield control


def test_a_closed_handle_says_so_in_one_line(ip, magics, ranks):
    job = ip.run_line_magic("dynprof", f"attach {ranks.name}")
    job.close()
    for line in ("start +5 +10", "status", "stop", "config"):
        with pytest.raises(UsageError) as info:
            ip.run_line_magic("dynprof", line)
        message = str(info.value)
        assert "\n" not in message and "memoryview" not in message
        assert "this handle is closed" in message
        assert f"%dynprof attach {ranks.name}" in message, message
    with pytest.raises(JobError, match="this handle is closed"):
        job.status()
    assert "closed" in repr(job) and "closed" in job._repr_html_()
    job.close()  # twice is fine
    again = ip.run_line_magic("dynprof", f"attach {ranks.name}")  # what the message says
    assert again is not job and len(again.status()) == 2


def test_a_prepared_job_with_no_rank_says_so_and_goes_with_its_last_handle(ip, magics, ranks):
    typo = ranks.name[:-1] + ("x" if not ranks.name.endswith("x") else "y")
    try:
        job = ip.run_line_magic("dynprof", f"attach {typo} --create")
        assert ip.run_line_magic("dynprof", f"attach {typo} --create") is job  # reused
        for _ in range(2):  # on every start
            with capture_output() as out:
                ip.run_line_magic("dynprof", "start +5 +10")
            assert f"no rank has joined job {typo!r} yet" in out.stdout, out.stdout
            assert f"Did you mean {ranks.name!r}" in out.stdout
        assert "no rank has joined" in repr(job.start("+5", "+10"))
        assert typo in segment.list_jobs()
        with capture_output() as out:
            ip.run_line_magic("dynprof", "stop")
        assert "no rank has joined the job" in out.stdout and "cleared it" not in out.stdout
        magics.job = None
        job.close()
        assert typo not in segment.list_jobs()
    finally:
        segment.unlink(typo)


def test_a_prepared_job_stopped_then_left_at_exit_is_removed(tmp_path):
    name = unique_job("exitprep")
    code = textwrap.dedent(f"""
        import dynprof_nb
        job = dynprof_nb.attach({name!r}, create=True)
        job.start(20, 29)
        job.stop()
        print(job.generation)
    """)  # no close(): the kernel shuts down
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    try:
        assert done.returncode == 0, done.stderr
        assert name not in segment.list_jobs()
    finally:
        segment.unlink(name)


def test_a_prepared_window_outlives_a_cli_start_for_its_ranks(tmp_path):
    name = unique_job("cliprep")
    cmd = [sys.executable, "-m", "dynprof_nb.ui.cli", "start", name, "20", "29", "--create"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PYTHONPATH=os.getcwd()))
        assert done.returncode == 0 and "no rank has joined" in done.stdout, done.stderr
        assert name in segment.list_jobs()  # kept for the ranks that start later
        job = dynprof_nb.attach(name)
        assert job.config.start_step == 20
        with pytest.warns(UserWarning, match="window 20-29 went with its last handle"):
            job.close()
        assert name not in segment.list_jobs()
    finally:
        segment.unlink(name)


def test_stop_with_nothing_to_stop_writes_nothing_and_rows_match_the_header(ranks):
    ranks.start("+25", "+27")
    ranks.wait(timeout=60, progress=False)
    assert (ranks.status().window != "").all()  # the window each rank recorded
    told = ranks.describe_stop()
    assert "is not recording or armed" in told and "cleared" not in told, told
    before = ranks.generation
    assert ranks.stop() == before + 1  # takes the ended window off the config
    assert [ranks.stop() for _ in range(3)] == [before + 1] * 3  # then nothing to stop
    assert ranks.describe_stop().startswith("nothing to stop")
    wait_until(lambda: all(s.applied == before + 1 for s in ranks.live_slots()),
               what="the ranks to apply the stop")
    assert not ranks.config.has_window
    assert (ranks.status().window == "").all()  # "no window asked for": no row says one


def test_wait_with_nothing_pending_says_so(ip, magics, ranks):
    ip.run_line_magic("dynprof", f"attach {ranks.name}")
    ranks.stop()
    wait_until(lambda: all(s.applied == ranks.generation for s in ranks.live_slots()),
               what="the ranks to apply the stop")
    with capture_output() as out:
        ip.run_line_magic("dynprof", "wait --no-progress")
    assert "nothing to wait for: no window is asked for" in out.stdout, out.stdout
    ranks.start("+100000", "+100009")
    with capture_output() as out, pytest.raises(UsageError, match="still waiting"):
        ip.run_line_magic("dynprof", "wait --timeout 0.5 --no-progress")
    assert "nothing to wait for" not in out.stdout  # a window is pending: it waits
    ranks.stop()


def test_ranks_naming_no_live_rank_are_refused(ip, magics, ranks):
    before = ranks.generation
    with pytest.raises(JobError, match=r"ranks 7: .*no such live rank \(live ranks: 0,1\)"):
        ranks.start("+5", "+10", ranks=[7])
    ip.run_line_magic("dynprof", f"attach {ranks.name}")
    with pytest.raises(UsageError, match="no window would be written"):
        ip.run_line_magic("dynprof", "start +5 +10 --ranks 7")
    assert ranks.generation == before
    gen = ranks.start("+100000", "+100009", ranks=[1, 7])  # one of them runs: fine
    assert gen == before + 1 and repr(gen).startswith(f"<generation {gen}: window ")
    assert f"{gen}" == str(before + 1)
    ranks.stop()


def test_windows_under_another_prof_path_stay_listed(ranks, tmp_path):
    """prof_path set to another directory for one window, then set back: both windows (and
    the panel's rows) stay listed."""
    from dynprof_nb.ui.panel import Panel, window_groups

    default = ranks.config.prof_path
    elsewhere = tmp_path / "elsewhere"
    ranks.set(prof_path=str(elsewhere))
    ranks.start("+25", "+26")
    ranks.wait(timeout=60, progress=False)
    ranks.set(prof_path=default)
    ranks.start("+25", "+26")
    ranks.wait(timeout=60, progress=False)
    frame = ranks.windows()
    done = frame[frame.status == "complete"]
    assert (done.path.str.startswith(str(elsewhere))).sum() == 2, frame  # both ranks' there
    assert (~done.path.str.startswith(str(elsewhere))).sum() >= 2, frame
    older = done[done.path.str.startswith(str(elsewhere))]
    assert sorted(ranks.load(list(older.path)).ranks) == [0, 1]  # as the README shows
    p = Panel(ranks, poll=False)
    try:
        p.refresh(windows=True)
        assert len(window_groups(ranks.windows())) >= 2 and len(p.windows) >= 2
    finally:
        p.close()


def test_a_warning_from_a_magic_points_at_the_cell_not_at_our_code(ip, magics):
    """A warning about what the user asked names the line they wrote: through ``%dynprof``
    it named dynprof_nb/ui/magics.py, a file nobody in the notebook wrote."""
    name = unique_job("warnline")
    try:
        ip.run_line_magic("dynprof", f"attach {name} --create")
        ip.run_line_magic("dynprof", "set profile_memory=True")
        with segment.Segment.open(name) as seg:
            seg.write_config(b"not a command")  # bytes no Job wrote
        with pytest.warns(UserWarning, match="cannot be used") as caught, capture_output():
            ip.run_cell("%dynprof config")
        where = {w.filename for w in caught if "cannot be used" in str(w.message)}
        assert where and not any("dynprof_nb" in f or "IPython" in f for f in where), where
    finally:
        segment.unlink(name)
