"""What a Job checks before it writes a window, from the ranks' slots: the checks that tell
the caller at once (a refusal, a warning) rather than a rank later, in its status.

A window every live rank has begun is refused (:class:`WindowRefused`), one whose ``ranks``
excludes every live rank too, one that overlaps a window the ranks record is refused
(:class:`WindowConflict`), one after it is queued (:class:`WindowQueued`), and one that
replaces a window another controller armed is warned about (:class:`WindowReplaced`).
"""

from __future__ import annotations

import difflib
import os
import time
import warnings
from collections.abc import Sequence

from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.protocol import Command
from dynprof_nb.contract.rows import RankRow, StepWindow, row_of_slot
from dynprof_nb.contract.segment import Segment, SlotView, pid_alive
from dynprof_nb.contract.shared_layout import estimated_step
from dynprof_nb.control.base import (
    JobError,
    RankClaimedTwice,
    WindowConflict,
    WindowQueued,
    WindowRefused,
    WindowReplaced,
    window_conflict,
)
from dynprof_nb.userframe import user_stacklevel


def current_step(seg: Segment | None, live: list[SlotView]) -> int:
    """The most advanced live rank's step now (a stalled rank's is not extrapolated)."""
    now = time.monotonic_ns()
    if seg is None:
        return max((s.estimated_step(now) for s in live), default=0)
    return max((estimated_step(seg, s, now) for s in live), default=0)


def refuse_passed(
    live: Sequence[SlotView | RankRow], first: int, last: int, shown: int | None = None
) -> None:
    """Refuse a window that every live rank has begun: the local controller's slots and the
    cluster's rows alike (``shown``: how many ranks the message names, for a cluster's
    thousands)."""
    if live and all(s.step >= first for s in live):
        where = ", ".join(f"rank {s.rank} at step {s.step}" for s in live[:shown])
        raise WindowRefused(
            f"window {first}-{last} has already begun on every rank ({where}). "
            f"Ask for a later one, e.g. start('+5', '+{last - first + 5}')."
        )


def refuse_ended(live: list[SlotView], cfg: ProfilerConfig) -> None:
    """File mode's refusal: a window that has ended on every live rank."""
    if live and all(s.step > cfg.stop_step for s in live):
        where = ", ".join(f"rank {s.rank} at step {s.step}" for s in live)
        raise WindowRefused(
            f"window {cfg.start_step}-{cfg.stop_step} has ended on every rank ({where}). "
            "Write a later window into the file."
        )


def refuse_no_rank_asked(name: str, ranks: list[int], live: list[int]) -> None:
    """``ranks=[7]`` on a job whose live ranks are 0 and 1 excludes every rank: no window
    would ever be written, so it is refused (ranks not running yet are fine)."""
    if ranks and live and not set(ranks) & set(live):
        raise JobError(
            f"ranks {','.join(map(str, ranks))}: job {name!r} has no such live rank "
            f"(live ranks: {','.join(map(str, live))}), so no window would be written. "
            "Ask for ranks among those, or leave ranks out (all ranks)."
        )


def warn_claimed_twice(name: str, live: list[SlotView]) -> None:
    """Warn when a rank is claimed by more than one live process: the window goes to each,
    at steps that may be far apart (a new user's second copy of a script recorded an old
    copy's window, 5 minutes ahead, while the bar sat at 0%)."""
    claims: dict[int, list[SlotView]] = {}
    for s in live:
        claims.setdefault(s.rank, []).append(s)
    twice = {rank: slots for rank, slots in claims.items() if len(slots) > 1}
    if not twice:
        return
    said = "; ".join(
        f"rank {rank} by {len(slots)} live processes ("
        + ", ".join(f"pid {s.pid} at step {s.step}" for s in slots)
        + ")"
        for rank, slots in sorted(twice.items())
    )
    warnings.warn(
        RankClaimedTwice(
            f"job {name!r}: {said}. Each of them records this window, and '+N' counts from "
            "the most advanced. Stop the extra process (a setup cell or a script started "
            "twice under one job name), then ask again."
        ),
        stacklevel=user_stacklevel(),
    )


