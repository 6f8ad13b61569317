"""Who a node is and which agent speaks for it (no Dask here).

A *node* is a shared-memory domain: the ranks and the agent that see the same ``/dev/shm``. Its
key is the host name plus the device number of the ``/dev/shm`` mount, so two containers (or two
simulated nodes, each with a private tmpfs) on one host are two nodes, and two Dask workers on one
node are one. Of those workers exactly one agent acts (``ElectionLock``): the kernel drops an
``flock`` when its holder dies, so a standby takes over at its next beat.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket

from dynprof_nb.locks import LockError, holder, open_lock, private_dir

log = logging.getLogger("dynprof_nb")

SHM_DIR = "/dev/shm"
NODE_ENV = "DYNPROF_NODE"


def node_key() -> str:
    """``host:major:minor`` of this process's ``/dev/shm``: the same for every process that
    shares the node's job segments, different on any other node."""
    try:
        dev = os.stat(SHM_DIR).st_dev
        where = f"{os.major(dev)}:{os.minor(dev)}"
    except OSError:
        where = "noshm"
    return f"{socket.gethostname()}:{where}"


def node_name(worker_name: object = None) -> str:
    """The name people see in the ``node`` column: ``$DYNPROF_NODE``, else the Dask worker's
    ``--name`` when it is a word (not an address or a LocalCluster index), else the host name."""
    name = os.environ.get(NODE_ENV, "").strip()
    if name:
        return name
    if isinstance(worker_name, str) and worker_name and "://" not in worker_name:
        return worker_name
    return socket.gethostname()


class ElectionLock:
    """One agent per node: a non-blocking ``flock`` on a file in this user's private lock
    directory in the node's ``/dev/shm`` (see :mod:`dynprof_nb.locks`: nobody else can plant,
    follow or hold it). The holder removes the file when it lets go, so a node keeps nothing
    once its agents stop; a standby that then wins the lock on the removed file sees it is no
    longer the named one and tries again on a fresh file (the usual lock-then-check-the-name
    dance). ``why`` says why this agent is not acting (who holds the lock, or what is wrong
    with the directory), for the standby's answer and the log."""

    NAME = "agent.lock"

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory
        if directory is None:
            try:
                directory = private_dir(SHM_DIR)
            except LockError:  # no private directory to be had: try_acquire says why
                directory = os.path.join(SHM_DIR, f"dynprof_nb.{os.getuid()}")
        self.path = os.path.join(directory, self.NAME)
        self._fd = -1
        self.held = False
        self.why = ""

    def try_acquire(self) -> bool:
        """True when this agent is (now) the node's one acting agent."""
        if self.held:
            return True
        for _ in range(3):  # the holder may remove the file between our open and our flock
            try:
                if self._fd < 0:
                    self._fd = open_lock(self.NAME, self.directory)
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                who = holder(self._fd)
                self._say(
                    f"standby: the node's agent lock {self.path} is held by "
                    f"{who or 'another process'}"
                )
                return False
            except (OSError, LockError) as exc:
                self._say(f"cannot take the node's agent lock: {exc}")
                return False
            if self._names_our_file():
                self.held, self.why = True, ""
                return True
            os.close(self._fd)  # we locked a removed file: open the current one
            self._fd = -1
        return False

    def _say(self, why: str) -> None:
        """Keep ``why``; log it when it changes (a standby is told once, not every beat)."""
        if why != self.why:
            self.why = why
            log.warning("dynprof_nb agent (pid %d): %s", os.getpid(), why)

    def _names_our_file(self) -> bool:
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(self._fd)
        return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)

    def release(self) -> None:
        if self._fd >= 0:
            if self.held:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)  # still ours: nobody else can hold it
            os.close(self._fd)  # closing the descriptor drops the lock
        self._fd, self.held = -1, False
