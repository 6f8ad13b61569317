"""The profiler's cost on a window's steps, said in its summary (analysis/profiler_cost.py).

A real built-in-backend rank at 10 ms a step records a window; its ``window.json`` holds the
median of its timed steps just before it (``steps_before_ms``). The note is then checked on
that window with the value moved (one piece: the rule, on a real window's frames)."""

from __future__ import annotations

import shutil
from pathlib import Path

from jobutil import finish, spawn_rank, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment, window_dirs


def test_a_window_says_the_job_s_own_step_time_before_it(tmp_path: Path) -> None:
    name = unique_job("cost")
    job = dynprof_nb.attach(name, create=True)
    proc = spawn_rank(name, 0, tmp_path / "out", step_ms=10)
    try:
        wait_until(lambda: [s for s in job.live_slots() if s.step > 40], 60,
                   "40 timed steps", proc=proc)  # fmt: skip
        job.start("+5", "+9")
        job.wait(timeout=60)
        w = job.load()
    finally:
        finish(proc)
        job.close()
        segment.unlink(name)
    before = w.manifest["steps_before_ms"]
    # a step sleeps 10 ms: never shorter; the machine may stretch it, as it does the window's
    assert 10.0 <= before <= w.steps["duration_us"].max() / 1000, (before, w.steps.to_string())

    during = float(w.steps["duration_us"].median()) / 1000
    moved = tmp_path / "moved"
    shutil.copytree(w.path, moved)
    manifest = window_dirs.read_manifest(str(moved))
    manifest["steps_before_ms"] = during / 4  # as if the profiler had made the steps 4x longer
    window_dirs.write_manifest(moved, manifest)
    notes = dynprof_nb.load_window(moved).summary().notes
    said = [n for n in notes if "the profiler's own cost" in n]
    assert said and "(4.0x)" in said[0], notes
    assert f"{during / 4:,.1f} ms just before it" in said[0], said

    manifest["steps_before_ms"] = during  # the window's steps as fast as the job's: no note
    window_dirs.write_manifest(moved, manifest)
    assert not [n for n in dynprof_nb.load_window(moved).summary().notes if "own cost" in n]
