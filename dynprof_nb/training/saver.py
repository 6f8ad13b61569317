"""Writing a window in a forked child process, so the training process never pays for it.

A window's files are built from what the backend holds in memory. Built on a thread of the
training process, that work holds the GIL and slows training (a 20 s save cost 29% of the
throughput) and it dies with the process. Here the saver thread forks: the child gets a
copy-on-write snapshot of the recording, builds the files, publishes the window and reports
back through a pipe. The training process pays for the ``fork()`` (page tables, a few ms for
hundreds of MB) and nothing else.

The child is its own session and ignores SIGTERM, SIGINT and SIGHUP, so it outlives the job:
``Monitor.close()`` waits a bounded time, then leaves the rest to it and says so. The child
closes every inherited file descriptor (the segment, its locks, the job's sockets) so it
holds nothing of the job, and it leaves with ``os._exit`` (no atexit, no flushing of the
parent's buffers).
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynprof_nb.contract import window_dirs


@dataclass
class ChildSave:
    """A window being written by a forked child."""

    pid: int
    fd: int  # the read end of the child's result pipe
    forked_at: float  # time.monotonic()
    fork_s: float  # how long fork() held the saver thread (and the GIL)


def can_fork() -> bool:
    return hasattr(os, "fork")


def fork_save(backend: Any, directory: Path, manifest: dict[str, Any]) -> ChildSave:
    """Fork a child that runs ``backend.save()``, then publishes ``manifest`` (complete)."""
    read_fd, write_fd = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, reported through the pipe
        _child(backend, directory, manifest, write_fd)
    fork_s = time.perf_counter() - t0
    os.close(write_fd)
    return ChildSave(pid, read_fd, time.monotonic(), fork_s)


def wait(child: ChildSave, timeout: float) -> dict[str, Any] | None:
    """The child's result (``{"path": ...}`` or ``{"error": ..., "path": ...}``), or None
    while it is still writing after ``timeout`` seconds. Waiting does not hold the GIL."""
    ready, _, _ = select.select([child.fd], [], [], max(0.0, timeout))
    if not ready:
        return None
    chunks = []
    while True:
        data = os.read(child.fd, 65536)
        if not data:
            break
        chunks.append(data)
    os.close(child.fd)
    _, status = os.waitpid(child.pid, 0)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        how = (
            f"was killed by signal {os.WTERMSIG(status)}"
            if os.WIFSIGNALED(status)
            else f"exited with status {os.waitstatus_to_exitcode(status)}"
        )
        return {
            "error": f"the window's writer process (pid {child.pid}) {how} before finishing",
            "path": None,
        }


def _child(
    backend: Any, directory: Path, manifest: dict[str, Any], write_fd: int
) -> None:  # pragma: no cover - runs in the child
    result: dict[str, Any]
    try:
        gc.disable()  # a collection would touch (and so copy) every page of the snapshot
        os.setsid()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        os.closerange(3, write_fd)
        os.closerange(write_fd + 1, 1 << 16)
        t0 = time.perf_counter()
        backend.save()
        written = dict(
            manifest,
            status="complete",
            writer_pid=os.getpid(),
            write_s=round(time.perf_counter() - t0, 3),
        )
        result = {"path": str(window_dirs.publish(directory, written))}
    except BaseException as exc:
        reason = f"{type(exc).__name__}: {exc}"
        try:
            kept = window_dirs.mark_failed(directory, reason, manifest)
        except BaseException:
            kept = directory
        result = {"error": reason, "path": str(kept)}
    try:
        os.write(write_fd, json.dumps(result).encode())
    finally:
        os._exit(0)
