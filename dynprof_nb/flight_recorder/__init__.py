"""Flight Recorder dumps: which collective a distributed job hangs in, and who never came.

``load(DIR_or_files)`` reads PyTorch's (NCCL, gloo) and torch_npu's (HCCL) per-rank dumps,
pickle or JSON, without ever running a pickle's code; ``analyse(...)`` lines the ranks of
each process group up by sequence id and names the stuck collectives and the missing ranks.
Names are imported on first use: this package imports no torch, and pandas only when a frame
is made (the rank side uses :mod:`.safe_pickle` alone).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "load": "frames",
    "analyse": "analysis",
    "read_dumps": "reader",
    "FRFrame": "frames",
    "Analysis": "analysis",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dynprof_nb.flight_recorder' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
