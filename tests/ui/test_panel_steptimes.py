"""The panel's "Step times" section as a person uses it: the trigger's fields typed, Arm and
Disarm clicked, against real rank processes; the live heat map is a real PNG, redrawn at most
once a second, and not redrawn when the step times did not change."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.image
import pytest
from jobutil import finish, running_ranks, unique_job, wait_until, windows_only

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.control.job import Job
from dynprof_nb.ui.panel import Panel
from dynprof_nb.ui.steppanel import HEAT_PERIOD_S

REPO = Path(__file__).resolve().parents[2]
PARKED = """
import sys, time, dynprof_nb
m = dynprof_nb.Monitor(job=sys.argv[1], rank=0)
for _ in range(30):
    time.sleep(0.03)
    m.step()
time.sleep(60)
"""


def png_shape(data: bytes) -> tuple[int, ...]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "the heat map is a PNG"
    return matplotlib.image.imread(io.BytesIO(data), format="png").shape


def test_arm_and_disarm_from_the_panel(tmp_path: Path) -> None:
    with running_ranks(unique_job("panelstep"), tmp_path, ranks=2, step_ms=10) as (job, _):
        panel = Panel(job, poll=False)
        try:
            section = panel.step_section
            assert "not armed" in section.trigger_state.value
            section.slowdown.set_state({"value": 3.5})  # as the browser sends a typed value
            section.steps.set_state({"value": 6})
            section.arm_button.click()
            other = dynprof_nb.attach(job.name, create=False)  # what the ranks see
            try:
                state = other.triggers
            finally:
                other.close()
            assert state["armed"] and state["slowdown"] == 3.5 and state["steps"] == 6, state
            assert "armed (watching)" in section.trigger_state.value
            assert "fired 0/" in section.trigger_state.value
            assert "trigger armed" in panel.message.value
            section.slowdown.set_state({"value": 0.5})  # a slowdown that is no slowdown
            section.arm_button.click()
            assert "trigger not armed" in panel.message.value
            assert job.triggers["slowdown"] == 3.5, "a refused arm leaves the trigger as it was"
            section.disarm_button.click()
            assert job.triggers == {"armed": False}
            assert "not armed" in section.trigger_state.value
            assert "trigger disarmed" in panel.message.value

            changes: list[float] = []
            section.heat.observe(lambda _c: changes.append(time.monotonic()), "value")
            t0 = time.monotonic()
            while time.monotonic() - t0 < 2.5 * HEAT_PERIOD_S:  # refreshes as fast as it can
                panel.refresh()
                time.sleep(0.01)
            section.wait()
            elapsed = time.monotonic() - t0
            height, width, _ = png_shape(section.heat.value)
            assert height > 100 and width > 300
            assert 2 <= len(changes) <= elapsed / HEAT_PERIOD_S + 1, (changes, elapsed)
            gaps = [b - a for a, b in zip(changes, changes[1:], strict=False)]
            assert all(g > 0.5 * HEAT_PERIOD_S for g in gaps), gaps
        finally:
            panel.close()


@pytest.fixture
def parked():
    """One real rank that made 30 steps and then stops stepping: its step times stay put."""
    name = unique_job("panelpark")
    proc = subprocess.Popen([sys.executable, "-c", PARKED, name], stdout=subprocess.PIPE,
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


def test_unchanged_step_times_are_not_redrawn(parked: Job) -> None:
    panel = Panel(parked, poll=False)
    try:
        section = panel.step_section
        wait_until(lambda: panel.refresh() or section.wait() or section.renders, 10,
                   "the first heat map")
        assert png_shape(section.heat.value)
        first = section.heat.value
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.5 * HEAT_PERIOD_S:
            panel.refresh()
            time.sleep(0.05)
        section.wait()
        assert section.renders == 1 and section.heat.value == first
    finally:
        panel.close()


def test_every_trigger_field_the_armed_values_and_a_notice_when_it_fires(tmp_path: Path) -> None:
    """Every field is edited and armed; a trigger armed elsewhere (the magic, another
    notebook) shows its values in the boxes; a window fired is a visible notice with its
    reason, and the Windows list marks it."""
    from dynprof_nb.ui.panel import window_groups

    slow = tmp_path / "slow"
    with running_ranks(unique_job("panelfire"), tmp_path, ranks=2, step_ms=10,
                       extra=["--slow-file", str(slow), "--slow-ms", "60",
                              "--slow-steps", "40"]) as (job, _):
        panel = Panel(job, poll=False)
        try:
            section = panel.step_section
            for name, value in (("slowdown", 2.5), ("confirm", 4), ("steps", 6),
                                ("cooldown_s", "30"), ("max_windows", 2),
                                ("disk_budget_mb", "500")):
                section.fields[name].set_state({"value": value})
            section.arm_button.click()
            state = job.triggers
            assert (state["slowdown"], state["confirm"], state["steps"], state["cooldown_s"],
                    state["max_windows"], state["disk_budget_mb"]) == (2.5, 4, 6, 30.0, 2, 500.0)
            line = section.trigger_state.value
            assert "slowdown 2.5x, confirm 4 steps, 6-step windows, cooldown 30 s" in line, line

            other = dynprof_nb.attach(job.name, create=False)  # armed from elsewhere
            try:
                other.trigger(slowdown=3.0, confirm=2, steps=5)
            finally:
                other.close()
            panel.refresh()
            assert section.slowdown.value == 3.0 and section.confirm.value == 2
            assert section.steps.value == 5 and section.cooldown.value == ""  # auto
            assert "(auto)" in section.trigger_state.value

            wait_until(lambda: all(s.step > 80 for s in job.live_slots()), timeout=60,
                       what="a baseline")
            assert section.notice.value == ""
            slow.touch()
            wait_until(lambda: panel.refresh() or "window fired" in section.notice.value,
                       timeout=30, what="the notice")
            assert "<b>window fired</b>: rank " in section.notice.value
            # said once: not again in the message line, and without the job's name (the
            # panel is the job's)
            assert "rank " not in panel.message.value and "job " not in section.notice.value
            wait_until(lambda: (windows_only(job.windows()).status == "complete").sum() == 2,
                       timeout=60,
                       what="the window")
            groups = window_groups(windows_only(job.windows()))
            assert "TRIGGERED: rank" in groups[0]["label"], groups[0]["label"]
        finally:
            panel.close()


def test_the_section_says_its_title_once_and_its_labels_whole(parked: Job) -> None:
    """The new-user pass read "Step times" twice (the section's label and the figure's own
    title), "max wind..." for a cut label, and "Stop" as stopping the job. The figure has no
    title of its own, the trigger labels take their own width, and the button says what it
    stops (tests/ui/test_browser.py measures the labels in chromium)."""
    from dynprof_nb.ui.steppanel import heat_figure

    panel = Panel(parked, poll=False)
    try:
        section = panel.step_section
        texts = [w.value for w in section.children if hasattr(w, "value")
                 and isinstance(w.value, str)]
        assert sum(t.lower().count("step times") for t in texts) == 1, texts
        wait_until(lambda: len(parked.step_times(last=20)), what="the parked rank's steps")
        figure = heat_figure(parked.step_times(last=20))
        assert [ax.get_title() for ax in figure.axes] == ["", ""]  # the heat map, its colorbar
        for field in section.fields.values():
            assert field.style.description_width == "initial", field.description
        assert panel.stop_button.description == "Stop window"
        assert "current window" in panel.stop_button.tooltip
        assert "training goes on" in panel.stop_button.tooltip
        assert "dynprof-stop" in panel.stop_button._dom_classes
    finally:
        panel.close()
