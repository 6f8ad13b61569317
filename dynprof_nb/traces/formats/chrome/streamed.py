"""What a window keeps of a one-pass read of its Kineto trace (:mod:`.summaries`), and which
windows take that pass: apart from the pass itself, so that a load from the frame cache
(:mod:`.first_pass`) imports neither the decoder nor the reducer."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pandas as pd

STREAM_ENV = "DYNPROF_NB_STREAM"


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
