"""Helpers for the tests that profile real framework training processes (torch, MindSpore).

The training script runs as its own process (as a user's job would), and the test drives it
from outside through ``dynprof_nb.attach`` only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import jobutil
from jobutil import unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment

__all__ = ["unique_job", "wait_until", "spawn", "finish", "attached_job"]

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def spawn(args: Sequence[str], python: str | None = None, cwd: Path | None = None,
          env: dict[str, str] | None = None) -> subprocess.Popen:
    """A background training process in a session of its own, its output collected in a file
    for failure messages (:func:`jobutil.start_script`: MindSpore's forked analysis workers
    once held a pipe here after the script had ended, and the run hung until CI's limit)."""
    full_env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **(env or {}))
    return jobutil.start_script([python or sys.executable, *map(str, args)], cwd=cwd,
                                env=full_env)


def outputs_within(procs: Sequence[subprocess.Popen], timeout: float) -> list[str]:
    """Each process's output once all have exited, waiting ``timeout`` seconds in all.

    Past that, every process still running is killed with its children, after printing its
    stacks (:func:`jobutil.kill_process`), and the test fails with what each one wrote: a
    hung training script is a failure that says where it hung, inside the test's own time
    limit, never a wait without end. What an ended script left running is killed with it.
    """
    deadline = time.monotonic() + timeout
    outputs: dict[int, str] = {}
    for i, proc in enumerate(procs):
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            jobutil.end_group(proc)
            outputs[i] = jobutil.output_of(proc)
        except subprocess.TimeoutExpired:
            for j, other in enumerate(procs):
                if j not in outputs:
                    outputs[j] = "(still running: killed)\n" + jobutil.kill_process(
                        other, dump_stacks=True)[0]
            raise AssertionError(
                f"the training scripts had not all ended after {timeout:.0f} s; what each "
                "wrote (with the stacks of those still running):\n" + "\n".join(
                    f"--- {' '.join(map(str, p.args[1:3]))}:\n{outputs[j][-6000:]}"
                    for j, p in enumerate(procs))) from None
    return [outputs[i] for i in range(len(procs))]


def finish(proc: subprocess.Popen, timeout: float = 60.0) -> str:
    """End a training process with SIGTERM (its loop exits cleanly) and return its output."""
    return jobutil.finish(proc, timeout)[0] or ""


@contextmanager
def attached_job(prefix: str, start: Callable[[str], subprocess.Popen], timeout: float,
                 what: str) -> Iterator[tuple[dynprof_nb.Job, subprocess.Popen]]:
    """A Job on a fresh job name, the training process ``start(name)`` launches for it, stepping.

    Afterwards the process is ended cleanly and must have exited 0 (its output is the message).
    """
    name = unique_job(prefix)
    job = dynprof_nb.attach(name, create=True)
    proc = start(name)
    try:
        wait_until(lambda: any(s.step > 0 for s in job.live_slots()), timeout,
                   f"{what} to start stepping", proc)
        yield job, proc
    finally:
        output = finish(proc)
        job.close()
        segment.unlink(name)
        assert proc.returncode == 0, f"training process failed:\n{output}"


def chrome_step_numbers(trace: Path) -> list[int]:
    """Sorted ``ProfilerStep#N`` numbers in a Chrome trace (object or bare-array form)."""
    data = json.loads(trace.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    return sorted(int(e["name"].split("#", 1)[1]) for e in events
                  if str(e.get("name", "")).startswith("ProfilerStep#"))


# MindSpore 2.7.0 needs numpy<2 while this venv's pandas needs numpy>=2, so MindSpore lives
# in its own venv (made by `make test`); its training processes run there, the controller here.
MINDSPORE_PYTHON = Path(os.environ.get("DYNPROF_MINDSPORE_PYTHON",
                                       REPO / ".venv" / "ms" / "bin" / "python"))


def mindspore_python() -> str:
    """The interpreter with MindSpore installed; a clear failure (not a skip) without it."""
    assert MINDSPORE_PYTHON.exists(), (
        f"no MindSpore interpreter at {MINDSPORE_PYTHON}: run `make test` (it installs "
        "mindspore==2.7.0 into .venv/ms) or set DYNPROF_MINDSPORE_PYTHON.")
    return str(MINDSPORE_PYTHON)


def spawn_mindspore(*args: object, cwd: Path | None = None) -> subprocess.Popen:
    """examples/train_mindspore.py in the MindSpore venv (graph mode unless told otherwise)."""
    return spawn([EXAMPLES / "train_mindspore.py", *map(str, args)], python=mindspore_python(),
                 cwd=cwd, env={"GLOG_v": "3"})


def mindspore_op_times(window_dir: str | Path) -> dict[str, list[int]]:
    """Start times (ns) of each op in a MindSpore CPU window's cpu_op_execute_timestamp file."""
    files = list(Path(window_dir).glob("*_ascend_ms/FRAMEWORK/cpu_op_execute_timestamp_*.txt"))
    assert len(files) == 1, f"expected one cpu_op_execute_timestamp file, got {files}"
    ops: dict[str, list[int]] = {}
    for line in files[0].read_text().splitlines():
        name, _type, rest = line.split(";", 2)
        ops.setdefault(name, []).extend(int(item.split(",")[0]) for item in rest.split())
    return ops


def marked_steps(window_dir: str | Path) -> dict[int, tuple[int, int]]:
    """step -> (start_ns, end_ns) from a dynprof MindSpore window's dynprof_steps.csv."""
    import csv

    with open(Path(window_dir) / "dynprof_steps.csv", newline="") as fh:
        return {int(r["name"].split("#")[1]): (int(r["start_ns"]), int(r["end_ns"]))
                for r in csv.DictReader(fh) if r["name"].startswith("ProfilerStep#")}
