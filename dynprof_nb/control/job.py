"""``Job``: a training job on this machine, driven through its shared-memory segment.

A Job validates before it writes (a bad value never reaches the segment, so the config in the
segment is always the last good one), writes a command into the job segment, and reads the
ranks' slots back as a DataFrame. Its parts live beside it: the hold on the segment and the
last good command (:mod:`~dynprof_nb.control.handle`), the checks made before a window is
written (:mod:`~dynprof_nb.control.asks`), ``wait()`` (:mod:`~dynprof_nb.control.waiting`),
the status rows (:mod:`~dynprof_nb.control.status`) and what a stall takes
(:mod:`~dynprof_nb.control.stall`).
"""

from __future__ import annotations

import os
import time
import warnings
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynprof_nb.contract.config import ConfigError, ProfilerConfig
from dynprof_nb.contract.protocol import command
from dynprof_nb.contract.protocol import window_options as window_options_of
from dynprof_nb.contract.segment import NoSuchJob, Segment, SegmentError, SlotView, run_of
from dynprof_nb.contract.shared_layout import common_step
from dynprof_nb.control import asks, runs, stall, trigger
from dynprof_nb.control import stacks as hangs
from dynprof_nb.control.base import Controller, JobError, resolve_step
from dynprof_nb.control.handle import SegmentHandle, watched
from dynprof_nb.control.recent import RecentRecords
from dynprof_nb.control.status import relay_rows, slot_row, status_frame
from dynprof_nb.control.waiting import BUSY_STATES, vanished, wait_for, window_progress
from dynprof_nb.userframe import user_stacklevel

if TYPE_CHECKING:
    import pandas as pd

    from dynprof_nb.analysis.stacks import StackFrame

__all__ = ["BUSY_STATES", "Generation", "Job"]

STOP_MARGIN_S = 0.05  # stop(): the write, the doorbell and a heartbeat-old estimate
HANG_AFTER, HANG_MIN_S = hangs.HANG_AFTER, hangs.HANG_MIN_S


