"""The analyses a trace window offers as methods (``w.summary()``, ``w.plot_timeline()``, ...),
registered with :mod:`dynprof_nb.traces.shortcuts`.

Each entry imports its module when called, so a summary does not load matplotlib and a plot
does not load the widget."""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from typing import Any

from dynprof_nb.traces.interface import Window
from dynprof_nb.traces.shortcuts import Shortcut, register


def _summary(w: Window, **kw: Any) -> Any:
    from .summary import summarize

    return summarize(w, **kw)


def _advise(w: Window, **kw: Any) -> Any:
    from .advise import advise

    return advise(w, **kw)


def _explain(
    w: Window, baseline: Window | str | PathLike[str] | Sequence[str] | None = None
) -> Any:
    """``explain(w, baseline)``; a recent-steps record with no baseline compares its own slow
    steps with its normal ones (:mod:`.recent_explain`)."""
    from .explain import explain
    from .recent_explain import explain_recent, is_recent

    if baseline is None and is_recent(w):
        return explain_recent(w)
    return explain(w, baseline)


def _critical_path(w: Window, **kw: Any) -> Any:
    from .critical_path import critical_path

    return critical_path(w, **kw)


def _plots(name: str) -> Shortcut:
    def call(w: Window, **kw: Any) -> Any:
        from . import plots

        return {
            "timeline": plots.timeline,
            "top_ops": plots.top_ops,
            "step_breakdown": plots.step_breakdown,
            "memory_over_time": plots.memory_over_time,
        }[name](w, **kw)

    return call


def _timeline_view(w: Window, **kw: Any) -> Any:
    from .timeline_view import TimelineView

    return TimelineView(w, **kw)


def _ranks(name: str) -> Shortcut:
    def call(w: Window, **kw: Any) -> Any:
        from . import ranks

        return {
            "compute_ops": ranks.compute_ops,
            "communication_ops": ranks.communication_ops,
            "cluster_step_breakdown": ranks.step_breakdown,
            "step_trace": ranks.step_trace,
            "time_summary": ranks.time_summary,
            "communication_matrix": ranks.communication_matrix,
            "slow_ranks": ranks.slow_ranks,
        }[name](w, **kw)

    return call


def _rank_plots(name: str) -> Shortcut:
    def call(w: Window, **kw: Any) -> Any:
        from . import rank_plots

        return {
            "rank_step_breakdown": rank_plots.rank_step_breakdown,
            "bandwidth_heatmap": rank_plots.bandwidth_heatmap,
        }[name](w, **kw)

    return call


def _sql(w: Window, query: str) -> Any:
    from .sql import sql

    return sql(w, query)


SHORTCUTS: dict[str, Shortcut] = {
    "sql": _sql,
    "summary": _summary,
    "advise": _advise,
    "explain": _explain,
    "critical_path": _critical_path,
    "timeline_view": _timeline_view,
    **{n: _plots(n) for n in ("timeline", "top_ops", "step_breakdown", "memory_over_time")},
    **{
        n: _ranks(n)
        for n in (
            "compute_ops",
            "communication_ops",
            "cluster_step_breakdown",
            "step_trace",
            "time_summary",
            "communication_matrix",
            "slow_ranks",
        )
    },
    **{n: _rank_plots(n) for n in ("rank_step_breakdown", "bandwidth_heatmap")},
}

for _name, _func in SHORTCUTS.items():
    register(_name, _func)
