"""The training side: ``Monitor.step()`` once per iteration, the window state machine.

Step N is the N-th training iteration, counted from 1. ``step()`` is called at the *end* of an
iteration, so a window ``start 20 30`` starts the profiler when step 19 ends and stops it when
step 30 ends: it records exactly iterations 20..30, inclusive, in ``step()`` mode and in
MindSpore's callback mode alike.

The training loop comes first. An idle ``step()`` bumps a counter and compares one word of
shared memory with the generation it last applied (in file mode, :class:`FileModeMonitor`, it
first ``fstat``s the config file) (while a window is armed or recording, the
comparison is made to fail so each step also checks the window's boundaries). That word is in
the rank's own sealed ``memfd`` (a
:class:`~dynprof_nb.contract.segment.Doorbell`), never in a mapping of
the ``/dev/shm`` segment: anyone can truncate that file, and touching a mapping of a truncated
file kills the process with SIGBUS. Everything else
(parsing a new config, starting and stopping a backend, writing files) happens only on the
steps where something changed, and nothing ever raises into the caller: problems go to this
rank's status slot and to the log, once. A small daemon thread copies the step counter and a
heartbeat into the slot every 20 ms, so the controller sees progress without the hot path
paying for a clock read; it also publishes the step rate so the controller can tell where a
fast loop is *now*. Every rate, heartbeat and wait is on the monotonic clock (the system-wide
``CLOCK_MONOTONIC``, comparable between processes): a wall clock stepped by NTP or an operator
must not turn into a rate of billions of steps a second. The same thread checks the segment
every few beats: one truncated, removed, replaced or chmod-ed under the job is reported and
republished (its config kept), and the rank trains on.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.segment import BELL_GEN, Doorbell, Segment, SegmentError
from dynprof_nb.contract.slot import RankSlot
from dynprof_nb.contract.window_dirs import output_root
from dynprof_nb.ownfd import guard_stderr
from dynprof_nb.training import frdump, recent
from dynprof_nb.training.backends import resolve_backend
from dynprof_nb.training.config_reader import CommandReader, fr_responder
from dynprof_nb.training.filerelay import FileRelay, NoFile
from dynprof_nb.training.heartbeat import RankStatus
from dynprof_nb.training.history import History
from dynprof_nb.training.stepstate import StepState
from dynprof_nb.training.steptimes import ENDS_MASK
from dynprof_nb.training.window_io import Windows

log = logging.getLogger("dynprof_nb")

assert BELL_GEN == 4, "step() reads the generation at the literal index 4"

# Bounds that protect the training job. The job's owner sets them (Monitor arguments or the
# environment), not the notebook: they are what makes profiling safe to leave on.
MEMORY_BUDGET_MB = 512  # per window; reaching it ends the window, which is then saved
DISK_BUDGET_MB = 20_480  # all windows under the output root; over it, new windows are refused
MAX_WINDOWS_PER_MINUTE = 30  # window starts per rank; a flood is refused, not recorded
CLOSE_WAIT_S = 8.0  # close() waits this long for saves, then hands them off and says so
EXIT_WAIT_S = 3.0  # the same on the way out of a dying process (exception, SIGTERM)


def _env_number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


def rank_from_env() -> int:
    """The rank as launchers set it (torchrun RANK, MindSpore RANK_ID, Open MPI), else 0."""
    for var in ("RANK", "RANK_ID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        value = os.environ.get(var, "")
        if value.strip().isdigit():
            return int(value)
    return 0


def world_size_from_env() -> int | None:
    for var in ("WORLD_SIZE", "RANK_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        value = os.environ.get(var, "")
        if value.strip().isdigit():
            return int(value)
    return None


def _cur_step(run_context: Any) -> int | None:
    """``cur_step_num`` from a MindSpore RunContext, if that is what we were given."""
    try:
        return int(run_context.original_args().cur_step_num)
    except Exception:
        return None


class Monitor:
    """Profile windows of this training process when a notebook (or the CLI) asks for them.

    >>> monitor = dynprof_nb.Monitor(job="llama")
    >>> for batch in data:
    ...     train_step(batch)
    ...     monitor.step()

    ``job`` names the shared segment the controller attaches to; ``rank`` defaults from the
    ``RANK`` / ``RANK_ID`` environment; windows go under ``output_path`` unless the config's
    ``prof_path`` says otherwise; ``backend`` is ``"auto"``, ``"builtin"``, ``"torch"`` or
    ``"mindspore"``. With ``cfg_path`` (a directory holding MindSpore's
    ``profiler_config.json``) one process per node also relays that file into the job, every
    ``poll_interval`` seconds (see :mod:`dynprof_nb.control.relay`).

    In a process that has imported MindSpore a Monitor is also a ``mindspore.train.Callback``,
    so ``Model.train(..., callbacks=[monitor])`` accepts it.

    The Monitor itself keeps the step path (``step()``, the slow path it enters on a change,
    the lifecycle) and the state they share; each other responsibility is an object it holds:
    reading and applying configs (:class:`~dynprof_nb.training.config_reader.CommandReader`),
    windows and saves (:class:`~dynprof_nb.training.window_io.Windows`), the heartbeat and the
    status slot (:class:`~dynprof_nb.training.heartbeat.RankStatus`) and file mode's relay
    (:class:`~dynprof_nb.training.filerelay.FileRelay`).
    """

    # Every attribute is a slot. A slot read is one indexed load, and an instance without a
    # dict makes ``monitor.step`` itself a plain method lookup. With a dict, Monitor's ~45
    # attributes overflow CPython's shared-key dicts (30 keys), every attribute read in step()
    # became a hashed lookup and so did finding the method: 3.4x an empty call, not < 3x.
    __slots__ = (
        "__weakref__",
        # the hot path's: step() reads these three and nothing else
        "_step",
        "_bell",
        "_watch",
        # the timed step()'s end times (the same list as _state.ends)
        "_ends",
        # the step path's own, and the state it shares with its parts (given to each)
        "_next",
        "_slot",
        "_state",
        "_stacks",
        "_recent",
        # the collaborators
        "_commands",
        "_windows",
        "_status",
        "_file",
        # public
        "flight_recorder",
        "memory_budget_mb",
        "disk_budget_mb",
        "max_windows_per_minute",
        "handed_off",
        "timings",
        "job",
        "rank",
        "world_size",
        "output_path",
        "backend",
        "config",
        "window_options",
        "state",
        "window",
        "last_window",
        "last_error",
        "segment_problem",
        "run",
    )

    def __new__(cls, *args: Any, **kwargs: Any) -> Monitor:
        cfg_path = kwargs.get("cfg_path", args[4] if len(args) > 4 else None)
        if cls is Monitor and cfg_path is not None:
            cls = FileModeMonitor  # file mode: step() also looks at the file (see there)
        if "mindspore" in sys.modules:
            from dynprof_nb.training.callback import with_callback

            cls = with_callback(cls)
        return object.__new__(cls)

    def __init__(
        self,
        job: str = "default",
        rank: int | None = None,
        output_path: str | os.PathLike[str] = "./dyn_profile_data",
        backend: str = "auto",
        cfg_path: str | os.PathLike[str] | None = None,
        poll_interval: float | None = None,
        memory_budget_mb: float | None = None,
        disk_budget_mb: float | None = None,
        max_windows_per_minute: int | None = None,
        history_steps: int | None = None,
        flight_recorder: bool = False,
        recent_steps: int | None = None,
    ) -> None:
        # the last K steps' ranges, kept between windows (built-in backend; history.py)
        k = int(history_steps or _env_number("DYNPROF_NB_HISTORY_STEPS", 0))
        self._state = state = StepState(History(k) if k > 0 else None)
        self._slot = slot = RankSlot()  # detached until _join: every part writes through it
        # the parts get the slot, the shared state and the step path's callbacks, never self's
        # private fields; the status first: every part reports through it
        self._status = RankStatus(
            self, slot, state, use_bell=self._use_bell, rewatch=self._rewatch,
            set_timed=self._set_timed, nudge=self._nudge,
        )  # fmt: skip
        self._commands = CommandReader(self, slot, state, self._status)
        self._windows = Windows(
            self, slot, state, self._status, self._commands, schedule=self._schedule,
            nudge=self._nudge,
        )  # fmt: skip
        self._status.windows = self._windows
        self._commands.windows = self._windows
        self._file = (
            None if cfg_path is None else FileRelay(self, slot, state, self._status, cfg_path)
        )
        # job.hang_report()'s rank side (training/frdump.py): on with flight_recorder=True here
        # or the config key of that name
        self.flight_recorder = bool(flight_recorder)
        # the last N steps, always on, kept when the trigger fires or asked for (recent.py):
        # N from here, else the environment, else the job's config when the rank joins
        asked = recent.steps_asked(recent_steps)
        self._recent: recent.RecentKeeper | None = None
        if asked is None or asked > 0:
            self._recent = recent.RecentKeeper(
                asked,
                self._slot,
                lambda: (state.ends, self._step, state.exact_from),
                lambda: output_root(self.config.prof_path, self.output_path),
                lambda: self.state,
                {"job": job, "rank": 0, "run": 0, "tid": threading.get_native_id()},
                frdump.collectives_since,
                # torch's dump holds the GIL: a running job's record reads it where asked
                lambda kind: kind == "hang" or self.flight_recorder or state.fr is not None,
            )
        self.memory_budget_mb = memory_budget_mb or _env_number(
            "DYNPROF_NB_MEMORY_BUDGET_MB", MEMORY_BUDGET_MB
        )
        self.disk_budget_mb = disk_budget_mb or _env_number(
            "DYNPROF_NB_DISK_BUDGET_MB", DISK_BUDGET_MB
        )
        self.max_windows_per_minute = int(
            max_windows_per_minute
            or _env_number("DYNPROF_NB_MAX_WINDOWS_PER_MINUTE", MAX_WINDOWS_PER_MINUTE)
        )
        self.handed_off: list[int] = []  # pids of writer processes left to finish windows
        self.timings: dict[str, float] = {}  # the last window's start/stop/save costs (s)
        guard_stderr()  # a job that closes fd 2 and opens a file there gets no line of ours
        self._stacks: Any = None  # the stack-dump handler and side file (job.stacks())
        self.job = job
        self.rank = rank_from_env() if rank is None else int(rank)
        self.world_size = world_size_from_env()
        self.output_path = Path(output_path)
        self.backend = backend
        self._init_state()
        self._join(poll_interval)

    def _init_state(self) -> None:
        """The state of a Monitor that has not joined its job yet (or never will)."""
        self.config = ProfilerConfig()  # the standing config (see window_config)
        self.window_options: dict[str, Any] = {}  # options of the current window only
        self.state = "idle"
        self.window: tuple[int, int] | None = None
        self.last_window: Path | None = None
        self.last_error = ""
        self.run = 0  # the job's run this rank joined (see RankSlot.claim)
        self._step = 0
        self._watch = 0  # what step() compares the segment's generation with (see _schedule)
        self._next = -1
        self._bell = self._state.bell  # the doorbell's words (see StepState)
        self.segment_problem = ""  # what happened to the segment, while it is not mended
        # when each step ended, written by the timed step() (see _set_timed); valid from
        # step _state.exact_from on (None: step() is not timed)
        self._ends = self._state.ends

    def _join(self, poll_interval: float | None) -> None:
        """Join the job's segment and start the threads; on failure say so and stay off."""
        try:
            resolve_backend(self.backend)
            seg = Segment.open(self.job)
            self._state.doorbell = Doorbell(self.job)
            self._use_bell(self._state.doorbell.words)
            self._bell[BELL_GEN] = seg.generation
            self._status.join_slot(seg)
        except Exception as exc:
            self._slot.detach()
            self._status.report(f"dynprof_nb is off for this process: {exc}")
            return
        self._status.check_duplicate_rank()
        if self._recent is not None:
            self._recent.identity.update(
                rank=self.rank,
                run=self.run,
                run_started_at=self._windows.run_started_at(),
                world_size=self.world_size,
            )
            if self._recent.begin(seg):
                # where its records go, so job.recent() finds them before any window (the
                # training thread writes the slot's text, as window_io does)
                self._slot.write_text("root", str(self._recent.root()))
            else:  # the job's config keeps none (recent_steps=0)
                self._recent = None
        if self._state.history is not None:
            self._state.history.attach()
        self._windows.start_io()
        if self._file is not None:  # first: the relay's first look at the file is in _advance(0)
            self._file.start(poll_interval)
        if self.flight_recorder:
            self._state.fr = fr_responder(self)
        self._advance(0)  # apply a config written before the job started (a window at step 1)
        self._set_timed(True)  # most loops' steps are long enough; the heartbeat decides
        self._status.start_heartbeat()
        _watch_exit(self)
        self._stacks = _stack_recorder(self)

    @property
    def window_config(self) -> ProfilerConfig:
        """The config the current window records with: the standing config and the options
        ``start`` gave for this window only."""
        if not self.window_options:
            return self.config
        return self.config.update(**self.window_options)

    # -- the hot path ---------------------------------------------------------------------

    def step(self) -> None:
        """Call once at the end of every training iteration."""
        self._step += 1
        if self._bell[4] != self._watch:
            self._advance(self._step)

    # -- what the parts may change on the step path (given to them as callbacks) -------------

    def _use_bell(self, words: Any) -> None:
        """``step()`` reads these doorbell words from now on (a new doorbell, a child's copy)."""
        self._bell = self._state.bell = words

    def _rewatch(self, gen: int) -> None:
        """A rejoined segment's generation is ``gen``, below the one applied: apply from there
        (an idle ``step()`` watches it; an armed or recording one keeps watching -1)."""
        self._state.applied = gen
        if self._watch >= 0:
            self._watch = gen

    def _nudge(self) -> None:
        """The next ``step()`` takes the slow path (``_advance``), whatever the generation."""
        self._watch = -1

    def _set_timed(self, on: bool) -> None:
        """Make ``step()`` record when each step ends (``on``) or not.

        A clock read costs about two empty method calls, so a ``step()`` that always took one
        would break the idle bound (under 3x an empty call) in a loop that does little else.
        The heartbeat therefore times steps only while they are long enough for the read not
        to matter (:func:`~dynprof_nb.training.steptimes.wants_timing`): it swaps this
        instance's class for one whose ``step`` reads the clock. Same slots, nothing added to
        the untimed ``step()``. Steps from ``StepState.exact_from`` on have their end time."""
        plain = _PLAIN.get(type(self), type(self))
        if on and plain.step not in (Monitor.step, FileModeMonitor.step):
            return  # a subclass's own step(): keep it (the heartbeat's times stand)
        if on:
            self.__class__ = _timed_class(plain)
            # the step in progress may still run the untimed step() (looked up before)
            self._state.exact_from = self._step + 2
        else:
            self.__class__ = plain
            self._state.exact_from = None

    # -- MindSpore's callback protocol --------------------------------------------------------

    def step_begin(self, run_context: Any = None) -> None:
        n = _cur_step(run_context)
        if n is None:
            return
        self._step = n - 1
        if self.state == "armed" and self.window and self.window[0] == n:
            self._advance(n - 1)

    def step_end(self, run_context: Any = None) -> None:
        n = _cur_step(run_context)
        if n is not None:
            self._step = n - 1
        self.step()

    def on_train_end(self, run_context: Any = None) -> None:
        self.close()

    # keep MindSpore's other hooks harmless when we are used as a plain callback object
    def begin(self, run_context: Any = None) -> None: ...
    def epoch_begin(self, run_context: Any = None) -> None: ...
    def epoch_end(self, run_context: Any = None) -> None: ...
    def end(self, run_context: Any = None) -> None: ...

    def window_edge(self, text: str) -> None:
        """Told on the training thread when a window starts and when it stops, in one line
        (``Rank 0 Dynamic profiler start at step 10, will stop at step 19``). The Monitor says
        nothing there (the rank's status does); the MindSpore drop-in prints MindSpore's own
        line."""

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def step_count(self) -> int:
        return self._step

    def close(self, wait_s: float = CLOSE_WAIT_S, cut_short: str | None = None) -> None:
        """End an active window (saving what was recorded), wait for saves, leave the slot.

        Waits at most ``wait_s`` seconds for saves. A window still being written then is left
        to its writer process, which outlives this one and publishes it (``handed_off``
        lists their pids; the log and the rank's status say so). ``cut_short`` says why the
        window ended early when the process is going away.
        """
        state = self._state
        if state.closed.is_set() or not state.owned_here():
            return
        if self._file is not None:
            self._file.stop()
        state.closing = True  # no step() comes any more: a writer is forked where it is asked
        try:
            if self.state == "recording":
                # the last step the backend was told of: a signal handler can run between
                # step()'s count and its _advance, and the step counted was never recorded
                rec = state.recording or {}
                self._windows.finish(
                    rec.get("last", rec.get("first", 1) - 1), stopped=True, reason=cut_short
                )
            if self._windows.io is not None:
                self._windows.wait_for_saves(wait_s, dying=cut_short is not None)
        except Exception as exc:
            self._status.report(f"closing: {exc!r}")
        state.closed.set()
        state.wake.set()  # a dozing heartbeat ends now, not at its doze's end
        self._set_timed(False)  # no heartbeat reads the end times any more
        if self._stacks is not None:
            self._stacks.close()
        if state.fr is not None:
            state.fr.close()
        if self._recent is not None:
            self._recent.close()
        if self._slot.seg is not None:
            self._leave()

    def _leave(self) -> None:
        """After the heartbeat's end: publish the last step and "closed", close the segment."""
        self._status.thread.join()
        self.state = "closed"
        seg = self._slot.seg
        try:
            self._slot.set_step(self._step)
            self._slot.release()
            seg.close()
        except (OSError, SegmentError) as exc:  # a lost segment: nothing to tidy
            log.debug("dynprof_nb: closing job %r's segment: %r", self.job, exc)
        self._slot.detach()
        if self._state.doorbell is not None:
            self._state.doorbell.close()

    def wait_saved(self, timeout: float | None = None) -> bool:
        """Wait until every window that ended has been written (or failed); False on timeout.

        Call it from the training loop's thread, between steps: a window's writer process is
        forked by that thread (see :meth:`Windows.fork_here
        <dynprof_nb.training.window_io.Windows.fork_here>`), and this does it while it waits."""
        return self._windows.wait_saved(timeout)

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        window = f" window={self.window[0]}-{self.window[1]}" if self.window else ""
        return (
            f"<Monitor job={self.job!r} rank={self.rank} step={self._step} "
            f"state={self.state}{window}>"
        )

    # -- the slow path: only on steps where something changed --------------------------------

    def _advance(self, n: int) -> None:
        state = self._state
        if not state.owned_here():  # a forked child stepping the parent's Monitor
            self._stand_down()
            return
        if state.dozing:  # the first step after the heartbeat dozed off (it nudged us here)
            self._wake_heartbeat()
        if state.fork_job is not None:  # the window-I/O thread waits for its writer process
            # (not rescheduled here: in a recording window that moved the boundary past n,
            # and step n went unrecorded; the end of this call schedules, or the next idles)
            self._windows.run_fork_job()
        if self._watch < 0 and self._next < 0 and state.history is None:
            self._watch = state.applied  # the fork request's nudge outlived it: idle again
        if state.history is not None and self.state != "recording":
            state.history.step(n)
        if n != self._next and self._bell[4] == state.applied:
            return  # armed, and neither the window's boundary nor a new config: nothing to do
        try:
            with state.lock:
                self._slot.set_step(n)
                if self.state == "recording":
                    self._record(n)
                if self._bell[4] != state.applied:
                    self._commands.read_config(n)
                if self._commands.pending is not None and self.state != "recording":
                    self._commands.apply_pending(n)
                if self.state == "armed" and n == self.window[0] - 1:
                    self._windows.start(n)
                self._schedule(n)
        except Exception as exc:  # never into the training loop
            self._status.report(f"internal error at step {n}: {exc!r}; the window was abandoned.")
            self._windows.abandon()

    def _wake_heartbeat(self) -> None:
        """Wake the dozing heartbeat, and read the segment's generation as its beat would
        have (a config written during the doze by a writer that could not ring us)."""
        state = self._state
        state.dozing = False
        state.wake.set()
        try:
            gen = self._slot.generation()
        except Exception:  # a segment in trouble: the heartbeat, awake now, mends it
            return
        if gen > self._bell[4]:
            self._bell[4] = gen

    def _stand_down(self) -> None:
        """A forked child stepping the parent's Monitor stands down once (see
        :meth:`RankStatus.stand_down_in_child`): a frozen private copy of the doorbell keeps
        its ``step()`` on the fast path."""
        self._use_bell(list(self._bell))
        self._watch = self._bell[4]
        self._status.stand_down_in_child()

    def _record(self, n: int) -> None:
        """Step ``n`` of a recording window ended: tell the backend, end the window at its
        last step or its memory budget (or one whose directory could not be made)."""
        rec = self._state.recording
        if rec["failed"]:
            self._windows.finish(n)  # its directory could not be made (reported)
            return
        backend = rec["backend"]
        rec["last"] = n  # for a window cut short (see close)
        backend.step(n)
        full = getattr(backend, "full", None)
        if n >= self.window[1] or full:
            early = bool(full) or rec.get("stop_asked", False)
            self._windows.finish(n, stopped=early, reason=full)

    def _schedule(self, n: int) -> None:
        """Set the step the slow path must see next, and what ``step()`` compares against.

        Idle, ``step()`` compares the segment's generation with the one applied. With a window
        armed or recording it compares against -1 (no generation is -1), so every step enters
        ``_advance``, which returns at once unless the step is a boundary or a config arrived.
        One hot path, nothing swapped on the instance (that would slow every attribute read).
        """
        if self.state == "recording":
            self._next = n + 1
        elif self.state == "armed":
            self._next = self.window[0] - 1
        else:
            self._next = -1
        state = self._state
        self._watch = -1 if self._next >= 0 or state.history is not None else state.applied