def check_others(
    name: str,
    live: list[SlotView],
    first: int,
    last: int,
    cmd: Command,
    slots: list[SlotView] | None = None,
) -> None:
    """Tell the caller at once when the ranks are busy with another window: refuse
    (:class:`WindowConflict`) a window that overlaps one they are recording, warn
    (:class:`WindowQueued`) that one after it waits for it, and warn
    (:class:`WindowReplaced`) when it replaces a window another process armed (named as
    what it is: a rank, another controller, an exited process; ``slots``: every slot, dead
    ranks included). The cluster runs the same pieces on its nodes' rows
    (:func:`overlap`, :func:`armed_other`, :func:`warn_replaced`)."""
    rows = [row_of_slot(s) for s in live]
    asked = {}
    if cmd.config.has_window and cmd.by:
        mine = " (this process)" if cmd.by == os.getpid() else ""
        asked[(cmd.config.start_step, cmd.config.stop_step)] = f"pid {cmd.by}{mine}"
    found = overlap(rows, first, last, asked)
    if found is not None:
        message, queued = found
        if not queued:
            raise WindowConflict(message)
        warnings.warn(f"job {name!r}: {message}", WindowQueued, stacklevel=user_stacklevel())
        return
    windows, armed = armed_other(rows, first, last)
    if windows and cmd.by and cmd.by != os.getpid():
        ranks = ",".join(r.name for r in armed)
        warn_replaced(name, first, last, windows, writer(cmd, slots or live), ranks)


def overlap(
    live: Sequence[RankRow],
    first: int,
    last: int,
    asked: dict[tuple[int, int], str],
    can_queue: bool = True,
) -> tuple[str, bool] | None:
    """Whether ``first``..``last`` meets a window the live ranks are recording, or one
    ``asked`` names (window -> who asked it): ``(message, queued)``, or ``None``."""
    recording = [
        (r.name, r.window.start, r.window.stop, r.step)
        for r in live
        if r.state == "recording" and r.window is not None
    ]
    return window_conflict(first, last, recording, asked, can_queue=can_queue)


def armed_other(
    live: Sequence[RankRow], first: int, last: int
) -> tuple[list[StepWindow], list[RankRow]]:
    """The windows the live ranks have armed other than ``first``..``last``, and the armed
    ranks."""
    armed = [r for r in live if r.state == "armed"]
    windows = {r.window for r in armed if r.window is not None} - {StepWindow(first, last)}
    return sorted(windows), armed


def warn_replaced(
    name: str, first: int, last: int, windows: list[StepWindow], who: str, ranks: str
) -> None:
    """Warn (:class:`WindowReplaced`) that ``first``..``last`` replaces ``windows``, which
    ``who`` had armed on ``ranks``."""
    warnings.warn(
        f"job {name!r}: window {first}-{last} replaces window "
        f"{', '.join(str(w) for w in windows)}, which {who} had armed on ranks {ranks}: "
        "that one will not be recorded. Tell its owner, or stop() and ask for it again.",
        WindowReplaced,
        stacklevel=user_stacklevel(),
    )


def writer(cmd: Command, slots: list[SlotView]) -> str:
    """Who wrote ``cmd``, in words: a rank of the job (its trigger or its config-file relay
    writes windows), another controller, or a process that has exited since."""
    rank = next((s for s in slots if s.pid == cmd.by), None)
    if rank is not None:
        what = "its trigger" if cmd.reason else "its config-file relay"
        gone = "" if rank.live else ", which has exited"
        return f"rank {rank.rank} (pid {cmd.by}{gone}; {what})"
    if not pid_alive(cmd.by):
        return f"pid {cmd.by} (a process that has exited)"
    return f"pid {cmd.by} (another controller)"


def no_rank_note(name: str, slots: list[SlotView]) -> str:
    """Why no window will come yet, for a job no rank has joined (a prepared job, or a
    typo given to ``--create``); ``""`` when some rank has."""
    if slots:
        return ""
    from dynprof_nb.contract.segment import list_jobs

    near = difflib.get_close_matches(name, [n for n in list_jobs() if n != name], n=1)
    hint = f" Did you mean {near[0]!r}?" if near else ""
    return (
        f"no rank has joined job {name!r} yet: nothing is recorded until ranks "
        f"start with Monitor(job={name!r}).{hint}"
    )


def describe_stop(cfg: ProfilerConfig, busy: list[SlotView], joined: bool) -> str:
    """What ``stop()`` would end or cancel now, rank by rank (``busy``: the live ranks armed
    or recording), or that there is nothing."""
    if not busy:
        if cfg.has_window:
            why = "no rank has joined the job" if not joined else "it had ended or was skipped"
            return (
                f"window {cfg.start_step}-{cfg.stop_step} is not recording or armed on "
                f"any rank ({why}): Stop clears it, so that no rank starts it later"
            )
        return "nothing to stop: no window is pending or recording"
    by_state: dict[str, list[str]] = {}
    for s in busy:
        by_state.setdefault(s.state, []).append(str(s.rank))

    def ranks(state: str) -> str:
        names = by_state[state]
        return f"rank{'s' if len(names) > 1 else ''} {','.join(names)}"

    parts = []
    if "recording" in by_state:
        parts.append(
            f"ended on {ranks('recording')} at one step, the next every rank can reach "
            "(what was recorded is saved)"
        )
    if "armed" in by_state:
        parts.append(f"cancelled on {ranks('armed')} (not begun)")
    return f"window {cfg.start_step}-{cfg.stop_step} " + "; ".join(parts)
