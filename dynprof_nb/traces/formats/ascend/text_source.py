"""Ascend's text export (``ASCEND_PROFILER_OUTPUT/``: ``trace_view.json``, ``kernel_details.csv``,
``op_statistic.csv``, ``step_trace_time.csv``, the memory CSVs, ``communication*.json``), read
by :mod:`dynprof_nb.traces.formats.ascend.text` and the Chrome reader."""

from __future__ import annotations

from pathlib import Path

from ... import schema
from ...discover import MEMORY_CSVS, WindowFiles
from ..base import OpenContext, Provides, Read, ReadContext, Source
from ..chrome.source import read_traces, traces_alone
from ..derived import from_events as derive
from ..mindspore import framework as mindspore
from . import links
from . import text as ascend


def _owns(p: Path) -> bool:
    return (
        p.suffix == ".csv"
        or p.name == "trace_view.json"
        or (p.name.startswith(("communication", "cluster_communication")) and p.suffix == ".json")
    )


def _detect(files: WindowFiles) -> bool:
    return bool(
        files.csv
        or files.communication
        or files.matrix
        or any(p.name == "trace_view.json" for p in files.traces)
    )


def _events(w: ReadContext) -> Read | None:
    if not any(p.name == "trace_view.json" for p in w.files.traces):
        return None
    return read_traces(w)


def _ops(w: ReadContext) -> Read | None:
    p = w.files.csv.get("op_statistic")
    if p is None:
        return None
    w.note("ops", [p], notes=["device op types from op_statistic.csv"])
    return ascend.op_statistic(p), "csv"


def _steps(w: ReadContext) -> Read | None:
    """step_trace_time.csv, its start times from the step marker events."""
    p = w.files.csv.get("step_trace_time")
    if p is None:
        return None
    derived, _ = derive.steps_from_events(w.frame("events"), w.comm_patterns)
    st = ascend.step_trace_time(p)
    if not derived.empty and "start_ns" in derived:
        starts = derived.set_index("step")["start_ns"]
        st["start_ns"] = st["step"].map(starts).astype("Int64")
    w.note(
        "steps",
        [p],
        notes=[
            "start_ns from step marker events"
            if not derived.empty
            else "step_trace_time.csv has no start times"
        ],
    )
    return st, "csv"


def _kernels(w: ReadContext) -> Read | None:
    p = w.files.csv.get("kernel_details")
    if p is None:
        return None
    w.note("kernels", [p])
    return ascend.kernel_details(p), "csv"


def _memory(w: ReadContext) -> Read | None:
    """The memory CSVs, with a MindSpore window's FRAMEWORK memory record beside them (one
    timeline of both allocators, as the window's memory has always been)."""
    frames, files = [], []
    for key in MEMORY_CSVS:
        p = w.files.csv.get(key)
        if p is not None:
            frames.append(ascend.memory_csv(p))
            files.append(p)
    if not frames:
        return None
    p = w.files.framework.get("cpu_ms_memory_record")
    if p is not None:
        frames.append(mindspore.cpu_memory_record(p))
        files.append(p)
    w.note("memory", files)
    out = schema.concat_frames([schema.conform(f, "memory") for f in frames])
    return out.sort_values("ts_ns", ignore_index=True), "csv"


def _communication(w: ReadContext) -> Read | None:
    p = w.files.communication
    if p is None:
        return None
    w.note("communication", [p])
    return ascend.communication_json(p), "json"


def _open(w: OpenContext) -> bool:
    """A lone Ascend file: the frame it feeds now (its rank, for a metadata file)."""
    f = w.files
    if f.metadata is not None:
        w.read_metadata(f.metadata)
    elif f.table is not None:  # parsed (so damage is reported), kept as-is in ``tables``
        w.keep_table(f.table, ascend.read_csv(f.table))
    elif f.matrix is not None:
        w.communication_links()
    elif f.communication is not None:
        w.frame("communication")
    elif "step_trace_time" in f.csv:  # alone it has no step start times to look for
        p = f.csv["step_trace_time"]
        w.note("steps", [p])
        w.adopt_frame("steps", ascend.step_trace_time(p), SOURCE, "csv")
    elif f.csv:  # kernel_details, op_statistic or a memory CSV
        key = next(iter(f.csv))
        w.frame(
            "kernels" if key == "kernel_details" else "ops" if key == "op_statistic" else "memory"
        )
    elif any(p.name == "trace_view.json" for p in f.traces):
        traces_alone(w)
    else:
        return False
    return True


SOURCE = Source(
    name="ascend_text",
    detect=_detect,
    owns=_owns,
    frames={
        "events": Provides(1, _events),
        "ops": Provides(1, _ops),
        "steps": Provides(1, _steps),
        "kernels": Provides(1, _kernels),
        "memory": Provides(1, _memory),
        "communication": Provides(1, _communication),
    },
    identity="profiler_metadata.json distributed_args.rank, then profiler_info_N.json "
    "(rank); PROF_*/device_N (device)",
    open_file=_open,
    # after the database's (registry order): these say what is missing when neither has one
    tables={
        "links": links.text_links,
        "bandwidth": links.text_bandwidth,
        "memory_copies": links.no_memory_copies,
    },
)
