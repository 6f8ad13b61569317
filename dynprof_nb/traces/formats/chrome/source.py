"""Chrome trace JSON: PyTorch's Kineto ``*.pt.trace.json[.gz]``, the built-in backend's
``trace.json``, any ``traceEvents`` file; read by :mod:`.reader` (whose
``repairs`` say when a damaged file was repaired, and ``read_path`` which decode path ran).
Steps, kernels, memory and communication are derived from its events where no table gives
them (:mod:`.derived`)."""

from __future__ import annotations

from pathlib import Path

from ... import cache, schema
from ...discover import WindowFiles
from ..base import OpenContext, Provides, Read, ReadContext, Source, lazy
from .first_pass import first_pass
from .streamed import goes_out_of_core

# the readers, imported when first used (not when the format registers)
steps = lazy("..derived.steps", __package__)
ooc = lazy(".out_of_core", __package__)


def _owns(p: Path) -> bool:
    return p.name != "trace_view.json" and p.name.endswith((".json", ".json.gz", ".gz"))


def _detect(files: WindowFiles) -> bool:
    return any(p.name != "trace_view.json" for p in files.traces)


def read_traces(w: ReadContext) -> Read | None:
    """Every Chrome trace of the window (Kineto's and Ascend's trace_view.json alike) as one
    events frame; the path is each trace's decode path (``pieces``, ``repaired+split``, ...)."""
    if goes_out_of_core(w):  # a trace too big for memory: Dask over Parquet
        big = ooc.events_out_of_core(w, w.files, SOURCE)
        if big is not None:
            return big, "out-of-core"
    traces = w.chrome_traces()
    if not traces:
        return None
    frames = [t.events for t in traces]
    ev = frames[0] if len(frames) == 1 else schema.concat_frames(frames)
    w.note("events", [t.path for t in traces], notes=[n for t in traces for n in t.repairs])
    return steps.events_with_steps(w, ev), "+".join(dict.fromkeys(t.read_path for t in traces))


def traces_alone(w: OpenContext) -> None:
    """A lone trace file: its events now, and the rank and framework it says it is."""
    if not first_pass(w, w.files, SOURCE):  # its summaries in one pass, without its events
        cache.identify(w, lambda: (w.frame("events"), w.identify_trace()))
        w.frame("events")  # from the frame cache when identify did not read it


def _open(w: OpenContext) -> bool:
    if not w.files.traces:
        return False
    traces_alone(w)
    return True


SOURCE = Source(
    name="kineto",
    detect=_detect,
    owns=_owns,
    frames={"events": Provides(2, read_traces)},
    identity="the trace's distributedInfo.rank, else a rank<N> in its name (rank); none (device)",
    open_file=_open,
)
