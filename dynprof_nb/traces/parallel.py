"""Load several ranks' events in parallel processes, frames coming back through tmpfs files.

The JSON decode holds the GIL, so ranks parse in forked processes, and the parent parses its own
share meanwhile rather than wait on an idle core: a 2-rank window on 2 cores forks one worker.
Ranks are shared out by file size, largest first onto the least loaded process.

Pickling a 300k-row events frame back costs about a quarter of its parse, so a worker writes the
frame's column buffers (categorical codes, int64 times, the step mask) raw to a file in a private
directory under /dev/shm (tmpfs: memory, not disk), and sends the parent, over a pipe only the
two share, just the layout, the small category tables, the rank's sources, traces and warnings
(as the process pool this replaces did), once its whole share is written, so it never waits on a
parent still parsing. The parent reads each column once into its own array and deletes the file.

Plain ``os.fork``, a pipe and files, no process pool or ``SharedMemory``: the pool costs its
start-up, its queue threads and a pickled job per rank, and in Python 3.11 every
``SharedMemory`` starts a resource-tracker interpreter in each process that creates or opens one
(three Python start-ups for a 2-rank window).

:func:`prime` shares other work out the same way (a multi-rank window's first passes): what it
leaves in the frame cache is what counts, and only small results come back over the pipes.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing import Pipe
from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.compat import categorical_from_codes
from dynprof_nb.traces import owner

Loaded = tuple[pd.DataFrame, dict, list]

#: seconds an interrupted caller's workers have to end on SIGINT before they are killed
STOP_GRACE_S = 2.0

#: the frame files' private directory: this, then :func:`.owner.owner_tag`, so the next load
#: removes one that a load killed mid-way (SIGKILL: no ``finally``) left in /dev/shm's memory
FRAMES_PREFIX = "dynprof_nb-frames-"


def load_events(
    children: list,
    load: Callable[[Any], Loaded],
    size: Callable[[Any], int] = lambda c: 1,
    max_procs: int | None = None,
    release: Callable[[Any], None] = lambda c: None,
) -> None:
    """Load the events of every child window that has none yet, spread over this process and
    forked workers. ``load(child)`` loads the child's events in the calling process and returns
    (events, sources, chrome traces); a worker's result is handed to the parent's child with
    ``child.adopt_events``. ``size(child)`` (bytes to parse) balances the shares;
    ``release(child)`` lets a worker drop a frame once written, so it holds one at a time. A
    child whose load failed is left unloaded: the caller loads it in-process, in order, where its
    error is raised with its own type and message. Warnings from workers are re-emitted here."""
    todo = [c for c in children if not c.loaded("events")]
    procs = min(len(todo), max_procs or _cores())
    if procs < 2 or not hasattr(os, "fork"):
        return
    shares = _shares([size(c) for c in todo], procs)
    need = sum(size(todo[i]) for s in shares[1:] for i in s) // 4  # a frame: ~1/10 of its JSON
    where = _scratch(need) or tempfile.gettempdir()
    owner.sweep(where, FRAMES_PREFIX)  # what a killed load left there: memory, on tmpfs
    tmp = tempfile.mkdtemp(prefix=f"{FRAMES_PREFIX}{owner.owner_tag()}-", dir=where)  # 0700

    def job(share: list[int], send: Any) -> None:  # the worker: never returns into the caller
        _work([(i, todo[i], os.path.join(tmp, str(i))) for i in share], load, release, send)

    try:
        with _workers(shares[1:], job) as pipes:
            for i in shares[0]:
                try:
                    load(todo[i])
                except Exception:  # noqa: BLE001  the caller loads it again, in order, and raises
                    break
            for recv in pipes:
                for i, head in _received(recv):
                    try:
                        ev = _read(os.path.join(tmp, str(i)), *head[:3])
                    except (OSError, EOFError, ValueError):  # as if this rank had failed
                        continue
                    sources, chrome, caught = head[3:]
                    for t in chrome:  # the frame travelled once; a one-trace window shares it
                        t.events = ev if len(chrome) == 1 else None
                    todo[i].adopt_events(ev, sources, chrome)
                    for msg, cat in caught:
                        warnings.warn(cat(msg), stacklevel=4)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prime(
    items: list,
    work: Callable[[Any], Any],
    size: Callable[[Any], int] = lambda c: 1,
    max_procs: int | None = None,
) -> list[Any]:
    """Run ``work(item)`` ahead of the caller, spread as :func:`load_events` spreads ranks, for
    what it leaves on disk (the first pass's frame-cache entries): the caller then does each
    item itself, in order, at the cost of reading what this left. A worker's changes to its
    items stay in its process; only the results (small, picklable) come back. Each item's
    result, None where ``work`` raised (the caller meets that error again, in order), its
    worker died, or nothing ran: with fewer than two processes the caller's own run is the
    serial one, and running ahead would only do the work twice."""
    out: list[Any] = [None] * len(items)
    procs = min(len(items), max_procs or _cores())
    if procs < 2 or not hasattr(os, "fork"):
        return out
    shares = _shares([size(c) for c in items], procs)

    def job(share: list[int], send: Any) -> None:  # the worker: never returns into the caller
        code = 0
        try:
            send.send([(i, _tried(work, items[i])) for i in share])
        except BaseException:  # noqa: BLE001  interrupted, or the parent has gone
            code = 2
        finally:
            os._exit(code)

    with _workers(shares[1:], job) as pipes:
        for i in shares[0]:
            out[i] = _tried(work, items[i])
        for recv in pipes:
            for i, got in _received(recv):
                out[i] = got
    return out


def _tried(work: Callable[[Any], Any], item: Any) -> Any:
    try:
        return work(item)
    except Exception:  # noqa: BLE001  the caller runs it again, where it raises
        return None


@contextmanager
def _workers(shares: list[list[int]], job: Callable[[list[int], Any], None]) -> Iterator[list]:
    """One forked worker per share, running ``job(share, send)`` (which must end its process:
    ``os._exit``, so nothing of the parent's, atexit hooks, buffered output, finalizers, runs
    twice); yields the pipes' read ends, in share order. On leaving, the workers are waited
    for, or, when the caller was interrupted, stopped (:func:`_stop`)."""
    pids: list[int] = []
    pipes = []
    try:
        for share in shares:
            recv, send = Pipe(duplex=False)
            pid = os.fork()
            if pid == 0:
                recv.close()
                job(share, send)
            pids.append(pid)
            send.close()
            pipes.append(recv)
        yield pipes
        while pids:
            try:
                os.waitpid(pids[0], 0)
            except ChildProcessError:  # reaped already (a SIGCHLD handler of the application)
                pass
            pids.pop(0)
    finally:
        for recv in pipes:
            recv.close()
        _stop(pids)  # interrupted: stop the workers we started


def _stop(pids: list[int]) -> None:
    """Stop workers: SIGINT first, so each ends as a Ctrl-C ends a load (a first pass removes
    its raw parts from the cache directory), SIGKILL for those still running after
    ``STOP_GRACE_S`` (one deep in a decode) or when a second Ctrl-C comes meanwhile."""
    left = list(pids)
    for pid in left:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    end = time.monotonic() + STOP_GRACE_S
    try:
        while left and time.monotonic() < end:
            time.sleep(0.01)
            left = [pid for pid in left if not _exited(pid)]
    finally:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def _exited(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:  # reaped already
        return True


def _received(recv: Any) -> list:
    """What a worker sent once its whole share was done; nothing when it died (the caller
    does its share)."""
    try:
        return recv.recv()
    except (EOFError, OSError):
        return []


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def _scratch(need: int = 0) -> str | None:
    """/dev/shm where there is one with ``need`` bytes free (tmpfs: the frames never touch a
    disk; a container's is often only 64 MB), else the temp dir."""
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
    except OSError:
        return None
    room = st.f_bavail * st.f_frsize >= need
    return shm if room and os.access(shm, os.W_OK | os.X_OK) else None


def _shares(sizes: list[int], procs: int) -> list[list[int]]:
    """Indexes of ``sizes`` split into ``procs`` lists of about equal sum, largest first onto the
    least loaded; on a tie a worker (lists 1..) gets it, as the parent (list 0) also collects.
    Each list is in index order, so the parent meets a failing rank in the caller's order."""
    loads = [0] * procs
    out: list[list[int]] = [[] for _ in range(procs)]
    order = list(range(1, procs)) + [0]
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        p = min(order, key=lambda p: loads[p])
        loads[p] += max(sizes[i], 1)
        out[p].append(i)
    return [sorted(s) for s in out]


def _work(
    jobs: list[tuple[int, Any, str]],
    load: Callable[[Any], Loaded],
    release: Callable[[Any], None],
    send: Any,
) -> None:
    """In the forked worker: load each child and write its columns to its file, then send the
    headers of those that loaded and exit at once, so nothing of the parent's (atexit hooks,
    buffered output, finalizers) runs twice. A rank that failed has no header: the parent loads
    it in-process and raises its error there."""
    code, heads = 0, []
    try:
        for i, child, path in jobs:
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    ev, sources, chrome = load(child)
                for t in chrome:
                    t.events = None  # never pickle the frame: it goes as raw columns
                head = _write(path, ev)
                del ev
                release(child)
                heads.append(
                    (i, (*head, sources, chrome, [(str(c.message), c.category) for c in caught]))
                )
            except Exception:  # noqa: BLE001
                code = 1
        send.send(heads)
    except BaseException:  # noqa: BLE001  interrupted, or the parent has gone
        code = 2
    finally:
        os._exit(code)


# ---- frames through files -----------------------------------------------------------------------


def _buffers(frame: pd.DataFrame) -> tuple[list[tuple], list[np.ndarray]]:
    """Per column: (name, kind, extra) specs and the numpy buffers to write raw."""
    specs, arrays = [], []
    for name in frame.columns:
        col = frame[name]
        dtype = col.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            specs.append((name, "cat", (dtype.categories, dtype.ordered)))
            arrays.append(np.ascontiguousarray(col.cat.codes.to_numpy()))
        elif isinstance(dtype, pd.Int64Dtype):
            specs.append((name, "Int64", None))  # the values (0 where NA) and the NA mask
            arrays.extend([col.to_numpy(dtype="int64", na_value=0), col.isna().to_numpy()])
        elif isinstance(dtype, np.dtype) and dtype.kind in "biuf":
            specs.append((name, "np", None))
            arrays.append(np.ascontiguousarray(col.to_numpy()))
        else:  # object or other extension columns: small or rare, pickled with the specs
            specs.append((name, "pickle", col.array))
    return specs, arrays


def _write(path: str, frame: pd.DataFrame) -> tuple[list, list, int]:
    """Write ``frame``'s column buffers to ``path``; returns what :func:`_read` needs besides."""
    specs, arrays = _buffers(frame)
    with open(path, "xb") as fh:
        for a in arrays:
            fh.write(memoryview(a).cast("B"))
    return specs, [(a.dtype.str, len(a)) for a in arrays], len(frame)


def _read(path: str, specs: list, layout: list, nrows: int) -> pd.DataFrame:
    """The frame :func:`_write` wrote to ``path`` (deleted as it is opened)."""
    with open(path, "rb", buffering=0) as fh:
        os.unlink(path)
        arrays = []
        for d, count in layout:
            a = np.empty(count, dtype=np.dtype(d))
            view, got = memoryview(a).cast("B"), 0
            while got < len(view):
                k = fh.readinto(view[got:])
                if not k:
                    raise EOFError(f"{path}: short column data")
                got += k
            arrays.append(a)
    return _frame(specs, arrays, nrows)


def _frame(specs: list[tuple], arrays: list[np.ndarray], nrows: int) -> pd.DataFrame:
    cols: dict[str, Any] = {}
    it = iter(arrays)
    for col, kind, extra in specs:
        if kind == "cat":
            cats, ordered = extra
            dtype = pd.CategoricalDtype(cats, ordered=ordered)
            cols[col] = categorical_from_codes(next(it), dtype=dtype)
        elif kind == "Int64":
            values, mask = next(it), next(it)
            cols[col] = pd.arrays.IntegerArray(values, mask)
        elif kind == "np":
            cols[col] = next(it)
        else:
            cols[col] = extra
    return pd.DataFrame(cols, index=pd.RangeIndex(nrows), copy=False)
