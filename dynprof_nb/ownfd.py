"""Descriptors the profiler owns inside someone else's process, and can tell are still its own.

A training rank is the job's process, not ours. Daemonising code and some launchers call
``os.closerange(3, N)`` and then open their own files, which get the lowest free numbers: the
numbers the Monitor opened its segment, doorbell and stack-dump file on. Writing to or closing
a raw fd number after that lands in the job's data file (the tester saw slot words and a
faulthandler dump in it, and the job's fd 3 closed under it). So every descriptor the
Monitor keeps is an :class:`OwnedFd`:

* moved to a high number (``F_DUPFD_CLOEXEC`` from :data:`FLOOR`, or lower when the process
  may not have that many), out of the range a job's own ``open()`` reuses, and close-on-exec
  so a job's ``exec`` never inherits it;
* remembered by the file it names (``st_dev``, ``st_ino`` at open): :meth:`OwnedFd.get`
  checks with one ``fstat`` that the number still names that file before every use, and
  raises :class:`FdLost` (an ``OSError``, which every caller already survives) when it does
  not: closed under us, or reused by a file of the job's;
* closed only while it is still ours (:meth:`OwnedFd.close`): never someone else's file.

A check and the use that follows are two system calls, so a job that closes and reopens the
number from another thread between them could still race it; the high number makes that
require the job to open a thousand files at that very moment.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import resource
import sys

FLOOR = 1000  # the lowest number an owned descriptor is moved to


class FdLost(OSError):
    """An owned descriptor no longer names its file (closed, or reused by the job)."""

    def __init__(self, what: str, fd: int) -> None:
        super().__init__(
            errno.EBADF,
            f"{what}'s descriptor {fd} was closed under the process (os.closerange?) or now "
            "names another file; not touching it",
        )


def floor() -> int:
    """:data:`FLOOR`, or lower when ``RLIMIT_NOFILE`` would not allow it (keep 32 free above)."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (OSError, ValueError):
        return 10
    if soft == resource.RLIM_INFINITY or soft > FLOOR + 32:
        return FLOOR
    return max(10, soft // 2)


def move_high(fd: int) -> int:
    """``fd`` duplicated to a high, close-on-exec number; the original is closed. Where that
    fails (no numbers left up there) the original is kept, made close-on-exec."""
    try:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor())
    except OSError:
        os.set_inheritable(fd, False)
        return fd
    os.close(fd)
    return high


class OwnedFd:
    """A descriptor of ours, checked before each use (see the module docstring)."""

    __slots__ = ("fd", "key", "what")

    def __init__(self, fd: int, what: str = "a dynprof_nb file") -> None:
        self.fd = move_high(fd)
        st = os.fstat(self.fd)
        self.key = (st.st_dev, st.st_ino)
        self.what = what

    def mine(self) -> bool:
        """The number is open and names the file it was opened on."""
        if self.fd < 0:
            return False
        try:
            st = os.fstat(self.fd)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.key

    def get(self) -> int:
        """The number, after checking it is still ours; :class:`FdLost` when it is not."""
        if not self.mine():
            raise FdLost(self.what, self.fd)
        return self.fd

    def close(self) -> bool:
        """Close it if it is still ours (True); a number now naming someone else's file is
        only forgotten."""
        fd, self.fd = self.fd, -1
        if fd < 0:
            return False
        try:
            st = os.fstat(fd)
        except OSError:
            return False
        if (st.st_dev, st.st_ino) != self.key:
            return False
        os.close(fd)
        return True


class StderrGuard(logging.Filter):
    """Keeps dynprof_nb's log lines out of a file of the job's that now sits on fd 2.

    ``os.closerange(0, N)`` closes stderr too, and the job's next ``open()`` lands on 0, 1
    and 2: a warning that went to ``sys.stderr`` (Python's last-resort handler, or a
    ``StreamHandler`` on it) would be written into the job's data file. The guard remembers
    the file fd 2 named when the first Monitor started; while fd 2 names another file (or
    none), a record that some handler would write to fd 2 is dropped. What the Monitor
    reports also goes to the rank's slot, where the notebook shows it."""

    def __init__(self) -> None:
        super().__init__("dynprof_nb")
        self.key = _key(2)

    def filter(self, record: logging.LogRecord) -> bool:
        if self.key is None or _key(2) == self.key:
            return True
        return not _reaches_fd2(logging.getLogger(record.name))


def _key(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _reaches_fd2(logger: logging.Logger) -> bool:
    handlers: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        handlers += current.handlers
        if not current.propagate:
            break
        current = current.parent
    if not handlers and logging.lastResort is not None:
        handlers = [logging.lastResort]
    for handler in handlers:
        stream = getattr(handler, "stream", None)
        if handler is logging.lastResort:
            stream = sys.stderr
        try:
            if stream is not None and stream.fileno() == 2:
                return True
        except (AttributeError, OSError, ValueError):
            continue
    return False


_GUARD: list[StderrGuard] = []


def guard_stderr() -> None:
    """Install the :class:`StderrGuard` on the ``dynprof_nb`` logger (once per process)."""
    if not _GUARD:
        _GUARD.append(StderrGuard())
        logging.getLogger("dynprof_nb").addFilter(_GUARD[0])
