"""The panel's "Keep recent steps" as a person uses it, against real rank processes.

Two built-in-backend ranks at ~10 ms a step; rank 1 has a 5-step hiccup (60 ms each) inside
its ``dynprof_nb.range("work")``, over before anyone clicks. The steps box is typed and the
button clicked: the record is ``job.recent(N)``'s (every rank's last N steps, listed as an
asked record), rendered below with ``explain()`` naming rank 1 and the range that grew. A
number that is no number of steps is refused in the message line, nothing loaded.
"""

from __future__ import annotations

from pathlib import Path

from jobutil import finish, spawn_rank, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.ui.panel import Panel

SLOW_RANK = 1
ASKED = 150  # the hiccup ended a few steps before the click: well inside the last 150


def test_keep_recent_steps_from_the_panel(tmp_path: Path) -> None:
    slow = tmp_path / "slow"
    extra = ["--slow-file", str(slow), "--slow-ms", "60", "--slow-steps", "5"]
    name = unique_job("panelrecent")
    job = dynprof_nb.attach(name, create=True)
    procs = [spawn_rank(name, r, tmp_path / "out", step_ms=10,
                        extra=extra if r == SLOW_RANK else None) for r in range(2)]
    try:
        wait_until(lambda: len(job.live_slots()) == 2, 60, "2 ranks", proc=procs[0])
        panel = Panel(job, poll=False)
        try:
            section = panel.step_section
            wait_until(lambda: all(s.step > 40 for s in job.live_slots()), 60,
                       "40 normal steps on each rank", proc=procs[0])
            slow.touch()
            done = Path(f"{slow}.done")
            wait_until(done.exists, 60, "the 5 slow steps", proc=procs[SLOW_RANK])
            first, last = map(int, done.read_text().split())

            section.recent_steps.set_state({"value": 0})  # as the browser sends a typed value
            section.recent_button.click()
            assert "recent steps not kept" in panel.message.value, panel.message.value
            assert panel.trace is None and section.kept is None
            assert job.windows().empty, "a refused ask writes no record"

            section.recent_steps.set_state({"value": ASKED})
            section.recent_button.click()
            record = panel.trace
            assert record is not None and record is section.kept, panel.message.value
            assert f"kept the last {ASKED} steps of rank(s) [0, 1]" in panel.message.value
            listed = job.windows()
            assert sorted(listed["rank"]) == [0, 1] and set(listed["recent"]) == {"asked"}
            steps = record.steps
            mine = steps[(steps["rank"] == SLOW_RANK) & steps.step.between(first, last)]
            assert len(mine) == 5, steps.to_string()
            sizes = steps.groupby("rank").size()  # at most N; a young job has fewer
            assert (sizes <= ASKED).all() and (sizes > 30).all(), sizes
            assert (steps.groupby("rank").step.min() < first - 30).all(), "normal steps too"
            shown = "".join(o.get("text", "") for o in panel.output.outputs)
            why = record.explain()
            assert why.rank == SLOW_RANK and why.cause == "range: work", why.text
            assert f"why: {why.text}" in shown, shown
            assert any("data" in o for o in panel.output.outputs), "the summary is shown"

            panel.refresh(windows=True)  # the Windows list names it a record, not a window
            assert panel.windows and "RECENT STEPS" in panel.windows[0]["label"]
        finally:
            panel.close()
    finally:
        for p in procs:
            finish(p)
        job.close()
        segment.unlink(name)
