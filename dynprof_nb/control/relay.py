"""The relay: mirror a MindSpore ``profiler_config.json`` into a job segment.

This is the role of MindSpore's own DynamicProfilerMonitor process: a hand-edited file, or one on a
shared filesystem read by one relay per node, drives the job. Unlike the original it writes
through :class:`~dynprof_nb.job.Job`, so the file is validated once, here, and an invalid file
never replaces the last good config: the relay keeps it and publishes the error in the job
segment's helper note, which ``job.status()`` shows as a row with ``rank`` -1 and ``state``
``relay``.

What a change of the file means:

* a new ``(start_step, stop_step)`` pair: ``job.start_from_file`` (``job.stop`` when it is
  -1, -1), with the other keys in the same write. This is file mode: a window whose first
  step has begun when it reaches a rank starts at that rank's next step with the same length
  and says so in the status and the window's manifest, whose directory keeps the name of the
  window asked for (MindSpore's own ``step()`` does the same; a hand edit cannot be timed to a
  step). Windows asked for from a notebook stay exact;
* the same pair with other keys changed: ``job.set`` (the window is *not* armed again, as in
  MindSpore, where the same pair never triggers twice);
* the relay's first look at a file without a window: ``job.set`` of its keys (a window asked
  for from a notebook keeps running).

Poll interval: :data:`POLL_INTERVAL_S` = 0.5 s. A poll is one ``stat()`` of one file (a few
microseconds on a local disk, one attribute lookup on NFS, which caches attributes for about
3 s anyway), so polling four times as often as the original's 2 s costs nothing measurable,
and an edit reaches the ranks within 0.5 s plus one step instead of 2 s plus one step. Faster
polling would buy little: the person editing the file is slower than that, and windows are
asked for a few steps ahead.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator

from dynprof_nb.config import ConfigError, ProfilerConfig, config_file
from dynprof_nb.control.job import Job
from dynprof_nb.locks import holder, open_lock
from dynprof_nb.segment import pid_start_time

log = logging.getLogger("dynprof_nb")

POLL_INTERVAL_S = 0.5
FIRST_LOOK_S = 2.0  # the most Relay.start() waits for its first look at the file
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
        self._stamp: tuple[int, int, int] | None = None
        self._note = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._first_look = threading.Event()  # set once this relay polled (or lost the election)

    # -- one poll -------------------------------------------------------------------------

    def poll(self) -> bool:
        """Relay the file if it changed since the last look; True when the job was written."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._publish(f"waiting for {self.path} (no such file yet)")
            return False
        except OSError as exc:
            self._publish(f"cannot read {self.path}: {exc.strerror}; keeping the last good config.")
            return False
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._stamp:
            self._publish(self.error)
            return False
        self._stamp = stamp
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                cfg = ProfilerConfig.load(self.path)
            wrote = self._apply(cfg)
        except (ConfigError, ValueError, RuntimeError) as exc:
            self._stamp = None  # read it again next poll: a writer may still be mid-write
            self._publish(f"{self.path}: {exc} Keeping the last good config.")
            return False
        notes = "; ".join(str(w.message) for w in caught)
        self._publish(f"warning: {notes}" if notes else "")
        return wrote

    def _apply(self, cfg: ProfilerConfig) -> bool:
        data = cfg.to_dict()
        rest = {k: v for k, v in data.items() if k not in WINDOW_KEYS}
        last = self.last
        window = (cfg.start_step, cfg.stop_step)
        if last is not None and window == (last.start_step, last.stop_step):
            changed = {k: v for k, v in rest.items() if last.to_dict()[k] != v}
            gen = self.job.set(**changed) if changed else 0
        elif last is None and not cfg.has_window:
            gen = self.job.set(**rest)
        else:
            gen = self.job.start_from_file(cfg)  # start (or stop for -1, -1), file mode
        self.last = cfg
        if gen:
            self.generation = gen
            log.info("dynprof_nb relay: %s -> job %r generation %d", self.path, self.job.name, gen)
        return bool(gen)

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
            self.job.write_note(note)
            self._note = note
        else:
            self.job.beat_note()

    # -- loops ----------------------------------------------------------------------------

    def run(self) -> None:
        """Poll until :meth:`stop` (or Ctrl-C). Never raises out of a poll."""
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
    fd = open_lock(f"relay.{job}.lock")
    try:
        acquired, told = False, ""
        while not acquired:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                acquired = True
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
        os.close(fd)


def _window_text(cfg: ProfilerConfig | None) -> str:
    return f"{cfg.start_step}-{cfg.stop_step}" if cfg is not None and cfg.has_window else ""


def _error_of(note: str) -> str:
    try:
        return json.loads(note).get("error", "") if note else ""
    except ValueError:
        return ""
