"""The analyses a trace window offers as methods (``w.summary()``, ``w.plot_timeline()``, ...),
registered with :mod:`dynprof_nb.traces.shortcuts`.

Each entry imports its module when called, so a summary does not load matplotlib and a plot
does not load the widget."""

from __future__ import annotations

from typing import Any

from dynprof_nb.traces.shortcuts import Shortcut, register


def _summary(w: Any, **kw: Any) -> Any:
    from .summary import summarize

    return summarize(w, **kw)


def _plots(name: str) -> Shortcut:
    def call(w: Any, **kw: Any) -> Any:
        from . import plots

        return {
            "timeline": plots.timeline,
            "top_ops": plots.top_ops,
            "step_breakdown": plots.step_breakdown,
            "memory_over_time": plots.memory_over_time,
        }[name](w, **kw)

    return call


def _timeline_view(w: Any, **kw: Any) -> Any:
    from .timeline_view import TimelineView

    return TimelineView(w, **kw)


def _cluster(name: str) -> Shortcut:
    def call(w: Any, **kw: Any) -> Any:
        from . import cluster

        return {
            "compute_ops": cluster.compute_ops,
            "communication_ops": cluster.communication_ops,
            "cluster_step_breakdown": cluster.step_breakdown,
            "step_trace": cluster.step_trace,
            "time_summary": cluster.time_summary,
            "communication_matrix": cluster.communication_matrix,
            "slow_ranks": cluster.slow_ranks,
        }[name](w, **kw)

    return call


def _cluster_plots(name: str) -> Shortcut:
    def call(w: Any, **kw: Any) -> Any:
        from . import cluster_plots

        return {
            "rank_step_breakdown": cluster_plots.rank_step_breakdown,
            "bandwidth_heatmap": cluster_plots.bandwidth_heatmap,
        }[name](w, **kw)

    return call


SHORTCUTS: dict[str, Shortcut] = {
    "summary": _summary,
    "timeline_view": _timeline_view,
    **{n: _plots(n) for n in ("timeline", "top_ops", "step_breakdown", "memory_over_time")},
    **{
        n: _cluster(n)
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
    **{n: _cluster_plots(n) for n in ("rank_step_breakdown", "bandwidth_heatmap")},
}

for _name, _func in SHORTCUTS.items():
    register(_name, _func)
