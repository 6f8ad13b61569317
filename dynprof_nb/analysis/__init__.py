"""Analysis over loaded windows: summaries, comparisons and plots (figures, never pyplot state).

``summary``: op tables, step breakdowns, notes, ``summarize`` and ``compare``; ``plots``: the
timeline, top operators, step breakdown and memory as matplotlib Figures; ``ranks``: the
multi-rank NPU analyses (msprof-analyze's cluster recipes) and ``rank_plots`` their plots.
Nothing here reads a file: it works on the DataFrames of a
:class:`~dynprof_nb.traces.TraceWindow`.

The names below are imported on first use, so ``from dynprof_nb.analysis.ranks import ...``
does not load ``summary`` and what it needs (the config schema, traitlets): about 30 ms of a
half-second cold start.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dynprof_nb.analysis.summary import Summary, compare, ranks_view, summarize

__all__ = ["Summary", "compare", "ranks_view", "summarize"]

# Modules renamed so that a name says one thing (issue 24), still importable by the old name
# where a notebook told users to import it (``from dynprof_nb.analysis import cluster``).
RENAMED = {"cluster": "dynprof_nb.analysis.ranks"}


def __getattr__(name: str) -> Any:
    if name in RENAMED:
        warnings.warn(
            f"dynprof_nb.analysis.{name} is now {RENAMED[name]} (the multi-rank analyses, "
            "not the cluster/ package): import that instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(RENAMED[name])
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("dynprof_nb.analysis.summary"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