class FileModeMonitor(Monitor):
    """A Monitor driven by MindSpore's ``profiler_config.json`` (``Monitor(cfg_path=...)``
    is one; so is the drop-in): an edit complete in the file before a ``step()`` is applied by
    that ``step()``, as a window asked for from a notebook at that step is (with file mode's
    rule for a window that has begun, :func:`~dynprof_nb.training.config_reader.shifted_window`).

    Its ``step()`` asks the file's :class:`~dynprof_nb.filewatch.FileWatch` first: one
    ``fstat`` (about 1 µs, against MindSpore 2.7's 26 µs re-read of its buffer); on a change it
    relays the file itself (:meth:`FileRelay.relay_now
    <dynprof_nb.training.filerelay.FileRelay.relay_now>`) before the step goes on. A Monitor
    without ``cfg_path`` keeps the shared-memory ``step()``, untouched.
    """

    __slots__ = ("_filewatch",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._filewatch: Any = NoFile
        super().__init__(*args, **kwargs)
        if self._file is not None and self._slot.seg is not None:
            self._filewatch = self._file.watch

    def step(self) -> None:
        """Call once at the end of every training iteration."""
        self._step += 1
        if self._filewatch.changed():
            self._file.relay_now()
        if self._bell[4] != self._watch:
            self._advance(self._step)

    def close(self, wait_s: float = CLOSE_WAIT_S, cut_short: str | None = None) -> None:
        self._filewatch = NoFile
        super().close(wait_s, cut_short)


_clock = time.monotonic_ns
_PLAIN: dict[type, type] = {}  # a timed class -> its untimed class
_TIMED: dict[type, type] = {}


def _timed_step(self: Monitor) -> None:
    """``Monitor.step()`` that also records when the step ended (see ``_set_timed``): the
    time first, then the count, so a heartbeat that sees step n finds n's end time."""
    n = self._step + 1
    self._ends[n & ENDS_MASK] = _clock()
    self._step = n
    if self._bell[4] != self._watch:
        self._advance(n)


def _timed_file_step(self: FileModeMonitor) -> None:
    """``FileModeMonitor.step()`` with the step's end time recorded, as :func:`_timed_step`."""
    n = self._step + 1
    self._ends[n & ENDS_MASK] = _clock()
    self._step = n
    if self._filewatch.changed():
        self._file.relay_now()
    if self._bell[4] != self._watch:
        self._advance(n)


def _timed_class(plain: type) -> type:
    """``plain`` (Monitor, or its MindSpore callback form) with the timed ``step``: the same
    slots, so an instance can switch between the two."""
    timed = _TIMED.get(plain)
    if timed is None:
        doc = {"__slots__": (), "__module__": plain.__module__, "__doc__": plain.__doc__}
        step = _timed_file_step if issubclass(plain, FileModeMonitor) else _timed_step
        timed = type(plain.__name__, (plain,), dict(doc, step=step))
        _TIMED[plain], _PLAIN[timed] = timed, plain
    return timed


# -- a process that goes away mid-window still saves it ------------------------------------

_live: weakref.WeakSet[Monitor] = weakref.WeakSet()
_hooks = {"pid": 0}


def _watch_exit(monitor: Monitor) -> None:
    """Save a recording window, marked cut short, when the process exits without close().

    ``atexit`` covers the end of the script, ``sys.exit``, an exception that escapes the
    training loop and SIGINT (Python turns it into KeyboardInterrupt). SIGTERM (a scheduler's
    preemption, SLURM's ``scancel``) kills a Python process without running atexit, so a
    handler is installed when the process has none (SIG_DFL): it saves, then puts the
    default back and re-sends SIGTERM, so the process still dies of SIGTERM as it would have.
    A handler the job set itself is left alone: the job then exits its own way (and close()).
    """
    _live.add(monitor)
    if _hooks["pid"] == os.getpid():
        return
    _hooks["pid"] = os.getpid()
    atexit.register(_at_exit)
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: atexit only
        pass


def _exit_reason() -> str:
    exc = getattr(sys, "last_value", None)
    if exc is not None:
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return f"the process exited with {what[:200]} during the window"
    return "the process exited during the window without Monitor.close()"


def _close_all(reason: str) -> None:
    for monitor in list(_live):  # close() does nothing in a forked child
        try:
            monitor.close(wait_s=EXIT_WAIT_S, cut_short=reason)
        except Exception:  # nothing may stop the process from going away
            pass


def _at_exit() -> None:
    if _hooks["pid"] == os.getpid():
        _close_all(_exit_reason())


def _on_sigterm(signum: int, frame: Any) -> None:
    if _hooks["pid"] == os.getpid():  # not in a forked child (a DataLoader worker)
        _close_all("SIGTERM during the window (the process was being stopped)")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _stack_recorder(monitor: Monitor) -> Any:
    """Install the stack-dump handler once at start (see :mod:`~dynprof_nb.training.stackdump`);
    None if it cannot be (training goes on without it)."""
    try:
        from dynprof_nb.training.stackdump import StackRecorder

        return StackRecorder(monitor)
    except Exception as exc:
        log.warning("dynprof_nb: job.stacks() will not see this rank: %r", exc)
        return None
