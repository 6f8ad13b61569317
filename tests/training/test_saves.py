"""Saving a window: linear in its length, off the training process, bounded at close()."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jobutil import trace_steps, unique_job, wait_until

import dynprof_nb
from dynprof_nb import segment, windows
from dynprof_nb.training import monitor
from dynprof_nb.training.backends.builtin import Coverage


def brute_union(intervals: list[tuple[int, int]]) -> int:
    """Length of a union of intervals, the obvious way (the reference for Coverage)."""
    covered: set[int] = set()
    for a, b in intervals:
        covered.update(range(a, b))
    return len(covered)


def test_coverage_answers_like_the_obvious_union_for_every_step():
    rng = random.Random(19)
    for _ in range(200):
        intervals = [(a, a + rng.randint(-3, 30)) for a in
                     (rng.randint(0, 200) for _ in range(rng.randint(0, 25)))]
        cover = Coverage(intervals)
        for _ in range(10):
            s0 = rng.randint(-10, 220)
            s1 = s0 + rng.randint(0, 80)
            clipped = [(max(a, s0), min(b, s1)) for a, b in intervals]
            assert cover.within(s0, s1) == brute_union([c for c in clipped if c[1] > c[0]])


# -- a process that goes away mid-window ----------------------------------------------------

CRASH_LOOP = Path(__file__).with_name("crash_loop.py")


@pytest.mark.parametrize("how", ["raise", "exit", "sigterm", "sigint"])
def test_a_process_that_dies_mid_window_leaves_a_loadable_window(tmp_path, how):
    job = unique_job(f"crash-{how}")
    proc = subprocess.Popen([sys.executable, str(CRASH_LOOP), job, str(tmp_path), how],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if how.startswith("sig"):
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
            proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=60)
        exit_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        segment.unlink(job)
    expected = {"raise": 1, "exit": 3, "sigterm": -signal.SIGTERM,
                "sigint": -signal.SIGINT}[how]
    assert proc.returncode == expected, err  # the job still dies the way it would have
    assert exit_s < monitor.EXIT_WAIT_S + 5, exit_s  # bounded: the writer outlives it
    found = wait_until(lambda: [w for w in windows.find_windows([tmp_path], job)
                                if w["status"] == "complete"], 30, "the saved window")
    manifest = windows.read_manifest(found[0]["path"])
    assert manifest["stopped_early"] and manifest["stop_step"] >= 120
    reason = manifest["stop_reason"]
    assert {"raise": "RuntimeError: the loss is nan", "exit": "without Monitor.close()",
            "sigterm": "SIGTERM", "sigint": "KeyboardInterrupt"}[how] in reason
    steps = trace_steps(Path(found[0]["path"]))
    assert steps[:3] == [3, 4, 5] and steps[-1] == manifest["stop_step"]
    assert len(dynprof_nb.load_window(found[0]["path"]).events) > 0
