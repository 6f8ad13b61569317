"""The rank side of ``job.stacks()``: a faulthandler dump of every thread on a signal.

A rank stuck in C code (a collective wait, ``time.sleep``, a blocking read, a C-level
deadlock) never calls ``step()`` again and may never release the GIL, so nothing that needs
the main thread or the GIL can say where it is. CPython's :mod:`faulthandler` can: its signal
handler walks every thread's frames and writes them with ``write(2)``, without the GIL. At
Monitor start each process registers it once for :data:`STACK_SIGNAL`, writing into a file it
opens then (``O_APPEND``, so after the controller truncates the file the next dump starts at
its beginning). Nothing is added to ``step()``.

The signal is ``SIGRTMIN+7`` (41 on Linux/glibc). Real-time signals are used by none of torch
elastic (SIGTERM, SIGINT, SIGHUP, SIGQUIT), SLURM (SIGTERM, SIGUSR1/2 via ``--signal``,
SIGCONT, SIGKILL), MindSpore (SIGTERM, SIGINT, SIGSEGV...) or glibc (which reserves the two
below SIGRTMIN). The handler is registered with ``chain=False``: chaining would re-raise the
signal to the previous disposition, which for an unused real-time signal is the default
action, *terminate*. If something else already catches the signal the handler is not
installed (stacks are then unavailable for that rank; training is untouched), and a
controller only ever signals a process whose ``/proc/PID/status`` shows the signal caught and
whose dump file exists, so a process without the handler is never killed by it.

The process is the job's, not ours: the dump's descriptor is an
:class:`~dynprof_nb.ownfd.OwnedFd` (a high, close-on-exec number). A job that closes it
(``os.closerange``) and opens its own file on the number would get the next dump written into
that file, so the recorder thread checks it every :data:`GUARD_S` and, once it is not ours,
opens the dump file again and points the registration at the new descriptor (saying so once).
A job that installs its own handler for the signal after the Monitor started (``signal.signal``
or a C library's ``sigaction``) must not have it run by ``job.stacks()``: the same check
compares the signal's handler with faulthandler's, as registered, and the side file says
``handler`` is no longer ours; the controller then refuses with that reason. The side file
also names the dump's descriptor and file, so a controller signals only while
``/proc/PID/fd/N`` is the dump file (between two checks as well).

Thread names cannot be read in a signal handler (that needs the GIL), so a small daemon thread
writes ``{ident: name}`` into a side file once a second when it changed, together with the
rank's step, when that step last changed and the median recent step time (what the controller
uses to say a job has stalled; see :mod:`dynprof_nb.control.stacks`).

Files live in a private per-user directory (``/dev/shm/dynprof_nb.<uid>/stacks``, mode 0700,
owner-checked, never followed through a symlink): ``<pid>.<start>.stack`` (the dump) and
``<job>.<rank>.<pid>.json`` (the side file). The directory, the file names and the signal are
the contract with the controller, in :mod:`dynprof_nb.contract.shared_layout`.
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import logging
import os
import signal
import statistics
import sys
import threading
import time
import traceback
from collections import deque
from pathlib import Path
from typing import Any

from dynprof_nb.contract.shared_layout import STACK_SIGNAL, catches, dump_name, side_name, stack_dir
from dynprof_nb.ownfd import OwnedFd

log = logging.getLogger("dynprof_nb")

RECORD_EVERY_S = 1.0  # how often the side file is refreshed (when something changed)
GUARD_S = 0.2  # how often the dump's descriptor and the signal's handler are checked
MAX_DUMP_THREADS = 100  # faulthandler's limit: past it, the main thread (the oldest) is cut


def _main_stack() -> dict[str, Any]:
    """The main thread's frames (outermost first) and when they were taken: recorded only
    in a process with more threads than faulthandler writes, where its dump leaves out the
    main thread (the oldest), so ``job.stacks()`` can still show it, saying how old it is."""
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    if frame is None:
        return {}
    stack = [[f.name, f.filename, f.lineno] for f in traceback.extract_stack(frame)]
    return {"main_stack": stack, "main_stack_mono": time.monotonic()}


STEP_TIMES = 64  # the recent step times the median is taken over


def _start_time() -> int:
    from dynprof_nb.contract.segment import pid_start_time

    return pid_start_time(os.getpid())


class _Handler:
    """The process's one registration (several Monitors in one process share it)."""

    def __init__(self) -> None:
        self.users = 0
        self.own: OwnedFd | None = None  # the dump file's descriptor, as registered
        self.path: Path | None = None
        self.address: int | None = None  # the signal's handler as faulthandler installed it
        self.problem = ""  # why job.stacks() must not signal this process ("" when it may)

    @property
    def fd(self) -> int:
        return self.own.fd if self.own is not None else -1


