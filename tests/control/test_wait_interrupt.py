"""Ctrl-C during ``wait`` stops only the waiting, as it happens in Jupyter: the stop button
sends SIGINT to the kernel's whole process group. Here a real process starts the demo's
ranks (as the quickstart's kernel does) and waits with ``dynprof wait``; the test sends a real
SIGINT to that process's group. The ranks were started in their own session, so they never
see it: they are alive afterwards and the window is still armed. Also: progress in a log is a
few lines, not carriage-return spam."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from jobutil import running_ranks, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.control.progress import Progress

KERNEL = textwrap.dedent("""
    import sys, time
    import dynprof_nb
    from dynprof_nb.ui.cli import main
    from dynprof_nb.ui.demo import start_ranks, wait_for_ranks
    job, out = sys.argv[1], sys.argv[2]
    procs = start_ranks(job, out, ranks=2)
    control = dynprof_nb.attach(job, create=True)
    wait_for_ranks(control, 2)
    control.start("+100000", "+100009")
    print("waiting", flush=True)
    sys.exit(main(["wait", job]))
""")


def test_sigint_to_the_waiting_process_group_leaves_the_ranks_running(tmp_path):
    job = unique_job("sigint")
    log = tmp_path / "kernel.err"  # a file: the ranks inherit it and outlive the kernel
    with log.open("w") as err_file:
        kernel = subprocess.Popen([sys.executable, "-c", KERNEL, job, str(tmp_path)],
                                  stdout=subprocess.PIPE, stderr=err_file, text=True,
                                  start_new_session=True,
                                  env=dict(os.environ, PYTHONPATH=os.getcwd()))
    control = None
    try:
        assert kernel.stdout.readline().strip() == "waiting", log.read_text()
        control = dynprof_nb.attach(job)
        pids = sorted(s.pid for s in control.live_slots())
        assert len(pids) == 2
        wait_until(lambda: f"job {job}: window" in log.read_text(), timeout=60,
                   what="dynprof wait to report progress")
        os.killpg(kernel.pid, signal.SIGINT)  # what Jupyter's stop button does
        kernel.wait(timeout=30)
        err = log.read_text()
        assert kernel.returncode == 130, err
        lines = err.strip().splitlines()
        cfg = control.config
        assert lines[-1].startswith(f"dynprof: stopped waiting; window {cfg.start_step}-"
                                    f"{cfg.stop_step} is still armed; rank 0 at "), err
        assert "Traceback" not in err
        # the ranks step on past the interrupt (a fact, not a pause): still armed, so the
        # interrupt never reached them
        at = max(s.step for s in control.live_slots())
        wait_until(lambda: min(s.step for s in control.live_slots()) > at + 2, timeout=30,
                   what="the ranks to step on after the interrupt")
        assert sorted(s.pid for s in control.live_slots()) == pids  # never reached the ranks
        assert {s.state for s in control.live_slots()} == {"armed"}
    finally:
        if kernel.poll() is None:
            kernel.kill()
        if control is not None:
            for slot in control.live_slots():  # orphans of the dead "kernel": ours to stop
                os.kill(slot.pid, signal.SIGTERM)
            wait_until(lambda: not control.live_slots(), what="the ranks to stop")
            control.close()
        segment.unlink(job)


def test_wait_in_a_log_writes_a_few_lines_and_no_carriage_returns(tmp_path, capfd):
    with running_ranks(unique_job("log"), tmp_path, ranks=2, step_ms=5) as (control, _):
        control.start("+20", "+49")
        control.wait(timeout=60)
        err = capfd.readouterr().err
    assert "\r" not in err
    lines = err.strip().splitlines()
    assert 2 <= len(lines) <= 12, err
    assert lines[-1].startswith(f"job {control.name}: window ") and " done 60/60 rank-steps in " \
        in lines[-1]
    assert any("armed" in line and "ETA" in line for line in lines), err


def test_progress_lines_mode_writes_on_phase_changes_and_quarters(capsys):
    report = Progress("job x", mode="lines")
    for done in range(0, 101):
        report.update(done, 100, "recording" if done else "armed", "r0:5")
    report.close("done")
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "job x: armed 0/100 steps (r0:5)"
    assert [line.split()[3] for line in lines[1:-1]] == ["1/100", "25/100", "50/100",
                                                         "75/100", "100/100"]
    assert lines[-1].startswith("job x: done 100/100 steps in ")
