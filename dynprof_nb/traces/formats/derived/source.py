"""Frames derived from other frames, declared as a provider like any format: ops computed from
the events (ahead of the tables, which only some formats have), and steps, kernels, memory and
communication from the events or the Chrome traces' side tables where no table gives them
(the lowest priority). Its readers always give a frame: an empty one notes what is missing."""

from __future__ import annotations

from pathlib import Path

from ... import schema
from ...discover import WindowFiles
from ..base import Provides, Read, ReadContext, Source
from . import from_events as derive
from .op_table import op_table

#: below every format's own table
LAST = 9


def _event_files(w: ReadContext) -> list[str] | None:
    return w.sources.get("events", {}).get("files")


def _ops(w: ReadContext) -> Read | None:
    ev = w.frame("events")
    if ev.empty:
        return None
    w.note(
        "ops",
        w.sources["events"]["files"],
        notes=["computed from events (self time = duration minus children on the same thread)"],
    )
    return op_table(ev), "op_table"


def _steps(w: ReadContext) -> Read:
    derived, how = derive.steps_from_events(w.frame("events"), w.comm_patterns)
    if derived.empty:
        w.note("steps", missing=how)
    else:
        w.note("steps", _event_files(w), notes=[how])
    return derived, "events"


def _kernels(w: ReadContext) -> Read:
    k = derive.kernels_from_events(w.frame("events"))
    if k.empty:
        w.note(
            "kernels",
            missing=f"no kernel_details.csv and no device events (this rank has: {w.have()})",
        )
    else:
        w.note("kernels", w.sources["events"]["files"], notes=["device events"])
    return k, "events"


def _memory(w: ReadContext) -> Read:
    w.frame("events")  # loads the traces
    frames, files = [], []
    for t in w.chrome_traces():
        if not t.memory.empty:
            frames.append(t.memory)
            files.append(t.path)
        m = derive.memory_from_counters(t.counters)
        if not m.empty:
            frames.append(m)
            files.append(t.path)
    if not frames:
        w.note(
            "memory",
            missing="no memory CSV, [memory] events or Memory counters "
            "(profile_memory was probably off)",
        )
        return schema.empty("memory"), "events"
    w.note("memory", files)
    out = schema.concat_frames([schema.conform(f, "memory") for f in frames])
    return out.sort_values("ts_ns", ignore_index=True), "events"


def _communication(w: ReadContext) -> Read:
    c = derive.communication_from_events(w.frame("events"), w.comm_patterns)
    if c.empty:
        w.note(
            "communication",
            missing="no communication.json and no event matched the "
            "communication patterns (dynprof_nb.traces.comm; "
            f"this rank has: {w.have()})",
        )
    else:
        w.note(
            "communication",
            w.sources["events"]["files"],
            notes=[f"{c['source'].iloc[0]} matching the communication patterns"],
        )
    return c, "events"


def _owns(p: Path) -> bool:
    return False  # no file of its own


def _detect(files: WindowFiles) -> bool:
    return True  # any window's events may give these


SOURCE = Source(
    name="derived",
    detect=_detect,
    owns=_owns,
    frames={
        "ops": Provides(0, _ops),
        "steps": Provides(LAST, _steps),
        "kernels": Provides(LAST, _kernels),
        "memory": Provides(LAST, _memory),
        "communication": Provides(LAST, _communication),
    },
    identity="that of the frames it is derived from",
)
