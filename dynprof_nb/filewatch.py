"""Has ``profiler_config.json`` changed since it was last read? One ``fstat`` says.

File mode (the MindSpore drop-in, or any ``Monitor(cfg_path=...)``) promises that an edit
complete in the file before a rank's ``step()`` is seen by that ``step()``. A poll on a timer
cannot promise that (MindSpore's 2 s poll, our relay's 0.5 s one, lose its own documented
example when steps are short), and neither can inotify: its event is handled by some thread
at some later time, while the training thread may already be in ``step()``. So a file-mode
rank asks the kernel itself, on its own thread, at every step: :meth:`FileWatch.changed` is one
``fstat()`` of the file it keeps open (no path lookup; 1 to 2 µs here), compared with the
``(st_ctime_ns, st_size)`` it saw when it last read the file. Any write updates the ctime; a
file replaced by a rename (an editor, :meth:`ProfilerConfig.save`) or removed has its ctime
updated as its last link goes, so it is seen too, and the next read reopens the path.

Reads are whole or nothing (:meth:`FileWatch.read`): the file's stamp is taken before and
after the read, and a read during which it changed is given up (the next step reads again).
A non-atomic writer (``json.dump(data, open(path, "w"))``) shows an empty or partial file for a
moment: that is a parse error for the caller, which keeps the last good config; the writer's
next ``write()`` changes the size, so the whole file is read at the next step.

Timestamps are coarse (the kernel's tick, 1 to 10 ms; a second on some filesystems), so two
writes within one tick of the same size would show the same stamp. As git does for its index,
a file read within :data:`RACY_S` of its last change (:data:`RACY_COARSE_S` where the
filesystem keeps whole seconds) is not trusted: ``changed()`` says yes until a read finds it
older, and the caller compares contents, so nothing is ever relayed twice.

An edit from another host on NFS may not show in the local ``fstat`` until the attribute
cache expires (about 3 s): the relay's timed poll opens the file each time (which makes the
NFS client revalidate), so such an edit arrives within one poll.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

RACY_S = 0.1  # a file changed this recently may change again within its timestamp's tick
RACY_COARSE_S = 2.0  # the same where the filesystem keeps whole seconds (ext3, some NFS)
READ_LIMIT = 1 << 20  # more than any config: a bigger file is not read whole (an error)


class FileWatch:
    """The rank's view of one config file: :meth:`changed` per step, :meth:`read` on change.

    Not thread-safe by itself: the relay calls :meth:`read` under its lock; ``changed()`` is
    only ever a hint (a stale answer means one more read, never a missed edit). While
    :attr:`relaying` (another thread of the process has read a change and not yet written it
    into the job) it says yes: the step then waits for that write (the relay's lock) instead
    of going on without the edit."""

    __slots__ = ("path", "_fd", "_ctime", "_size", "_racy", "_missing", "relaying")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(Path(path))
        self._fd = -1  # the file as last read; -1 before the first read or while it is missing
        self._ctime = -1
        self._size = -1
        self._racy = False  # the stamp is too recent to be trusted (see the module doc)
        self._missing = False  # the last read found no file: only its appearance is news
        # a relay is between reading a change and writing it into the job (Relay.poll sets
        # it): the file no longer reads as changed, but the job does not have the edit yet
        self.relaying = False

    def changed(self) -> bool:
        """True when the file may differ from what :meth:`read` last returned (the hot path:
        one ``fstat``, never raises)."""
        if self._racy or self.relaying:
            return True
        if self._fd < 0:  # not read yet, or no file: one stat of the path until there is
            return not self._missing or os.path.exists(self.path)
        try:
            st = os.fstat(self._fd)
        except OSError:  # closed under us by a read on another thread: read again
            return True
        return st.st_ctime_ns != self._ctime or st.st_size != self._size or not st.st_nlink

    def read(self) -> bytes | None:
        """The file's bytes, read whole, or None when it changed during the read (try again
        at the next step). Raises ``OSError`` (``FileNotFoundError``...) as ``open`` does."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self._forget()
            self._missing = isinstance(exc, FileNotFoundError)
            raise
        try:
            before = os.fstat(fd)
            if before.st_size > READ_LIMIT:
                raise ValueError(
                    f"{self.path} is {before.st_size} bytes; a profiler config is at most "
                    f"{READ_LIMIT} (is it the right file?)."
                )
            data = os.read(fd, READ_LIMIT)
            while len(data) < before.st_size and len(data) < READ_LIMIT:  # a short read
                more = os.read(fd, READ_LIMIT - len(data))
                if not more:
                    break
                data += more
            after = os.fstat(fd)
        except ValueError:
            self._keep(fd, before.st_ctime_ns, before.st_size)  # not read again until it changes
            raise
        except BaseException:
            os.close(fd)
            raise
        if (before.st_ctime_ns, before.st_size) != (after.st_ctime_ns, after.st_size) or len(
            data
        ) != after.st_size:
            self._keep(fd, -1, -1)  # written while we read: read it again at the next step
            return None
        self._keep(fd, before.st_ctime_ns, before.st_size)
        racy = RACY_COARSE_S if before.st_ctime_ns % 1_000_000_000 == 0 else RACY_S
        # abs(): a file server's clock ahead of ours is not "recent" for ever (its edits
        # arrive by the relay's poll in any case)
        self._racy = abs(time.time_ns() - before.st_ctime_ns) < racy * 1e9
        return data

    def _keep(self, fd: int, ctime: int, size: int) -> None:
        """Watch ``fd`` from now on (the file the path names now), with its stamp."""
        old, self._fd = self._fd, fd
        if old >= 0 and old != fd:
            os.close(old)
        self._ctime, self._size, self._racy, self._missing = ctime, size, False, False

    def _forget(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._ctime, self._size, self._racy, self._missing = -1, -1, -1, False, False

    def close(self) -> None:
        self._forget()

    def __repr__(self) -> str:
        return f"<FileWatch {self.path} ctime={self._ctime} size={self._size}>"
