"""The step path's slow half: reading a new config and applying its command to the window.

``Monitor.step()`` only compares one word with the generation it last applied; on the step
where they differ, ``Monitor._advance`` asks the Monitor's :class:`CommandReader` to read the
config from the segment (retrying with backoff while a writer is mid-write) and apply it: arm
a window, stop one (at once, or at the step the controller chose for every rank), skip one
that began before the request arrived, or (file mode) shift it to begin at the next step as
MindSpore does. An edit that arrives while a window records waits for it to end (a stop does
not).

It is given the rank's slot, the step path's shared
:class:`~dynprof_nb.training.stepstate.StepState` (the generation applied, the config kept) and
the rank's status when built, and sets the Monitor's public window state (``state``,
``window``, ``config``): this object is the part of the Monitor that decides what the window is.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from dynprof_nb.contract import window_dirs
from dynprof_nb.contract.config import ConfigError
from dynprof_nb.contract.protocol import Command, decode
from dynprof_nb.contract.segment import BELL_GEN, SegmentError
from dynprof_nb.contract.slot import RankSlot
from dynprof_nb.training.stepstate import StepState

log = logging.getLogger("dynprof_nb")

UNREADABLE_S = 2.0  # a config unreadable this long means a writer died mid-write
UNREADABLE = (
    "could not read a consistent config for a while (did a writer die mid-write?); "
    "keeping the last good config. Write it again."
)


class CommandReader:
    """The config side of one Monitor ``m``: what was asked, and the window it makes."""

    __slots__ = (
        "m",
        "slot",
        "state",
        "status",
        "windows",
        "pending",
        "read_failures",
        "read_failing_since",
        "late",
        "asked",
        "reason",
    )

    def __init__(self, monitor: Any, slot: RankSlot, state: StepState, status: Any) -> None:
        self.m = monitor  # its public window state: state, window, config, window_options
        self.slot = slot  # where the window and the generation applied are published
        self.state = state  # the generation applied, the config kept, the window recording
        self.status = status  # the rank's RankStatus: its state and its errors
        self.windows: Any = None  # the Monitor's Windows (built after this: it is given later)
        self.pending: tuple[int, Command] | None = None  # an edit waiting for the window's end
        self.read_failures = 0
        self.read_failing_since = 0.0
        self.late = "skip"  # the current command's rule for a window that has begun (LATE)
        self.asked: tuple[int, int] | None = None  # the window asked for, if shifted
        self.reason = ""  # why the current window was asked for (a trigger's), for its manifest

    def read_config(self, n: int) -> None:
        """Read the config the doorbell rang for and apply it (or keep it for later)."""
        m = self.m
        failures = self.read_failures
        if failures and n % (1 << min(failures, 10)):
            return  # a writer is slow or died mid-write: retry with backoff, not every step
        try:
            got = self.slot.seg.read_config(attempts=50)
        except SegmentError:  # cut short under us: the heartbeat republishes it
            got = None
        if got is None:
            self.unreadable()
            return
        self.read_failures = 0
        if m.last_error == UNREADABLE:
            self.status.clear_error()  # it reads again: the report no longer holds
        gen, data = got
        state = self.state
        if gen < state.bell[BELL_GEN]:
            state.suspect = True  # rung for a segment we are not on (republished by another)
        state.applied = gen
        state.kept = got
        try:
            cmd = decode(data)
        except ConfigError as exc:
            self.status.report(
                f"config generation {gen} rejected: {exc} Keeping the last good config.", gen
            )
            self.slot.set_applied(gen)
            return
        if m.state == "recording" and cmd.action != "stop":
            self.pending = (gen, cmd)  # edits made during a window wait until it ends
            return
        # a newer command supersedes one that waited for the window to end: a stop must not
        # be followed by the older queued start (which would also report an older generation)
        self.pending = None
        self.apply(cmd, gen, n)

    def unreadable(self) -> None:
        """On a loaded machine a live writer can be preempted mid-write for a few ms, so only
        a failure that lasts (seconds, over several retries) is worth reporting."""
        now = time.monotonic()
        if not self.read_failures:
            self.read_failing_since = now
        self.read_failures += 1
        if self.read_failures >= 8 and now - self.read_failing_since > UNREADABLE_S:
            self.status.report(UNREADABLE)

    def apply_pending(self, n: int) -> None:
        """Apply the edit that waited for the window to end."""
        gen, cmd = self.pending
        self.pending = None
        self.apply(cmd, gen, n)

    def apply(self, cmd: Command, gen: int, n: int) -> None:
        m = self.m
        cmd = self.of_this_run(cmd)
        old, cfg = m.config, cmd.config
        m.config = cfg
        if cfg.flight_recorder and self.state.fr is None:
            self.state.fr = fr_responder(m)
        m.window_options = dict(cmd.window)
        self.late = cmd.late
        if cmd.action == "start":
            self.reason = cmd.reason
        if cmd.action == "stop":
            self.stop_at(cfg.stop_step if cfg.has_window else -1, n)
        elif cmd.action == "start" or (
            cfg.has_window and (cfg.start_step, cfg.stop_step) != (old.start_step, old.stop_step)
        ):
            self.status.clear_error()
            if cfg.has_window:
                self.arm(n)
            else:
                self.status.set_state("idle")
        elif not cfg.has_window and m.state in ("armed", "excluded"):
            self.status.set_state("idle")
        self.slot.set_applied(gen)

    def of_this_run(self, cmd: Command) -> Command:
        """``cmd`` as this rank takes it: a window asked of an earlier run of the job (one
        whose ranks were all gone before this rank joined) is dropped, never armed here; the
        standing keys still hold. The controller says so in the new run's status."""
        m = self.m
        if not (cmd.run and m.run and cmd.run < m.run and cmd.config.has_window):
            return cmd
        cfg = cmd.config
        log.info(
            "dynprof_nb job %r rank %d: window %d-%d was asked of run %d, which ended; "
            "dropped (this rank is in run %d)",
            m.job,
            m.rank,
            cfg.start_step,
            cfg.stop_step,
            cmd.run,
            m.run,
        )
        return Command("set", cfg.update(start_step=-1, stop_step=-1), cmd.by, cmd.at, run=cmd.run)

    def stop_at(self, at: int, n: int) -> None:
        """A stop: at once (``at`` -1, or a step this rank has reached), or when step ``at``
        ends, the step the controller chose for every rank, so their windows end together."""
        m = self.m
        if m.state == "recording":
            if at > n and m.window is not None:
                m.window = (m.window[0], min(m.window[1], at))
                self.slot.set_stop(m.window[1])
                self.state.recording["stop_asked"] = True
            else:
                self.windows.finish(n, stopped=True)
        elif m.state in ("armed", "excluded"):
            if m.window is not None and 1 <= m.window[0] <= at:
                m.window = (m.window[0], min(m.window[1], at))
                self.slot.set_stop(m.window[1])
            else:
                self.status.set_state("idle")

    def arm(self, n: int) -> None:
        """Arm the window the config asks for, or start it now, shift it or skip it."""
        m = self.m
        cfg = m.window_config
        start, stop = cfg.start_step, cfg.stop_step
        m.window, self.asked = (start, stop), None
        self.slot.set_window(start, stop)
        if cfg.ranks and m.rank not in cfg.ranks:
            self.status.set_state("excluded")
            log.info(
                "dynprof_nb rank %d: not in ranks %s; window %d-%d is not profiled here",
                m.rank,
                cfg.ranks,
                start,
                stop,
            )
            return
        shifted = shifted_window(start, stop, n) if self.late == "shift" else None
        if shifted is not None:  # file mode: begin at the next step, the same length
            self.asked, m.window = (start, stop), shifted
            self.slot.set_window(*shifted)
            self.status.report(shift_note(m.rank, start, stop, n, shifted))
            self.status.set_state("armed")
            self.windows.start(n)
            return
        if start <= n:
            length = stop - start
            # a lead that would have worked: twice how late this request was, at least 5
            lead = max(5, 2 * (n - start + 3))
            self.status.set_state("idle")
            self.status.report(
                f"window {start}-{stop} skipped: the request reached this rank at "
                f"the end of step {n}, {n - start + 1} step(s) after step {start} had begun. "
                f"Ask for a later window, e.g. start +{lead} +{lead + length}."
            )
            return
        self.status.set_state("armed")
        if n == start - 1:
            self.windows.start(n)


