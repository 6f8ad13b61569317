"""The training side: ``Monitor.step()`` once per iteration, the window state machine.

Step N is the N-th training iteration, counted from 1. ``step()`` is called at the *end* of an
iteration, so a window ``start 20 30`` starts the profiler when step 19 ends and stops it when
step 30 ends: it records exactly iterations 20..30, inclusive, in ``step()`` mode and in
MindSpore's callback mode alike.

The training loop comes first. An idle ``step()`` bumps a counter and compares one word of
shared memory with the generation it last applied (in file mode, :class:`FileModeMonitor`, it
first ``fstat``s the config file) (while a window is armed or recording, the
comparison is made to fail so each step also checks the window's boundaries). That word is in
the rank's own sealed ``memfd`` (a :class:`~dynprof_nb.segment.Doorbell`), never in a mapping of
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
import collections
import logging
import os
import queue
import signal
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from dynprof_nb import window_dirs
from dynprof_nb.config import ConfigError, ProfilerConfig
from dynprof_nb.ownfd import FdLost, guard_stderr
from dynprof_nb.protocol import Command, decode
from dynprof_nb.segment import (
    BELL_GEN,
    H_GEN,
    S_APPLIED,
    S_BEAT_NS,
    S_BELL_FD,
    S_BELL_TOKEN,
    S_ERR_GEN,
    S_RATE,
    S_START,
    S_STATE,
    S_STEP,
    S_STOP,
    STATE,
    Doorbell,
    Segment,
    SegmentError,
)
from dynprof_nb.training import saver
from dynprof_nb.training.backends import make_backend, resolve_backend
from dynprof_nb.training.history import History, adopt
from dynprof_nb.training.steptimes import ENDS, ENDS_MASK, StepWatch, note_refused, wants_timing

log = logging.getLogger("dynprof_nb")

# no step for this long, and for 3 of the rank's recent steps: the window-I/O thread forks the
# writer itself (the loop has ended or waits; a 10 s LLM step is not mistaken for that)
FORK_GRACE_S = 2.0
HEARTBEAT_S = 0.02
CHECK_EVERY = 10  # heartbeats between two checks that the segment is still whole and named
UNREADABLE_S = 2.0  # a config unreadable this long means a writer died mid-write
UNREADABLE = (
    "could not read a consistent config for a while (did a writer die mid-write?); "
    "keeping the last good config. Write it again."
)
assert BELL_GEN == 4, "step() reads the generation at the literal index 4"

# Bounds that protect the training job. The job's owner sets them (Monitor arguments or the
# environment), not the notebook: they are what makes profiling safe to leave on.
MEMORY_BUDGET_MB = 512  # per window; reaching it ends the window, which is then saved
DISK_BUDGET_MB = 20_480  # all windows under the output root; over it, new windows are refused
MAX_WINDOWS_PER_MINUTE = 30  # window starts per rank; a flood is refused, not recorded
NOTE = "note: "  # a status message that informs (a cost, a choice made), not an error
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
    """

    # Every attribute is a slot. A slot read is one indexed load, and an instance without a
    # dict makes ``monitor.step`` itself a plain method lookup. With a dict, Monitor's ~45
    # attributes overflow CPython's shared-key dicts (30 keys), every attribute read in step()
    # became a hashed lookup and so did finding the method: 3.4x an empty call, not < 3x.
    __slots__ = (
        "__weakref__",
        "_step",
        "_words",
        "_watch",
        "_next",
        "_applied",
        "_base",
        "_seg",
        "_slot",
        "_pending",
        "_read_failures",
        "_read_failing_since",
        "_recording",
        "_saving",
        "_saving_in_thread",
        "_saved",
        "_io",
        "_io_thread",
        "_beat",
        "_lock",
        "_closed",
        "_handoff",
        "_relay",
        "_starts",
        "_disk_over",
        "_pid",
        "_stacks",
        "_fr",
        "flight_recorder",
        "_late",
        "_asked",
        "_reason",
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
        "_bell",
        "_doorbell",
        "_old_bells",
        "_kept",
        "_suspect",
        "segment_problem",
        "_history",
        "_fork_job",
        "_fork_lock",
        "_closing",
        "_rate",
        "_ends",
        "_exact_from",
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
    ) -> None:
        self._relay: Any = None
        # job.hang_report()'s rank side (training/frdump.py): on with flight_recorder=True here
        # or the config key of that name
        self.flight_recorder = bool(flight_recorder)
        self._fr: Any = None
        # the last K steps' ranges, kept between windows (built-in backend; history.py)
        k = int(history_steps or _env_number("DYNPROF_NB_HISTORY_STEPS", 0))
        self._history = History(k) if k > 0 else None
        self._late = "skip"  # the current command's rule for a window that has begun (LATE)
        self._asked: tuple[int, int] | None = None  # the window asked for, if shifted
        self._reason = ""  # why the current window was asked for (a trigger's), for its manifest
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
        self._starts: collections.deque[float] = collections.deque()
        self._disk_over = ""  # why the last save found the output over its disk budget
        self.handed_off: list[int] = []  # pids of writer processes left to finish windows
        self.timings: dict[str, float] = {}  # the last window's start/stop/save costs (s)
        self._pid = os.getpid()
        guard_stderr()  # a job that closes fd 2 and opens a file there gets no line of ours
        self._stacks: Any = None  # the stack-dump handler and side file (job.stacks())
        self.job = job
        self.rank = rank_from_env() if rank is None else int(rank)
        self.world_size = world_size_from_env()
        self.output_path = Path(output_path)
        self.backend = backend
        self.config = ProfilerConfig()  # the standing config (see window_config)
        self.window_options: dict[str, Any] = {}  # options of the current window only
        self.state = "idle"
        self.window: tuple[int, int] | None = None
        self.last_window: Path | None = None
        self.last_error = ""
        self._step = 0
        self._applied = 0  # the generation this rank has read
        self._watch = 0  # what step() compares the segment's generation with (see _schedule)
        self._next = -1
        self._words: Any = [0] * 16  # stands in for the segment when there is none
        self._bell: Any = [0] * 16  # stands in for the doorbell when there is none
        self._doorbell: Doorbell | None = None
        self._old_bells: list[Doorbell] = []  # replaced doorbells: their mappings stay
        self._kept: tuple[int, bytes] | None = None  # the last config read: (generation, bytes)
        self.segment_problem = ""  # what happened to the segment, while it is not mended
        self._suspect = False  # rung with a generation our segment lacks: check it now
        self._base = 0
        self._seg: Segment | None = None
        self._slot = -1
        self._pending: tuple[int, Command] | None = None
        self._read_failures = 0
        self._read_failing_since = 0.0
        self._recording: dict[str, Any] | None = None
        self._saving = 0  # windows ended and not yet written
        self._saving_in_thread = False  # a backend's save() runs on the window-I/O thread
        self._saved = threading.Condition()
        self._io: Any = None  # the window-I/O thread's queue (see _run_io)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._handoff = threading.Event()
        # a writer process is forked on the training thread, between steps (see _fork_here)
        self._fork_job: dict[str, Any] | None = None
        self._fork_lock = threading.Lock()
        self._closing = False
        self._rate = 0.0  # steps per second, as the heartbeat last measured it
        # when each step ended, written by the timed step() (see _set_timed); valid from
        # step _exact_from on (None: step() is not timed)
        self._ends = [0] * ENDS
        self._exact_from: int | None = None
        try:
            resolve_backend(backend)
            self._seg = Segment.open(job)
            self._doorbell = Doorbell(job)
            self._bell = self._doorbell.words
            self._bell[BELL_GEN] = self._seg.generation
            self._join_slot()
        except Exception as exc:
            self._seg = None
            self._report(f"dynprof_nb is off for this process: {exc}")
            return
        self._check_duplicate_rank()
        if self._history is not None:
            self._history.attach()
        self._io = queue.SimpleQueue()
        self._io_thread = threading.Thread(
            target=self._run_io, name="dynprof_nb-windows", daemon=True
        )
        self._io_thread.start()
        if cfg_path is not None:  # first: the relay's first look at the file is in _advance(0)
            self._start_relay(cfg_path, poll_interval)
        if self.flight_recorder:
            self._fr = _fr_responder(self)
        self._advance(0)  # apply a config written before the job started (a window at step 1)
        self._set_timed(True)  # most loops' steps are long enough; the heartbeat decides
        self._beat = threading.Thread(
            target=self._heartbeat, name="dynprof_nb-heartbeat", daemon=True
        )
        self._beat.start()
        _watch_exit(self)
        self._stacks = _stack_recorder(self)

    def _join_slot(self, keep: int = -1) -> None:
        """Claim this rank's slot (``keep``: the slot this process already holds there, as in
        a segment republished from a copy of ours) and publish the doorbell in it."""
        seg = self._seg
        if keep >= 0 and seg.words[seg.slot_base(keep)] == os.getpid():
            self._slot = keep
        else:
            self._slot = seg.claim_slot(self.rank)
        self._base = seg.slot_base(self._slot)
        self._words = seg.words
        if self._doorbell is not None:
            self._words[self._base + S_BELL_TOKEN] = self._doorbell.token
            self._words[self._base + S_BELL_FD] = self._doorbell.fd

    def _start_relay(self, cfg_path: str | os.PathLike[str], poll_interval: float | None) -> None:
        """Relay ``cfg_path``'s file into this job from one process per node (an election)."""
        from dynprof_nb.control.relay import POLL_INTERVAL_S, Relay

        try:
            self._relay = Relay(cfg_path, self.job, poll_interval or POLL_INTERVAL_S)
            self._relay.poll()  # the first look, here: a window asked for before step 1 is in
            self._relay.start(elect=True, first_look_s=0)
        except Exception as exc:
            self._relay = None
            self._report(f"cannot relay {cfg_path}: {exc}")

    def _check_duplicate_rank(self) -> None:
        """Say so in this rank's slot when another live process already claims this rank."""
        try:
            others = [
                s.pid
                for s in self._seg.slots()
                if s.rank == self.rank and s.index != self._slot and s.live
            ]
        except Exception:
            return
        if others:
            pids = ", ".join(str(p) for p in others)
            self._report(
                f"rank {self.rank} is also claimed by live pid {pids} in job "
                f"{self.job!r}: two training processes with one rank (a setup cell "
                "run twice?). Stop the extra process or give it another RANK."
            )

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

    def _set_timed(self, on: bool) -> None:
        """Make ``step()`` record when each step ends (``on``) or not.

        A clock read costs about two empty method calls, so a ``step()`` that always took one
        would break the idle bound (under 3x an empty call) in a loop that does little else.
        The heartbeat therefore times steps only while they are long enough for the read not
        to matter (:func:`~dynprof_nb.training.steptimes.wants_timing`): it swaps this
        instance's class for one whose ``step`` reads the clock. Same slots, nothing added to
        the untimed ``step()``. Steps from :attr:`_exact_from` on have their end time."""
        plain = _PLAIN.get(type(self), type(self))
        if on and plain.step not in (Monitor.step, FileModeMonitor.step):
            return  # a subclass's own step(): keep it (the heartbeat's times stand)
        if on:
            self.__class__ = _timed_class(plain)
            # the step in progress may still run the untimed step() (looked up before)
            self._exact_from = self._step + 2
        else:
            self.__class__ = plain
            self._exact_from = None

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
        if self._closed.is_set() or os.getpid() != self._pid:
            return
        if self._relay is not None:
            self._relay.stop()
        self._closing = True  # no step() comes any more: a writer is forked where it is asked
        try:
            if self.state == "recording":
                # the last step the backend was told of: a signal handler can run between
                # step()'s count and its _advance, and the step counted was never recorded
                rec = self._recording or {}
                self._finish(
                    rec.get("last", rec.get("first", 1) - 1), stopped=True, reason=cut_short
                )
            if self._io is not None:
                self._wait_for_saves(wait_s, dying=cut_short is not None)
        except Exception as exc:
            self._report(f"closing: {exc!r}")
        self._closed.set()
        self._set_timed(False)  # no heartbeat reads the end times any more
        if self._stacks is not None:
            self._stacks.close()
        if self._fr is not None:
            self._fr.close()
        if self._seg is not None:
            self._beat.join()
            self.state = "closed"
            seg, self._seg = self._seg, None
            try:
                self._words[self._base + S_STEP] = self._step
                seg.words[self._base + S_STATE] = STATE["closed"]
                seg.close()
            except (OSError, SegmentError) as exc:  # a lost segment: nothing to tidy
                log.debug("dynprof_nb: closing job %r's segment: %r", self.job, exc)
            self._words = [0] * 16
            if self._doorbell is not None:
                self._doorbell.close()

    def _wait_for_saves(self, wait_s: float, dying: bool) -> None:
        """Let the window-I/O thread finish; after ``wait_s`` leave windows to their writer
        processes. A save that runs in this process (MindSpore's) is waited for to its end,
        unless the process is dying (then it is bounded too, and said so)."""
        self._io.put(None)
        self._io_thread.join(wait_s)
        while self._io_thread.is_alive() and self._saving_in_thread and not dying:
            self._io_thread.join(0.5)
        if not self._io_thread.is_alive():
            return
        self._handoff.set()  # a save waiting on its writer process stops waiting
        self._io_thread.join(0.5)
        if self.handed_off:
            pids = ", ".join(map(str, self.handed_off))
            self._report(
                f"close() waited {wait_s:.0f} s; the writer process (pid {pids}) "
                "finishes the window after this process ends and publishes it."
            )
        if self._io_thread.is_alive():
            self._report(
                f"close() waited {wait_s:.0f} s; a window is still being saved on a "
                "thread of this process and is lost if the process ends first."
            )

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
        if os.getpid() != self._pid:  # a forked child stepping the parent's Monitor
            self._stand_down_in_child()
            return
        if self._fork_job is not None:  # the window-I/O thread waits for its writer process
            self._run_fork_job()
            with self._lock:
                self._schedule(n)
        elif self._watch < 0 and self._next < 0 and self._history is None:
            self._watch = self._applied  # the fork request's nudge outlived it: idle again
        if self._history is not None and self.state != "recording":
            self._history.step(n)
        if n != self._next and self._bell[4] == self._applied:
            return  # armed, and neither the window's boundary nor a new config: nothing to do
        try:
            with self._lock:
                self._words[self._base + S_STEP] = n
                if self.state == "recording" and self._recording["failed"]:
                    self._finish(n)  # its directory could not be made (reported)
                if self.state == "recording":
                    backend = self._recording["backend"]
                    self._recording["last"] = n  # for a window cut short (see close)
                    backend.step(n)
                    full = getattr(backend, "full", None)
                    if n >= self.window[1] or full:
                        early = bool(full) or self._recording.get("stop_asked", False)
                        self._finish(n, stopped=early, reason=full)
                if self._bell[4] != self._applied:
                    self._read_config(n)
                if self._pending is not None and self.state != "recording":
                    gen, cmd = self._pending
                    self._pending = None
                    self._apply(cmd, gen, n)
                if self.state == "armed" and n == self.window[0] - 1:
                    self._start(n)
                self._schedule(n)
        except Exception as exc:  # never into the training loop
            self._report(f"internal error at step {n}: {exc!r}; the window was abandoned.")
            self._abandon()

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
        self._watch = -1 if self._next >= 0 or self._history is not None else self._applied

    def _read_config(self, n: int) -> None:
        failures = self._read_failures
        if failures and n % (1 << min(failures, 10)):
            return  # a writer is slow or died mid-write: retry with backoff, not every step
        try:
            got = self._seg.read_config(attempts=50)
        except SegmentError:  # cut short under us: the heartbeat republishes it
            got = None
        if got is None:
            # On a loaded machine a live writer can be preempted mid-write for a few ms, so
            # only a failure that lasts (seconds, over several retries) is worth reporting.
            now = time.monotonic()
            if not self._read_failures:
                self._read_failing_since = now
            self._read_failures += 1
            if self._read_failures >= 8 and now - self._read_failing_since > UNREADABLE_S:
                self._report(UNREADABLE)
            return
        self._read_failures = 0
        if self.last_error == UNREADABLE:
            self._clear_error()  # it reads again: the report no longer holds
        gen, data = got
        if gen < self._bell[BELL_GEN]:
            self._suspect = True  # rung for a segment we are not on (republished by another)
        self._applied = gen
        self._kept = got
        try:
            cmd = decode(data)
        except ConfigError as exc:
            self._report(
                f"config generation {gen} rejected: {exc} Keeping the last good config.", gen
            )
            self._words[self._base + S_APPLIED] = gen
            return
        if self.state == "recording" and cmd.action != "stop":
            self._pending = (gen, cmd)  # edits made during a window wait until it ends
            return
        # a newer command supersedes one that waited for the window to end: a stop must not
        # be followed by the older queued start (which would also report an older generation)
        self._pending = None
        self._apply(cmd, gen, n)

    def _apply(self, cmd: Command, gen: int, n: int) -> None:
        old, cfg = self.config, cmd.config
        self.config = cfg
        if cfg.flight_recorder and self._fr is None:
            self._fr = _fr_responder(self)
        self.window_options = dict(cmd.window)
        self._late = cmd.late
        if cmd.action == "start":
            self._reason = cmd.reason
        if cmd.action == "stop":
            self._stop_at(cfg.stop_step if cfg.has_window else -1, n)
        elif cmd.action == "start" or (
            cfg.has_window and (cfg.start_step, cfg.stop_step) != (old.start_step, old.stop_step)
        ):
            self._clear_error()
            if cfg.has_window:
                self._arm(n)
            else:
                self._set_state("idle")
        elif not cfg.has_window and self.state in ("armed", "excluded"):
            self._set_state("idle")
        self._words[self._base + S_APPLIED] = gen

    def _stop_at(self, at: int, n: int) -> None:
        """A stop: at once (``at`` -1, or a step this rank has reached), or when step ``at``
        ends, the step the controller chose for every rank, so their windows end together."""
        if self.state == "recording":
            if at > n and self.window is not None:
                self.window = (self.window[0], min(self.window[1], at))
                self._words[self._base + S_STOP] = self.window[1]
                self._recording["stop_asked"] = True
            else:
                self._finish(n, stopped=True)
        elif self.state in ("armed", "excluded"):
            if self.window is not None and 1 <= self.window[0] <= at:
                self.window = (self.window[0], min(self.window[1], at))
                self._words[self._base + S_STOP] = self.window[1]
            else:
                self._set_state("idle")

    def _arm(self, n: int) -> None:
        cfg = self.window_config
        start, stop = cfg.start_step, cfg.stop_step
        self.window, self._asked = (start, stop), None
        self._words[self._base + S_START] = start
        self._words[self._base + S_STOP] = stop
        if cfg.ranks and self.rank not in cfg.ranks:
            self._set_state("excluded")
            log.info(
                "dynprof_nb rank %d: not in ranks %s; window %d-%d is not profiled here",
                self.rank,
                cfg.ranks,
                start,
                stop,
            )
            return
        shifted = shifted_window(start, stop, n) if self._late == "shift" else None
        if shifted is not None:  # file mode: begin at the next step, the same length
            self._asked, self.window = (start, stop), shifted
            self._words[self._base + S_START], self._words[self._base + S_STOP] = shifted
            self._report(shift_note(self.rank, start, stop, n, shifted))
            self._set_state("armed")
            self._start(n)
            return
        if start <= n:
            length = stop - start
            # a lead that would have worked: twice how late this request was, at least 5
            lead = max(5, 2 * (n - start + 3))
            self._set_state("idle")
            self._report(
                f"window {start}-{stop} skipped: the request reached this rank at "
                f"the end of step {n}, {n - start + 1} step(s) after step {start} had begun. "
                f"Ask for a later window, e.g. start +{lead} +{lead + length}."
            )
            return
        self._set_state("armed")
        if n == start - 1:
            self._start(n)

    def _refusal(self) -> str:
        """Why no window may start now ("" when one may): too many starts lately, or the
        output over its disk budget. Cheap: no clock read beyond one, no disk access."""
        now = time.monotonic()
        starts = self._starts
        while starts and now - starts[0] > 60.0:
            starts.popleft()
        if len(starts) >= self.max_windows_per_minute:
            return (
                f"{len(starts)} windows started on this rank in the last minute (the "
                f"Monitor's max_windows_per_minute={self.max_windows_per_minute}). "
                "Ask for longer windows, less often."
            )
        if self._disk_over:
            return self._disk_over
        starts.append(now)
        return ""

    def _start(self, n: int) -> None:
        """Start the backend on this thread; the window's directory and manifest are made by
        the window-I/O thread (a mkdir and an fsync cost milliseconds on a busy disk), unless
        the backend needs its directory to start (MindSpore's profiler does)."""
        cfg = self.window_config
        start, stop = self.window
        refusal = self._refusal()
        if refusal:
            self._set_state("idle")
            self._report(f"window {start}-{stop} refused: {refusal}")
            if self._reason and self._seg is not None:  # the trigger's: counted apart
                try:
                    note_refused(self._seg, self._applied)
                except (OSError, SegmentError):
                    pass
            if self._disk_over:
                threading.Thread(target=self._recheck_disk, args=(cfg,), daemon=True).start()
            return
        t0 = time.perf_counter()
        rec: dict[str, Any] = {
            "backend": None,
            "dir": None,
            "manifest": None,
            "first": n + 1,
            "failed": "",
            "config": cfg,
            "options": self.window_options,
            "window": (start, stop),
            "asked": self._asked,
            "shift_note": self.last_error if self._asked else "",
            "reason": self._reason,
        }
        try:
            backend = rec["backend"] = make_backend(resolve_backend(self.backend))
            needs_dir = getattr(backend, "needs_directory_at_start", False)
            if needs_dir:
                self._open_window(rec)
                if rec["failed"]:
                    self._set_state("idle")
                    return
            t1 = time.perf_counter()
            backend.start(
                rec["dir"],
                cfg,
                start,
                {
                    "job": self.job,
                    "rank": self.rank,
                    "world_size": self.world_size,
                    "memory_budget": int(self.memory_budget_mb * 2**20),
                },
            )
            t2 = time.perf_counter()
        except Exception as exc:
            self._set_state("idle")
            self._report(
                f"window {start}-{stop} could not start: {exc}. Training goes on; "
                "fix the cause and ask again."
            )
            if rec["dir"] is not None:
                _mark_failed(rec["dir"], str(exc))
            return
        if self._history is not None:  # the window begins with the steps kept before it
            rec["history"] = adopt(backend, self._history.take())
        self._recording = rec
        if not needs_dir:
            self._io.put((self._open_window, rec))
        self._set_state("recording")
        # the profiler's own start (torch, MindSpore) is counted apart from dynprof_nb's
        self.timings = {
            "start_s": time.perf_counter() - t0 - (t2 - t1),
            "profiler_start_s": t2 - t1,
        }

    def _open_window(self, rec: dict[str, Any]) -> None:
        """Make the window's temporary directory and its "recording" manifest. A failure is
        reported as the window not starting; the training thread drops it at its next step."""
        cfg, (start, stop) = rec["config"], rec["window"]
        try:
            root = window_dirs.output_root(cfg.prof_path, self.output_path)
            # a window file mode moved keeps the name of the window asked for (MindSpore's)
            rec["dir"] = window_dirs.create_window_dir(
                root, self.rank, *(rec["asked"] or rec["window"])
            )
            rec["manifest"] = window_dirs.new_manifest(
                job=self.job,
                rank=self.rank,
                start=start,
                stop=stop,
                backend=rec["backend"].name,
                config=cfg.to_dict(),
                window_options=rec["options"],
            )
            if rec["asked"] is not None:
                rec["manifest"].update(
                    window_dirs.shifted_fields(rec["asked"], rec["window"], rec["shift_note"])
                )
            if rec.get("history"):  # steps kept before the window (history_steps)
                rec["manifest"]["history_steps"] = list(rec["history"])
            if rec["reason"]:  # why a trigger started this window
                rec["manifest"]["reason"] = rec["reason"]
            window_dirs.write_manifest(rec["dir"], rec["manifest"])
            if hasattr(rec["backend"], "directory"):
                rec["backend"].directory = rec["dir"]
            if self._seg is not None:
                self._seg.write_text(self._slot, "root", str(root))
        except Exception as exc:
            rec["failed"] = str(exc)
            self._report(
                f"window {start}-{stop} could not start: {exc}. Training goes on; "
                "fix the cause and ask again."
            )
            if rec["dir"] is not None:
                _mark_failed(rec["dir"], str(exc))

    def _run_io(self) -> None:
        """The window-I/O thread: opens and saves windows, in the order they were asked."""
        while True:
            job = self._io.get()
            if job is None:
                return
            fn, *args = job
            try:
                fn(*args)
            except Exception as exc:  # never lose the thread
                self._report(f"window I/O: {exc!r}")

    def _recheck_disk(self, cfg: ProfilerConfig) -> None:
        """After a refusal for disk: measure again, so freed space lets the next window in."""
        root = window_dirs.output_root(cfg.prof_path, self.output_path)
        if window_dirs.output_bytes(root) < self.disk_budget_mb * 2**20:
            self._disk_over = ""

    def _finish(self, n: int, stopped: bool = False, reason: str | None = None) -> None:
        """Stop the backend on this thread (quick); the window-I/O thread writes the window.

        ``reason`` says why the window ended before its last step (a budget, the process
        exiting); it goes into the manifest (``stop_reason``) and the rank's status.
        """
        t0 = time.perf_counter()
        rec, self._recording = self._recording, None
        # "idle" is published only once the save is counted (then it reads "saving"):
        # a controller's wait() must not see an idle rank between the stop and the save.
        self.state = "idle"
        if rec is None:
            self._publish_state()
            return
        t1 = time.perf_counter()
        try:
            rec["backend"].stop()
        except Exception as exc:  # keep what was recorded: save() may still write it
            self._report(f"stopping the profiler: {exc!r}")
        t2 = time.perf_counter()
        if self._history is not None:
            self._history.attach()
        if rec["failed"]:  # its directory could not be made (reported): nothing to save
            self._publish_state()
            return
        if n < rec["first"]:  # stopped before its first step ended: nothing to keep
            self._io.put((self._discard, rec, "stopped before any step was recorded"))
            self._publish_state()
            return
        self.timings.update(stop_s=time.perf_counter() - t0 - (t2 - t1), profiler_stop_s=t2 - t1)
        end = {
            "stop_step": n,
            "stopped_early": stopped,
            "ended_at": time.time(),
            "stop_reason": reason,
            "disk_budget_bytes": int(self.disk_budget_mb * 2**20),
            # what this window cost the training thread: dynprof_nb's part and the
            # profiler's own (torch's stop processes its events there, seconds for big ones)
            "training_thread_s": {k: round(v, 6) for k, v in self.timings.items()},
        }
        if t2 - t1 > 0.1:
            self._report(  # what it cost, not a failure: a note (status shows it apart)
                f"{NOTE}window {rec['window'][0]}-{n}: the profiler's own stop held the "
                f"training thread {t2 - t1:.2f} s (saving it does not)."
            )
        if reason:
            self._report(
                f"window {rec['window'][0]}-{rec['window'][1]} ended at step {n}: "
                f"{reason}; what was recorded is saved."
            )
        with self._saved:
            self._saving += 1
        self._publish_state()
        self._io.put((self._save, rec, end))

    def _discard(self, rec: dict[str, Any], reason: str) -> None:
        if rec["dir"] is not None:
            _mark_failed(rec["dir"], reason)

    def wait_saved(self, timeout: float | None = None) -> bool:
        """Wait until every window that ended has been written (or failed); False on timeout.

        Call it from the training loop's thread, between steps: a window's writer process is
        forked by that thread (see :meth:`_fork_here`), and this does it while it waits."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._saved:
            while self._saving:
                self._saved.release()
                try:
                    self._run_fork_job()
                finally:
                    self._saved.acquire()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._saved.wait(0.05 if left is None else min(0.05, left))
            return True

    def _save(self, rec: dict[str, Any], end: dict[str, Any]) -> None:
        """Write and publish one window; failures mark it incomplete and are reported.

        Backends that can (``save_in_child``) are written by a forked child process, so the
        training process keeps its GIL; the others on this thread, and the time their save
        held it is kept in the manifest (``save_s``) and in ``timings``.
        """
        backend, directory = rec["backend"], rec["dir"]
        manifest = dict(rec["manifest"] or {}, **end)
        try:
            if rec["failed"] or directory is None:
                return
            if window_dirs.output_bytes(directory.parent) >= end["disk_budget_bytes"]:
                self._disk_over = (
                    f"the windows under {directory.parent} are over the disk budget "
                    f"({self.disk_budget_mb:.0f} MB, the Monitor's disk_budget_mb); nothing is "
                    "deleted for you: remove old windows, or raise the budget"
                )
                raise OSError(self._disk_over)
            if getattr(backend, "save_in_child", False) and saver.can_fork():
                final = self._save_in_child(backend, directory, manifest)
                if final is None:
                    return
            else:
                self._saving_in_thread = True
                t0, cpu0 = time.perf_counter(), time.thread_time()
                backend.save()
                held = time.perf_counter() - t0
                # this thread's CPU time bounds how long the save held the GIL, so how long
                # it can have stalled the training thread (MindSpore's analysis is Python)
                gil = time.thread_time() - cpu0
                self.timings.update(save_s=held, save_gil_s=gil)
                thread_s = dict(manifest.get("training_thread_s") or {}, save_gil_s=round(gil, 6))
                if gil > 0.1:
                    self._report(
                        f"window {manifest['start_step']}-{manifest['stop_step']}: "
                        f"saving it held this process's GIL up to {gil:.2f} s of "
                        f"{held:.2f} s (the profiler's analysis); training steps "
                        "waited for it."
                    )
                final = window_dirs.publish(
                    directory,
                    dict(
                        manifest,
                        status="complete",
                        save_s=round(held, 3),
                        training_thread_s=thread_s,
                    ),
                )
            self.last_window = final
            if self._seg is not None:
                self._seg.write_text(self._slot, "window", str(final))
            log.info(
                "dynprof_nb rank %d: window %d-%d written to %s",
                self.rank,
                manifest["start_step"],
                manifest["stop_step"],
                final,
            )
        except Exception as exc:
            if isinstance(exc, WriterFailed):  # the writer process marked it already
                reason, kept = exc.reason, exc.kept
            else:
                reason = f"{type(exc).__name__}: {exc}"
                kept = _mark_failed(directory, reason, manifest)
            self._report(
                f"window {manifest['start_step']}-{manifest['stop_step']} could not "
                f"be written ({reason}); it is kept as incomplete in {kept}."
            )
        finally:
            self._saving_in_thread = False
            with self._saved:
                self._saving -= 1
                self._saved.notify_all()
            self._publish_state()

    def _save_in_child(
        self, backend: Any, directory: Path, manifest: dict[str, Any]
    ) -> Path | None:
        """Fork the writer; wait for it unless close() gave up waiting (then None)."""
        child = self._fork_here(backend, directory, manifest)
        if child is None:  # close() gave up waiting before a step came to fork it
            return None
        self.timings["fork_s"] = child.fork_s
        while True:
            result = saver.wait(child, 0.1)
            if result is not None:
                break
            if self._handoff.is_set():
                self.handed_off.append(child.pid)
                log.warning(
                    "dynprof_nb rank %d: window %d-%d is left to its writer process "
                    "(pid %d), which publishes it after this process ends",
                    self.rank,
                    manifest["start_step"],
                    manifest["stop_step"],
                    child.pid,
                )
                return None
        self.timings["write_s"] = time.monotonic() - child.forked_at
        release = getattr(backend, "release", None)
        if release is not None:
            release()
        if "error" in result:
            raise WriterFailed(result["error"], result.get("path") or directory)
        return Path(result["path"])

    def _fork_here(self, backend: Any, directory: Path, manifest: dict[str, Any]) -> Any:
        """Have the training thread fork the writer at its next ``step()``, and wait for it.

        ``fork()`` runs every library's atfork handlers, and OpenBLAS's shuts down its thread
        pool: forked from this thread while the training thread was inside a BLAS call, the
        training thread spun forever on workers that were gone (a numpy job hung right after
        its window). Between two steps the training thread is in none, so it forks there.
        When no step comes for :data:`FORK_GRACE_S` and three of the rank's recent steps (the
        loop ended, or waits in this process), or in close(), this thread forks itself."""
        job: dict[str, Any] = {
            "args": (backend, directory, manifest),
            "child": None,
            "error": None,
            "done": threading.Event(),
        }
        self._fork_job = job
        step, since = self._step, time.monotonic()
        while not job["done"].wait(0.02):
            if self._step != step:  # steps come: the next one forks
                step, since = self._step, time.monotonic()
            grace = max(FORK_GRACE_S, 3 / self._rate) if self._rate > 0 else FORK_GRACE_S
            if self._closing or time.monotonic() - since > grace:
                self._run_fork_job()
            elif self._handoff.is_set():
                return None
            else:
                self._watch = -1  # the next step() takes the slow path (_advance), which forks
        if job["error"] is not None:
            raise job["error"]
        return job["child"]

    def _run_fork_job(self) -> None:
        """Fork the writer process the window-I/O thread asked for (one thread does it)."""
        if not self._fork_lock.acquire(blocking=False):
            return
        try:
            job, self._fork_job = self._fork_job, None
            if job is None:
                return
            try:
                job["child"] = saver.fork_save(*job["args"])
            except Exception as exc:
                job["error"] = exc
            job["done"].set()
        finally:
            self._fork_lock.release()

    def _abandon(self) -> None:
        rec, self._recording = self._recording, None
        if rec is not None:
            try:
                rec["backend"].stop()
            except Exception:
                pass
            self._io.put((self._discard, rec, self.last_error))
        self.state = "idle"
        self._schedule(0)
        try:
            self._publish_state()
        except Exception:
            pass

    # -- status -------------------------------------------------------------------------

    def _set_state(self, state: str) -> None:
        self.state = state
        self._publish_state()

    def _publish_state(self) -> None:
        state = self.state
        if state == "idle" and self._saving:
            state = "saving"
        if self._seg is not None:
            self._words[self._base + S_STATE] = STATE[state]

    def _stand_down_in_child(self) -> None:
        """A ``fork()`` of the training process shares the parent's slot and doorbell
        mappings: a child that steps on (a worker forked from the loop, a job that forks
        and trains in the child) would apply the parent's config, write its step, state and
        errors into the parent's slot and record windows as the parent's rank. The child
        stands down once, says so in its own log only, and its ``step()`` stays on the fast
        path (a frozen private copy of the doorbell)."""
        self._bell = list(self._bell)
        self._watch = self._bell[4]
        log.warning(
            "dynprof_nb job %r rank %d: this is a forked child (pid %d) of the rank's "
            "process (pid %d); it does not profile and never writes into the rank's slot. "
            "Start a Monitor of its own in the child to profile it.",
            self.job,
            self.rank,
            os.getpid(),
            self._pid,
        )

    def _report(self, message: str, generation: int | None = None) -> None:
        """Say it once: to the log and to this rank's slot, where the notebook shows it."""
        if message == self.last_error:
            return
        self.last_error = message
        log.warning("dynprof_nb job %r rank %d: %s", self.job, self.rank, message)
        if self._seg is not None:
            try:
                self._seg.write_text(self._slot, "error", message)
                self._words[self._base + S_ERR_GEN] = (
                    self._applied if generation is None else generation
                )
            except Exception:
                pass

    def _clear_error(self) -> None:
        if self.last_error and self._seg is not None:
            self.last_error = ""
            self._seg.write_text(self._slot, "error", "")

    def _heartbeat(self) -> None:
        """Every HEARTBEAT_S: publish the step, a heartbeat and the step rate (all on the
        monotonic clock), keep the doorbell in step with the segment, and every CHECK_EVERY
        beats check the segment itself. Nothing here may end the thread."""
        last, last_ns, rate, beats = self._step, time.monotonic_ns(), 0.0, 0
        watch, watched = None, None  # the step-time ring's writer, remade for a new segment
        while not self._closed.wait(HEARTBEAT_S):
            beats += 1
            try:
                words, base = self._words, self._base
                if self._seg.fd_lost:  # the job closed our descriptor: mend it before use
                    raise FdLost(self._seg.name, -1)
                if self._seg is not watched:  # first beat, or the segment was republished
                    watched = self._seg
                    watch = StepWatch(watched, self._slot, self.rank, self._step, HEARTBEAT_S)
                n = self._step  # before the end times: each of steps <= n has its own
                exact_from = self._exact_from
                watch.beat(n, self.state, self._ends if exact_from else None, exact_from)
                self._note_watch(watch)
                gen = words[H_GEN]
                if gen > self._bell[BELL_GEN]:
                    self._bell[BELL_GEN] = gen  # a writer that could not ring the doorbell
                if n != last:
                    now = time.monotonic_ns()
                    current = (n - last) * 1e9 / max(1, now - last_ns)
                    rate = current if rate == 0 else 0.7 * rate + 0.3 * current
                    words[base + S_STEP] = n
                    words[base + S_BEAT_NS] = now
                    words[base + S_RATE] = int(rate * 1000)
                    self._rate = rate
                    timed = exact_from is not None
                    if wants_timing(timed, n - last, now - last_ns) != timed:
                        self._set_timed(not timed)
                    last, last_ns = n, now
            except (OSError, SegmentError):
                beats = CHECK_EVERY  # the segment is in trouble: check it now
            if beats >= CHECK_EVERY or self._suspect:
                beats = 0
                self._check_segment()

    def _note_watch(self, watch: StepWatch) -> None:
        """A failure of the step-time watch (or the trigger) goes into this rank's status
        error; once it is reset (the trigger re-armed), that error is cleared."""
        if watch.failed:
            self._report(watch.failed)
        elif watch.cleared and self.last_error == watch.cleared:
            watch.cleared = ""
            self._clear_error()

    def _check_segment(self) -> None:
        """Mend a segment that was truncated, removed, replaced or overwritten under the job:
        republish it (config and slots kept when they can be) and rejoin it, saying so once
        in the log; while that is impossible, say why and keep training."""
        try:
            problem = self._seg.problem()
            if not problem and self._words[self._base] != os.getpid():
                problem = "lost this rank's slot"
        except (OSError, SegmentError) as exc:
            problem = f"cannot be read ({exc})"
        if not problem:
            self.segment_problem = ""
            self._check_doorbell()
            if self._suspect:  # a ring from a writer on another segment; ours is sound
                self._suspect = False
                try:
                    self._bell[BELL_GEN] = self._words[H_GEN]
                except (OSError, SegmentError):
                    pass
            return
        with self._lock:
            if self._closed.is_set():
                return
            old = self._seg
            try:
                self._seg = old.republish(self._kept)
                self._join_slot(keep=self._slot)
            except (OSError, SegmentError) as exc:
                self._seg = old
                if problem != self.segment_problem:
                    self.segment_problem = problem
                    log.warning(
                        "dynprof_nb job %r rank %d: the job segment %s and cannot be "
                        "republished yet (%s); training goes on, retrying.",
                        self.job,
                        self.rank,
                        problem,
                        exc,
                    )
                return
            self.segment_problem, self._suspect = "", False
            log.warning(
                "dynprof_nb job %r rank %d: the job segment %s; republished it and "
                "rejoined. Training went on.",
                self.job,
                self.rank,
                problem,
            )
            self._republish_slot()
            self._check_doorbell()

    def _check_doorbell(self) -> None:
        """A doorbell whose descriptor the job closed (``os.closerange``) cannot be rung: make
        a new one, publish it in the slot and say so once. ``step()`` reads the old mapping
        until the swap, which is one attribute store; the old one is kept (never unmapped
        under a step)."""
        old = self._doorbell
        if old is None or not old.lost():
            return
        new = None
        try:
            new = Doorbell(self.job)
            self._words[self._base + S_BELL_TOKEN] = new.token
            self._words[self._base + S_BELL_FD] = new.fd
        except (OSError, SegmentError) as exc:
            if new is not None:
                new.close()
            self._report(
                f"the doorbell's descriptor was closed under the job and cannot be made "
                f"again ({exc}); config changes reach this rank within a heartbeat"
            )
            return
        new.words[BELL_GEN] = self._bell[BELL_GEN]
        self._old_bells.append(old)
        self._doorbell, self._bell = new, new.words
        log.warning(
            "dynprof_nb job %r rank %d: the doorbell's descriptor %d was closed under the job "
            "(os.closerange?); made a new one (descriptor %d). Training went on.",
            self.job,
            self.rank,
            old.fd,
            new.fd,
        )

    def _republish_slot(self) -> None:
        """Write this rank's status into a (re)joined slot: what a new segment does not hold."""
        w, b = self._words, self._base
        w[b + S_STEP] = self._step
        w[b + S_APPLIED] = self._applied
        if self.window is not None:
            w[b + S_START], w[b + S_STOP] = self.window
        self._publish_state()
        if self.last_error:
            self._seg.write_text(self._slot, "error", self.last_error)
            w[b + S_ERR_GEN] = self._applied
        if self.last_window is not None:
            self._seg.write_text(self._slot, "window", str(self.last_window))
        gen = w[H_GEN]
        self._bell[BELL_GEN] = gen
        if gen < self._applied:  # a new segment with no config: nothing to apply
            self._applied = gen
            if self._watch >= 0:
                self._watch = gen


