"""``Job``: a training job on this machine, driven through its shared-memory segment.

A Job validates before it writes (a bad value never reaches the segment, so the config in the
segment is always the last good one), writes a command into the job segment, and reads the
ranks' slots back as a DataFrame.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynprof_nb.config import ConfigError, ProfilerConfig
from dynprof_nb.control.base import Controller, JobError, WindowRefused, resolve_step
from dynprof_nb.control.status import relay_rows, slot_row, status_frame
from dynprof_nb.protocol import command, decode
from dynprof_nb.segment import NoSuchJob, Segment, SegmentError, SlotView

if TYPE_CHECKING:
    import pandas as pd

BUSY_STATES = ("armed", "recording", "saving")


class Job(Controller):
    """A training job on this machine: its config, its ranks (live), its windows.

    A Job attaches to the job's segment when it exists. For a job that has not started yet
    (``open(create=True)``) the segment is created by the first request that is accepted, so
    a refused request (a bad value, a window already begun) leaves nothing behind.
    """

    def __init__(self, name: str, segment: Segment | None) -> None:
        self.name = name
        self._segment = segment
        self._last_good: ProfilerConfig | None = None

    @classmethod
    def open(cls, name: str, create: bool = True) -> Job:
        """The job ``name`` (with ``create``, also one whose segment does not exist yet)."""
        try:
            return cls(name, Segment.open(name, create=False))
        except NoSuchJob as exc:
            if not create:
                raise JobError(str(exc)) from None
            return cls(name, None)
        except SegmentError as exc:
            raise JobError(str(exc)) from None

    def _attached(self, create: bool) -> Segment | None:
        """The segment, attaching now if the job has started since (creating it: ``create``)."""
        if self._segment is None:
            try:
                self._segment = Segment.open(self.name, create=create)
            except NoSuchJob:
                return None
            except SegmentError as exc:
                raise JobError(str(exc)) from None
        return self._segment

    @property
    def _seg(self) -> Segment:
        """The segment, created if the job has none yet (for writes)."""
        seg = self._attached(create=True)
        assert seg is not None
        return seg

    # -- config ---------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Bumped by every write; a rank whose ``generation`` equals it has seen the latest."""
        seg = self._attached(create=False)
        return 0 if seg is None else seg.generation

    @property
    def config(self) -> ProfilerConfig:
        """The config currently in the segment (a copy: change it through set/start).

        If the segment holds no consistent config (a controller died in the middle of writing
        it) or bytes that are not a valid command, this is the last good config this Job read
        or wrote, with a warning: the ranks keep their last good config too, and ``set()`` on
        top of it must not silently reset every other key to its default.
        """
        seg = self._attached(create=False)
        got = (0, b"") if seg is None else seg.read_config()
        problem = None
        if got is None:
            problem = "was left half-written (a controller probably died mid-write)"
        elif got[0] == 0:
            return ProfilerConfig()
        else:
            try:
                cfg = decode(got[1]).config
            except ConfigError as exc:  # bytes no Job wrote: set()/stop() must still work
                problem = f"cannot be used ({exc})"
            else:
                self._last_good = cfg.copy()
                return cfg
        known = self._last_good is not None
        warnings.warn(
            f"job {self.name!r}: the config in the segment {problem}; the ranks keep their "
            f"last good config. Showing {'the last config this notebook saw' if known else 'the defaults'}; "
            "the next set() or start() writes a whole config again.", stacklevel=2)
        return self._last_good.copy() if known else ProfilerConfig()

    def set(self, **changes: Any) -> int:
        """Change config keys (not the window) for every rank; returns the new generation.

        Setting ``start_step``/``stop_step`` here is the same as ``start()``; setting both to
        -1 is ``stop()`` with the other changes, still in one write.
        """
        if {"start_step", "stop_step"} & set(changes):
            cfg = self.config.update(**changes)
            if not cfg.has_window:
                return self._write("stop", cfg)
            return self.start(cfg.start_step, cfg.stop_step,
                              **{k: v for k, v in changes.items()
                                 if k not in ("start_step", "stop_step")})
        return self._write("set", self.config.update(**changes))

    def start(self, start: int | str, stop: int | str, **changes: Any) -> int:
        """Ask every rank to record steps ``start``..``stop`` (inclusive, 1-based).

        ``"+10"`` means ten steps after the most advanced live rank. Refused, with the ranks'
        steps in the message, when every live rank has already begun step ``start``.
        """
        slots = self.live_slots()
        now = time.time_ns()
        current = max((s.estimated_step(now) for s in slots), default=0)
        first = resolve_step("start", start, current)
        last = resolve_step("stop", stop, current)
        cfg = self.config.update(start_step=first, stop_step=last, **changes)
        if slots and all(s.step >= first for s in slots):
            where = ", ".join(f"rank {s.rank} at step {s.step}" for s in slots)
            raise WindowRefused(
                f"window {first}-{last} has already begun on every rank ({where}). "
                f"Ask for a later one, e.g. start('+5', '+{last - first + 5}').")
        return self._write("start", cfg)

    def stop(self) -> int:
        """End an active window at once (what was recorded is saved) or cancel a pending one."""
        cfg = self.config.update(start_step=-1, stop_step=-1)
        return self._write("stop", cfg)

    def _publish(self, action: str, cfg: ProfilerConfig) -> int:
        gen = self._seg.write_config(command(action, cfg).encode())
        self._last_good = cfg.copy()
        return gen

    # -- ranks ----------------------------------------------------------------------------

    def slots(self) -> list[SlotView]:
        seg = self._attached(create=False)
        return [] if seg is None else sorted(seg.slots(), key=lambda s: (s.rank, -s.heartbeat_ns))

    def live_slots(self) -> list[SlotView]:
        return [s for s in self.slots() if s.live]

    def live_ranks(self) -> list[int]:
        return sorted({s.rank for s in self.live_slots()})

    def status(self) -> pd.DataFrame:
        """One row per rank: ``rank, pid, step, state, window, generation, heartbeat_age_s,
        alive, error``. Dead ranks stay listed (``alive`` False) until they are replaced."""
        now = time.time_ns()
        rows = [slot_row(s, now) for s in self.slots()]
        seg = self._attached(create=False)
        if seg is not None:
            rows += relay_rows(seg, now)  # a relay's row: rank -1, state "relay"
        return status_frame(rows)

    def progress(self) -> tuple[int, int]:
        """Steps of the current window done so far, summed over live ranks, and the total.

        ``(0, 0)`` without a window. The same count ``wait()``'s bar shows, for the panel.
        """
        cfg, target = self.config, self.generation
        if not cfg.has_window:
            return 0, 0
        live = self.live_slots()
        length = cfg.stop_step - cfg.start_step + 1
        return sum(_window_progress(s, cfg, target) for s in live), length * len(live)

    def wait(self, timeout: float | None = None, progress: bool = True,
             poll: float = 0.05) -> pd.DataFrame:
        """Block until every live rank has applied the latest config and finished its window.

        Shows a progress bar over the window's steps. Returns ``status()``; raises
        ``TimeoutError`` (with the ranks' state) when ``timeout`` seconds pass first.
        """
        target = self.generation
        cfg = self.config
        length = cfg.stop_step - cfg.start_step + 1 if cfg.has_window else 0
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = _progress_bar(progress, length, f"job {self.name}")
        try:
            while True:
                live = self.live_slots()
                if not live and not self.slots():
                    raise JobError(f"job {self.name!r} has no rank: start the training side, "
                                   "then wait.")
                pending = [s for s in live if s.applied < target or s.state in BUSY_STATES]
                if bar is not None and live:
                    done = [_window_progress(s, cfg, target) for s in live]
                    bar.total = max(1, length * len(live))
                    bar.n = sum(done)
                    bar.set_postfix_str(", ".join(f"r{s.rank}:{s.step}" for s in live[:8]))
                    bar.refresh()
                if not pending:
                    if bar is not None:
                        bar.n = bar.total
                        bar.refresh()
                    return self.status()
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(
                        f"job {self.name!r}: still waiting after {timeout} s for "
                        + ", ".join(f"rank {s.rank} ({s.state}, step {s.step})" for s in pending)
                        + ". The window goes on; call wait() again or stop().")
                time.sleep(poll)
        finally:
            if bar is not None:
                bar.close()

    # -- windows --------------------------------------------------------------------------

    def roots(self) -> list[Path]:
        """Directories the ranks write windows into (their slots say so)."""
        roots = {Path(s.root) for s in self.slots() if s.root}
        roots |= {Path(s.window).parent for s in self.slots() if s.window}
        prof = self.config.prof_path
        if os.path.isabs(prof):
            roots.add(Path(prof))
        return sorted(roots)

    # -- display --------------------------------------------------------------------------

    def _describe(self) -> str:
        cfg = self.config
        window = f"{cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "none"
        return (f"Job {self.name!r}: {len(self.live_slots())} live rank(s), window {window}, "
                f"generation {self.generation}")

    def write_note(self, text: str) -> None:
        """Publish a helper's note (the relay's state) in the segment."""
        self._seg.write_note(text)

    def beat_note(self) -> None:
        """Refresh the helper note's heartbeat without rewriting it."""
        self._seg.beat_note()

    def close(self) -> None:
        """Detach; the last process to leave a finished job removes its segment."""
        if self._segment is not None:
            self._segment.close()


def _window_progress(slot: SlotView, cfg: ProfilerConfig, target: int) -> int:
    length = cfg.stop_step - cfg.start_step + 1
    if slot.applied >= target and slot.state not in BUSY_STATES:
        return length
    return max(0, min(length, slot.step - cfg.start_step + 1))


def _progress_bar(enabled: bool, total: int, desc: str) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=max(1, total), desc=desc, unit="step", leave=True)
