"""The relay: mirror a MindSpore ``profiler_config.json`` into a job segment.

This is the role of MindSpore's own DynamicProfilerMonitor process: a hand-edited file, or one on a
shared filesystem read by one relay per node, drives the job. Unlike the original it writes
through :class:`~dynprof_nb.job.Job`, so the file is validated once, here, and an invalid file
never replaces the last good config: the relay keeps it and publishes the error in the job
segment's helper note, which ``job.status()`` shows as a row with ``rank`` -1 and ``state``
``relay``.

What a change of the file means:

* a new ``(start_step, stop_step)`` pair: ``start_from_file`` (``job.stop`` when it is
  -1, -1), with the other keys in the same write. This is file mode: a window whose first
  step has begun when it reaches a rank starts at that rank's next step with the same length
  and says so in the status and the window's manifest, whose directory keeps the name of the
  window asked for (MindSpore's own ``step()`` does the same; a hand edit cannot be timed to a
  step). Windows asked for from a notebook stay exact;
* the same pair with other keys changed: ``job.set`` (the window is *not* armed again, as in
  MindSpore, where the same pair never triggers twice);
* the relay's first look at a file without a window: ``job.set`` of its keys (a window asked
  for from a notebook keeps running).

When an edit arrives: a file-mode rank (the drop-in, or a ``Monitor`` with ``cfg_path``) asks
the file's :class:`~dynprof_nb.filewatch.FileWatch` at every ``step()`` (one ``fstat``) and,
when it changed, calls :meth:`Relay.poll` itself before its step goes on, so an edit complete
before a ``step()`` is applied by that ``step()`` whatever the step time and the machine's load
(MindSpore's 2 s poll, and this relay's timed poll alone, lost the second window of
MindSpore's own documented example on short steps). Every process of the node that relays the
file takes the same node lock and shares what was relayed last (a small state file beside the
relay's election lock), so an edit is written into the job once, by whichever rank sees it
first, and the others adopt it.

The timed poll, :data:`POLL_INTERVAL_S` = 0.5 s, stays for what no rank's ``fstat`` sees: an
edit made on another host of a shared filesystem (NFS caches attributes for about 3 s; the
poll opens the file, which makes the client revalidate it), or a job between steps. It reads
the file (tens of microseconds, on a thread of one process per node), so it also catches
anything the stamps could miss.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from dynprof_nb.contract.config import (
    ConfigError,
    ProfilerConfig,
    config_file,
    unknown_keys_message,
)
from dynprof_nb.contract.rows import StepWindow
from dynprof_nb.contract.segment import H_CREATOR, H_CREATOR_START, pid_start_time
from dynprof_nb.control.asks import refuse_ended
from dynprof_nb.control.job import Job
from dynprof_nb.filewatch import FileWatch
from dynprof_nb.locks import drop_lock, holder, job_lock_name, open_lock, still_named

log = logging.getLogger("dynprof_nb")

POLL_INTERVAL_S = 0.5
FIRST_LOOK_S = 2.0  # the most Relay.start() waits for its first look at the file
NODE_LOCK_WAIT_S = 2.0  # the most a look waits for another process's relaying (see _node_lock)
WINDOW_KEYS = ("start_step", "stop_step")


class Relay:
    """Mirror one ``profiler_config.json`` into one job; :meth:`poll` checks the file once.

    >>> Relay("./cfg", "llama").run()          # foreground, as ``dynprof relay`` does
    >>> relay = Relay("./cfg", "llama").start()  # a daemon thread; relay.stop() ends it
    """

    def __init__(
        self,
        cfg_path: str | os.PathLike[str],
        job: str | Job,
        poll_interval: float = POLL_INTERVAL_S,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"poll_interval: got {poll_interval}; expected seconds > 0.")
        self.path = config_file(cfg_path).resolve()
        self._own_job = isinstance(job, str)  # attached here: closed by stop()
        self.job = Job.open(job) if isinstance(job, str) else job
        self.poll_interval = float(poll_interval)
        self.last: ProfilerConfig | None = None  # the last config relayed from the file
        self.error = ""
        self.generation = 0
        self.watch = FileWatch(self.path)  # a file-mode rank asks it at every step
        self._bytes: bytes | None = None  # the file as this process last relayed or adopted it
        self._refused: tuple[bytes, str] = (b"", "")  # the file last refused, and why
        self._poll_lock = threading.Lock()  # a rank's step() and the relay thread
        self._relaying = False  # this process runs the node's relay loop (it won the election)
        self._lock_wait = NODE_LOCK_WAIT_S
        # the node's relay state and lock: one file per job in the private lock directory
        self._state_name = job_lock_name(self.job.name, "state")
        self._state_fd = open_lock(self._state_name)
        self._note = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._first_look = threading.Event()  # set once this relay polled (or lost the election)

    # -- one poll -------------------------------------------------------------------------

    def poll(self) -> bool:
        """Relay the file if its contents changed since this node last relayed it; True
        when the job was written. Safe from any thread and any process of the node at once
        (a file-mode rank calls it from ``step()`` when :class:`FileWatch` sees a change):
        the first to take the node's relay lock relays an edit, the others adopt it."""
        with self._poll_lock:
            if self._state_fd < 0:  # stopped (stop() closes it under this lock)
                return False
            # from the read of a change until the job has it and the doorbells rang, a rank's
            # step() on another thread must not take the file for unchanged and go on without
            # the edit (issue 43: the relay thread read it while the previous window's save
            # held the GIL, and the moved window began a step late): it waits on this lock
            self.watch.relaying = self.watch.changed()
            try:
                with self._node_lock(self._lock_wait) as locked:
                    # a stuck holder: this look is skipped (the file still reads as changed),
                    # and the next ones do not wait until the lock is had again
                    self._lock_wait = NODE_LOCK_WAIT_S if locked else 0.0
                    return self._poll() if locked else False
            finally:
                self.watch.relaying = False

    def _poll(self) -> bool:
        try:
            data = self.watch.read()
        except FileNotFoundError:
            self._publish(f"waiting for {self.path} (no such file yet)")
            return False
        except OSError as exc:
            self._publish(f"cannot read {self.path}: {exc.strerror}; keeping the last good config.")
            return False
        except ValueError as exc:
            self._publish(f"{exc} Keeping the last good config.")
            return False
        if data is None:  # written while it was read: the next look reads it whole
            return False
        if data == self._bytes:
            if self._relaying:  # the elected relay keeps the note fresh; a rank only says news
                self._publish(self.error)
            return False
        state = self._shared_state()
        digest = hashlib.sha1(data).hexdigest()
        last = self.last
        if state is not None:
            if state.get("digest") == digest:  # another process of this node relayed it
                self._adopt(data, state)
                return False
            last = _config_or_none(state.get("config"))
        try:
            cfg, notes = parse_config(data, self.path)
            wrote = self._apply(cfg, last)
        except (ConfigError, ValueError, RuntimeError) as exc:
            # kept: a non-atomic writer may be mid-write; its next write() is read whole. The
            # same file refused again is not news: its first message stands, said once (a
            # window that has ended names the ranks' steps, which change at every look)
            if data != self._refused[0]:
                self._refused = (data, f"{self.path}: {exc} Keeping the last good config.")
            self._publish(self._refused[1])
            return False
        self._bytes, self._refused = data, (b"", "")
        self._save_state(digest, cfg)
        self._publish(f"warning: {notes}" if notes else "")
        return wrote

    def _apply(self, cfg: ProfilerConfig, last: ProfilerConfig | None) -> bool:
        data = cfg.to_dict()
        rest = {k: v for k, v in data.items() if k not in WINDOW_KEYS}
        window = (cfg.start_step, cfg.stop_step)
        if last is not None and window == (last.start_step, last.stop_step):
            changed = {k: v for k, v in rest.items() if last.to_dict()[k] != v}
            gen = self.job.set(**changed) if changed else 0
        elif last is None and not cfg.has_window:
            gen = self.job.set(**rest)
        else:
            gen = start_from_file(self.job, cfg)  # start (or stop for -1, -1), file mode
        self.last = cfg
        if gen:
            self.generation = gen
            log.info("dynprof_nb relay: %s -> job %r generation %d", self.path, self.job.name, gen)
        return bool(gen)

    @contextlib.contextmanager
    def _node_lock(self, timeout: float = NODE_LOCK_WAIT_S) -> Iterator[bool]:
        """The node's relay lock of this job (an ``flock`` on the state file, which the kernel
        drops if its holder dies): one process at a time reads the shared state, relays and
        writes it. A holder keeps it for microseconds; one stopped while holding it (a
        debugger, SIGSTOP) must not stall every rank's ``step()``, so after ``timeout`` this
        yields False and the caller looks next time. The file goes with the job's segment
        (:func:`dynprof_nb.locks.forget_job`): one found removed once locked is opened again,
        so every process of the node shares the file the name points to."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self._state_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(0.0005)
                continue
            try:
                named = still_named(self._state_fd, self._state_name)
            except BaseException:  # no fd left to look with: never leave the node locked
                fcntl.flock(self._state_fd, fcntl.LOCK_UN)
                raise
            if named:
                break
            fresh = open_lock(self._state_name)  # opened before the old one is let go: a
            os.close(self._state_fd)  # failed open leaves no closed number behind
            self._state_fd = fresh
        try:
            yield True
        finally:
            fcntl.flock(self._state_fd, fcntl.LOCK_UN)

    # -- what this node relayed last (shared by every process that relays the file) --------

    def _segment_id(self) -> list[int]:
        """Which segment the shared state belongs to: a job run again under the same name (a
        new segment) starts afresh, as MindSpore's monitor does when it starts."""
        words = self.job.segment(create=True).words
        return [words[H_CREATOR], words[H_CREATOR_START]]

    def _shared_state(self) -> dict[str, Any] | None:
        """What the last process to relay this file on this node relayed into this segment
        (None: nothing yet, or for another segment). Read under the node lock."""
        try:
            raw = os.pread(self._state_fd, os.fstat(self._state_fd).st_size, 0)
            state = json.loads(raw) if raw else None
        except (OSError, ValueError):
            return None
        if not isinstance(state, dict) or state.get("path") != str(self.path):
            return None
        return state if state.get("segment") == self._segment_id() else None

    def _save_state(self, digest: str, cfg: ProfilerConfig) -> None:
        state = {
            "path": str(self.path),
            "segment": self._segment_id(),
            "digest": digest,
            "config": cfg.to_dict(),
            "generation": self.generation,
        }
        raw = json.dumps(state).encode()
        try:
            os.ftruncate(self._state_fd, 0)
            os.pwrite(self._state_fd, raw, 0)
        except OSError as exc:  # the others then relay it again: a set of the same keys
            log.debug("dynprof_nb relay: cannot save its state: %r", exc)

    def _adopt(self, data: bytes, state: dict[str, Any]) -> None:
        self._bytes, self.error = data, ""  # the relaying process published the note
        self.last = _config_or_none(state.get("config")) or self.last
        self.generation = int(state.get("generation") or self.generation)

    def _publish(self, error: str) -> None:
        """Put this relay's state in the segment's helper note (only when it changed)."""
        self.error = error
        note = json.dumps(
            {
                "role": "relay",
                "pid": os.getpid(),
                "pid_start": pid_start_time(os.getpid()),
                "path": str(self.path),
                "poll_s": self.poll_interval,
                "generation": self.generation,
                "window": _window_text(self.last),
                "error": error,
            }
        )
        if note != self._note:
            if error and error != _error_of(self._note):
                log.warning("dynprof_nb relay for job %r: %s", self.job.name, error)
            self.job.segment(create=True).write_note(note)
            self._note = note
        else:
            self.job.segment(create=True).beat_note()

    # -- loops ----------------------------------------------------------------------------

    def run(self) -> None:
        """Poll until :meth:`stop` (or Ctrl-C). Never raises out of a poll."""
        self._relaying = True
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # a relay must outlive any one bad poll
                self._publish(f"relay error: {exc!r}")
            self._first_look.set()
            self._stop.wait(self.poll_interval)

    def start(self, elect: bool = False, first_look_s: float = FIRST_LOOK_S) -> Relay:
        """Run in a daemon thread. With ``elect``, only one process per node and job relays:
        the thread first waits for a node-local lock, so another process takes over when
        the relaying one exits.

        Returns once the relay has looked at the file (at most ``first_look_s``), or at once
        where another process holds the lock: a window the file asks for before training
        starts is then in the segment before the first step ends, as with MindSpore's
        monitor, whose helper process reads the file as it starts."""
        target = self._run_elected if elect else self.run
        self._thread = threading.Thread(target=target, name="dynprof_nb-relay", daemon=True)
        self._thread.start()
        self._first_look.wait(first_look_s)
        return self

    def stop(self) -> None:
        """End the loop (and detach from the job if this relay attached it)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5 * self.poll_interval + 1)
            if self._own_job and not self._thread.is_alive():
                self.job.close()
        with self._poll_lock:
            self.watch.close()
            if self._state_fd >= 0:
                os.close(self._state_fd)
                self._state_fd = -1

    def _run_elected(self) -> None:
        try:
            with relay_lock(self.job.name, self._stop, on_wait=self._first_look.set) as acquired:
                if acquired:
                    self.run()
        except Exception as exc:
            self._first_look.set()
            log.warning("dynprof_nb relay for job %r stopped: %r", self.job.name, exc)

    def __repr__(self) -> str:
        return (
            f"<Relay {self.path} -> job {self.job.name!r} every {self.poll_interval} s"
            f"{', error: ' + self.error if self.error else ''}>"
        )


@contextlib.contextmanager
def relay_lock(
    job: str,
    stop: threading.Event | None = None,
    check: float = 0.25,
    on_wait: Callable[[], object] | None = None,
) -> Iterator[bool]:
    """Hold the node-local relay lock of ``job``: waits until it is free (yields True) or
    ``stop`` is set (yields False). ``on_wait`` is called once if the lock is held elsewhere.

    The kernel drops an ``flock`` when its process dies, so a crashed relay never blocks the
    next one. The lock file is in this user's private lock directory (see
    :mod:`dynprof_nb.locks`), so no other user can plant it or hold it; while another relay
    holds it, the log says which process, once.
    """
    name = job_lock_name(job, "lock")
    fd = open_lock(name)
    try:
        acquired, told = False, ""
        while not acquired:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                acquired = still_named(fd, name)
                if not acquired:  # its holder left and removed it: lock the fresh one
                    os.close(fd)
                    fd = -1
                    fd = open_lock(name)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                    on_wait = None
                who = holder(fd) or "another process"
                if who != told:
                    told = who
                    log.warning(
                        "dynprof_nb relay for job %r: standby, %s relays it on this "
                        "node; taking over when it stops.",
                        job,
                        who,
                    )
                if stop is not None and stop.wait(check):
                    break
                if stop is None:
                    time.sleep(check)
        yield acquired
    finally:
        if acquired:  # the holder leaving removes the file; a standby opens a fresh one
            drop_lock(fd, name)
        elif fd >= 0:
            os.close(fd)


def parse_config(data: bytes, path: os.PathLike[str] | str) -> tuple[ProfilerConfig, str]:
    """The config in a file's bytes, and what is worth a warning (unknown keys, which are
    ignored as MindSpore does). Raises :class:`ConfigError` for what cannot be used, a
    half-written file included (a truncated JSON object never parses)."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text ({exc.reason}).") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}. "
            "Fix the file; the last good config stays in force."
        ) from None
    if not isinstance(raw, dict):
        return ProfilerConfig.from_dict(raw), ""  # raises with what it got
    known = set(ProfilerConfig.keys())
    unknown = sorted(k for k in raw if k not in known and k != "is_valid")
    cfg = ProfilerConfig.from_dict({k: v for k, v in raw.items() if k in known})
    return cfg, unknown_keys_message(unknown) + " They are ignored." if unknown else ""


def _config_or_none(data: Any) -> ProfilerConfig | None:
    try:
        return ProfilerConfig.from_dict(data) if isinstance(data, dict) else None
    except (ConfigError, ValueError):
        return None


def _window_text(cfg: ProfilerConfig | None) -> str:
    return (
        str(StepWindow(cfg.start_step, cfg.stop_step)) if cfg is not None and cfg.has_window else ""
    )


def _error_of(note: str) -> str:
    try:
        return json.loads(note).get("error", "") if note else ""
    except ValueError:
        return ""


def start_from_file(job: Job, cfg: ProfilerConfig) -> int:
    """Write a window read from a MindSpore ``profiler_config.json`` with file mode's rule: a
    rank that gets it after the window's first step has begun starts it at its next step,
    with the same length, and says so (MindSpore's own ``step()`` does the same; an edit of a
    file cannot be timed to a step). Refused only when every live rank has passed its last
    step. ``(-1, -1)`` is a stop."""
    if not cfg.has_window:
        return job.publish("stop", cfg)
    refuse_ended(job.live_slots(), cfg)
    return job.publish("start", cfg, late="shift")