class FileModeMonitor(Monitor):
    """A Monitor driven by MindSpore's ``profiler_config.json`` (``Monitor(cfg_path=...)``
    is one; so is the drop-in): an edit complete in the file before a ``step()`` is applied by
    that ``step()``, as a window asked for from a notebook at that step is (with file mode's
    rule for a window that has begun, :func:`shifted_window`).

    Its ``step()`` asks the file's :class:`~dynprof_nb.filewatch.FileWatch` first: one
    ``fstat`` (about 1 µs, against MindSpore 2.7's 26 µs re-read of its buffer); on a change it
    relays the file itself (:meth:`Relay.poll <dynprof_nb.control.relay.Relay.poll>`) before the
    step goes on. A Monitor without ``cfg_path`` keeps the shared-memory ``step()``, untouched.
    """

    __slots__ = ("_filewatch",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._filewatch: Any = _NoFile
        super().__init__(*args, **kwargs)
        if self._relay is not None and self._seg is not None:
            self._filewatch = self._relay.watch

    def step(self) -> None:
        """Call once at the end of every training iteration."""
        self._step += 1
        if self._filewatch.changed():
            self._relay_file()
        if self._bell[4] != self._watch:
            self._advance(self._step)

    def _relay_file(self) -> None:
        """The file changed: relay it now, on this thread, so this step applies it."""
        try:
            self._words[self._base + S_STEP] = self._step  # the relay checks where ranks are
            if self._relay.poll():
                gen = self._words[H_GEN]
                if gen > self._bell[BELL_GEN]:  # our own doorbell, in case the ring missed
                    self._bell[BELL_GEN] = gen
        except Exception as exc:  # never into the training loop
            self._report(f"cannot relay {self._relay.path}: {exc!r}")

    def close(self, wait_s: float = CLOSE_WAIT_S, cut_short: str | None = None) -> None:
        self._filewatch = _NoFile
        super().close(wait_s, cut_short)


class _NoFile:
    """The watch of a file-mode monitor that has no relay (it reported why)."""

    @staticmethod
    def changed() -> bool:
        return False


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
        self._relay_file()
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


class WriterFailed(Exception):
    """The writer process could not write a window (it marked the window incomplete)."""

    def __init__(self, reason: str, kept: str | Path) -> None:
        super().__init__(reason)
        self.reason, self.kept = reason, kept


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
    for monitor in list(_live):
        if monitor._pid == os.getpid():
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


def _fr_responder(monitor: Monitor) -> Any:
    """The Flight Recorder responder (see :mod:`~dynprof_nb.training.frdump`), or None."""
    from dynprof_nb.training.frdump import start

    return start(monitor)


def _mark_failed(directory: Path, reason: str, manifest: dict[str, Any] | None = None) -> Path:
    """Leave a failed window listed as ``incomplete`` (see ``window_dirs.mark_failed``)."""
    try:
        return window_dirs.mark_failed(directory, reason, manifest)
    except Exception:
        return directory
