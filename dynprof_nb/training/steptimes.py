"""Step times of a rank, and the trigger beside it: run by the rank's heartbeat thread.

While steps last :data:`TIMED_ON_NS` or more, the Monitor's timed ``step()`` records each
step's end (``time.monotonic_ns``) in a list of the training thread's; every heartbeat
(20 ms) this thread copies the steps ended since its last look into this rank's ring in the
segment, one exact ``(step, end_ns)`` entry per step. Faster loops are not timed (a clock read
per step would break the idle bound): their entry is the heartbeat's time, the mean of the
steps it saw end (``kind`` "interval").

The trigger (:class:`TriggerWatch`) is evaluated on the same thread, so it works with no
notebook attached: when ``confirm`` of this rank's steps in a row each take more than
``slowdown`` x its median over its last :data:`ROLLING` steps and more than :data:`MAD_K` scaled
MADs over it (the baseline's own noise is not a slowdown), or the job's median is ``slowdown`` x
what it was when the trigger was armed, the rank writes a window request into the segment, under
the segment's write lock, as a controller would: ``steps`` steps from a step just ahead of the
most advanced rank. Across nodes (``mode`` "cluster") it writes only a request word, and the
node agent starts the window on every node at one step. Nothing here raises into the heartbeat:
the caller catches.

The ring and trigger words are laid out in :mod:`dynprof_nb.contract.shared_layout`, which the
controller side reads too.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from typing import Any

from dynprof_nb.contract.segment import STATE, Segment, run_of
from dynprof_nb.contract.shared_layout import (
    R_LAST_NS,
    R_LOOKED_NS,
    R_MEDIAN_NS,
    R_RECENT_NS,
    T_BASELINE_NS,
    T_FIRED,
    T_GEN,
    T_LAST_FIRE_NS,
    T_REFUSED,
    T_REFUSED_GEN,
    T_REQ,
    T_REQ_DONE,
    check_definition,
    common_step,
    cooldown_s,
    estimated_step,
    job_median_ns,
    median_of,
    write_entry,
)

log = logging.getLogger("dynprof_nb")

RECENT = 9  # entries in the "recent" median (status' step_s)
ROLLING = 64  # entries in a rank's rolling median and MAD (the trigger's baseline)
MIN_HISTORY = 8  # entries before a rank's median counts
MAD_K = 5.0  # a slow step is also this many (scaled) MADs over the median: noise is not slow
MAD_SCALE = 1.4826  # MAD x this estimates a standard deviation
# The training thread's own end times (Monitor's timed step): a list of ENDS, indexed by
# step & ENDS_MASK; a heartbeat trusts the newest ENDS_KEEP of them (the rest may be rewritten
# while it reads). Steps are timed while they last TIMED_ON_NS or more on average over a
# heartbeat, and no longer once they are under TIMED_OFF_NS: there a clock read per step would
# cost the loop more than 0.03% (and the idle bound, 3x an empty call, would not hold), so a
# heartbeat's entry is the mean of the steps it saw end ("interval").
ENDS = 4096
ENDS_MASK = ENDS - 1
ENDS_KEEP = 2048
TIMED_ON_NS = 500_000
TIMED_OFF_NS = 250_000
JOB_CHECK_S = 1.0  # how often a rank compares the job's median with the baseline
BUSY = (STATE["armed"], STATE["recording"], STATE["saving"])
MARGIN_S = 0.03  # a window starts this far (at each rank's rate) ahead of every rank


# -- the rank's side ----------------------------------------------------------------------


def median_before(ends: Any, exact_from: int | None, last: int, k: int = ROLLING) -> float | None:
    """The median of the timed steps ``last-k+1..last`` (ms): the job's step time just before
    a window, unprofiled, for the window's manifest (``steps_before_ms``); None with fewer
    than :data:`MIN_HISTORY` timed steps. Read by the training thread as a window opens: at
    most ``k`` subtractions and a sort, once a window."""
    if exact_from is None or ends is None:
        return None
    lo = max(last - k + 1, exact_from + 1, last - ENDS_KEEP + 2)
    took = sorted(ends[s & ENDS_MASK] - ends[(s - 1) & ENDS_MASK] for s in range(lo, last + 1))
    took = [t for t in took if t > 0]
    if len(took) < MIN_HISTORY:
        return None
    return took[len(took) // 2] / 1e6


def wants_timing(timed: bool, steps: int, elapsed_ns: int) -> bool:
    """Whether ``step()`` should read the clock, from ``steps`` steps in ``elapsed_ns`` (one
    heartbeat's look): with hysteresis, so a job near the bound does not flip every beat."""
    if steps <= 0:
        return timed
    mean = elapsed_ns / steps
    return mean >= TIMED_OFF_NS if timed else mean >= TIMED_ON_NS


class StepClock:
    """Turns the step counter and the training thread's step end times, read once a
    heartbeat, into ring entries and medians.

    ``ends`` is the training thread's own list of end times (:data:`ENDS` of them, indexed by
    ``step & ENDS_MASK``; see :class:`~dynprof_nb.training.monitor.Monitor`'s timed step),
    valid from step ``exact_from`` on. Each step whose end and the previous end are both
    known becomes one exact entry; what is not (a loop too fast to time, a gap the list has
    already overwritten) one entry at the heartbeat's time, marked approximate."""

    def __init__(self, words: Any, ring: int, step: int) -> None:
        self.words, self.ring = words, ring
        self.last_step, self.last_ns = step, time.monotonic_ns()
        self.exact = False  # whether last_ns is a step's own end time (not a heartbeat's)
        self.history: deque[float] = deque(maxlen=ROLLING)
        self.recent: deque[float] = deque(maxlen=RECENT)
        self.median = 0.0  # the rolling median once MIN_HISTORY steps are in it, else 0
        write_entry(words, ring, step, self.last_ns, exact=False)

    def observe(
        self,
        step: int,
        now_ns: int,
        counts: bool = True,
        ends: Any = None,
        exact_from: int | None = None,
    ) -> list[tuple[int, float, float]]:
        """``(step, ns per step, the rolling median before it)`` for each entry made for the
        steps ended since the last look (none when no step ended). ``counts``: False while
        this rank records a window (the profiler's own cost must not become the reference)."""
        if step <= self.last_step:
            if step < self.last_step:  # a restarted count (step_begin rewound it): start over
                self.last_step, self.last_ns, self.exact = step, now_ns, False
            return []
        seen: list[tuple[int, float, float]] = []
        lo = step + 1  # the first step whose own end time is known
        if ends is not None and exact_from is not None:
            lo = max(exact_from, step - ENDS_KEEP + 1, self.last_step + 1)
        if lo > step:  # nothing timed: one entry at this look
            seen.append(self._entry(step, now_ns, False, counts))
        else:
            for s in range(lo, step + 1):  # (from a gap, the first is the gap's mean)
                seen.append(self._entry(s, ends[s & ENDS_MASK], True, counts))
        w, r = self.words, self.ring
        w[r + R_RECENT_NS] = int(median_of(self.recent))
        w[r + R_MEDIAN_NS] = int(median_of(self.history)) if self.history else 0
        w[r + R_LAST_NS] = int(seen[-1][1])
        return seen

    def _entry(
        self, step: int, end_ns: int, true_end: bool, counts: bool
    ) -> tuple[int, float, float]:
        """One ring entry: the steps after the last one up to ``step``, ended at ``end_ns``
        (``true_end``: the step's own end time, not a heartbeat's)."""
        per_step = (end_ns - self.last_ns) / (step - self.last_step)
        write_entry(self.words, self.ring, step, end_ns, exact=true_end)
        median = self.median
        self.last_step, self.last_ns, self.exact = step, end_ns, true_end
        if counts:
            self.history.append(per_step)
        self.recent.append(per_step)
        self.median = median_of(self.history) if len(self.history) >= MIN_HISTORY else 0.0
        return step, per_step, median

    def running(self, now_ns: int) -> tuple[int, float, float]:
        """The step in progress: ``(step, ns it has run at least, the rolling median)``; the
        time is counted from the last step's end (exact when timed, else the look that saw it
        end), so it is never more than the step has really run."""
        return self.last_step + 1, now_ns - self.last_ns, self.median

    def spread(self) -> float:
        """The rolling median absolute deviation (ns) of the steps in the reference."""
        if len(self.history) < MIN_HISTORY:
            return 0.0
        m = median_of(self.history)
        return median_of([abs(v - m) for v in self.history])


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
        self.run_times: list[float] = []  # the slow steps in a row so far (ns)
        self.job_slow_run = 0  # looks in a row that found the job's median slow

    def _load(self) -> None:
        gen = self.seg.words[self.seg.trigger_base + T_GEN]
        if gen == self.gen:
            return
        self.gen, self.slow_run, self.pending, self.flagged = gen, 0, None, 0
        self.run_times, self.job_slow_run = [], 0
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

    def _slow(self, d: dict[str, Any], took: float, median: float, spread: float) -> bool:
        """Slower than ``slowdown`` x the baseline median, and beyond the baseline's noise
        (:data:`MAD_K` scaled MADs over the median)."""
        return (
            median > 0
            and took > d["slowdown"] * median
            and took > median + MAD_K * MAD_SCALE * spread
        )

    def beat(
        self,
        step: int,
        seen: list[tuple[int, float, float]],
        state: str,
        running: tuple[int, float, float] | None = None,
        spread: float = 0.0,
    ) -> str | None:
        """One heartbeat's evaluation of the entries ``seen`` (StepClock.observe); returns
        what happened when a request was made (for tests and the log), else None.
        ``running``: the step in progress (StepClock.running), so that the ``confirm``-th slow
        step in a row trips while it runs, not only once it ends (a running step's time only
        grows, so this trips on the same steps, one slow step sooner). ``spread``: the
        baseline's MAD."""
        self._load()
        d = self.definition
        if d is None:
            return None
        watching = state not in ("recording", "saving")
        if seen and watching:
            for at, per_step, median in seen:
                if self.flagged and at >= self.flagged:  # the step that tripped while it ran
                    self.flagged, slow = 0, False
                else:
                    slow = self._slow(d, per_step, median, spread)
                if slow:
                    self.slow_run += 1
                    self.run_times.append(per_step)
                else:
                    self.slow_run, self.run_times = 0, []
                if self.slow_run >= d["confirm"] and self.pending is None:
                    self.pending = self._reason(at, median)
                    self.slow_run, self.run_times = 0, []
        elif not watching:
            self.slow_run, self.run_times = 0, []
        elif (
            running is not None
            and self.slow_run >= d["confirm"] - 1
            and self.pending is None
            and not self.flagged
            and self._slow(d, running[1], running[2], spread)
        ):  # the confirm-th slow step trips while it runs (time only adds to a running step)
            at, took, median = running
            self.flagged = at
            self.run_times.append(took)
            self.pending = self._reason(at, median, running=True)
            self.slow_run, self.run_times = 0, []
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

    def _reason(self, at: int, median: float, running: bool = False) -> str:
        """The reason of a window fired by ``confirm`` slow steps in a row ending at ``at``
        (``running``: step ``at`` had not ended yet, its time is what it had run so far)."""
        times = self.run_times
        ms = ", ".join(f"{t / 1e6:.0f}" for t in times[-5:])
        ms = ("..., " if len(times) > 5 else "") + ms
        first = at - len(times) + 1
        steps = f"step {at}" if len(times) == 1 else f"steps {first}-{at}"
        return (
            f"rank {self.rank} {steps} took {ms} ms = {median_of(times) / median:.1f}x its "
            f"median {median / 1e6:.1f} ms (over its last {ROLLING} steps"
            + (f"; step {at} so far, still running)" if running else ")")
        )

    def _job_slowdown(self, d: dict[str, Any]) -> str | None:
        """The second condition: the job's median against its median when armed, both over
        the ranks' last :data:`ROLLING` steps, ``confirm`` looks in a row."""
        w, tb = self.seg.words, self.seg.trigger_base
        current = job_median_ns(self.seg, R_MEDIAN_NS)
        if current <= 0:
            return None
        baseline = w[tb + T_BASELINE_NS]
        if baseline <= 0:
            with self.seg.write_lock():
                if w[tb + T_BASELINE_NS] <= 0 and w[tb + T_GEN] == self.gen:
                    w[tb + T_BASELINE_NS] = int(current)
            return None
        if current <= d["slowdown"] * baseline:
            self.job_slow_run = 0
            return None
        self.job_slow_run += 1  # sustained: confirm looks in a row, JOB_CHECK_S apart
        if self.job_slow_run < d["confirm"]:
            return None
        self.job_slow_run = 0
        return (
            f"the job's median step {current / 1e6:.0f} ms (the median of the ranks' "
            f"medians over their last {ROLLING} steps, {d['confirm']} looks {JOB_CHECK_S:g} s "
            f"apart) = {current / baseline:.1f}x its median when armed "
            f"{baseline / 1e6:.1f} ms (seen by rank {self.rank})"
        )


def fire(seg: Segment, gen: int, d: dict[str, Any], text: str, reason: str) -> str:
    """Ask for the trigger's window, if its bounds allow: ``fired``, ``requested`` (cluster
    mode: the agent starts it), ``busy`` (a window is pending or recording: try again),
    ``cooldown``, ``spent`` (max_windows), ``disk`` (over the disk budget), ``disarmed``."""
    from dynprof_nb.contract.config import ProfilerConfig
    from dynprof_nb.contract.protocol import Command, command, decode

    w, tb = seg.words, seg.trigger_base
    with seg.write_lock():
        if w[tb + T_GEN] != gen:
            return "disarmed"
        if w[tb + T_FIRED] - w[tb + T_REFUSED] >= d["max_windows"]:
            return "spent"
        now = time.monotonic_ns()
        last = w[tb + T_LAST_FIRE_NS]
        if last and now - last < cooldown_s(d, w[tb + T_BASELINE_NS]) * 1e9:
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
        current = max((estimated_step(seg, s, wall) for s in live), default=0)
        run = run_of(seg)[0]
        ended = 0 < cmd.run < run  # a window asked of a run that ended: dropped, not pending
        if cmd.config.has_window and cmd.config.stop_step >= current and not ended:
            return "busy"  # a window asked for and not yet over
        if d["disk_budget_mb"] is not None and _disk_used_mb(live) >= d["disk_budget_mb"]:
            w[tb + T_FIRED] = d["max_windows"] + w[tb + T_REFUSED]  # spent until re-armed
            seg.write_trigger_text(
                text,
                f"not fired ({reason}): the job's windows use more "
                f"than disk_budget_mb={d['disk_budget_mb']:g}",
            )
            return "disk"
        first = first_step(seg, live, wall)
        cfg = cmd.config.update(start_step=first, stop_step=first + d["steps"] - 1)
        new = command("start", cfg, d["window"], reason=reason, run=run)
        w[tb + T_FIRED] += 1
        w[tb + T_LAST_FIRE_NS] = now
        seg.write_trigger_text(text, reason)
        seg.write_config(new.encode(), locked=True)
        return "fired"


def note_refused(seg: Segment, generation: int) -> None:
    """A rank refused the trigger's window of config ``generation``: count it apart from the
    windows recorded (once per window, however many ranks refuse it)."""
    w, tb = seg.words, seg.trigger_base
    with seg.write_lock():
        if w[tb + T_REFUSED_GEN] != generation:
            w[tb + T_REFUSED_GEN] = generation
            w[tb + T_REFUSED] += 1


def first_step(seg: Segment, live: list[Any], now_ns: int) -> int:
    """The earliest step every live rank can still begin a window at: each rank reads a
    request at the end of its next step, so two of its steps plus :data:`MARGIN_S` (at its own
    rate) after where it probably is now, the latest of those."""
    return common_step(seg, live, now_ns, 2, MARGIN_S)


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

    A failure turns only this watch off (the heartbeat and training go on) and is kept in
    ``failed`` for the rank's status error; re-arming the trigger (a new trigger generation)
    starts the watch afresh, and ``cleared`` then names the error that no longer holds."""

    def __init__(
        self, seg: Segment | None, slot: int, rank: int, step: int, heartbeat_s: float
    ) -> None:
        self.clock: StepClock | None = None
        self.trigger: TriggerWatch | None = None
        self.seg, self.slot, self.rank, self.heartbeat_s = seg, slot, rank, heartbeat_s
        self.failed = ""  # why the watch is off ("" while it works)
        self.cleared = ""  # a failure that re-arming has reset (for the status error)
        self.failed_gen = 0
        if seg is None:
            return
        self.clock = StepClock(seg.words, seg.ring_base(slot), step)
        self.trigger = TriggerWatch(seg, slot, rank, heartbeat_s)

    def beat(self, step: int, state: str, ends: Any = None, exact_from: int | None = None) -> None:
        if self.clock is None:
            return
        if self.failed:
            if self.seg.words[self.seg.trigger_base + T_GEN] == self.failed_gen:
                return
            self.cleared, self.failed = self.failed, ""  # re-armed: start afresh
            self.clock = StepClock(self.seg.words, self.seg.ring_base(self.slot), step)
            self.trigger = TriggerWatch(self.seg, self.slot, self.rank, self.heartbeat_s)
        try:
            quiet = state not in ("recording", "saving")  # the profiler's cost is not the job's
            now = time.monotonic_ns()
            self.seg.words[self.clock.ring + R_LOOKED_NS] = now
            seen = self.clock.observe(step, now, quiet, ends, exact_from)
            running = self.clock.running(now) if not seen else None
            spread = self.clock.spread() if self.trigger.definition or seen else 0.0
            outcome = self.trigger.beat(step, seen, state, running, spread)
            if outcome in ("fired", "requested"):
                log.info(
                    "dynprof_nb rank %d: trigger %s a window: %s",
                    self.trigger.rank,
                    outcome,
                    self.seg_reason(),
                )
        except Exception as exc:  # never into the heartbeat
            self.failed_gen = self.seg.words[self.seg.trigger_base + T_GEN]
            self.failed = (
                f"step times and the trigger stopped on this rank: {exc!r}; "
                "arming the trigger again restarts them"
            )
            log.warning("dynprof_nb rank %s: %s", self.rank, self.failed)

    def seg_reason(self) -> str:
        return self.trigger.seg.read_trigger_text()[1]
