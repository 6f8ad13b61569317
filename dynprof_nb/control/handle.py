"""A Job's hold on its job's segment, and the last good command it read or wrote there.

The segment may not exist yet (a job prepared before its ranks start: the first accepted write
creates it), may be truncated, removed or replaced under the notebook (its ranks republish
it: the handle lets go of the orphan and attaches to the one now under the job's name), and
may hold a half-written config (a controller died mid-write: the handle answers with the
last good command it saw, so ``set()`` on top of it never resets every other key).
"""

from __future__ import annotations

import warnings

from dynprof_nb.contract.config import ConfigError, ProfilerConfig
from dynprof_nb.contract.protocol import Command, decode
from dynprof_nb.contract.segment import DamagedSegment, NoSuchJob, Segment, SegmentError
from dynprof_nb.control.base import JobError
from dynprof_nb.control.runs import dropped_window
from dynprof_nb.userframe import user_stacklevel


class SegmentHandle:
    """The segment of job ``name`` as one controller holds it (``segment``: None until the job
    has one)."""

    __slots__ = ("name", "segment", "closed", "last_good", "last_window", "said", "unsaid")

    def __init__(self, name: str, segment: Segment | None) -> None:
        self.name = name
        self.segment = segment
        self.closed = False
        self.last_good: ProfilerConfig | None = None
        self.last_window: dict = {}
        self.said: set[str] = set()  # dropped windows this handle has noted (once each)
        # (first step, run, why) of each dropped window not told of yet: status() tells
        self.unsaid: list[tuple[int, int, str]] = []

    def attached(self, create: bool) -> Segment | None:
        """The segment, attaching now if the job has started since (creating it: ``create``).

        A segment truncated, removed or replaced under us (its ranks republish it) is left for
        the one now under the job's name, so a notebook never drives an orphan."""
        if self.closed:
            raise JobError(closed_message(self.name))
        if self.segment is not None and lost(self.segment):
            old, self.segment = self.segment, None
            try:
                old.close(tidy=False)
            except (OSError, SegmentError):
                pass
        if self.segment is None:
            try:
                self.segment = watched(Segment.open(self.name, create=create))
            except NoSuchJob:
                return None
            except DamagedSegment as exc:
                if create:
                    raise JobError(str(exc)) from None
                return None  # replaced under us: the ranks republish theirs over it
            except SegmentError as exc:
                raise JobError(str(exc)) from None
        return self.segment

    def writable(self) -> Segment:
        """The segment, created if the job has none yet (for writes)."""
        seg = self.attached(create=True)
        assert seg is not None
        return seg

    def remember(self, cfg: ProfilerConfig, window: dict) -> None:
        """A command this controller wrote or read whole: the last good one from now on."""
        self.last_good, self.last_window = cfg.copy(), dict(window)

    def command(self) -> Command:
        """The command in the segment; the last good one (with a warning) when the segment's
        is half-written or not a valid command; the defaults for a job with none."""
        seg = self.attached(create=False)
        got = (0, b"") if seg is None else seg.read_config()
        problem = None
        if got is None:
            problem = "was left half-written (a controller probably died mid-write)"
        elif got[0] == 0:
            return Command("set", ProfilerConfig())
        else:
            try:
                cmd = decode(got[1])
            except ConfigError as exc:  # bytes no Job wrote: set()/stop() must still work
                problem = f"cannot be used ({exc})"
            else:
                cmd = self.of_current_run(cmd, seg)
                self.remember(cmd.config, cmd.window)
                return cmd
        known = self.last_good is not None
        warnings.warn(
            f"job {self.name!r}: the config in the segment {problem}; the ranks keep their "
            f"last good config. Showing "
            f"{'the last config this notebook saw' if known else 'the defaults'}; "
            "the next set() or start() writes a whole config again.",
            stacklevel=user_stacklevel(),
        )
        if not known:
            return Command("set", ProfilerConfig())
        return Command("set", self.last_good.copy(), window=dict(self.last_window))

    def of_current_run(self, cmd: Command, seg: Segment) -> Command:
        """``cmd`` without a window asked of a run that has ended (the ranks of the new run
        drop it too); noted once in :attr:`unsaid` (``status()`` tells it)."""
        why = dropped_window(cmd, seg)
        if not why:
            return cmd
        if why not in self.said:
            self.said.add(why)
            self.unsaid.append((cmd.config.start_step, cmd.run, f"job {self.name!r}: {why}"))
        cfg = cmd.config.update(start_step=-1, stop_step=-1)
        return Command("set", cfg, cmd.by, cmd.at, late=cmd.late, run=cmd.run)

    def close(self) -> Segment | None:
        """Let go (once): later uses say the handle is closed. The segment it held, if any."""
        seg, self.segment, self.closed = self.segment, None, True
        return seg


def lost(seg: Segment) -> bool:
    """The segment was truncated, removed or replaced under us (or cannot be read)."""
    try:
        return bool(seg.problem())
    except (OSError, SegmentError):
        return True


def watched(seg: Segment) -> Segment:
    """A controller's segment: ranks that restart join it rather than reclaim it as stale."""
    seg.watch()
    return seg


def closed_message(name: str) -> str:
    """The one line a closed handle answers with."""
    return (
        f"job {name!r}: this handle is closed (job.close() was called); attach again: "
        f"job = dynprof_nb.attach({name!r}), or %dynprof attach {name}"
    )
