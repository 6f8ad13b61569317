"""The panel's form follows the job it drives, as a person opening it sees it: for a job whose
windows record with the built-in (or torch) profiler, MindSpore's own output keys are folded
away with the Ascend-only ones, titled as not read by that profiler; and a Flight Recorder that
the job's Monitor turned on shows checked (and cannot be unchecked from the form), where the
hang report uses it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from jobutil import finish, running_ranks, unique_job, wait_until

from dynprof_nb.contract import segment
from dynprof_nb.control.job import Job
from dynprof_nb.ui.panel import MINDSPORE_ONLY, Panel, job_backend

REPO = Path(__file__).resolve().parents[2]


def section_of(panel: Panel, key: str) -> str:
    """The title of the section whose fields include ``key``'s, as the form shows it."""
    field = panel.fields[key]
    for box in panel.children:
        if not any(c.startswith("dynprof-section-") for c in box._dom_classes):
            continue
        titles = getattr(box, "titles", None)
        inner = box.children[0] if titles else box.children[1]
        if any(field in cell.children for cell in getattr(inner, "children", ())):
            return titles[0] if titles else box.children[0].value
    raise AssertionError(f"{key} is in no section")


def test_a_builtin_jobs_form_folds_mindsporeonly_keys(tmp_path: Path) -> None:
    with running_ranks(unique_job("pdef"), tmp_path, ranks=1, step_ms=5) as (job, _):
        before = Panel(job, poll=False)
        try:  # no window yet: which profiler records is not known, every key is offered
            assert section_of(before, "export_type") == "<b>Recording and output</b>"
        finally:
            before.close()
        job.start("+40", "+41")  # 0.2 s ahead: one recorded window says the profiler
        wait_until(lambda: job_backend(job) == "builtin", 60, "a window on disk")
        panel = Panel(job, poll=False)
        try:
            for key in (*MINDSPORE_ONLY, "aic_metrics"):
                assert "not read by this job's builtin profiler" in section_of(panel, key), key
            assert section_of(panel, "with_stack") == "<b>Recording and output</b>"
            assert panel.ascend.selected_index is None  # folded
        finally:
            panel.close()


PARKED = """
import sys, time, dynprof_nb
m = dynprof_nb.Monitor(job=sys.argv[1], rank=0, flight_recorder=True)
for _ in range(10):
    time.sleep(0.02)
    m.step()
time.sleep(60)
"""


def test_a_flight_recorder_the_monitor_set_shows_checked() -> None:
    name = unique_job("pdfr")
    proc = subprocess.Popen([sys.executable, "-c", PARKED, name], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    job = Job.open(name)
    try:
        wait_until(lambda: [s.step for s in job.live_slots()] == [10], 30, "10 steps", proc)
        assert job.config.flight_recorder is False  # the config leaves it off
        panel = Panel(job, poll=False)
        try:
            field = panel.fields["flight_recorder"]
            assert field.value is True and field.disabled
            assert panel.edited() == []  # nothing to Apply: the form shows the job as it is
            panel.fields["with_stack"].value = True
            panel.apply()
            assert job.config.with_stack and not job.config.flight_recorder
        finally:
            panel.close()
    finally:
        finish(proc)
        job.close()
        segment.unlink(name)
