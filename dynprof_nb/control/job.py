"""``Job``: a training job on this machine, driven through its shared-memory segment.

A Job validates before it writes (a bad value never reaches the segment, so the config in the
segment is always the last good one), writes a command into the job segment, and reads the
ranks' slots back as a DataFrame.
"""

from __future__ import annotations

import difflib
import os
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynprof_nb.config import ConfigError, ProfilerConfig
from dynprof_nb.control import stacks as hangs
from dynprof_nb.control import stall, trigger
from dynprof_nb.control.base import (
    Controller,
    JobError,
    WaitInterrupted,
    WindowConflict,
    WindowQueued,
    WindowRefused,
    WindowReplaced,
    resolve_step,
    window_conflict,
)
from dynprof_nb.control.progress import Progress, format_eta
from dynprof_nb.control.status import relay_rows, slot_row, status_frame
from dynprof_nb.protocol import Command, command, decode
from dynprof_nb.protocol import window_options as window_options_of
from dynprof_nb.segment import DamagedSegment, NoSuchJob, Segment, SegmentError, SlotView
from dynprof_nb.shared_layout import common_step, estimated_step

if TYPE_CHECKING:
    import pandas as pd

    from dynprof_nb.analysis.stacks import StackFrame

BUSY_STATES = ("armed", "recording", "saving")
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
        self._segment = segment
        self._hang = hangs.HangWatch(name)
        self._last_hang: Any = None  # the hang report taken at the last stall (control/hang.py)
        self._closed = False
        # a person's handle (registry.attach): its close() also removes a job no rank joined.
        # Internal handles (a cluster node's one-operation handle, a relay) never do: their
        # window is for ranks that have not started yet.
        self.removes_unjoined = False
        self._roots_seen: set[Path] = set()  # every output root this handle saw a rank use
        self._last_good: ProfilerConfig | None = None
        self._last_window: dict[str, Any] = {}

    @classmethod
    def open(cls, name: str, create: bool = True) -> Job:
        """The job ``name`` (with ``create``, also one whose segment does not exist yet)."""
        try:
            return cls(name, _watched(Segment.open(name, create=False)))
        except NoSuchJob as exc:
            if not create:
                raise JobError(str(exc)) from None
            return cls(name, None)
        except SegmentError as exc:
            raise JobError(str(exc)) from None

    def _attached(self, create: bool) -> Segment | None:
        """The segment, attaching now if the job has started since (creating it: ``create``).

        A segment truncated, removed or replaced under us (its ranks republish it) is left for
        the one now under the job's name, so a notebook never drives an orphan."""
        if self._closed:
            raise JobError(closed_message(self.name))
        if self._segment is not None and self._lost(self._segment):
            old, self._segment = self._segment, None
            try:
                old.close(tidy=False)
            except (OSError, SegmentError):
                pass
        if self._segment is None:
            try:
                self._segment = _watched(Segment.open(self.name, create=create))
            except NoSuchJob:
                return None
            except DamagedSegment as exc:
                if create:
                    raise JobError(str(exc)) from None
                return None  # replaced under us: the ranks republish theirs over it
            except SegmentError as exc:
                raise JobError(str(exc)) from None
        return self._segment

    def segment(self, create: bool = False) -> Segment | None:
        """The job's segment (what the cluster's agents read and arm triggers in): attached now
        if the job has started since, created first with ``create``; None when the job has no
        segment and ``create`` is False."""
        return self._seg if create else self._attached(create=False)

    def publish(self, action: str, cfg: ProfilerConfig, **extra: Any) -> int:
        """Validate ``cfg``, then publish it with ``action`` to the ranks (a bad value never
        reaches a rank): the generation written. What ``set``/``stop`` do, for a caller that
        holds a config already (a cluster agent relaying a notebook's request)."""
        return self._write(action, cfg, **extra)

    @staticmethod
    def _lost(seg: Segment) -> bool:
        try:
            return bool(seg.problem())
        except (OSError, SegmentError):
            return True

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
        """The standing config in the segment, with the current window's steps (a copy: change
        it through set/start). Options given to ``start`` for one window are not in it: see
        ``window_options`` and ``window_config``.

        If the segment holds no consistent config (a controller died in the middle of writing
        it) or bytes that are not a valid command, this is the last good config this Job read
        or wrote, with a warning: the ranks keep their last good config too, and ``set()`` on
        top of it must not silently reset every other key to its default.
        """
        return self._command(stacklevel=3).config

    @property
    def window_options(self) -> dict[str, Any]:
        """The options ``start`` gave the current window only (``{}`` when none)."""
        cmd = self._command(stacklevel=3)
        return dict(cmd.window) if cmd.config.has_window else {}

    def _command(self, stacklevel: int = 2) -> Command:
        seg = self._attached(create=False)
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
                self._last_good, self._last_window = cmd.config.copy(), dict(cmd.window)
                return cmd
        known = self._last_good is not None
        warnings.warn(
            f"job {self.name!r}: the config in the segment {problem}; the ranks keep their "
            f"last good config. Showing "
            f"{'the last config this notebook saw' if known else 'the defaults'}; "
            "the next set() or start() writes a whole config again.",
            stacklevel=stacklevel,
        )
        if not known:
            return Command("set", ProfilerConfig())
        return Command("set", self._last_good.copy(), window=dict(self._last_window))

    def set(self, **changes: Any) -> int:
        """Change standing config keys for every rank (they hold for every later window);
        returns the new generation. A pending window keeps its own ``start`` options.

        Setting ``start_step``/``stop_step`` here is the same as ``start()`` (the other
        changes still stand); setting both to -1 is ``stop()`` with the other changes, still
        in one write. ``"+N"`` steps work here too.
        """
        cmd = self._command()
        if {"start_step", "stop_step"} & set(changes):
            steps = {k: changes.pop(k) for k in ("start_step", "stop_step") if k in changes}
            if any(isinstance(v, str) for v in steps.values()):
                current = self._current_step()
                steps = {k: resolve_step(k, v, current) for k, v in steps.items()}
            cfg = cmd.config.update(**changes, **steps)
            if not cfg.has_window:
                return self._write("stop", cfg)
            self._refuse_passed(cfg.start_step, cfg.stop_step)
            self._check_others(cfg.start_step, cfg.stop_step, cmd)
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
        cmd = self._command(stacklevel=3)
        current = self._current_step()
        first = resolve_step("start", start, current)
        last = resolve_step("stop", stop, current)
        cfg = cmd.config.update(start_step=first, stop_step=last)
        asked = cfg.update(**changes)  # check the options before anything is written
        self._refuse_passed(first, last)
        self._refuse_no_rank_asked(asked.ranks)
        self._check_others(first, last, cmd)
        gen = self._write("start", cfg, window=changes)
        return Generation(
            gen, f"window {first}-{last} asked for; {self.no_rank_note() or ''}".rstrip("; ")
        )

    def no_rank_note(self) -> str:
        """Why no window will come yet, for a job no rank has joined (a prepared job, or a
        typo given to ``--create``); ``""`` when some rank has."""
        if self.slots():
            return ""
        from dynprof_nb.segment import list_jobs  # (registry's close_job_names imports Job)

        near = difflib.get_close_matches(self.name, [n for n in list_jobs() if n != self.name], n=1)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        return (
            f"no rank has joined job {self.name!r} yet: nothing is recorded until ranks "
            f"start with Monitor(job={self.name!r}).{hint}"
        )

    def _refuse_no_rank_asked(self, ranks: list[int]) -> None:
        """``ranks=[7]`` on a job whose live ranks are 0 and 1 excludes every rank: no window
        would ever be written, so it is refused (ranks not running yet are fine)."""
        live = self.live_ranks()
        if ranks and live and not set(ranks) & set(live):
            raise JobError(
                f"ranks {','.join(map(str, ranks))}: job {self.name!r} has no such live rank "
                f"(live ranks: {','.join(map(str, live))}), so no window would be written. "
                "Ask for ranks among those, or leave ranks out (all ranks)."
            )

    def start_from_file(self, cfg: ProfilerConfig) -> int:
        """Write a window read from a MindSpore ``profiler_config.json`` (the relay does), with
        file mode's rule: a rank that gets it after the window's first step has begun starts
        it at its next step, with the same length, and says so (MindSpore's own ``step()``
        does the same; an edit of a file cannot be timed to a step). Refused only when every
        live rank has passed its last step. ``(-1, -1)`` is ``stop()``."""
        if not cfg.has_window:
            return self._write("stop", cfg)
        slots = self.live_slots()
        if slots and all(s.step > cfg.stop_step for s in slots):
            where = ", ".join(f"rank {s.rank} at step {s.step}" for s in slots)
            raise WindowRefused(
                f"window {cfg.start_step}-{cfg.stop_step} has ended on every rank ({where}). "
                "Write a later window into the file."
            )
        return self._write("start", cfg, late="shift")

    def _current_step(self) -> int:
        """The most advanced live rank's step now (a stalled rank's is not extrapolated)."""
        now = time.monotonic_ns()
        seg = self._attached(create=False)
        if seg is None:
            return max((s.estimated_step(now) for s in self.live_slots()), default=0)
        return max((estimated_step(seg, s, now) for s in self.live_slots()), default=0)

    def _refuse_passed(self, first: int, last: int) -> None:
        slots = self.live_slots()
        if slots and all(s.step >= first for s in slots):
            where = ", ".join(f"rank {s.rank} at step {s.step}" for s in slots)
            raise WindowRefused(
                f"window {first}-{last} has already begun on every rank ({where}). "
                f"Ask for a later one, e.g. start('+5', '+{last - first + 5}')."
            )

    def _check_others(self, first: int, last: int, cmd: Command) -> None:
        """Tell the caller at once when the ranks are busy with another window: refuse
        (:class:`WindowConflict`) a window that overlaps one they are recording, warn
        (:class:`WindowQueued`) that one after it waits for it, and warn
        (:class:`WindowReplaced`) when it replaces a window another process armed."""
        live = self.live_slots()
        recording = [(str(s.rank), s.start, s.stop, s.step) for s in live if s.state == "recording"]
        asked = {}
        if cmd.config.has_window and cmd.by:
            mine = " (this process)" if cmd.by == os.getpid() else ""
            asked[(cmd.config.start_step, cmd.config.stop_step)] = f"pid {cmd.by}{mine}"
        found = window_conflict(first, last, recording, asked)
        if found is not None:
            message, queued = found
            if not queued:
                raise WindowConflict(message)
            warnings.warn(f"job {self.name!r}: {message}", WindowQueued, stacklevel=3)
            return
        armed = sorted({(s.start, s.stop) for s in live if s.state == "armed"} - {(first, last)})
        if armed and cmd.by and cmd.by != os.getpid():
            ranks = ",".join(str(s.rank) for s in live if s.state == "armed")
            windows = ", ".join(f"{a}-{b}" for a, b in armed)
            warnings.warn(
                f"job {self.name!r}: window {first}-{last} replaces window {windows}, which "
                f"pid {cmd.by} (another controller) had armed on ranks {ranks}: that one will "
                "not be recorded. Tell its owner, or stop() and ask for it again.",
                WindowReplaced,
                stacklevel=3,
            )

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
        seg = self._attached(create=False)
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
        cfg = self.config
        busy = [s for s in self.live_slots() if s.state in ("armed", "recording")]
        if not busy:
            if cfg.has_window:
                why = (
                    "no rank has joined the job"
                    if not self.slots()
                    else "it had ended or was skipped"
                )
                return (
                    f"window {cfg.start_step}-{cfg.stop_step} is not recording or armed on "
                    f"any rank ({why}): stop takes it off the config"
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

    def _publish(
        self,
        action: str,
        cfg: ProfilerConfig,
        window: dict[str, Any] | None = None,
        late: str = "skip",
        reason: str = "",
    ) -> int:
        cmd = command(action, cfg, window, late, reason)
        gen = self._seg.write_config(cmd.encode())
        if os.path.isabs(cfg.prof_path):  # where the next windows go: remembered from now on
            self._roots_seen.add(Path(cfg.prof_path))
        self._last_good, self._last_window = cfg.copy(), dict(cmd.window)
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
            trigger.arm(self._seg, None)
            return self.triggers
        try:
            window_options = window_options_of(self.config, window_options)  # bad: refused
            d = trigger.definition(
                slowdown, steps, cooldown_s, max_windows, confirm, disk_budget_mb, **window_options
            )
            trigger.check_window(self.config, d, self._current_step())
        except (trigger.TriggerError, ConfigError) as exc:
            raise JobError(str(exc)) from None
        trigger.arm(self._seg, d)
        return self.triggers

    @property
    def triggers(self) -> dict[str, Any]:
        """The job's trigger: its options, its state (watching, cooling down, spent), the
        windows it fired and the last reason; ``{"armed": False}`` when none."""
        return trigger.describe(self._attached(create=False))

    def step_times(self, last: int = 100) -> pd.DataFrame:
        """Every rank's last ``last`` step times, measured without profiling: ``rank, node,
        step, end_s, duration_s, kind`` (``kind`` "step": one step, its own duration, for
        steps of 0.5 ms and more; "interval": the mean of the steps a heartbeat saw end
        together, for faster steps; see docs/trigger.md). ``.attrs["stalled"]``: the stalled
        ranks, ``{rank: {"step", "seconds", "first"}}`` (the heat map draws them)."""
        seg = self._attached(create=False)
        frame = trigger.step_frame(trigger.step_rows(seg, int(last)))
        slots = self.slots()
        found = stall.stalls(seg, slots, time.monotonic_ns(), self.hang_after, self.hang_min_s)
        frame.attrs["stalled"] = {
            v[0].rank: {"step": v[0].step, "seconds": round(v[0].seconds, 1), "first": v[0].first}
            for v in found.values()
        }
        return frame

    # -- ranks ----------------------------------------------------------------------------

    def slots(self) -> list[SlotView]:
        seg = self._attached(create=False)
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
        now = time.monotonic_ns()
        slots = self.slots()
        rows = [slot_row(s, now) for s in slots]
        seg = self._attached(create=False)
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
        for s, row in zip(slots, rows, strict=True):  # exec'd: not this Monitor's any more
            lost = stall.lost_monitor(s, now) if row["alive"] else ""
            if lost:
                row.update(state="dead", alive=False, step_s=None)
                row["error"] = f"{lost}; {row['error']}" if row["error"] else lost
        stalled = stall.stalls(seg, slots, now, self.hang_after, self.hang_min_s)
        stall.mark(rows, slots, stalled)
        if stalled:  # the stacks, once per stall, from the first rank to stop
            first = max((v[0] for v in stalled.values()), key=lambda x: x.seconds)
            since = time.monotonic() - first.seconds
            self._hang.note((first.step, first.seconds), [], since, self._stall_capture)
        else:
            found, since = hangs.local_stall(self.name, slots, self.hang_after, self.hang_min_s)
            self._hang.note(found, rows, since, self._stall_capture)
        if not self.config.has_window:  # the header says "no window asked for": so do the rows
            for row in rows:
                if row["state"] not in BUSY_STATES:
                    row["window"] = ""
        seg = self._attached(create=False)
        if seg is not None:
            rows += relay_rows(seg, now)  # a relay's row: rank -1, state "relay"
        return status_frame(rows)

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
            self.name, slots, lambda t: hangs.take_stacks(self.name, slots, t), timeout, keep
        )

    def _stall_capture(self) -> StackFrame:
        """What a named stall takes: the hang report where a rank has its Flight Recorder on
        (kept as ``last_hang_report``; its stacks become ``last_stacks``), else the stacks."""
        from dynprof_nb.control import hang

        slots = self.live_slots()
        if not hang.any_recorder(self.name, slots):
            return self.stacks()
        self._last_hang = self.hang_report()
        return self._last_hang.stacks

    @property
    def last_hang_report(self) -> Any:
        """The hang report taken when ``status()`` last named a stall (ranks with
        ``flight_recorder=True`` only), or None."""
        return self._last_hang

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
        return sum(_window_progress(s, cfg, target) for s in live), length * len(live)

    def wait(
        self, timeout: float | None = None, progress: bool = True, poll: float = 0.05
    ) -> pd.DataFrame:
        """Block until every live rank has applied the latest config and finished its window.

        Shows progress over the window's steps with an ETA from the ranks' step rate (a bar
        in a notebook or terminal, a few lines in a log) and says when a rank vanishes
        without closing. Returns ``status()``; raises ``TimeoutError`` (with the ranks'
        state) when ``timeout`` seconds pass first. Ctrl-C stops only the waiting: it raises
        :class:`~dynprof_nb.control.base.WaitInterrupted`, whose message says what the
        window is doing; the training ranks go on.
        """
        target = self.generation
        cfg = self.config
        window = f"window {cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "config"
        length = cfg.stop_step - cfg.start_step + 1 if cfg.has_window else 0
        deadline = None if timeout is None else time.monotonic() + timeout
        report = Progress(f"job {self.name}: {window}", enabled=progress, unit="rank-step")
        seen: dict[int, SlotView] = {}
        try:
            while True:
                slots = self.slots()
                live = [s for s in slots if s.live]
                if not live and not slots:
                    raise JobError(
                        f"job {self.name!r} has no rank: start the training side, then wait."
                    )
                for s in live:
                    seen[s.index] = s
                for s in slots:  # a rank seen live that is now gone without closing
                    if s.index in seen and not s.live and s.state != "closed":
                        report.note(f"job {self.name}: rank {s.rank} (pid {s.pid}) {vanished(s)}")
                        del seen[s.index]
                pending = [s for s in live if s.applied < target or s.state in BUSY_STATES]
                if not pending:
                    report.close("done")
                    return self.status()
                if live:
                    done = sum(_window_progress(s, cfg, target) for s in live)
                    report.update(
                        done,
                        length * len(live),
                        _phase(pending, target),
                        _detail(live, pending, cfg),
                    )
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(
                        f"job {self.name!r}: still waiting after {timeout} s for "
                        + ", ".join(f"rank {s.rank} ({s.state}, step {s.step})" for s in pending)
                        + ". The window goes on; call wait() again or stop()."
                    )
                time.sleep(poll)
        except KeyboardInterrupt:
            report.close()
            raise WaitInterrupted(self._still_going()) from None
        finally:
            report.close()

    def _still_going(self) -> str:
        """The one line Ctrl-C in ``wait()`` prints: the window goes on, where the ranks are."""
        try:
            cfg, live = self.config, self.live_slots()
        except Exception:  # the segment itself is fine; never hide the interrupt behind this
            return f"stopped waiting for job {self.name!r}; the job goes on"
        where = ", ".join(f"rank {s.rank} at {s.step}" for s in live[:4])
        where += f" (+{len(live) - 4} more)" if len(live) > 4 else ""
        if not cfg.has_window:
            return f"stopped waiting; no window is pending; {where or 'no live rank'}"
        states = sorted({s.state for s in live if s.state in BUSY_STATES})
        doing = f"is still {' and '.join(states)}" if states else "is no longer pending on any rank"
        return f"stopped waiting; window {cfg.start_step}-{cfg.stop_step} {doing}; {where}"

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
        if self._closed:
            return f"Job {self.name!r}: closed (attach again: dynprof_nb.attach({self.name!r}))"
        cfg = self.config
        window = f"{cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "none"
        return (
            f"Job {self.name!r}: {len(self.live_slots())} live rank(s), window {window}, "
            f"generation {self.generation}"
        )

    def write_note(self, text: str) -> None:
        """Publish a helper's note (the relay's state) in the segment."""
        self._seg.write_note(text)

    def beat_note(self) -> None:
        """Refresh the helper note's heartbeat without rewriting it."""
        self._seg.beat_note()

    def _repr_html_(self) -> str:
        if self._closed:
            return f"<p><b>{self._describe()}</b></p>"
        return super()._repr_html_()

    @property
    def closed(self) -> bool:
        """``close()`` was called: every other use says so, with how to attach again."""
        return self._closed

    def close(self) -> None:
        """Detach (once; later uses of this handle say it is closed). The last process to
        leave a finished job removes its segment. A handle from ``attach()`` also removes a
        job that no rank ever joined (a typo given to ``--create``): if it asked for a window,
        a warning says the window went with it."""
        if self._closed:
            return
        seg = self._segment
        asked = self.config if seg is not None and not seg.slots() else None
        self._segment, self._closed = None, True
        removed = seg is not None and seg.close(unjoined=self.removes_unjoined)
        if removed and asked and asked.has_window:
            warnings.warn(
                f"job {self.name!r}: no rank ever joined it; its window "
                f"{asked.start_step}-{asked.stop_step} went with its last handle. "
                "To prepare a window for ranks yet to start, keep the handle open "
                "until they do.",
                stacklevel=2,
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


def closed_message(name: str) -> str:
    """The one line a closed handle answers with."""
    return (
        f"job {name!r}: this handle is closed (job.close() was called); attach again: "
        f"job = dynprof_nb.attach({name!r}), or %dynprof attach {name}"
    )


def _window_progress(slot: SlotView, cfg: ProfilerConfig, target: int) -> int:
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


def _watched(seg: Segment) -> Segment:
    """A controller's segment: ranks that restart join it rather than reclaim it as stale."""
    seg.watch()
    return seg
