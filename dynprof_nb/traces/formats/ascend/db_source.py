"""Ascend's profiler database (``ascend_{pytorch,mindspore}_profiler_N.db``, ``msprof_*.db``,
beside ``analysis.db``): when a window has one, every frame it holds is read from it (one
export), by :class:`~dynprof_nb.traces.formats.ascend.db.AscendDb`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ... import schema
from ...discover import WindowFiles
from ..base import OpenContext, Provides, Read, ReadContext, Source, lazy

if TYPE_CHECKING:
    from .db import AscendDb

# the readers, imported when first used (not when the format registers)
steps = lazy("..derived.steps", __package__)
links = lazy(".links", __package__)


def _owns(p: Path) -> bool:
    return p.suffix == ".db"


def _detect(files: WindowFiles) -> bool:
    return files.db is not None


def _noted(w: ReadContext, kind: str, frame: pd.DataFrame, tables: str) -> Read:
    """The frame, with its note: the db's files, or what is missing; the path the db took."""
    adb = w.database()
    files = [adb.path] + (
        [adb.analysis] if adb.analysis and kind in ("steps", "communication") else []
    )
    if frame.empty:
        w.note(
            kind,
            missing=f"the database has no {tables} rows (this rank has: {w.have()}; "
            f"its database's tables: {', '.join(sorted(adb.tables))})",
            notes=adb.notes,
        )
    else:
        w.note(kind, files, notes=[f"from {tables}"] + adb.notes)
    return frame, adb.read_paths.get(kind, "tables")


def _reader(kind: str, read: Callable[[AscendDb], pd.DataFrame], tables: str):
    def read_frame(w: ReadContext) -> Read:
        return _noted(w, kind, read(w.database()), tables)

    read_frame.__qualname__ = f"read_{kind}"
    return read_frame


def _events(w: ReadContext) -> Read:
    ev, path = _noted(
        w, "events", w.database().api_events(), "PYTORCH_API, CANN_API, TASK and COMMUNICATION_OP"
    )
    if ev.empty:
        return schema.empty("events"), path
    return steps.events_with_steps(w, ev), path


def _open(w: OpenContext) -> bool:
    """A lone .db: its rank and device now (reading the table list validates the file)."""
    if w.files.db is None:
        return False
    w.identify_db()
    return True


SOURCE = Source(
    name="ascend_db",
    detect=_detect,
    owns=_owns,
    frames={
        "events": Provides(0, _events),
        "steps": Provides(
            0, _reader("steps", lambda db: db.steps(), "analysis.db StepTraceTime / STEP_TIME")
        ),
        "kernels": Provides(
            0,
            _reader(
                "kernels", lambda db: db.kernels(), "TASK, COMPUTE_TASK_INFO and COMMUNICATION_OP"
            ),
        ),
        "memory": Provides(
            0, _reader("memory", lambda db: db.memory(), "MEMORY_RECORD and OP_MEMORY")
        ),
        "communication": Provides(
            0,
            _reader(
                "communication",
                lambda db: db.communication(),
                "COMMUNICATION_OP (or analysis.db CommAnalyzerTime)",
            ),
        ),
    },
    identity="RANK_DEVICE_MAP (rank) and TASK (device) of the database",
    open_file=_open,
    tables={
        "links": lambda w: links.db_links(w),
        "bandwidth": lambda w: links.db_bandwidth(w),
        "memory_copies": lambda w: links.db_memory_copies(w),
    },
)
