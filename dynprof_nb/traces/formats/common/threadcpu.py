"""A window's ``thread_cpu.json`` per rank: the training thread's on-CPU time and run-queue delay
over the window (written by every backend, :mod:`dynprof_nb.training.threadcpu`), as a frame
with one row per rank (``w.thread_cpu()``).

A rank without the file (a window recorded by another profiler, or before dynprof_nb wrote it),
or whose file says it has no reading (not Linux), keeps its row with ``missing`` saying why and
no numbers: the straggler rule then cannot name CPU contention on it, and says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from dynprof_nb.contract.protocol import THREAD_CPU_FILE

COLUMNS = [
    "rank",
    "steps",
    "wall_ns",
    "on_cpu_ns",
    "runqueue_ns",
    "timeslices",
    "on_cpu_us_per_step",
    "runqueue_us_per_step",
    "threads",
    "missing",
]
MAX_BYTES = 64 * 1024  # the file is ~200 bytes; anything larger is not ours
COUNTERS = ("steps", "wall_ns", "on_cpu_ns", "runqueue_ns", "timeslices")


def read_file(path: Path | None) -> dict[str, Any]:
    """The numbers of one rank's file, or ``{"missing": why}``."""
    if path is None:
        return {"missing": f"no {THREAD_CPU_FILE} in the window (its backend did not write it)"}
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        return {"missing": f"{path.name} cannot be read: {exc.strerror or exc}"}
    if len(raw) > MAX_BYTES:
        return {"missing": f"{path.name} is over {MAX_BYTES // 1024} KiB: not a thread_cpu record"}
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):  # 64 KiB of '[' nests deeper than the parser goes
        return {"missing": f"{path.name} is not valid JSON"}
    if not isinstance(doc, dict):
        return {"missing": f"{path.name} is not a JSON object"}
    if doc.get("missing"):
        return {"missing": str(doc["missing"])[:300]}
    got = {k: doc.get(k) for k in COUNTERS}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in got.values()):
        return {"missing": f"{path.name} lacks its counters or holds negative ones"}
    if got["steps"] == 0:
        return {"missing": f"{path.name} covers no step"}
    threads = doc.get("threads", "training")
    impossible = _impossible(got, whole_process=threads == "process")
    if impossible:
        return {"missing": f"{path.name} holds numbers that cannot be: {impossible}"}
    return {
        **got,
        "threads": threads if threads in ("training", "process") else "training",
        "on_cpu_us_per_step": got["on_cpu_ns"] / 1000.0 / got["steps"],
        "runqueue_us_per_step": got["runqueue_ns"] / 1000.0 / got["steps"],
        "missing": None,
    }


#: the longest window a record may span (30 days, in ns): past it a counter is not a reading
MAX_WALL_NS = 30 * 86_400 * 10**9
#: a whole-process record sums its threads: at most this many can be on a CPU or waiting at once
MAX_THREADS = 4096
#: one thread's on-CPU plus run-queue time may pass the wall time by the slack of reading the
#: three at slightly different instants
SLACK_NS = 20_000_000


def _impossible(got: dict[str, int], whole_process: bool) -> str:
    """Why the counters cannot be one reading of a window ("" when they can): a thread is on a
    CPU or waiting for one for at most the window's wall time (a process for at most that
    times :data:`MAX_THREADS`), and a window spans at most :data:`MAX_WALL_NS`."""
    wall = got["wall_ns"]
    if wall > MAX_WALL_NS or got["steps"] > MAX_WALL_NS:
        return f"a window of {wall} ns over {got['steps']} steps"
    busy = got["on_cpu_ns"] + got["runqueue_ns"]
    bound = wall * (MAX_THREADS if whole_process else 1) + SLACK_NS
    if busy > bound:
        return f"{busy} ns on a CPU or waiting for one in a window of {wall} ns"
    return ""


def thread_cpu(w: Any) -> pd.DataFrame:
    """Per rank of window ``w`` (columns :data:`COLUMNS`), each column's unit its suffix:

    * ``steps``, ``timeslices``: counts over the window;
    * ``wall_ns``, ``on_cpu_ns``, ``runqueue_ns``: the window's wall time, the training
      thread's on-CPU time and its run-queue delay, in **nanoseconds**, exact integers as the
      rank wrote them (``thread_cpu.json``);
    * ``on_cpu_us_per_step``, ``runqueue_us_per_step``: those two per step, in
      **microseconds**, the unit of ``w.steps`` and ``w.ops`` (what a person compares);
    * ``threads``: ``"training"`` or ``"process"`` (MindSpore: every thread);
    * ``missing``: None, or why the rank has no numbers."""
    ranks = list(getattr(w, "ranks", None) or [])
    if len(ranks) > 1 and callable(getattr(w, "rank_window", None)):
        parts = [(r, w.rank_window(r)) for r in ranks]
    else:
        parts = [(ranks[0] if ranks else 0, w)]
    rows = []
    for rank, rw in parts:
        files = getattr(rw, "files", None)
        rows.append({"rank": int(rank), **read_file(getattr(files, "thread_cpu", None))})
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


__all__ = ["COLUMNS", "read_file", "thread_cpu"]
