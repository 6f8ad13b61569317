"""Is a process still running, by its pid: one answer for every part that judges a writer, a
rank or a scratch directory's owner by the pid it recorded.

A zombie has ended: it runs nothing and holds nothing, and its parent may reap it only later
(a process pool's manager thread on a loaded machine), so ``os.kill(pid, 0)``, which succeeds on
it, is not enough. A pid of another user's process reads as alive (EPERM).
"""

from __future__ import annotations

import os

PID_LIMIT = 1 << 22  # the kernel's largest pid_max: a word above it is not a pid


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (or runs as another user); False once it has ended, a zombie
    included, and for a number that cannot be a pid (garbage must not reach ``os.kill``)."""
    if not 0 < pid <= PID_LIMIT:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not is_zombie(pid)


def is_zombie(pid: int) -> bool:
    """The process has exited and waits for its parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False
