"""``dynprof hang JOB``, ``%dynprof hang`` and the panel's Stacks button with a rank whose
Monitor has ``flight_recorder=True`` but no process group: its answer says why it has no dump,
and the report is its stacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from jobutil import finish, unique_job, wait_until

from dynprof_nb.contract import segment
from dynprof_nb.control.job import Job

REPO = Path(__file__).resolve().parents[2]
PARKED = """
import sys, time, dynprof_nb
m = dynprof_nb.Monitor(job=sys.argv[1], rank=0, flight_recorder=True)
for _ in range(10):
    time.sleep(0.02)
    m.step()
def parked_without_a_process_group():
    time.sleep(60)
parked_without_a_process_group()
"""
WHY = "No Flight Recorder dump (this rank does not use PyTorch (no Flight Recorder))"


@pytest.fixture(scope="module")
def parked():
    name = unique_job("hangui")
    proc = subprocess.Popen([sys.executable, "-c", PARKED, name], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    job = Job.open(name)
    try:
        wait_until(lambda: [s.step for s in job.live_slots()] == [10], 30, "10 steps", proc)
        yield job
    finally:
        finish(proc)
        job.close()
        segment.unlink(name)


def test_cli_prints_the_report(parked):
    out = subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", "hang", parked.name],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(WHY), out.stdout
    assert "parked_without_a_process_group" in out.stdout


def test_magic_returns_the_report_and_keeps_it(ip: InteractiveShell, magics, parked):
    ip.run_line_magic("dynprof", f"attach {parked.name}")
    report = ip.run_line_magic("dynprof", "hang -o rep")
    assert report.verdict.startswith(WHY) and ip.user_ns["rep"] is report
    assert report.notes == {0: "this rank does not use PyTorch (no Flight Recorder)"}


def test_panel_stacks_button_shows_the_report_above_the_tree(parked):
    from dynprof_nb.ui.panel import Panel

    panel = Panel(parked, poll=False)
    try:
        frame = panel.stacks_button.click() or panel.stacks_frame
        assert "parked_without_a_process_group" in set(frame.function)
        assert panel.hang_report is not None and panel.hang_report.stacks is frame
        html = [o["data"].get("text/html", "") for o in panel.output.outputs]
        assert "No Flight Recorder dump (this rank does not use PyTorch" in html[0]
        assert "dynprof-hang" in html[0]
        assert "<details" in html[1]  # the tree, as without a recorder
    finally:
        panel.close()
