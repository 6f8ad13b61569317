"""A rank's status and heartbeat: what the controller reads about one Monitor.

The Monitor holds one :class:`RankStatus`. It owns everything this rank publishes into its
slot of the job segment apart from the step path's own words: the state ("saving" while a
window is being written), the error or note of the moment (said once, to the log too), and the
heartbeat thread, which every :data:`HEARTBEAT_S` copies the step counter, a heartbeat and the
step rate into the slot (so ``step()`` never reads a clock for them), feeds the step-time ring
and the trigger, and switches ``step()`` between its timed and untimed class. Every
:data:`CHECK_EVERY` beats it checks the segment itself: one truncated, removed, replaced or
chmod-ed under the job is republished (its config kept) and rejoined, and a doorbell whose
descriptor the job closed is made again; training goes on either way.

It is given what it works on when built: the rank's slot, the step path's shared
:class:`~dynprof_nb.training.stepstate.StepState` (the doorbell, the generation applied, the
step times) and the Monitor's callbacks for what only the step path holds (the doorbell words
``step()`` reads, the generation it watches, timed or untimed). It reads the Monitor's public
attributes (job, rank, state, window, errors) and never its private fields.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from dynprof_nb.contract.segment import BELL_GEN, Doorbell, Segment, SegmentError
from dynprof_nb.contract.slot import RankSlot
from dynprof_nb.ownfd import FdLost
from dynprof_nb.training.stepstate import StepState
from dynprof_nb.training.steptimes import StepWatch, wants_timing

log = logging.getLogger("dynprof_nb")

HEARTBEAT_S = 0.02
CHECK_EVERY = 10  # heartbeats between two checks that the segment is still whole and named
# A rank whose step has not changed for DOZE_AFTER beats, with nothing armed, recording,
# saving or being mended, dozes: it waits up to DOZE_S for the next step() to wake it (that
# step takes the slow path once, see Monitor._advance) and checks the segment once a doze.
DOZE_AFTER = 10
DOZE_S = 0.5


class RankStatus:
    """The status side of one Monitor ``m``: its slot's state and error, and its heartbeat."""

    __slots__ = (
        "m", "slot", "state", "use_bell", "rewatch", "set_timed", "nudge", "windows",
        "old_bells", "thread",
    )  # fmt: skip

    def __init__(
        self,
        monitor: Any,
        slot: RankSlot,
        state: StepState,
        use_bell: Callable[[Any], None],
        rewatch: Callable[[int], None],
        set_timed: Callable[[bool], None],
        nudge: Callable[[], None],
    ) -> None:
        self.m = monitor  # its public attributes: job, rank, state, window, errors, step_count
        self.slot = slot  # this rank's words in the segment (the Monitor's, re-pointed on rejoin)
        self.state = state  # the step path's shared state (doorbell, generation, step times)
        self.use_bell = use_bell  # step() reads these doorbell words from now on
        self.rewatch = rewatch  # a rejoined segment's generation, below the one applied
        self.set_timed = set_timed  # step() records each step's end time, or not
        self.nudge = nudge  # the next step() takes the slow path (which wakes a doze)
        self.windows: Any = None  # the Monitor's Windows (built after this: it is given later)
        self.old_bells: list[Doorbell] = []  # replaced doorbells: their mappings stay
        self.thread: threading.Thread | None = None

    # -- what the slot says ---------------------------------------------------------------

    def set_state(self, state: str) -> None:
        self.m.state = state
        self.publish_state()

    def publish_state(self) -> None:
        """Write the Monitor's state into the slot ("saving" while a window is written)."""
        m = self.m
        state = m.state
        if state == "idle" and self.windows.saving:
            state = "saving"
        if self.slot.seg is not None:
            self.slot.set_state(state)

    def report(self, message: str, generation: int | None = None) -> None:
        """Say it once: to the log and to this rank's slot, where the notebook shows it."""
        m = self.m
        if message == m.last_error:
            return
        m.last_error = message
        log.warning("dynprof_nb job %r rank %d: %s", m.job, m.rank, message)
        if self.slot.seg is not None:
            try:
                gen = self.state.applied if generation is None else generation
                self.slot.set_error(message, gen)
            except Exception:
                pass

    def clear_error(self) -> None:
        m = self.m
        if m.last_error and self.slot.seg is not None:
            m.last_error = ""
            self.slot.write_text("error", "")

    # -- joining the segment --------------------------------------------------------------

    def join_slot(self, seg: Segment, keep: int = -1) -> None:
        """Claim this rank's slot (``keep``: the slot this process already holds there, as in
        a segment republished from a copy of ours) and publish the doorbell in it."""
        m, slot = self.m, self.slot
        slot.claim(seg, m.rank, keep)
        if not m.run:  # the run this rank joined; a republished segment keeps it (see below)
            m.run = slot.run
        bell = self.state.doorbell
        if bell is not None:
            slot.set_bell(bell.token, bell.fd)

    def check_duplicate_rank(self) -> None:
        """Say so in this rank's slot when another live process already claims this rank."""
        m = self.m
        try:
            others = [
                s.pid
                for s in self.slot.seg.slots()
                if s.rank == m.rank and s.index != self.slot.index and s.live
            ]
        except Exception:
            return
        if others:
            pids = ", ".join(str(p) for p in others)
            self.report(
                f"rank {m.rank} is also claimed by live pid {pids} in job "
                f"{m.job!r}: two training processes with one rank (a setup cell "
                "run twice?). Stop the extra process or give it another RANK."
            )

    def stand_down_in_child(self) -> None:
        """A ``fork()`` of the training process shares the parent's slot and doorbell
        mappings: a child that steps on (a worker forked from the loop, a job that forks
        and trains in the child) would apply the parent's config, write its step, state and
        errors into the parent's slot and record windows as the parent's rank. The child
        stands down once (the Monitor gives its ``step()`` a frozen private copy of the
        doorbell, so it stays on the fast path) and says so in its own log only."""
        m = self.m
        log.warning(
            "dynprof_nb job %r rank %d: this is a forked child (pid %d) of the rank's "
            "process (pid %d); it does not profile and never writes into the rank's slot. "
            "Start a Monitor of its own in the child to profile it.",
            m.job,
            m.rank,
            os.getpid(),
            self.state.pid,
        )

    # -- the heartbeat thread ---------------------------------------------------------------

    def start_heartbeat(self) -> None:
        self.thread = threading.Thread(target=self.run, name="dynprof_nb-heartbeat", daemon=True)
        self.thread.start()

    def run(self) -> None:
        """Every HEARTBEAT_S: publish the step, a heartbeat and the step rate (all on the
        monotonic clock), keep the doorbell in step with the segment, and every CHECK_EVERY
        beats check the segment itself; while the step stands still, doze (see
        :meth:`doze`). Nothing here may end the thread."""
        state = self.state
        beat = _Beat(self.m.step_count)
        while not state.closed.wait(HEARTBEAT_S):
            if beat.still >= DOZE_AFTER and self.may_doze(beat):
                self.doze(beat)
                if state.closed.is_set():
                    return
            beat.beats += 1
            try:
                beat.once(self.m, self.slot, state, self.set_timed)
                self.note_watch(beat.watch)
            except (OSError, SegmentError):
                beat.beats = CHECK_EVERY  # the segment is in trouble: check it now
            if beat.beats >= CHECK_EVERY or state.suspect:
                beat.beats = 0
                self.check_segment()

    def may_doze(self, beat: _Beat) -> bool:
        """Only an idle rank with nothing to watch dozes: no window armed, recording or being
        saved (their boundaries are the step path's, but their status is ours), no trigger
        armed (a step still running can trip it), no segment being mended."""
        trigger = getattr(beat.watch, "trigger", None)
        return (
            self.m.state == "idle"
            and not self.windows.saving
            and not self.state.suspect
            and not self.m.segment_problem
            and (trigger is None or trigger.definition is None)
        )

    def doze(self, beat: _Beat) -> None:
        """Wait up to :data:`DOZE_S` instead of :data:`HEARTBEAT_S`: an idle rank that does
        not step (a loop waiting on data, an evaluation, a hang) costs two wake-ups a second,
        not fifty. The next ``step()`` wakes it at once (it is nudged onto the slow path,
        which sets ``wake`` and refreshes the doorbell's generation), so a stepping rank's
        step, rate and step times are published every :data:`HEARTBEAT_S` as before; the
        segment is checked once a doze."""
        state = self.state
        state.wake.clear()
        state.dozing = True
        self.nudge()
        if self.m.step_count == beat.last:  # no step came in between: nothing wakes us late
            state.wake.wait(DOZE_S)
        state.dozing = False
        beat.beats = CHECK_EVERY  # a doze is as long as CHECK_EVERY beats: check now

    def note_watch(self, watch: StepWatch) -> None:
        """A failure of the step-time watch (or the trigger) goes into this rank's status
        error; once it is reset (the trigger re-armed), that error is cleared."""
        if watch.failed:
            self.report(watch.failed)
        elif watch.cleared and self.m.last_error == watch.cleared:
            watch.cleared = ""
            self.clear_error()

    # -- keeping the segment and the doorbell sound -------------------------------------------

    def check_segment(self) -> None:
        """Mend a segment that was truncated, removed, replaced or overwritten under the job:
        republish it (config and slots kept when they can be) and rejoin it, saying so once
        in the log; while that is impossible, say why and keep training."""
        m, state = self.m, self.state
        try:
            problem = self.slot.seg.problem()
            if not problem and not self.slot.owned():
                problem = "lost this rank's slot"
        except (OSError, SegmentError) as exc:
            problem = f"cannot be read ({exc})"
        if not problem:
            m.segment_problem = ""
            self.check_doorbell()
            if state.suspect:  # a ring from a writer on another segment; ours is sound
                state.suspect = False
                try:
                    state.bell[BELL_GEN] = self.slot.generation()
                except (OSError, SegmentError):
                    pass
            return
        with state.lock:
            if not state.closed.is_set():
                self._republish(problem)

    def _republish(self, problem: str) -> None:
        """Republish the segment (under the Monitor's lock) and rejoin it, or say why not."""
        m = self.m
        old = self.slot.seg
        try:
            self.join_slot(old.republish(self.state.kept), keep=self.slot.index)
        except (OSError, SegmentError) as exc:  # the slot stays on the old segment
            if problem != m.segment_problem:
                m.segment_problem = problem
                log.warning(
                    "dynprof_nb job %r rank %d: the job segment %s and cannot be "
                    "republished yet (%s); training goes on, retrying.",
                    m.job,
                    m.rank,
                    problem,
                    exc,
                )
            return
        m.segment_problem, self.state.suspect = "", False
        log.warning(
            "dynprof_nb job %r rank %d: the job segment %s; republished it and "
            "rejoined. Training went on.",
            m.job,
            m.rank,
            problem,
        )
        self.republish_slot()
        self.check_doorbell()

    def check_doorbell(self) -> None:
        """A doorbell whose descriptor the job closed (``os.closerange``) cannot be rung: make
        a new one, publish it in the slot and say so once. ``step()`` reads the old mapping
        until the swap, which is one attribute store; the old one is kept (never unmapped
        under a step)."""
        m, state = self.m, self.state
        old = state.doorbell
        if old is None or not old.lost():
            return
        new = None
        try:
            new = Doorbell(m.job)
            self.slot.set_bell(new.token, new.fd)
        except (OSError, SegmentError) as exc:
            if new is not None:
                new.close()
            self.report(
                f"the doorbell's descriptor was closed under the job and cannot be made "
                f"again ({exc}); config changes reach this rank within a heartbeat"
            )
            return
        new.words[BELL_GEN] = state.bell[BELL_GEN]
        self.old_bells.append(old)
        state.doorbell = new
        self.use_bell(new.words)
        log.warning(
            "dynprof_nb job %r rank %d: the doorbell's descriptor %d was closed under the job "
            "(os.closerange?); made a new one (descriptor %d). Training went on.",
            m.job,
            m.rank,
            old.fd,
            new.fd,
        )

    def republish_slot(self) -> None:
        """Write this rank's status into a (re)joined slot: what a new segment does not hold."""
        m, slot, state = self.m, self.slot, self.state
        slot.set_step(m.step_count)
        slot.set_applied(state.applied)
        slot.set_run(m.run)  # the run it joined, even in a segment made from its config only
        if m.window is not None:
            slot.set_window(*m.window)
        self.publish_state()
        if m.last_error:
            slot.set_error(m.last_error, state.applied)
        if m.last_window is not None:
            slot.write_text("window", str(m.last_window))
        gen = slot.generation()
        state.bell[BELL_GEN] = gen
        if gen < state.applied:  # a new segment with no config: nothing to apply
            self.rewatch(gen)


