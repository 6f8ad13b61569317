"""What a MindSpore window costs the training thread, with real MindSpore 2.7 on CPU (run it
in the MindSpore venv, ``.venv/ms/bin/python``). Prints one JSON object, on its last line:

* ``budget``: a window of 1e9 steps on a job that grows by ``--grow-mb`` per step, under a
  ``--budget-mb`` memory budget: the reason it ended with and the RSS growth over the budget;
* ``analyse``: a ``--steps``-step window with ``analyse=True``: its ``training_thread_s``
  (MindSpore's own stop on the training thread; ``save_gil_s``, the CPU time the save, i.e.
  MindSpore's analysis, took on the window-I/O thread, which bounds how long it held the
  GIL), the save's wall time, and the training throughput during the save against before,
  with the longest step during the save against the median step before.

    .venv/ms/bin/python benchmarks/mindspore_cost.py [--budget-mb 16] [--grow-mb 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]  # this checkout's dynprof_nb, the example

import dynprof_nb  # noqa: E402
from dynprof_nb.contract import window_dirs  # noqa: E402


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed_steps(step_cell: Any, batches: list, monitor: Any, n: int) -> list[float]:
    took = []
    for i in range(n):
        t0 = time.perf_counter()
        step_cell(*batches[i % len(batches)])
        monitor.step()
        took.append(time.perf_counter() - t0)
    return took


def manifest_of(monitor: Any) -> dict[str, Any]:
    return window_dirs.read_manifest(monitor.last_window) or {}


def budget_window(step_cell: Any, batches: list, out: str, budget_mb: float,
                  grow_mb: float, max_steps: int) -> dict[str, Any]:
    job = f"bench-ms-budget-{os.getpid()}"
    control = dynprof_nb.attach(job, create=True)
    monitor = dynprof_nb.Monitor(job=job, output_path=out, backend="mindspore",
                                 memory_budget_mb=budget_mb)
    control.start(monitor.step_count + 2, monitor.step_count + 10**9, activities=["CPU"])
    timed_steps(step_cell, batches, monitor, 1)
    base, held = rss(), []
    for _ in range(max_steps):
        held.append(bytearray(int(grow_mb * 2**20)))  # what the job itself keeps
        timed_steps(step_cell, batches, monitor, 1)
        if monitor.state != "recording":
            break
    peak = rss()
    monitor.wait_saved(120)
    manifest = manifest_of(monitor) if monitor.last_window else {}
    result = {"ended_by_budget": monitor.state != "recording",
              "steps": monitor.step_count, "stop_reason": manifest.get("stop_reason"),
              "status_error": control.status().error[0],
              "rss_growth_over_budget": (peak - base) / (budget_mb * 2**20)}
    monitor.close()
    control.close()
    return result


def analyse_window(step_cell: Any, batches: list, out: str, steps: int) -> dict[str, Any]:
    job = f"bench-ms-analyse-{os.getpid()}"
    control = dynprof_nb.attach(job, create=True)
    monitor = dynprof_nb.Monitor(job=job, output_path=out, backend="mindspore")
    before = timed_steps(step_cell, batches, monitor, 200)
    now = monitor.step_count
    control.start(now + 2, now + 1 + steps, activities=["CPU"], analyse=True, analyse_mode=0)
    timed_steps(step_cell, batches, monitor, steps + 1)
    during: list[float] = []
    t0 = time.perf_counter()
    while not monitor.wait_saved(0):
        during += timed_steps(step_cell, batches, monitor, 5)
    wall = time.perf_counter() - t0
    manifest = manifest_of(monitor)
    typical = statistics.median(before)
    result = {"status": manifest.get("status"), "save_s": manifest.get("save_s"),
              "training_thread_s": manifest.get("training_thread_s"),
              "steps_during_save": len(during), "save_wall_s": wall,
              "throughput_during_save_ratio":
                  (len(during) / sum(during)) / (1 / typical) if during else None,
              "longest_step_during_save_over_median": max(during) / typical if during
              else None,
              "median_step_us": typical * 1e6}
    monitor.close()
    control.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget-mb", type=float, default=16)
    parser.add_argument("--grow-mb", type=float, default=1)
    parser.add_argument("--max-steps", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    from train_mindspore import build

    step_cell, _, data = build("pynative")
    batches = list(data.create_tuple_iterator())
    with tempfile.TemporaryDirectory() as out:
        result = {"budget": budget_window(step_cell, batches, out, args.budget_mb,
                                          args.grow_mb, args.max_steps),
                  "analyse": analyse_window(step_cell, batches, out, args.steps)}
    print(json.dumps(result))  # one line, the last: MindSpore prints its progress too


if __name__ == "__main__":
    main()
