"""Ascend's side tables: per-link traffic (``links``), per-transport bandwidth (``bandwidth``)
and the device's asynchronous memory copies (``memory_copies``), which a window offers as
``communication_links()``, ``communication_bandwidth()`` and ``memory_copies()``.

The Ascend sources declare these readers (``Source.tables``); the window reads a table through
the frame cache, as it reads a frame (:func:`dynprof_nb.traces.formats.read_table`). Each
reader returns None when the window has nothing of its kind, so the database
(:mod:`.db_source`) answers first and the text export (:mod:`.text_source`) next, which says
what is missing when neither has the table.
"""

from __future__ import annotations

import pandas as pd

from ..base import ReadContext
from . import bandwidth as ascend_bandwidth
from . import text as ascend


def db_links(w: ReadContext) -> pd.DataFrame | None:
    """Per op and link, from the database's HCCL tasks."""
    adb = w.database()
    if adb is None:
        return None
    w.sources["links"] = {"files": [str(adb.path)], "format": "db"}
    return adb.links()


def db_bandwidth(w: ReadContext) -> pd.DataFrame | None:
    """Per op and transport, from analysis.db or the database's HCCL tasks."""
    adb = w.database()
    if adb is None:
        return None
    w.sources["bandwidth"] = {"files": [str(adb.path)], "format": "db"}
    return adb.bandwidth()


def db_memory_copies(w: ReadContext) -> pd.DataFrame | None:
    """The MEMCPY_ASYNC tasks of the database."""
    adb = w.database()
    return None if adb is None else adb.memory_copies()


def text_links(w: ReadContext) -> pd.DataFrame:
    """Per op and link from communication_matrix.json; empty, saying so, without one."""
    m = w.files.matrix
    if m is not None:
        w.sources["links"] = {"files": [str(m)], "format": "text"}
        return ascend.communication_matrix_json(m)
    w.sources["links"] = {
        "files": [],
        "missing": f"no communication_matrix.json or database (this rank has: {w.have()})",
    }
    return pd.DataFrame(columns=ascend.LINK_COLUMNS)


def text_bandwidth(w: ReadContext) -> pd.DataFrame:
    """Per op and transport from communication.json; empty, saying so, without one."""
    p = w.files.communication
    if p is not None:
        w.sources["bandwidth"] = {"files": [str(p)], "format": "text"}
        return ascend.communication_bandwidth_json(p)
    w.sources["bandwidth"] = {
        "files": [],
        "missing": f"no communication.json or database (this rank has: {w.have()})",
    }
    return ascend_bandwidth.frame(pd.DataFrame(columns=ascend_bandwidth.COLUMNS))


def no_memory_copies(w: ReadContext) -> pd.DataFrame:
    """Empty for every window without a database."""
    return pd.DataFrame(
        {
            "start_ns": pd.Series(dtype="int64"),
            "end_ns": pd.Series(dtype="int64"),
            "step": pd.Series(dtype="Int64"),
        }
    )
