"""A job's runs, as a controller sees them.

A job restarted under its name (after a crash, a code change) is a new *run*: the first rank
to join once every rank of the run before is gone bumps the segment's run counter
(:meth:`dynprof_nb.contract.segment.Segment.claim_slot`). A controller stamps each command with the
run it is for (:func:`run_for_write`); a rank of a later run never arms a window asked of an
earlier one (:meth:`dynprof_nb.training.config_reader.CommandReader.of_this_run`), and the
controller says once that it was dropped (:func:`dropped_window`). ``status()``,
``windows()``, each window's ``window.json`` and the loaded window name the run, so steps of
two runs are never taken for one.
"""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING

from dynprof_nb.contract.protocol import Command
from dynprof_nb.contract.segment import Segment, SlotView, pid_alive, run_of
from dynprof_nb.userframe import user_stacklevel

if TYPE_CHECKING:
    import pandas as pd


class WindowDropped(UserWarning):
    """A window asked of a run that ended before it was recorded: the job's ranks were
    restarted (a new run), and the new ranks do not record it."""


def run_for_write(seg: Segment | None, slots: list[SlotView]) -> int:
    """The run a command written now is for: the current run while one of its ranks is live,
    else the next one (a window asked while the job is down is for the ranks to come)."""
    if seg is None:
        return 1
    run = run_of(seg)[0]
    # pid_alive, not s.live: no /proc/<pid>/stat read per rank before each write (a reused
    # pid would only stamp the current run on a window the ranks to come then drop)
    if any(s.state != "closed" and s.run == run and pid_alive(s.pid) for s in slots):
        return run
    return run + 1


def dropped_window(cmd: Command, seg: Segment | None) -> str:
    """Why the window in ``cmd`` is not the job's any more ("" when it is): it was asked of a
    run that has ended since (the ranks of the current run drop it)."""
    if seg is None or not cmd.run or not cmd.config.has_window:
        return ""
    run = run_of(seg)[0]
    if cmd.run >= run:
        return ""
    cfg = cmd.config
    return (
        f"window {cfg.start_step}-{cfg.stop_step} was asked of run {cmd.run}, which ended; "
        f"dropped (the job's ranks were restarted: run {run} now). Ask again for a window "
        "of this run."
    )


def describe_run(seg: Segment | None) -> str:
    """``run 2 (since 21:58:03)``, or "" before any rank joined."""
    run, started = run_of(seg) if seg is not None else (0, 0)
    if run < 1:
        return ""
    when = f" (since {time.strftime('%H:%M:%S', time.localtime(started / 1e9))})" if started else ""
    return f"run {run}{when}"


def tell_dropped(unsaid: list[tuple[int, int, str]], windows: pd.DataFrame) -> list[str]:
    """Say (a :class:`WindowDropped` warning) each window of ``unsaid`` (first step, run,
    words; emptied) that its run never recorded: one it recorded is not dropped, just done."""
    told = []
    while unsaid:
        first, run, words = unsaid.pop(0)
        same = (windows.start == first) & (windows["run"] == run)
        done = windows[same.fillna(False).astype(bool)]
        if not (done.status == "complete").any():
            warnings.warn(words, WindowDropped, stacklevel=user_stacklevel())
            told.append(words)
    return told
