"""Helpers for the tests that profile real framework training processes (torch, MindSpore).

The training script runs as its own process (as a user's job would), and the test drives it
from outside through ``dynprof_nb.attach`` only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def unique_job(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def spawn(args: Sequence[str], python: str | None = None, cwd: Path | None = None,
          env: dict[str, str] | None = None) -> subprocess.Popen:
    """A background training process; its output is collected for failure messages."""
    full_env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.Popen([python or sys.executable, *map(str, args)], cwd=cwd, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str,
               proc: subprocess.Popen | None = None) -> Any:
    """Poll ``predicate``; fail with the process's output if it died or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"training process exited ({proc.returncode}) while waiting "
                                 f"for {what}:\n{proc.stdout.read() if proc.stdout else ''}")
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def finish(proc: subprocess.Popen, timeout: float = 60.0) -> str:
    """End a training process with SIGTERM (its loop exits cleanly) and return its output."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


def chrome_step_numbers(trace: Path) -> list[int]:
    """Sorted ``ProfilerStep#N`` numbers in a Chrome trace (object or bare-array form)."""
    data = json.loads(trace.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    return sorted(int(e["name"].split("#", 1)[1]) for e in events
                  if str(e.get("name", "")).startswith("ProfilerStep#"))