class Job(Controller):
    """A training job on this machine: its config, its ranks (live), its windows.

    A Job attaches to the job's segment when it exists. For a job that has not started yet
    (``open(create=True)``) the segment is created by the first request that is accepted, so
    a refused request (a bad value, a window already begun) leaves nothing behind.
    """

    # a rank has stalled after this x its own median step time, and at least this many
    # seconds without a step (control/stall.py; the stacks are taken then, once a stall)
    hang_after = stall.STALL_AFTER
    hang_min_s = stall.STALL_MIN_S

    def __init__(self, name: str, segment: Segment | None) -> None:
        self.name = name
        self._handle = SegmentHandle(name, segment)
        self._hang = hangs.HangWatch(name)
        self._capture = stall.StallCapture()  # the hang report taken at the last stall
        # a person's handle (registry.attach): its close() also removes a job no rank joined.
        # Internal handles (a cluster node's one-operation handle, a relay) never do: their
        # window is for ranks that have not started yet.
        self.removes_unjoined = False
        self._roots_seen: set[Path] = set()  # every output root this handle saw a rank use
        # job.recent(100): every rank's last steps, written now and loaded (control/recent.py)
        self.recent = RecentRecords(self)

    @classmethod
    def open(cls, name: str, create: bool = True) -> Job:
        """The job ``name`` (with ``create``, also one whose segment does not exist yet)."""
        try:
            return cls(name, watched(Segment.open(name, create=False)))
        except NoSuchJob as exc:
            if not create:
                raise JobError(str(exc)) from None
            return cls(name, None)
        except SegmentError as exc:
            raise JobError(str(exc)) from None

    def segment(self, create: bool = False) -> Segment | None:
        """The job's segment (what the cluster's agents read and arm triggers in, what a relay
        writes its note into): attached now if the job has started since, created first with
        ``create``; None when the job has no segment and ``create`` is False."""
        return self._handle.writable() if create else self._handle.attached(create=False)

    def publish(self, action: str, cfg: ProfilerConfig, **extra: Any) -> int:
        """Validate ``cfg``, then publish it with ``action`` to the ranks (a bad value never
        reaches a rank): the generation written. What ``set``/``stop`` do, for a caller that
        holds a config already (a cluster agent relaying a notebook's request, the relay of a
        ``profiler_config.json``: ``late="shift"``)."""
        return self._write(action, cfg, **extra)

    # -- config ---------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Bumped by every write; a rank whose ``generation`` equals it has seen the latest."""
        seg = self._handle.attached(create=False)
        return 0 if seg is None else seg.generation

    @property
    def config(self) -> ProfilerConfig:
        """The standing config in the segment, with the current window's steps (a copy: change
        it through set/start). Options given to ``start`` for one window are not in it: see
        ``window_options`` and ``window_config``.

        If the segment holds no consistent config (a controller died in the middle of writing
        it) or bytes that are not a valid command, this is the last good config this Job read
        or wrote, with a warning: the ranks keep their last good config too, and ``set()`` on
        top of it must not silently reset every other key to its default.
        """
        return self._handle.command().config

    @property
    def window_options(self) -> dict[str, Any]:
        """The options ``start`` gave the current window only (``{}`` when none)."""
        cmd = self._handle.command()
        return dict(cmd.window) if cmd.config.has_window else {}

    def set(self, **changes: Any) -> int:
        """Change standing config keys for every rank (they hold for every later window);
        returns the new generation. A pending window keeps its own ``start`` options.

        Setting ``start_step``/``stop_step`` here is the same as ``start()`` (the other
        changes still stand); setting both to -1 is ``stop()`` with the other changes, still
        in one write. ``"+N"`` steps work here too.
        """
        cmd = self._handle.command()
        if {"start_step", "stop_step"} & set(changes):
            steps = {k: changes.pop(k) for k in ("start_step", "stop_step") if k in changes}
            if any(isinstance(v, str) for v in steps.values()):
                current = asks.current_step(self.segment(), self.live_slots())
                steps = {k: resolve_step(k, v, current) for k, v in steps.items()}
            cfg = cmd.config.update(**changes, **steps)
            if not cfg.has_window:
                return self._write("stop", cfg)
            live = self.live_slots()
            asks.refuse_passed(live, cfg.start_step, cfg.stop_step)
            asks.check_others(self.name, live, cfg.start_step, cfg.stop_step, cmd, self.slots())
            # the pending window moved its stop: it keeps the options it was asked with
            same = cmd.config.has_window and cfg.start_step == cmd.config.start_step
            return self._write("start", cfg, window=cmd.window if same else {})
        window = cmd.window if cmd.config.has_window else {}
        return self._write("set", cmd.config.update(**changes), window=window)

    def start(self, start: int | str, stop: int | str, **changes: Any) -> int:
        """Ask every rank to record steps ``start``..``stop`` (inclusive, 1-based).

        ``"+10"`` means ten steps after the most advanced live rank. ``changes`` apply to this
        window only (``set()`` makes a key standing). Refused, with the ranks' steps in the
        message, when every live rank has already begun step ``start``
        (:class:`WindowRefused`), or when it overlaps a window the ranks are recording, asked
        for by another controller or by this one (:class:`WindowConflict`, naming that window
        and its ranks). A window after the one being recorded is queued behind it, with a
        :class:`WindowQueued` warning saying so.
        """
        cmd = self._handle.command()
        live = self.live_slots()
        current = asks.current_step(self.segment(), live)
        first = resolve_step("start", start, current)
        last = resolve_step("stop", stop, current)
        cfg = cmd.config.update(start_step=first, stop_step=last)
        asked = cfg.update(**changes)  # check the options before anything is written
        asks.refuse_passed(live, first, last)
        asks.refuse_no_rank_asked(self.name, asked.ranks, sorted({s.rank for s in live}))
        asks.check_others(self.name, live, first, last, cmd, self.slots())
        asks.warn_claimed_twice(self.name, live)
        gen = self._write("start", cfg, window=changes)
        note = asks.no_rank_note(self.name, self.slots())
        return Generation(gen, f"window {first}-{last} asked for; {note}".rstrip("; "))

    def stop(self) -> int:
        """End an active window (what was recorded is saved) or cancel a pending one. A window
        being recorded by several ranks ends on every one at one step: the next step every
        rank can reach (a step and :data:`STOP_MARGIN_S` at each rank's rate past where it
        is); with one rank, at once.
        ``describe_stop()`` beforehand says which. With no window asked for there is nothing
        to stop: nothing is written and the generation stays as it is."""
        cfg = self.config
        if not cfg.has_window:
            return self.generation
        seg = self._handle.attached(create=False)
        busy = [s for s in self.live_slots() if s.state in ("armed", "recording")]
        if seg is None or len(busy) < 2 or not any(s.state == "recording" for s in busy):
            # one rank (nothing to keep together) or nothing begun: at once
            return self._write("stop", cfg.update(start_step=-1, stop_step=-1))
        # one step for every rank: the next each can honour (so the ranks' directories are
        # one window); a rank that reads it too late ends where it is, and windows() says so
        at = common_step(seg, busy, time.monotonic_ns(), 1, STOP_MARGIN_S)
        at = min(max(at, cfg.start_step), cfg.stop_step)
        return self._write("stop", cfg.update(stop_step=at))

    def describe_stop(self) -> str:
        """What ``stop()`` would end or cancel now, rank by rank, or that there is nothing
        (said before ``stop()``: what it will do, not what it did)."""
        busy = [s for s in self.live_slots() if s.state in ("armed", "recording")]
        return asks.describe_stop(self.config, busy, joined=bool(busy) or bool(self.slots()))

    def _publish(
        self,
        action: str,
        cfg: ProfilerConfig,
        window: dict[str, Any] | None = None,
        late: str = "skip",
        reason: str = "",
    ) -> int:
        seg = self._handle.writable()
        cmd = command(action, cfg, window, late, reason, runs.run_for_write(seg, seg.slots()))
        gen = seg.write_config(cmd.encode())
        if os.path.isabs(cfg.prof_path):  # where the next windows go: remembered from now on
            self._roots_seen.add(Path(cfg.prof_path))
        self._handle.remember(cfg, cmd.window)
        return gen

    # -- step times and the trigger (dynprof_nb.control.trigger) ------------------------------

    def trigger(
        self,
        slowdown: float | None = 1.5,
        steps: int = 10,
        cooldown_s: float | None = None,
        max_windows: int = 3,
        confirm: int = 5,
        disk_budget_mb: float | None = None,
        **window_options: Any,
    ) -> dict[str, Any]:
        """Arm a window that starts by itself when a step slows; ``trigger(None)`` disarms.

        When ``confirm`` of a rank's steps in a row each take more than ``slowdown`` x its
        median over its last 64 steps (and more than 5 scaled MADs over it: noise is not a
        slowdown), or the job's median step is ``slowdown`` x its median now,
        every rank records ``steps`` steps from one step just ahead of the most advanced
        rank, with ``window_options`` (config keys, for that window only). At most
        ``max_windows`` windows recorded (windows a rank refused are counted apart, as
        ``refused``), ``cooldown_s`` apart (None: 20 windows' worth of the job's steps, at
        least 10 s), none while another window is pending
        or recording (it waits), none once the job's windows use ``disk_budget_mb``. Stored
        in the job: evaluated by the ranks themselves, with no notebook attached. Each
        window's manifest and ``windows()`` row say why (``reason``). Returns ``triggers``.
        """
        if slowdown is None:
            trigger.arm(self._handle.writable(), None)
            return self.triggers
        try:
            window_options = window_options_of(self.config, window_options)  # bad: refused
            d = trigger.definition(
                slowdown, steps, cooldown_s, max_windows, confirm, disk_budget_mb, **window_options
            )
            now = asks.current_step(self.segment(), self.live_slots())
            trigger.check_window(self.config, d, now)
        except (trigger.TriggerError, ConfigError) as exc:
            raise JobError(str(exc)) from None
        trigger.arm(self._handle.writable(), d)
        return self.triggers

    @property
    def triggers(self) -> dict[str, Any]:
        """The job's trigger: its options, its state (watching, cooling down, spent), the
        windows it fired and the last reason; ``{"armed": False}`` when none."""
        return trigger.describe(self._handle.attached(create=False))

    def step_times(self, last: int = 100) -> pd.DataFrame:
        """Every rank's last ``last`` step times, measured without profiling: ``rank, node,
        step, end_s, duration_s, kind`` (``kind`` "step": one step, its own duration, for
        steps of 0.5 ms and more; "interval": the mean of the steps a heartbeat saw end
        together, for faster steps; see docs/trigger.md). ``.attrs["stalled"]``: the stalled
        ranks, ``{rank: {"step", "seconds", "first"}}`` (the heat map draws them)."""
        seg = self._handle.attached(create=False)
        frame = trigger.step_frame(trigger.step_rows(seg, int(last)))
        slots = self.slots()
        # status()'s rule on the same kind of snapshot: the slots, then the clock
        found = stall.named(seg, slots, time.monotonic_ns(), self.hang_after, self.hang_min_s)
        frame.attrs["stalled"] = {
            v[0].rank: {"step": v[0].step, "seconds": round(v[0].seconds, 1), "first": v[0].first}
            for v in found.values()
        }
        return frame

    # -- ranks ----------------------------------------------------------------------------

    def slots(self) -> list[SlotView]:
        seg = self._handle.attached(create=False)
        slots = [] if seg is None else sorted(seg.slots(), key=lambda s: (s.rank, -s.heartbeat_ns))
        for s in slots:  # a slot names only its current root: remember the earlier ones
            if s.root:
                self._roots_seen.add(Path(s.root))
            if s.window:
                self._roots_seen.add(Path(s.window).parent)
        return slots

    def live_slots(self) -> list[SlotView]:
        return [s for s in self.slots() if s.live]

    def live_ranks(self) -> list[int]:
        return sorted({s.rank for s in self.live_slots()})

    def status(self) -> pd.DataFrame:
        """One row per rank: ``rank, pid, step, state, window, generation, heartbeat_age_s,
        alive, error``. Dead ranks stay listed (``alive`` False) until they are replaced."""
        slots = self.slots()
        now = time.monotonic_ns()  # after the snapshot, as step_times() reads it
        rows = [slot_row(s, now) for s in slots]
        seg = self._handle.attached(create=False)
        for s, row in zip(slots, rows, strict=True):
            row["step_s"] = trigger.recent_step_s(seg, s.index) if row["alive"] else None
        claims: dict[int, list[int]] = {}
        for s, row in zip(slots, rows, strict=True):
            if row["alive"]:
                claims.setdefault(s.rank, []).append(s.pid)
        for s, row in zip(slots, rows, strict=True):
            if row["state"] == "dead" and not row["error"]:
                row["error"] = vanished(s)
        for row in rows:  # two live processes with one rank: say so on both rows
            pids = claims.get(row["rank"], [])
            if row["alive"] and len(pids) > 1:
                note = (
                    f"rank {row['rank']} is claimed by {len(pids)} live processes "
                    f"(pids {', '.join(map(str, pids))}): stop the extra one"
                )
                row["error"] = (
                    note
                    if not row["error"] or "also claimed" in row["error"]
                    else f"{note}; {row['error']}"
                )
        gone: set[int] = set()
        for s, row in zip(slots, rows, strict=True):  # exec'd: not this Monitor's any more
            lost = stall.lost_monitor(s, now) if row["alive"] else ""
            if lost:
                gone.add(s.index)
                row.update(state="dead", alive=False, step_s=None)
                row["error"] = f"{lost}; {row['error']}" if row["error"] else lost
        stalled = stall.named(seg, slots, now, self.hang_after, self.hang_min_s, gone)
        stall.mark(rows, slots, stalled)
        take = partial(self._capture.take, self)  # what a named stall takes, now
        if stalled:  # the stacks, once per stall, from the first rank to stop
            first = max((v[0] for v in stalled.values()), key=lambda x: x.seconds)
            since = time.monotonic() - first.seconds
            self._hang.note((first.step, first.seconds), [], since, take)
        else:
            found, since = hangs.local_stall(self.name, slots, self.hang_after, self.hang_min_s)
            self._hang.note(found, rows, since, take)
        if not self.config.has_window:  # the header says "no window asked for": so do the rows
            for row in rows:
                if row["state"] not in BUSY_STATES:
                    row["window"] = ""
        seg = self._handle.attached(create=False)
        if seg is not None:
            rows += relay_rows(seg, now)  # a relay's row: rank -1, state "relay"
        frame = status_frame(rows)
        frame.attrs["run"] = runs.describe_run(seg)
        run, began = run_of(seg) if seg is not None else (0, 0)
        frame.attrs["run_started_at"] = began / 1e9 if run and began else None
        cmd = self._handle.command()
        if cmd.config.has_window and cmd.at:  # when the window was asked (wall clock, s)
            frame.attrs["asked_at"] = cmd.at
        if self._handle.unsaid:  # the disk is read only then (the panel polls status())
            notes = runs.tell_dropped(self._handle.unsaid, self.windows())
            if notes:
                frame.attrs["note"] = "; ".join(notes)
        return frame

    def stacks(self, timeout: float = hangs.DUMP_TIMEOUT_S) -> StackFrame:
        """The Python stack of every thread of every live rank, taken now (even of a rank
        stuck in C code): a DataFrame ``rank, node, pid, thread, depth, function, file, line``
        (depth 0 = outermost frame); ranks that did not answer within ``timeout`` seconds are
        in ``.silent``. ``.tree()`` shows which ranks differ. See :mod:`dynprof_nb.control.stacks`.
        """
        return hangs.take_stacks(self.name, self.live_slots(), timeout)

    def hang_report(
        self, timeout: float = hangs.DUMP_TIMEOUT_S, keep: str | Path | None = None
    ) -> Any:
        """Which collective the job waits in, which ranks never arrived, and where their main
        threads are: the ranks' Flight Recorder dumps (``Monitor(flight_recorder=True)``)
        analysed and joined with ``stacks()``; without a recorder, the stacks alone, saying
        why. ``keep=DIR`` copies the dumps there (``_dump_<rank>``, as torch names them).
        See :mod:`dynprof_nb.control.hang`."""
        from dynprof_nb.control import hang

        slots = self.live_slots()
        return hang.report(
            self.name,
            slots,
            lambda t: hangs.take_stacks(self.name, slots, t),
            timeout,
            keep,
            steps={s.rank: s.step for s in slots},
        )

    @property
    def last_hang_report(self) -> Any:
        """The hang report taken when ``status()`` last named a stall (ranks with
        ``flight_recorder=True`` only), or None."""
        return self._capture.last_report

    @property
    def last_stacks(self) -> StackFrame | None:
        """The stacks taken automatically when ``status()`` last found the job stalled (kept
        on this machine, so a notebook attached later sees them too), or None."""
        return self._hang.last_stacks()

    def duplicate_ranks(self) -> dict[int, list[int]]:
        """Ranks claimed by more than one live process: ``{rank: [pid, ...]}``."""
        claims: dict[int, list[int]] = {}
        for s in self.live_slots():
            claims.setdefault(s.rank, []).append(s.pid)
        return {r: p for r, p in claims.items() if len(p) > 1}

    def progress(self) -> tuple[int, int]:
        """Steps of the current window done so far, summed over live ranks, and the total.

        ``(0, 0)`` without a window. The same count ``wait()``'s bar shows, for the panel.
        """
        cfg, target = self.config, self.generation
        if not cfg.has_window:
            return 0, 0
        live = self.live_slots()
        length = cfg.stop_step - cfg.start_step + 1
        return sum(window_progress(s, cfg, target) for s in live), length * len(live)

    def wait(
        self, timeout: float | None = None, progress: bool = True, poll: float = 0.05
    ) -> pd.DataFrame:
        """Block until every live rank has applied the latest config and finished its window.

        Shows progress over the window's steps with an ETA from the ranks' step rate (a bar
        in a notebook or terminal, a few lines in a log) and says when a rank vanishes
        without closing. Returns ``status()``; raises ``TimeoutError`` (with the ranks'
        state) when ``timeout`` seconds pass first. Ctrl-C stops only the waiting: it raises
        :class:`~dynprof_nb.control.base.WaitInterrupted`, whose message says what the
        window is doing; the training ranks go on. See :mod:`dynprof_nb.control.waiting`.
        """
        return wait_for(self, timeout, progress, poll)

    # -- windows --------------------------------------------------------------------------

    def roots(self) -> list[Path]:
        """Directories the ranks write windows into (their slots say so), and every one this
        handle saw them write into before: a window recorded under another ``prof_path``
        stays listed once ``prof_path`` is set back."""
        self.slots()  # what the slots name now joins what was seen
        prof = self.config.prof_path
        if os.path.isabs(prof):
            self._roots_seen.add(Path(prof))
        return sorted(self._roots_seen)

    # -- display --------------------------------------------------------------------------

    def _describe(self) -> str:
        if self.closed:
            return f"Job {self.name!r}: closed (attach again: dynprof_nb.attach({self.name!r}))"
        cfg = self.config
        window = f"{cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "none"
        run = runs.describe_run(self._handle.attached(create=False))
        return (
            f"Job {self.name!r}: {len(self.live_slots())} live rank(s), "
            f"{run + ', ' if run else ''}window {window}, generation {self.generation}"
        )

    @property
    def closed(self) -> bool:
        """``close()`` was called: every other use says so, with how to attach again."""
        return self._handle.closed

    def close(self) -> None:
        """Detach (once; later uses of this handle say it is closed). The last process to
        leave a finished job removes its segment. A handle from ``attach()`` also removes a
        job that no rank ever joined (a typo given to ``--create``): if it asked for a window,
        a warning says the window went with it."""
        if self.closed:
            return
        seg = self._handle.segment
        asked = self.config if seg is not None and not seg.slots() else None
        self._handle.close()
        removed = seg is not None and seg.close(unjoined=self.removes_unjoined)
        if removed and asked and asked.has_window:
            warnings.warn(
                f"job {self.name!r}: no rank ever joined it; its window "
                f"{asked.start_step}-{asked.stop_step} went with its last handle. "
                "To prepare a window for ranks yet to start, keep the handle open "
                "until they do.",
                stacklevel=user_stacklevel(),
            )


class Generation(int):
    """The generation ``start`` wrote, an int that also says in its repr what was asked
    (``job.start(...)`` in a cell shows that, not a bare ``1``)."""

    note: str

    def __new__(cls, value: int, note: str) -> Generation:
        gen = super().__new__(cls, value)
        gen.note = note
        return gen

    def __repr__(self) -> str:
        return f"<generation {int(self)}: {self.note}>"

    def __str__(self) -> str:  # f"{gen}" stays the number
        return int.__repr__(self)
