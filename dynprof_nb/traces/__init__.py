"""Trace readers: every window's files into pandas DataFrames (see :class:`TraceWindow`).

Names are resolved lazily so that importing ``dynprof_nb.traces.errors`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "load_trace": "load",
    "load_window": "load",
    "TraceWindow": "window",
    "MultiRankWindow": "multirank",
    "TraceFormatError": "errors",
    "TraceRepairWarning": "errors",
    "IncompleteWindowWarning": "errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dynprof_nb.traces' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
