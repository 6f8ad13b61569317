"""Analysis over loaded windows: summaries, comparisons and plots (figures, never pyplot state).

``summary``: op tables, step breakdowns, notes, ``summarize`` and ``compare``; ``plots``: the
timeline, top operators, step breakdown and memory as matplotlib Figures. Nothing here reads a
file: it works on the DataFrames of a :class:`~dynprof_nb.traces.TraceWindow`.

The names below are imported on first use, so ``from dynprof_nb.analysis.cluster import ...``
does not load ``summary`` and what it needs (the config schema, traitlets): about 30 ms of a
half-second cold start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dynprof_nb.analysis.summary import Summary, compare, ranks_view, summarize

__all__ = ["Summary", "compare", "ranks_view", "summarize"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("dynprof_nb.analysis.summary"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