def shifted_window(start: int, stop: int, n: int) -> tuple[int, int] | None:
    """File mode's rule for a window that reaches a rank at the end of step ``n``, after its
    first step had begun: it begins at step ``n + 1`` with the same length, as long as its
    last step has not ended (``start <= n <= stop``); None when it has not begun (it is
    exact) or has ended (it is skipped, with a message). MindSpore's own ``step()`` does the
    same, so the window in its documented example, written after its first step ran, is
    recorded rather than lost."""
    if start <= n <= stop:
        return n + 1, n + 1 + stop - start
    return None


def shift_note(rank: int, start: int, stop: int, n: int, shifted: tuple[int, int]) -> str:
    """What the rank's status (and the window's manifest) says about a window
    ``shifted_window`` moved."""
    return (
        f"window {start}-{stop} from the config file reached this rank at the end of step "
        f"{n}, after step {start} had begun: recording steps {shifted[0]}-{shifted[1]} "
        f"instead (the same length, as MindSpore does) into "
        f"{window_dirs.window_name(rank, start, stop)}."
    )


def fr_responder(monitor: Any) -> Any:
    """The Flight Recorder responder (see :mod:`~dynprof_nb.training.frdump`), or None."""
    from dynprof_nb.training.frdump import start

    return start(monitor)
