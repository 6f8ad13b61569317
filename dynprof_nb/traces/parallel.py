"""Load several ranks' events in parallel processes, frames coming back through tmpfs files.

The JSON decode holds the GIL, so ranks parse in forked processes, and the parent parses its own
share meanwhile rather than wait on an idle core: a 2-rank window on 2 cores forks one worker.
Ranks are shared out by file size, largest first onto the least loaded process.

Pickling a 300k-row events frame back costs about a quarter of its parse, so each worker writes
every frame it parses to a file in a private directory under /dev/shm (tmpfs: memory, not disk):
a pickled header (column layout, the small category tables, the rank's sources, traces and
warnings), then the raw column buffers (categorical codes, int64 times, the step mask). The
parent reads each column once into its own array and deletes the file as it opens it.

Plain ``os.fork`` and files, no process pool or ``SharedMemory``: the pool costs its start-up,
its queue threads and a pickled job per rank, and in Python 3.11 every ``SharedMemory`` starts
a resource-tracker interpreter in each process that creates or opens one (three Python
start-ups for a 2-rank window).
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import struct
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

Loaded = tuple[pd.DataFrame, dict, list]


def load_events(children: list, load: Callable[[Any], Loaded],
                size: Callable[[Any], int] = lambda c: 1, max_procs: int | None = None) -> None:
    """Load the events of every child window that has none yet, spread over this process and
    forked workers. ``load(child)`` loads the child's events in the calling process and returns
    (events, sources, chrome traces); a worker's result is handed to the parent's child with
    ``child.adopt_events``. ``size(child)`` (bytes to parse) balances the shares. A child whose
    load failed is left unloaded: the caller loads it in-process, in order, where its error is
    raised with its own type and message. Warnings from workers are re-emitted here."""
    todo = [c for c in children if not c.loaded("events")]
    procs = min(len(todo), max_procs or _cores())
    if procs < 2 or not hasattr(os, "fork"):
        return
    shares = _shares([size(c) for c in todo], procs)
    tmp = tempfile.mkdtemp(prefix="dynprof_nb-", dir=_scratch())  # mode 0700: only we read it
    pids: list[int] = []
    try:
        for share in shares[1:]:
            pid = os.fork()
            if pid == 0:  # the worker: never returns into the caller's code
                _work([(todo[i], os.path.join(tmp, str(i))) for i in share], load)
            pids.append(pid)
        for i in shares[0]:
            try:
                load(todo[i])
            except Exception:  # noqa: BLE001  the caller loads it again, in order, and raises
                break
        while pids:
            os.waitpid(pids[0], 0)
            pids.pop(0)
        for share in shares[1:]:
            for i in share:
                try:
                    got = _read(os.path.join(tmp, str(i)))
                except Exception:  # noqa: BLE001  unreadable: as if the worker had failed
                    got = None
                if got is None:  # this rank failed in its worker: the caller loads it
                    continue
                ev, sources, chrome, caught = got
                for t in chrome:  # the frame travelled once; a one-trace window shares it again
                    t.events = ev if len(chrome) == 1 else None
                todo[i].adopt_events(ev, sources, chrome)
                for msg, cat in caught:
                    warnings.warn(cat(msg), stacklevel=4)
    finally:
        for pid in pids:  # interrupted: stop the workers we started
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        shutil.rmtree(tmp, ignore_errors=True)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def _scratch() -> str | None:
    """/dev/shm where there is one (tmpfs: the frames never touch a disk), else the temp dir."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


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


def _work(jobs: list[tuple[Any, str]], load: Callable[[Any], Loaded]) -> None:
    """In the forked worker: load each child and write it to its file; then exit at once, so
    nothing of the parent's (atexit hooks, buffered output, finalizers) runs twice."""
    code = 0
    try:
        for child, path in jobs:
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    ev, sources, chrome = load(child)
                for t in chrome:
                    t.events = None  # never pickle the frame: it goes as raw columns
                _write(path, ev, sources, chrome, [(str(c.message), c.category) for c in caught])
            except Exception:  # noqa: BLE001  no file: the parent loads this rank and raises
                code = 1
    except BaseException:  # noqa: BLE001  interrupted
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
            arr = col.array
            specs.append((name, "Int64", None))
            arrays.extend([np.ascontiguousarray(arr._data), np.ascontiguousarray(arr._mask)])
        elif isinstance(dtype, np.dtype) and dtype.kind in "biuf":
            specs.append((name, "np", None))
            arrays.append(np.ascontiguousarray(col.to_numpy()))
        else:  # object or other extension columns: small or rare, pickled with the specs
            specs.append((name, "pickle", col.array))
    return specs, arrays


def _write(path: str, frame: pd.DataFrame, *rest: Any) -> None:
    """Header length, pickled header, then the column buffers; renamed into place when whole."""
    specs, arrays = _buffers(frame)
    layout = [(a.dtype.str, len(a)) for a in arrays]
    head = pickle.dumps((specs, layout, len(frame), *rest), protocol=pickle.HIGHEST_PROTOCOL)
    with open(path + ".part", "wb") as fh:
        fh.write(struct.pack("<Q", len(head)))
        fh.write(head)
        for a in arrays:
            fh.write(memoryview(a).cast("B"))
    os.rename(path + ".part", path)


def _read(path: str) -> tuple | None:
    """(frame, *rest) from the file :func:`_write` wrote (deleted here), None if there is none."""
    try:
        fh = open(path, "rb", buffering=0)  # noqa: SIM115  closed below
    except FileNotFoundError:
        return None
    with fh:
        os.unlink(path)
        (n,) = struct.unpack("<Q", _exact(fh, 8))
        specs, layout, nrows, *rest = pickle.loads(_exact(fh, n))
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
    return (_frame(specs, arrays, nrows), *rest)


def _exact(fh: Any, n: int) -> bytes:
    b = fh.read(n)
    while len(b) < n:
        more = fh.read(n - len(b))
        if not more:
            raise EOFError("short header")
        b += more
    return b


def _frame(specs: list[tuple], arrays: list[np.ndarray], nrows: int) -> pd.DataFrame:
    cols: dict[str, Any] = {}
    it = iter(arrays)
    for col, kind, extra in specs:
        if kind == "cat":
            cats, ordered = extra
            dtype = pd.CategoricalDtype(cats, ordered=ordered)
            cols[col] = pd.Categorical.from_codes(next(it), dtype=dtype, validate=False)
        elif kind == "Int64":
            values, mask = next(it), next(it)
            cols[col] = pd.arrays.IntegerArray(values, mask)
        elif kind == "np":
            cols[col] = next(it)
        else:
            cols[col] = extra
    return pd.DataFrame(cols, index=pd.RangeIndex(nrows), copy=False)
