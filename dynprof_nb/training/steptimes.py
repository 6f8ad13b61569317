"""Step times of a rank, and the trigger beside it: run by the rank's heartbeat thread.

``step()`` never reads a clock. Every heartbeat (20 ms) the heartbeat thread looks at the step
counter; when it moved, it writes ``(step, end_ns)`` (``time.monotonic_ns``) into this rank's
ring in the segment (:data:`~dynprof_nb.segment.RING_ENTRIES` entries, one writer). A step
longer than ten heartbeats is seen alone, so its duration is exact to one heartbeat; faster
steps are seen a few at a time and the entry is their mean (``kind`` "interval").

The trigger (:class:`TriggerWatch`) is evaluated on the same thread, so it works with no
notebook attached: when this rank's step takes more than ``slowdown`` x its own rolling median
(``confirm`` observations in a row, and at least one heartbeat longer than the median: the
clock cannot tell less), or the job's median is ``slowdown`` x what it was when the trigger was
armed, the rank writes a window request into the segment, under the segment's write lock, as a
controller would: ``steps`` steps from a step just ahead of the most advanced rank. Across
nodes (``mode`` "cluster") it writes only a request word, and the node agent starts the window
on every node at one step. Nothing here raises into the heartbeat: the caller catches.

The ring and trigger words are laid out in :mod:`dynprof_nb.shared_layout`, which the
controller side reads too.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import deque
from typing import Any

from dynprof_nb.segment import STATE, Segment
from dynprof_nb.shared_layout import (
    R_LAST_NS,
    R_MEDIAN_NS,
    R_RECENT_NS,
    T_BASELINE_NS,
    T_FIRED,
    T_GEN,
    T_LAST_FIRE_NS,
    T_REQ,
    T_REQ_DONE,
    check_definition,
    job_median_ns,
    median_of,
    write_entry,
)

log = logging.getLogger("dynprof_nb")

RECENT = 5  # entries in the "recent" median (status' step_s)
ROLLING = 64  # entries in a rank's rolling median (the trigger's reference)
MIN_HISTORY = 8  # entries before a rank's median counts
JOB_CHECK_S = 1.0  # how often a rank compares the job's median with the baseline
BUSY = (STATE["armed"], STATE["recording"], STATE["saving"])
MARGIN_S = 0.03  # a window starts this far (at each rank's rate) ahead of every rank


# -- the rank's side ----------------------------------------------------------------------


class StepClock:
    """Turns the step counter, seen once a heartbeat, into ring entries and medians."""

    def __init__(self, words: Any, ring: int, step: int) -> None:
        self.words, self.ring = words, ring
        self.last_step, self.last_ns = step, time.monotonic_ns()
        self.history: deque[float] = deque(maxlen=ROLLING)
        self.recent: deque[float] = deque(maxlen=RECENT)
        self.median = 0.0  # the rolling median once MIN_HISTORY steps are in it, else 0
        write_entry(words, ring, step, self.last_ns)

    def observe(self, step: int, now_ns: int, counts: bool = True) -> tuple[float, float] | None:
        """The per-step duration (ns) of the steps ended since the last look and the rolling
        median before them, or None when no step ended. ``counts``: False while this rank
        records a window (the profiler's own cost must not become the reference)."""
        if step <= self.last_step:
            if step < self.last_step:  # a restarted count (step_begin rewound it): start over
                self.last_step, self.last_ns = step, now_ns
            return None
        per_step = (now_ns - self.last_ns) / (step - self.last_step)
        write_entry(self.words, self.ring, step, now_ns)
        self.last_step, self.last_ns = step, now_ns
        median = median_of(self.history) if len(self.history) >= MIN_HISTORY else 0.0
        if counts:
            self.history.append(per_step)
        self.recent.append(per_step)
        w, r = self.words, self.ring
        w[r + R_RECENT_NS] = int(median_of(self.recent))
        self.median = median_of(self.history) if len(self.history) >= MIN_HISTORY else 0.0
        w[r + R_MEDIAN_NS] = int(median_of(self.history)) if self.history else 0
        w[r + R_LAST_NS] = int(per_step)
        return per_step, median

    def running(self, now_ns: int) -> tuple[int, float, float]:
        """The step in progress: ``(step, ns it has run at least, the rolling median)``; the
        time is counted from the look that saw the last step end, so it is never more than
        the step has really run."""
        return self.last_step + 1, now_ns - self.last_ns, self.median


class TriggerWatch:
    """The trigger as one rank evaluates it, once a heartbeat (see the module docstring)."""

    def __init__(self, seg: Segment, slot: int, rank: int, heartbeat_s: float) -> None:
        self.seg, self.slot, self.rank = seg, slot, rank
        self.heartbeat_ns = heartbeat_s * 1e9
        self.gen = 0
        self.definition: dict[str, Any] | None = None
        self.text = ""
        self.slow_run = 0
        self.pending: str | None = None  # a reason waiting for a window to end
        self.flagged = 0  # a step that tripped the trigger while it ran (not counted again)
        self.next_job_check = 0.0
        self.last_error = ""

    def _load(self) -> None:
        gen = self.seg.words[self.seg.trigger_base + T_GEN]
        if gen == self.gen:
            return
        self.gen, self.slow_run, self.pending, self.flagged = gen, 0, None, 0
        self.definition = None
        if gen <= 0:
            return
        text, _ = self.seg.read_trigger_text()
        if not text:  # disarmed
            return
        try:
            self.definition, self.text = check_definition(json.loads(text)), text
        except (ValueError, TypeError) as exc:  # another version's definition: say nothing
            self.last_error = f"trigger definition unusable: {exc}"

    def _slow(self, d: dict[str, Any], took: float, median: float) -> bool:
        return median > 0 and took > d["slowdown"] * median and took - median > self.heartbeat_ns

    def beat(
        self,
        step: int,
        seen: tuple[float, float] | None,
        state: str,
        running: tuple[int, float, float] | None = None,
    ) -> str | None:
        """One heartbeat's evaluation; returns what happened when a request was made (for
        tests and the log), else None. ``running``: the step in progress (StepClock.running),
        so that with ``confirm=1`` a slow step trips while it runs, not only once it ends
        (at 10 ms steps that is ~3 steps of the other ranks sooner)."""
        self._load()
        d = self.definition
        if d is None:
            return None
        watching = state not in ("recording", "saving")
        if seen is not None and watching:
            per_step, median = seen
            if self.flagged and step >= self.flagged:  # the step that tripped while it ran
                self.flagged, slow = 0, False
            else:
                slow = self._slow(d, per_step, median)
            self.slow_run = self.slow_run + 1 if slow else 0
            if self.slow_run >= d["confirm"]:
                self.pending = (
                    f"rank {self.rank} step {step} took {per_step / 1e6:.0f} ms = "
                    f"{per_step / median:.1f}x its median {median / 1e6:.1f} ms"
                )
                self.slow_run = 0
        elif not watching:
            self.slow_run = 0
        elif (
            running is not None
            and d["confirm"] == 1
            and self.pending is None
            and not self.flagged
            and self._slow(d, running[1], running[2])
        ):
            at, took, median = running
            self.flagged = at
            self.pending = (
                f"rank {self.rank} step {at} took {took / 1e6:.0f} ms so far = "
                f"{took / median:.1f}x its median {median / 1e6:.1f} ms"
            )
        now = time.monotonic()
        if self.pending is None and now >= self.next_job_check:
            self.next_job_check = now + JOB_CHECK_S
            self.pending = self._job_slowdown(d)
        if self.pending is None:
            return None
        outcome = fire(self.seg, self.gen, d, self.text, self.pending)
        if outcome != "busy":  # fired, or not allowed now (cooldown, spent): forget it
            self.pending = None
        return outcome

    def _job_slowdown(self, d: dict[str, Any]) -> str | None:
        """The second condition: the job's median against its median when armed."""
        w, tb = self.seg.words, self.seg.trigger_base
        current = job_median_ns(self.seg)
        if current <= 0:
            return None
        baseline = w[tb + T_BASELINE_NS]
        if baseline <= 0:
            with self.seg.write_lock():
                if w[tb + T_BASELINE_NS] <= 0 and w[tb + T_GEN] == self.gen:
                    w[tb + T_BASELINE_NS] = int(current)
            return None
        if current > d["slowdown"] * baseline:
            return (
                f"the job's median step {current / 1e6:.0f} ms = "
                f"{current / baseline:.1f}x its median when armed {baseline / 1e6:.1f} ms "
                f"(seen by rank {self.rank})"
            )
        return None


def fire(seg: Segment, gen: int, d: dict[str, Any], text: str, reason: str) -> str:
    """Ask for the trigger's window, if its bounds allow: ``fired``, ``requested`` (cluster
    mode: the agent starts it), ``busy`` (a window is pending or recording: try again),
    ``cooldown``, ``spent`` (max_windows), ``disk`` (over the disk budget), ``disarmed``."""
    from dynprof_nb.config import ProfilerConfig
    from dynprof_nb.protocol import Command, command, decode

    w, tb = seg.words, seg.trigger_base
    with seg.write_lock():
        if w[tb + T_GEN] != gen:
            return "disarmed"
        if w[tb + T_FIRED] >= d["max_windows"]:
            return "spent"
        now = time.monotonic_ns()
        last = w[tb + T_LAST_FIRE_NS]
        if last and now - last < d["cooldown_s"] * 1e9:
            return "cooldown"
        live = [s for s in seg.slots() if s.live]
        if any(s.state in ("armed", "recording", "saving") for s in live):
            return "busy"
        if d["mode"] == "cluster":
            if w[tb + T_REQ] != w[tb + T_REQ_DONE]:
                return "busy"  # the agent has not taken the last request yet
            seg.write_trigger_text(text, reason)
            w[tb + T_REQ] += 1
            return "requested"
        got = seg.read_config(attempts=50)
        cmd = Command("set", ProfilerConfig())
        if got is not None and got[0] > 0:
            cmd = decode(got[1])
        wall = time.monotonic_ns()  # heartbeats are on the monotonic clock
        current = max((s.estimated_step(wall) for s in live), default=0)
        if cmd.config.has_window and cmd.config.stop_step >= current:
            return "busy"  # a window asked for and not yet over
        if d["disk_budget_mb"] is not None and _disk_used_mb(live) >= d["disk_budget_mb"]:
            w[tb + T_FIRED] = d["max_windows"]  # do not look again until re-armed
            seg.write_trigger_text(
                text,
                f"not fired ({reason}): the job's windows use more "
                f"than disk_budget_mb={d['disk_budget_mb']:g}",
            )
            return "disk"
        first = first_step(live, wall)
        cfg = cmd.config.update(start_step=first, stop_step=first + d["steps"] - 1)
        new = command("start", cfg, d["window"], reason=reason)
        w[tb + T_FIRED] += 1
        w[tb + T_LAST_FIRE_NS] = now
        seg.write_trigger_text(text, reason)
        seg.write_config(new.encode(), locked=True)
        return "fired"


def first_step(live: list[Any], now_ns: int) -> int:
    """The earliest step every live rank can still begin a window at: each rank reads a
    request at the end of its next step, so two of its steps plus :data:`MARGIN_S` (at its own
    rate) after where it probably is now, the latest of those."""
    return max(
        (s.estimated_step(now_ns) + math.ceil(s.rate_milli / 1000 * MARGIN_S) + 2 for s in live),
        default=1,
    )


def _disk_used_mb(live: list[Any]) -> float:
    """Megabytes under the ranks' window roots (this job's windows live there)."""
    total = 0
    for root in {s.root for s in live if s.root}:
        for parent, _, files in os.walk(root):
            for name in files:
                try:
                    total += os.lstat(os.path.join(parent, name)).st_size
                except OSError:
                    pass
    return total / 1e6


class StepWatch:
    """What the Monitor's heartbeat thread calls once a beat: the ring, then the trigger.

    Any failure is logged once and turns only this watch off: the heartbeat (and training)
    go on."""

    def __init__(
        self, seg: Segment | None, slot: int, rank: int, step: int, heartbeat_s: float
    ) -> None:
        self.clock = self.trigger = None
        self.failed = False
        if seg is None:
            return
        self.clock = StepClock(seg.words, seg.ring_base(slot), step)
        self.trigger = TriggerWatch(seg, slot, rank, heartbeat_s)

    def beat(self, step: int, state: str) -> None:
        if self.clock is None or self.failed:
            return
        try:
            quiet = state not in ("recording", "saving")  # the profiler's cost is not the job's
            now = time.monotonic_ns()
            seen = self.clock.observe(step, now, counts=quiet)
            running = self.clock.running(now) if seen is None else None
            outcome = self.trigger.beat(step, seen, state, running)
            if outcome in ("fired", "requested"):
                log.info(
                    "dynprof_nb rank %d: trigger %s a window: %s",
                    self.trigger.rank,
                    outcome,
                    self.trigger.text and self.seg_reason(),
                )
        except Exception as exc:  # never into the heartbeat
            self.failed = True
            log.warning(
                "dynprof_nb rank %s: step times and the trigger are off for this process: %r",
                getattr(self.trigger, "rank", "?"),
                exc,
            )

    def seg_reason(self) -> str:
        return self.trigger.seg.read_trigger_text()[1]
