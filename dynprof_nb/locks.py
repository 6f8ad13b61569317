"""Lock files nobody else can plant, follow or hold.

A lock file at a predictable name in a shared directory (``/tmp``, ``/dev/shm``) is an attack
surface: another local user can put a symlink there (root's agent then creates a file wherever
it points) or create the file and hold an ``flock`` on it (every agent waits in standby forever,
the file-mode relay never runs, and nobody is told). So every lock of dynprof_nb lives in one
private directory per user and node, ``/dev/shm/dynprof_nb.<uid>/`` (``/dev/shm`` because
what a lock elects is per node: the ranks and agents that share that ``/dev/shm``):

* created 0700; a directory already there is used only if it is a real directory (not a
  link), owned by us, and not open to others; anything else is a :class:`LockError` naming
  the path and its owner, never silently worked around;
* lock files are opened relative to that directory's descriptor with ``O_NOFOLLOW``;
* a lock someone holds is described (:func:`holder`: pid, uid and command from
  ``/proc/locks``), so a standby says whom it waits for.
"""

from __future__ import annotations

import errno
import os
import stat

SHM_DIR = "/dev/shm"
PREFIX = "dynprof_nb"


class LockError(RuntimeError):
    """The private lock directory is not ours: someone planted it (or a link) first."""


def private_dir(base: str = SHM_DIR) -> str:
    """``base/dynprof_nb.<uid>``, created 0700 if missing; raises LockError if what is there
    is not a directory of ours closed to others."""
    path = os.path.join(base, f"{PREFIX}.{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    fd = _open_dir(path)
    os.close(fd)
    return path


def _open_dir(path: str) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LockError(
                _foreign(path, "is not a directory (a planted symlink or file?)")
            ) from None
        raise
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        os.close(fd)
        raise LockError(
            f"dynprof_nb's private lock directory {path} belongs to uid "
            f"{st.st_uid} with mode {oct(stat.S_IMODE(st.st_mode))}; refusing to use "
            "it. Remove it (as its owner or root) and retry."
        )
    return fd


def _foreign(path: str, what: str) -> str:
    try:
        owner = f", owner uid {os.lstat(path).st_uid}"
    except OSError:
        owner = ""
    return (
        f"dynprof_nb's private lock directory {path} {what}{owner}; refusing to use it. "
        f"Remove it (as its owner or root) and retry."
    )


def open_lock(name: str, directory: str | None = None) -> int:
    """Open (creating, 0600) the lock file ``name`` in ``directory`` (default: the private
    directory), never through a symbolic link."""
    dir_fd = _open_dir(directory or private_dir())
    try:
        return os.open(
            name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LockError(
                f"the lock file {name} in {directory or private_dir()} is a "
                "symbolic link; refusing to follow it. Remove it."
            ) from None
        raise
    finally:
        os.close(dir_fd)


def holder(fd: int) -> str:
    """Who holds a lock on the file open as ``fd``: ``pid N (uid U: command)``, or ``""``
    when nobody is found (``/proc/locks`` shows pids of this pid namespace only)."""
    st = os.fstat(fd)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        parts = line.split()
        if "->" in parts:  # a waiter, not a holder
            continue
        if len(parts) >= 6 and parts[5] == key:
            return describe_pid(int(parts[4]))
    return ""


def describe_pid(pid: int) -> str:
    if pid <= 0:
        return "an open file of some process (an OFD lock, which names no pid)"
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:120]
    except OSError:
        return f"pid {pid}"
    return f"pid {pid} (uid {uid}: {cmd or '?'})"
