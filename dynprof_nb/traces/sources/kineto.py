"""Chrome trace JSON: PyTorch's Kineto ``*.pt.trace.json[.gz]``, the built-in backend's
``trace.json``, any ``traceEvents`` file; read by :mod:`dynprof_nb.traces.chrome` (whose
``repairs`` say when a damaged file was repaired). Steps, kernels, memory and communication
are derived from its events where no table gives them."""

from __future__ import annotations

from pathlib import Path

from ..discover import WindowFiles
from .base import Source


def _owns(p: Path) -> bool:
    return p.name != "trace_view.json" and p.name.endswith((".json", ".json.gz", ".gz"))


def _detect(files: WindowFiles) -> bool:
    return any(p.name != "trace_view.json" for p in files.traces)


SOURCE = Source(
    name="kineto",
    detect=_detect,
    owns=_owns,
    frames={"events": 2},
    identity="the trace's distributedInfo.rank, else a rank<N> in its name (rank); none (device)",
)
