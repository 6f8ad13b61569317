"""Analysis over loaded windows: summaries, comparisons and plots (figures, never pyplot state).

``summary``: op tables, step breakdowns, notes, ``summarize`` and ``compare``; ``plots``: the
timeline, top operators, step breakdown and memory as matplotlib Figures. Nothing here reads a
file: it works on the DataFrames of a :class:`~dynprof_nb.traces.TraceWindow`.
"""

from dynprof_nb.analysis.summary import Summary, compare, ranks_view, summarize

__all__ = ["Summary", "compare", "ranks_view", "summarize"]
