"""Ascend's profiler database (``ascend_{pytorch,mindspore}_profiler_N.db``, ``msprof_*.db``,
beside ``analysis.db``): when a window has one, every frame it holds is read from it (one
export), by :class:`~dynprof_nb.traces.ascend_db.AscendDb`."""

from __future__ import annotations

from pathlib import Path

from ..discover import WindowFiles
from .base import Source


def _owns(p: Path) -> bool:
    return p.suffix == ".db"


def _detect(files: WindowFiles) -> bool:
    return files.db is not None


SOURCE = Source(
    name="ascend_db",
    detect=_detect,
    owns=_owns,
    frames={"events": 0, "steps": 0, "kernels": 0, "memory": 0, "communication": 0},
    identity="RANK_DEVICE_MAP (rank) and TASK (device) of the database",
)
