"""Ascend's text export (``ASCEND_PROFILER_OUTPUT/``: ``trace_view.json``, ``kernel_details.csv``,
``op_statistic.csv``, ``step_trace_time.csv``, the memory CSVs, ``communication*.json``), read
by :mod:`dynprof_nb.traces.ascend` and the Chrome reader."""

from __future__ import annotations

from pathlib import Path

from ..discover import WindowFiles
from .base import Source


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


SOURCE = Source(
    name="ascend_text",
    detect=_detect,
    owns=_owns,
    frames={"events": 1, "ops": 1, "steps": 1, "kernels": 1, "memory": 1, "communication": 1},
    identity="profiler_metadata.json distributed_args.rank, then profiler_info_N.json "
    "(rank); PROF_*/device_N (device)",
)
