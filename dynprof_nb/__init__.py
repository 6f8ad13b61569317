"""dynprof_nb: profile a running training job from a notebook.

Training side: ``Monitor`` (call ``monitor.step()`` each iteration) and ``range``.
Control side: ``attach``, ``jobs``, ``Job``, ``ProfilerConfig``.
Analysis: ``load_window``, ``load_trace``, ``TraceWindow``, ``compare``.
Notebook: ``%load_ext dynprof_nb`` (the ``%dynprof`` magics), ``panel``, ``profile_block``.

Names are imported on first use so ``import dynprof_nb`` in a training script stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Monitor": "monitor",
    "DynamicProfilerMonitor": "compat",
    "range": "ranges",
    "ProfilerConfig": "config",
    "ConfigError": "config",
    "Job": "job",
    "JobError": "job",
    "attach": "job",
    "FileJob": "filemode",
    "Relay": "relay",
    "jobs": "job",
    "load_trace": "traces",
    "load_window": "traces",
    "TraceWindow": "traces",
    "TraceFormatError": "traces",
    "compare": "analysis",
    "panel": "panel",
    "profile_block": "local",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dynprof_nb' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext dynprof_nb``: register the ``%dynprof`` / ``%%dynprof`` magics."""
    from .magics import load_ipython_extension as load

    load(ipython)
