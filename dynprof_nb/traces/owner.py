"""Transient directories that say which process made them, so a later load can remove those a
killed process left (SIGKILL, the OOM killer: no ``finally`` runs) as soon as it has ended,
not after an age that must also outlast the slowest live load.

A name carries ``<host>-<pid>-``; :func:`ended` reads it back. The host keeps a directory on a
disk that several machines share (an NFS home's cache) from being judged by a pid of another
machine; a pid another process took since reads as alive, so such a directory waits for the
caller's age rule instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
from pathlib import Path

from dynprof_nb.pids import PID_LIMIT, pid_alive

HOST = socket.gethostname().replace("-", "_")[:32]


def owner_tag() -> str:
    """``<host>-<pid>``: this process, as :func:`ended` reads it."""
    return f"{HOST}-{os.getpid()}"


def ended(tail: str) -> bool | None:
    """For ``tail``, a name's part from its :func:`owner_tag` on (``<host>-<pid>-...``): True
    when that process, on this host, has ended; False while it runs (or runs as another
    user); None when this cannot tell (another host's, or not such a name)."""
    host, _, rest = tail.partition("-")
    pid, sep, _ = rest.partition("-")
    if host != HOST or not sep or not (pid.isascii() and pid.isdigit()):
        return None
    if not 0 < int(pid) <= PID_LIMIT:  # (os.kill overflows past a C int)
        return None
    return not pid_alive(int(pid))  # a zombie has ended: its parent may reap it only later


def sweep(parent: str | Path, prefix: str) -> int:
    """Remove the directories in ``parent`` named ``<prefix><host>-<pid>-...`` whose process
    has ended (how many): never a symlink, never another user's."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    except OSError:
        return 0
    removed = 0
    for name in names:
        if ended(name[len(prefix) :]) is not True:
            continue
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():  # lstat: not a symlink
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed
