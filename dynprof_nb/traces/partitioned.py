"""Analyses written for a pandas frame that reduce it (sums, bounds, a few rows), run on an
out-of-core events frame too (:mod:`dynprof_nb.traces.formats.chrome.out_of_core`: a Dask
frame over Parquet partitions) one partition at a time, so the frame is never whole in memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd


def is_out_of_core(frame: Any) -> bool:
    """Whether ``frame`` is an out-of-core (Dask) frame rather than a pandas one."""
    return not isinstance(frame, pd.DataFrame) and hasattr(frame, "to_delayed")


def per_partition(frame: Any, func: Callable[[pd.DataFrame], Any]) -> list[Any]:
    """``func`` of each partition of an out-of-core frame (Dask runs a few at a time, so at
    most those are in memory), or ``[func(frame)]`` of a pandas frame: an analysis written for
    pandas that reduces its frame (sums, bounds, a few rows) runs on either."""
    if not is_out_of_core(frame):
        return [func(frame)]
    import dask

    # this process's threads, never a distributed Client that attach(cluster=...) made the
    # default: its workers on other hosts cannot read this host's partition files
    tasks = [dask.delayed(func)(p) for p in frame.to_delayed()]
    return list(dask.compute(*tasks, scheduler="threads"))


def rows(frame: Any, keep: Callable[[pd.DataFrame], Any]) -> pd.DataFrame:
    """The rows ``keep`` selects, as a pandas frame, from a pandas or an out-of-core frame
    (for selections much smaller than the frame: the collectives, the device rows)."""
    if not is_out_of_core(frame):
        return frame[keep(frame)]
    return pd.concat(per_partition(frame, lambda p: p[keep(p)]))
