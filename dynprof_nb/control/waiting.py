"""``Job.wait()``: waiting for the ranks to apply the latest config and finish its window.

Progress over the window's steps is shown with an ETA from the ranks' step rates (a bar in a
notebook or terminal, a few lines in a log); a rank that vanishes without closing is said
once; Ctrl-C stops only the waiting, with one line saying what the window is doing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.segment import SlotView
from dynprof_nb.control.base import JobError, WaitInterrupted
from dynprof_nb.control.progress import Progress, format_eta

if TYPE_CHECKING:
    import pandas as pd

BUSY_STATES = ("armed", "recording", "saving")


def wait_for(job: Any, timeout: float | None, progress: bool, poll: float) -> pd.DataFrame:
    """Block until every live rank of ``job`` (a :class:`~dynprof_nb.control.job.Job`) has
    applied its latest config and finished its window; ``job.status()`` then.

    Ctrl-C anywhere in the wait, its first reads of the job included, is
    :class:`WaitInterrupted`: the handler wraps the whole wait, not only its loop (a Ctrl-C
    during the first read of the config came out as a bare KeyboardInterrupt)."""
    try:
        return _wait(job, timeout, progress, poll)
    except KeyboardInterrupt:
        raise WaitInterrupted(still_going(job)) from None


def _wait(job: Any, timeout: float | None, progress: bool, poll: float) -> pd.DataFrame:
    target = job.generation
    cfg = job.config
    window = f"window {cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "config"
    length = cfg.stop_step - cfg.start_step + 1 if cfg.has_window else 0
    deadline = None if timeout is None else time.monotonic() + timeout
    report = Progress(f"job {job.name}: {window}", enabled=progress, unit="rank-step")
    seen: dict[int, SlotView] = {}
    try:
        while True:
            slots = job.slots()
            live = [s for s in slots if s.live]
            if not live and not slots:
                raise JobError(f"job {job.name!r} has no rank: start the training side, then wait.")
            _note_vanished(job.name, report, slots, live, seen)
            pending = [s for s in live if s.applied < target or s.state in BUSY_STATES]
            if not pending:
                report.close("done")
                return job.status()
            if live:
                done = sum(window_progress(s, cfg, target) for s in live)
                report.update(
                    done, length * len(live), _phase(pending, target), _detail(live, pending, cfg)
                )
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"job {job.name!r}: still waiting after {timeout} s for "
                    + ", ".join(f"rank {s.rank} ({s.state}, step {s.step})" for s in pending)
                    + ". The window goes on; call wait() again or stop()."
                )
            time.sleep(poll)
    finally:
        report.close()


def _note_vanished(
    name: str,
    report: Progress,
    slots: list[SlotView],
    live: list[SlotView],
    seen: dict[int, SlotView],
) -> None:
    """Say once of a rank seen live that is now gone without closing."""
    for s in live:
        seen[s.index] = s
    for s in slots:
        if s.index in seen and not s.live and s.state != "closed":
            report.note(f"job {name}: rank {s.rank} (pid {s.pid}) {vanished(s)}")
            del seen[s.index]


def still_going(job: Any) -> str:
    """The one line Ctrl-C in ``wait()`` prints: the window goes on, where the ranks are."""
    try:
        cfg, live = job.config, job.live_slots()
    except Exception:  # the segment itself is fine; never hide the interrupt behind this
        return f"stopped waiting for job {job.name!r}; the job goes on"
    where = ", ".join(f"rank {s.rank} at {s.step}" for s in live[:4])
    where += f" (+{len(live) - 4} more)" if len(live) > 4 else ""
    if not cfg.has_window:
        return f"stopped waiting; no window is pending; {where or 'no live rank'}"
    states = sorted({s.state for s in live if s.state in BUSY_STATES})
    doing = f"is still {' and '.join(states)}" if states else "is no longer pending on any rank"
    return f"stopped waiting; window {cfg.start_step}-{cfg.stop_step} {doing}; {where}"


def window_progress(slot: SlotView, cfg: ProfilerConfig, target: int) -> int:
    """Steps of the current window ``slot``'s rank has done (all of them once it is done)."""
    length = cfg.stop_step - cfg.start_step + 1
    if slot.applied >= target and slot.state not in BUSY_STATES:
        return length
    return max(0, min(length, slot.step - cfg.start_step + 1))


def vanished(slot: SlotView) -> str:
    """What a rank that died without closing its Monitor left behind, in words."""
    return f"exited without closing: heartbeat lost at step {slot.step}"


def _phase(pending: list[SlotView], target: int) -> str:
    """What the wait is held up by: the least advanced pending rank's state (``applying``,
    ``armed``, ``recording``, ``saving``), so ranks a step apart do not flip it back and
    forth (each change is a line in a log)."""
    states = {s.state if s.applied >= target else "applying" for s in pending}
    order = ("applying", "armed", "recording", "saving")
    return next((x for x in order if x in states), "waiting")


def _detail(live: list[SlotView], pending: list[SlotView], cfg: ProfilerConfig) -> str:
    """The ranks' steps and an ETA from their step rates (the slowest pending rank's)."""
    steps = " ".join(f"r{s.rank}:{s.step}" for s in live[:6])
    steps += " ..." if len(live) > 6 else ""
    eta = None
    if cfg.has_window:
        now = time.monotonic_ns()
        times = []
        for s in pending:
            rate = s.rate_milli / 1000
            left = cfg.stop_step - s.estimated_step(now)
            if s.state != "saving" and left > 0:
                times.append(left / rate if rate > 0 else float("nan"))
        if times and all(t == t for t in times):
            eta = max(times)
    return ", ".join(x for x in (steps, format_eta(eta)) if x)
