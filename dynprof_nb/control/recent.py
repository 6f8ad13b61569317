"""``job.recent(100)``: every live rank's record of its last steps, written now and loaded.

The controller bumps the segment's recent-request word (with the number of steps asked) under
the segment's write lock; each rank's keeper thread (:mod:`dynprof_nb.training.recent`) sees
it within 0.2 s and writes its record as a window directory whose ``window.json`` carries
``recent.request``. This waits for one record per live rank, with one deadline, and loads
them together; a rank that wrote none by then is named in a warning (the window is loaded
without it) or, when none did, in the error.

:func:`keep_at_hang` asks the same way, without waiting, when a stalled job's stacks are
taken (:class:`~dynprof_nb.control.stall.StallCapture`): each rank keeps every step it holds,
as a record of kind ``"hang"``, so the steps leading up to the hang sit beside its stacks.
"""

from __future__ import annotations

import numbers
import time
from typing import Any

from dynprof_nb.contract.config import RECENT_STEPS_MAX
from dynprof_nb.contract.segment import run_of
from dynprof_nb.contract.shared_layout import (
    RECENT_ASKED,
    RECENT_HANG,
    T_RECENT_KIND,
    T_RECENT_REQ,
    T_RECENT_STEPS,
)
from dynprof_nb.contract.window_dirs import find_windows, read_manifest
from dynprof_nb.control.base import JobError
from dynprof_nb.control.loading import load_paths

RECENT_TIMEOUT_S = 10.0
POLL_S = 0.05
#: a record is written after its request: by the rank's clock, on the notebook's machine
CLOCK_SLACK_S = 0.5


def ask(job: Any, steps: int, kind: int = RECENT_ASKED) -> int:
    """Ask every rank of ``job`` for its last ``steps`` steps (0 with ``RECENT_HANG``: all it
    holds); returns the request's number."""
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral):
        raise ValueError(f"recent({steps!r}): ask for a whole number of steps, e.g. recent(100)")
    if int(steps) < 1 and kind == RECENT_ASKED:
        raise ValueError(f"recent({steps!r}): ask for at least one step")
    steps = min(int(steps), RECENT_STEPS_MAX)  # no rank keeps more (a word of the segment)
    seg = job.segment()
    if seg is None:
        raise JobError(f"job {job.name!r} has no segment: no rank to ask")
    w, tb = seg.words, seg.trigger_base
    with seg.write_lock():
        w[tb + T_RECENT_STEPS] = int(steps)
        w[tb + T_RECENT_KIND] = int(kind)
        w[tb + T_RECENT_REQ] += 1
        return int(w[tb + T_RECENT_REQ])


HANG_NOTE = (
    "each live rank keeps its steps up to the hang as a record (job.windows() rows with "
    "recent == 'hang'; load one with job.load(path))"
)


def keep_at_hang(job: Any) -> str:
    """Ask every rank of a stalled ``job`` to keep all the steps it holds, now, beside the
    stacks just taken (not waited for: a rank's keeper writes within a second, unless the hung
    thread holds the GIL). Returns the note the stacks carry, or why nothing was asked."""
    try:
        request = ask(job, 0, RECENT_HANG)
    except (JobError, OSError, ValueError) as exc:
        return f"no record of the steps before the hang: {exc}"
    return f"{HANG_NOTE} (request {request})"


def records(
    job: Any, request: int, asked_at: float, run_started_at: float | None
) -> dict[int, str]:
    """``{rank: path}`` of the records written for ``request`` so far: the request's number,
    written after it was asked (``asked_at``, wall clock s), by a rank of the run now live
    (``run_started_at``, where both say it). A job restarted under its name counts its
    requests from 1 again, and its folder keeps the dead run's records: the number alone took a
    dead run's record for the live one's."""
    found: dict[int, str] = {}
    for row in find_windows(job.roots(), job.name):
        if row.get("recent") != "asked" or row["status"] != "complete":
            continue
        manifest = read_manifest(row["path"]) or {}
        recent = manifest.get("recent") or {}
        if recent.get("request") != request or not _written_since(manifest, asked_at):
            continue
        theirs = manifest.get("run_started_at")
        if run_started_at is not None and theirs is not None:
            if abs(float(theirs) - run_started_at) > 1e-3:
                continue
        found[int(row["rank"])] = row["path"]
    return found


def _written_since(manifest: dict[str, Any], asked_at: float) -> bool:
    started = manifest.get("started_at")
    return isinstance(started, (int, float)) and float(started) >= asked_at - CLOCK_SLACK_S


def live_run_started(job: Any) -> float | None:
    """When the job's live run began (wall clock, s), or None where its segment does not say."""
    seg = job.segment()
    if seg is None:
        return None
    run, started = run_of(seg)
    return started / 1e9 if run and started else None


class RecentRecords:
    """``job.recent(steps=100, timeout=10)``: every live rank's record of its last ``steps``
    steps (step times, user ranges, GC pauses, data-loader waits), written now and loaded as
    one window; ``w.explain()`` then compares its slow steps with its normal ones. For a
    slowdown a person saw on the heat map after the fact."""

    def __init__(self, job: Any) -> None:
        self.job = job

    def __call__(self, steps: int = 100, timeout: float = RECENT_TIMEOUT_S) -> Any:
        return recent(self.job, steps, timeout)

    def __repr__(self) -> str:
        return f"<job.recent(steps=100, timeout={RECENT_TIMEOUT_S:g}) of {self.job.name!r}>"


def recent(job: Any, steps: int = 100, timeout: float = RECENT_TIMEOUT_S) -> Any:
    """See :class:`RecentRecords`."""
    ranks = sorted({s.rank for s in job.live_slots()})
    if not ranks:
        raise JobError(f"job {job.name!r} has no live rank to ask for its recent steps")
    asked_at, started = time.time(), live_run_started(job)
    request = ask(job, steps)
    deadline = time.monotonic() + timeout
    found = records(job, request, asked_at, started)
    while set(found) < set(ranks) and time.monotonic() < deadline:
        time.sleep(POLL_S)  # the notebook's thread, never a rank's
        found = records(job, request, asked_at, started)
    if not found:
        raise JobError(
            f"job {job.name!r}: no rank wrote its recent steps within {timeout:g} s "
            f"(ranks {ranks}; a rank started with recent_steps=0, or a loop under 0.5 ms a "
            "step, keeps none)"
        )
    missing = [f"rank {r} (no record within {timeout:g} s)" for r in ranks if r not in found]
    return load_paths([found[r] for r in sorted(found)], missing, job.name)
