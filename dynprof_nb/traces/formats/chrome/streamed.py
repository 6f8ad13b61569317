"""What a window keeps of a one-pass read of its Kineto trace (:mod:`.summaries`), which
windows take that pass and whose events go out of core: apart from the pass itself, so that a
load from the frame cache (:mod:`.first_pass`) imports neither the decoder nor the reducer, and
a load into memory not the pass, the out-of-core writer or pyarrow's pandas glue (7 ms)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..common import budget

STREAM_ENV = "DYNPROF_NB_STREAM"
OOC_ENV = "DYNPROF_NB_OUT_OF_CORE"
#: peak memory of an in-memory load per byte of JSON text (measured: 3.6x on a 562 MB trace)
FRAME_PER_BYTE = 4


@dataclass
class Streamed:
    """What one pass over a trace gave: the frames, the span, and what the trace said (the
    frames are None where the window read them from the frame cache: :mod:`.first_pass`)."""

    ops: pd.DataFrame | None
    steps: pd.DataFrame | None
    steps_how: str
    kernels: pd.DataFrame | None
    span_ms: float | None  # first event's start to last event's end; None without timed events
    meta: dict
    repairs: list[str]
    processes: set[str]
    memory: tuple[pd.DataFrame, pd.DataFrame] | None = None  # [memory] rows, counters
    dropped: tuple[int, str] | None = None  # rows with impossible times dropped, and the warning


def streamable(files: Any) -> bool:
    """Whether a window of ``files`` is one Kineto trace and nothing else."""
    return not (
        files.db is not None
        or files.csv
        or files.framework
        or files.step_markers is not None
        or len(files.traces) != 1
        or files.traces[0].name == "trace_view.json"
    )


def takes_first_pass(files: Any) -> bool:
    """Whether a window of ``files`` takes the streamed first pass (:mod:`.first_pass`): one
    Kineto trace, and ``DYNPROF_NB_STREAM=0`` does not turn the pass off."""
    return os.environ.get(STREAM_ENV, "").strip() != "0" and streamable(files)


def too_big(paths: list[Path]) -> bool:
    """Whether the events frame of these traces would need more than half the memory a load
    may use (``FRAME_PER_BYTE`` x their text, gzip files at a fifth of the gzip budget ratio)."""
    size = 0
    for p in paths:
        try:
            n = p.stat().st_size
        except OSError:
            return False
        size += n * (budget.gzip_ratio() // 5 if p.name.endswith(".gz") else 1)
    return size * FRAME_PER_BYTE > budget.load_memory() // 2


def wanted(paths: list[Path]) -> bool:
    """Whether these traces' events go out of core (:mod:`.out_of_core`): by
    ``DYNPROF_NB_OUT_OF_CORE``, else when the frame would not fit (:func:`too_big`)."""
    force = os.environ.get(OOC_ENV, "").strip()
    if force in ("0", "1"):
        want = force == "1"
    else:
        want = too_big(paths)
    return want and _can()


def goes_out_of_core(w: Any) -> bool:
    """Whether window ``w``'s events will be an out-of-core frame (one Kineto trace, no
    device asked for, :func:`wanted`)."""
    return w.device is None and streamable(w.files) and wanted(w.files.traces)


def _can() -> bool:
    """Whether pyarrow and dask import here; if not, the events load into memory, as with
    ``DYNPROF_NB_OUT_OF_CORE=0``, and the user is told once (:mod:`dynprof_nb.optional`)."""
    from ....optional import available
    from ...errors import warn

    return available("out-of-core frames", say=lambda w: warn(w, stacklevel=5))
