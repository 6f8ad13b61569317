"""MindSpore's ``FRAMEWORK/`` files (``cpu_op_detail_info``, ``cpu_op_execute_timestamp``,
``cpu_ms_memory_record``) and the MindSpore backend's ``dynprof_steps.csv`` step markers, read by
:mod:`dynprof_nb.traces.mindspore`; used where no trace or Ascend table gives the frame."""

from __future__ import annotations

from pathlib import Path

from ..discover import FRAMEWORK_FILES, WindowFiles
from .base import Source


def _owns(p: Path) -> bool:
    return p.name.startswith(FRAMEWORK_FILES) or p.name == "dynprof_steps.csv"


def _detect(files: WindowFiles) -> bool:
    return bool(files.framework) or files.step_markers is not None


SOURCE = Source(
    name="mindspore",
    detect=_detect,
    owns=_owns,
    frames={"events": 3, "ops": 3, "memory": 2},
    identity="the window directory's rank<N> name or window.json (rank); none (device)",
)