class _Beat:
    """The heartbeat's running numbers: the last step and time it published, the step rate,
    the beats since the last segment check, and the step-time ring's writer (remade for a new
    segment)."""

    __slots__ = ("last", "last_ns", "rate", "beats", "still", "watch", "watched")

    def __init__(self, step: int) -> None:
        self.last, self.last_ns, self.rate, self.beats = step, time.monotonic_ns(), 0.0, 0
        self.still = 0  # beats in a row that saw no new step
        self.watch: Any = None
        self.watched: Any = None

    def once(
        self, m: Any, slot: RankSlot, state: StepState, set_timed: Callable[[bool], None]
    ) -> None:
        """One beat: the step-time ring, the doorbell's generation, the step and its rate."""
        if slot.lost():  # the job closed our descriptor: mend it before use
            raise FdLost(slot.seg.name, -1)
        if slot.seg is not self.watched:  # first beat, or the segment was republished
            self.watched = slot.seg
            self.watch = StepWatch(self.watched, slot.index, m.rank, m.step_count, HEARTBEAT_S)
        n = m.step_count  # before the end times: each of steps <= n has its own
        exact_from = state.exact_from
        self.watch.beat(n, m.state, state.ends if exact_from else None, exact_from)
        gen = slot.generation()
        if gen > state.bell[BELL_GEN]:
            state.bell[BELL_GEN] = gen  # a writer that could not ring the doorbell
        if n == self.last:
            self.still += 1
            return
        self.still = 0
        now = time.monotonic_ns()
        current = (n - self.last) * 1e9 / max(1, now - self.last_ns)
        self.rate = current if self.rate == 0 else 0.7 * self.rate + 0.3 * current
        slot.beat(n, now, self.rate)
        state.rate = self.rate
        timed = exact_from is not None
        if wants_timing(timed, n - self.last, now - self.last_ns) != timed:
            set_timed(not timed)
        self.last, self.last_ns = n, now
