"""``dynprof stacks JOB``, ``%dynprof stacks`` and the panel's Stacks button and stall banner,
against one real training process stopped in a function of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from jobutil import finish, unique_job, wait_until

from dynprof_nb.contract import segment
from dynprof_nb.control.job import Job

REPO = Path(__file__).resolve().parents[2]
STOPS = """
import sys, time, dynprof_nb
m = dynprof_nb.Monitor(job=sys.argv[1], rank=0)
for _ in range(30):
    time.sleep(0.02)
    m.step()
def parked_in_user_code():
    time.sleep(60)
parked_in_user_code()
"""


@pytest.fixture(scope="module")
def parked():
    name = unique_job("stacksui")
    proc = subprocess.Popen([sys.executable, "-c", STOPS, name], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    job = Job.open(name)
    try:
        wait_until(lambda: [s.step for s in job.live_slots()] == [30], 30, "30 steps", proc)
        yield job
    finally:
        finish(proc)
        job.close()
        segment.unlink(name)


def test_cli_prints_the_tree(parked):
    out = subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", "stacks", parked.name],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 0, out.stderr
    assert "MainThread [rank 0]" in out.stdout
    assert "parked_in_user_code" in out.stdout
    help_text = subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", "--help"],
                               capture_output=True, text=True, timeout=60).stdout
    assert "stacks" in help_text


def test_magic_returns_the_tree_and_keeps_the_frame(ip: InteractiveShell, magics, parked):
    from dynprof_nb.ui.magics import candidates

    ip.run_line_magic("dynprof", f"attach {parked.name}")
    tree = ip.run_line_magic("dynprof", "stacks -o st")
    assert "parked_in_user_code" in str(tree) and "<details" in tree._repr_html_()
    assert "parked_in_user_code" in set(ip.user_ns["st"].function)
    assert "stacks" in candidates("%dynprof st")
    assert "--last" in candidates("%dynprof stacks --")
    with capture_output() as out:
        assert ip.run_line_magic("dynprof", "stacks --last") is None
    assert "not been found stalled" in out.stdout


def test_panel_button_and_stall_banner(parked):
    from dynprof_nb.ui.panel import Panel

    parked.hang_min_s = 1000.0  # the parked rank is not stalled yet (its bound: 5 s)
    panel = Panel(parked, poll=False)
    try:
        frame = panel.stacks_button.click() or panel.stacks_frame
        assert frame is not None and "parked_in_user_code" in set(frame.function)
        assert panel.output.outputs, "the tree is shown below the panel"
        assert panel.stall.value == ""
        parked.hang_after, parked.hang_min_s = 20.0, 1.0
        wait_until(lambda: (panel.refresh() or "stalled since step 30" in panel.stall.value),
                   10, "the panel to show the stall")
    finally:
        parked.hang_after, parked.hang_min_s = Job.hang_after, Job.hang_min_s
        panel.close()