_HANDLER = _Handler()
_LOCK = threading.Lock()


_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def handler_address(signum: int = STACK_SIGNAL) -> int | None:
    """The address of the process's handler for ``signum`` (``sigaction``'s first field, as in
    glibc's and musl's ``struct sigaction``), or None where it cannot be read."""
    try:
        libc = _LIBC or _libc()
        old = ctypes.create_string_buffer(512)  # larger than any libc's struct sigaction
        if libc.sigaction(int(signum), None, old) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return int.from_bytes(old.raw[: ctypes.sizeof(ctypes.c_void_p)], sys.byteorder)


def _open_dump(path: Path, truncate: bool) -> OwnedFd:
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags | (os.O_TRUNC if truncate else 0), 0o600)
    return OwnedFd(fd, "the stack-dump file")


def guard() -> str:
    """Check the registration (from the recorder thread): a dump descriptor the job closed or
    reused is replaced and the registration follows it; a handler the job put in place of
    faulthandler's is left alone and named. Returns why this process must not be signalled
    now ("" when it may be); a change is logged once."""
    with _LOCK:
        h = _HANDLER
        if not h.users or h.own is None or h.path is None:
            return h.problem
        problem = ""
        now = handler_address()
        python_handler = signal.getsignal(STACK_SIGNAL)
        if (now is not None and h.address is not None and now != h.address) or callable(
            python_handler
        ):
            problem = (
                f"the job installed its own handler for signal {int(STACK_SIGNAL)} after the "
                "Monitor started; not signalled (it would run the job's handler, not "
                "dynprof_nb's stack dump)"
            )
        elif not h.own.mine():
            old = h.own.fd
            try:
                new = _open_dump(h.path, truncate=False)
                faulthandler.register(STACK_SIGNAL, file=new.fd, all_threads=True, chain=False)
            except (OSError, RuntimeError, ValueError) as exc:
                problem = (
                    f"its stack-dump descriptor was closed under it and cannot be reopened ({exc})"
                )
            else:
                h.own = new
                log.warning(
                    "dynprof_nb: the stack-dump descriptor %d was closed under the process "
                    "(os.closerange?); reopened %s as %d for job.stacks()",
                    old,
                    h.path,
                    new.fd,
                )
        if problem and problem != h.problem:
            log.warning("dynprof_nb: job.stacks() will not signal this process: %s", problem)
        h.problem = problem
        return problem


def install() -> Path | None:
    """Register the dump handler for this process (once; counted); the dump file's path, or
    None when it cannot be installed (the reason is logged once, training goes on)."""
    with _LOCK:
        if _HANDLER.users:
            _HANDLER.users += 1
            return _HANDLER.path
        try:
            if _HANDLER.fd < 0 and catches("self"):
                raise RuntimeError(
                    f"signal {STACK_SIGNAL} already has a handler in this process; not replacing it"
                )
            if _HANDLER.address is not None and handler_address() != _HANDLER.address:
                raise RuntimeError(  # registered by an earlier Monitor, replaced by the job since
                    f"the job installed its own handler for signal {STACK_SIGNAL}; not using it"
                )
            directory = stack_dir()
            _sweep(directory)
            path = directory / dump_name(os.getpid(), _start_time())
            own = _open_dump(path, truncate=True)
            try:
                faulthandler.register(STACK_SIGNAL, file=own.fd, all_threads=True, chain=False)
            except Exception:
                own.close()
                raise
        except Exception as exc:
            log.warning("dynprof_nb: job.stacks() will not see this process: %s", exc)
            return None
        if _HANDLER.own is not None:  # registered by an earlier Monitor: now the new fd
            _HANDLER.own.close()
        _HANDLER.users, _HANDLER.own, _HANDLER.path = 1, own, path
        if _HANDLER.address is None:  # faulthandler's, as it installed it the first time
            _HANDLER.address = handler_address()
        _HANDLER.problem = ""
        return path


