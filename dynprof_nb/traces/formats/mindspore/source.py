"""MindSpore's ``FRAMEWORK/`` files (``cpu_op_detail_info``, ``cpu_op_execute_timestamp``,
``cpu_ms_memory_record``) and the MindSpore backend's ``dynprof_steps.csv`` step markers, read by
:mod:`.framework`; used where no trace or Ascend table gives the frame."""

from __future__ import annotations

from pathlib import Path

from ... import schema
from ...discover import FRAMEWORK_FILES, WindowFiles
from ..base import OpenContext, Provides, Read, ReadContext, Source
from ..derived.steps import events_with_steps
from . import framework as mindspore


def _owns(p: Path) -> bool:
    return p.name.startswith(FRAMEWORK_FILES) or p.name == "dynprof_steps.csv"


def _detect(files: WindowFiles) -> bool:
    return bool(files.framework) or files.step_markers is not None


def _events(w: ReadContext) -> Read | None:
    p = w.files.framework.get("cpu_op_execute_timestamp")
    if p is None:
        return None
    ev = mindspore.cpu_op_execute_timestamps(p)
    w.note("events", [p])
    return events_with_steps(w, ev), "table"


def _ops(w: ReadContext) -> Read | None:
    p = w.files.framework.get("cpu_op_detail_info")
    if p is None:
        return None
    w.note("ops", [p])
    return mindspore.cpu_op_detail(p), "table"


def _memory(w: ReadContext) -> Read | None:
    p = w.files.framework.get("cpu_ms_memory_record")
    if p is None:
        return None
    w.note("memory", [p])
    out = schema.concat_frames([schema.conform(mindspore.cpu_memory_record(p), "memory")])
    return out.sort_values("ts_ns", ignore_index=True), "table"


def _open(w: OpenContext) -> bool:
    """A lone FRAMEWORK file: the frame it feeds now."""
    fw = w.files.framework
    if "cpu_op_detail_info" in fw:
        w.adopt_frame("events", schema.empty("events"))
        w.note("events", missing="cpu_op_detail_info has aggregates only")
        w.frame("ops")
    elif "cpu_op_execute_timestamp" in fw:
        w.frame("events")
    elif "cpu_ms_memory_record" in fw:
        w.frame("memory")
    else:
        return False
    return True


SOURCE = Source(
    name="mindspore",
    detect=_detect,
    owns=_owns,
    frames={
        "events": Provides(3, _events),
        "ops": Provides(3, _ops),
        "memory": Provides(2, _memory),
    },
    identity="the window directory's rank<N> name or window.json (rank); none (device)",
    open_file=_open,
)
