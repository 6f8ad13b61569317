"""Load several ranks' events in parallel processes, frames coming back through shared memory.

The JSON decode holds the GIL, so ranks parse in forked worker processes. Pickling a 300k-row
events frame back through the pool's pipe costs about a quarter of its parse (four copies of
every column plus pickling each category string); instead each worker writes the frame's
column buffers (categorical codes, int64 times, the step mask) into one POSIX shared-memory
block and sends only their layout and the small category tables. The parent copies the columns
out once and unlinks the block.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
import pandas as pd

_ALIGN = 64


def load_events(children: list, worker: Callable[[Any], tuple[pd.DataFrame, dict, list]],
                job: Callable[[Any], Any], max_workers: int | None = None) -> None:
    """Load the events of every child window that has none yet, one child per worker process
    (handed over with ``child.adopt_events``). ``job(child)`` is the picklable description a
    worker gets; ``worker(job)`` returns (events, sources, chrome traces) in the worker. A
    child whose worker failed is left unloaded: the caller loads it in-process, where its error
    is raised with its own type and message."""
    todo = [c for c in children if not c.loaded("events")]
    workers = min(len(todo), max_workers or os.cpu_count() or 1)
    if len(todo) < 2 or workers < 2:
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
        futs = [pool.submit(_run, worker, job(c)) for c in todo]
        for c, fut in zip(todo, futs, strict=True):
            try:
                packed, sources, chrome, caught = fut.result()
            except Exception:  # noqa: BLE001  the child loads in this process and raises here
                continue
            ev = unpack_frame(packed)
            for t in chrome:  # the frame travelled once; a one-trace window shares it again
                t.events = ev if len(chrome) == 1 else None
            c.adopt_events(ev, sources, chrome)
            for msg, cat in caught:
                warnings.warn(cat(msg), stacklevel=4)


def _run(worker: Callable, job: Any) -> tuple:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ev, sources, chrome = worker(job)
    for t in chrome:
        t.events = None  # never pickle the frame: it goes through shared memory
    return pack_frame(ev), sources, chrome, [(str(c.message), c.category) for c in caught]


# ---- frames through shared memory ---------------------------------------------------------------

def _buffers(frame: pd.DataFrame) -> tuple[list[tuple], list[np.ndarray]]:
    """Per column: (name, kind, extra) specs and the numpy buffers to place in shared memory."""
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


def pack_frame(frame: pd.DataFrame) -> tuple:
    """Write ``frame``'s column buffers into a new shared-memory block; returns its description."""
    specs, arrays = _buffers(frame)
    layout, offset = [], 0
    for a in arrays:
        layout.append((offset, a.dtype.str, a.shape[0]))
        offset += -(-a.nbytes // _ALIGN) * _ALIGN
    shm = SharedMemory(create=True, size=max(offset, 1))
    try:
        for (off, _, _), a in zip(layout, arrays, strict=True):
            np.frombuffer(shm.buf, dtype=a.dtype, count=len(a), offset=off)[:] = a
        name = shm.name
    finally:
        shm.close()
    _forget(name)  # the parent unlinks it: this worker's exit must not
    return name, specs, layout, len(frame)


def unpack_frame(packed: tuple) -> pd.DataFrame:
    """The frame :func:`pack_frame` wrote; the block is unlinked once its columns are copied."""
    name, specs, layout, nrows = packed
    shm = SharedMemory(name=name)
    try:
        arrays = [np.frombuffer(shm.buf, dtype=np.dtype(d), count=n, offset=off).copy()
                  for off, d, n in layout]
    finally:
        shm.close()
        shm.unlink()
    cols: dict[str, Any] = {}
    it = iter(arrays)
    for col, kind, extra in specs:
        if kind == "cat":
            cats, ordered = extra
            cols[col] = pd.Categorical.from_codes(next(it), categories=cats, ordered=ordered)
        elif kind == "Int64":
            values, mask = next(it), next(it)
            cols[col] = pd.arrays.IntegerArray(values, mask)
        elif kind == "np":
            cols[col] = next(it)
        else:
            cols[col] = extra
    return pd.DataFrame(cols, index=pd.RangeIndex(nrows))


def _forget(name: str) -> None:
    """Stop this process's resource tracker from unlinking a block the parent now owns."""
    try:
        from multiprocessing import resource_tracker

        resource_tracker.unregister("/" + name.lstrip("/"), "shared_memory")
    except (ImportError, KeyError, ValueError):
        pass