def uninstall() -> None:
    """Drop one use; the last one removes the dump file, so no controller signals this
    process any more. The handler and its descriptor stay for the process's life: a signal
    sent just before the file went must not meet the default action (terminate), and the
    descriptor's number must not be reused by a file the handler would then write into."""
    with _LOCK:
        if not _HANDLER.users:
            return
        _HANDLER.users -= 1
        if not _HANDLER.users:
            _unlink(_HANDLER.path)
            _HANDLER.path = None


def _sweep(directory: Path) -> None:
    """Remove files left by processes that died without closing (their pid is gone)."""
    from dynprof_nb.contract.segment import pid_alive

    for entry in os.scandir(directory):
        parts = entry.name.split(".")
        pid = parts[0] if entry.name.endswith(".stack") else parts[-2] if len(parts) > 2 else ""
        if pid.isdigit() and not pid_alive(int(pid)):
            _unlink(Path(entry.path))


def _unlink(path: Path | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass


class StackRecorder:
    """The side file of one Monitor: thread names, the step and its recent timing.

    A daemon thread reads ``monitor.step_count`` once a second (no cost to ``step()``) and
    rewrites the file only when the step or the threads changed, so a stalled rank writes
    nothing. Step times are the time between two observed changes divided by the steps made.
    """

    def __init__(self, monitor: Any) -> None:
        self.monitor = monitor
        self.dump = install()
        self.path: Path | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.dump is None:
            return
        self.path = self.dump.parent / side_name(monitor.job, monitor.rank, os.getpid())
        self._times: deque[float] = deque(maxlen=STEP_TIMES)
        self._last = (monitor.step_count, time.monotonic(), time.time())
        self._written: Any = None
        self._guarded = (_HANDLER.problem, _HANDLER.fd)
        self._write()
        self._thread = threading.Thread(target=self._run, name="dynprof_nb-stacks", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        due = time.monotonic() + RECORD_EVERY_S
        while not self._stop.wait(GUARD_S):
            try:
                problem, fd = guard(), _HANDLER.fd
                if time.monotonic() >= due or (problem, fd) != self._guarded:
                    due = time.monotonic() + RECORD_EVERY_S
                    self._observe()
            except Exception as exc:  # the recorder never takes the rank down
                log.debug("dynprof_nb stack recorder: %r", exc)

    def _observe(self) -> None:
        n = self.monitor.step_count
        last_n, last_mono, _ = self._last
        if n != last_n:
            now = time.monotonic()
            if n > last_n:
                self._times.append((now - last_mono) / (n - last_n))
            self._last = (n, now, time.time())
        self._write()

    def record(self) -> dict[str, Any]:
        n, mono, wall = self._last
        threads = {str(t.ident): t.name for t in threading.enumerate() if t.ident}
        extra: dict[str, Any] = {}
        if len(threads) > MAX_DUMP_THREADS:
            extra = _main_stack()
        return {
            **extra,
            "job": self.monitor.job,
            "rank": self.monitor.rank,
            "pid": os.getpid(),
            "main": str(threading.main_thread().ident),
            "threads": threads,
            "step": n,
            "last_step_mono": mono,
            "last_step_wall": wall,
            "step_s": statistics.median(self._times) if self._times else None,
            "signal": int(STACK_SIGNAL),
            "dump": str(self.dump),
            "dump_fd": _HANDLER.fd,  # a controller signals only while /proc/PID/fd/N is it
            "handler": _HANDLER.problem or "ok",
        }

    def _write(self) -> None:
        rec = self.record()
        if rec == self._written:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(rec, fh)
        os.replace(tmp, self.path)
        self._written = rec
        self._guarded = (rec["handler"] if rec["handler"] != "ok" else "", rec["dump_fd"])

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        if self.dump is not None:
            _unlink(self.path)
            uninstall()
            self.dump = None
