"""A window's shortcuts to what is computed from its frames (summary, plots, cluster analyses).

The computing lives in a package above this one; it registers each shortcut here by name
(:func:`register`), as pandas lets a plotting backend provide ``DataFrame.plot`` and xarray
lets a package register an accessor. So ``traces/`` imports and names nothing above it, and
reading a trace never loads matplotlib: the providers (listed by the top-level package) are
imported the first time a shortcut is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

Shortcut = Callable[..., Any]

_REGISTERED: dict[str, Shortcut] = {}


def register(name: str, func: Shortcut) -> None:
    """Make ``func(window, **kw)`` what the window shortcut ``name`` calls."""
    _REGISTERED[name] = func


def shortcut(name: str) -> Shortcut:
    """The callable registered for ``name``, importing the providers on first use."""
    if name not in _REGISTERED:
        from dynprof_nb.extensions import extend  # which packages provide shortcuts

        extend("window_shortcuts")
    try:
        return _REGISTERED[name]
    except KeyError:
        raise LookupError(
            f"no window shortcut {name!r} is registered (registered: "
            f"{', '.join(sorted(_REGISTERED)) or 'none'}); is dynprof_nb installed whole?"
        ) from None


class WindowShortcuts:
    """The summary, plot and cluster-analysis methods of a window, each a registered
    :func:`shortcut` called with the window."""

    def summary(self) -> Any:
        """Header, top operations, step breakdown and plain-language notes (HTML and text)."""
        return shortcut("summary")(self)

    def advise(self, **kw: Any) -> Any:
        """Findings: what msprof-analyze's advisor and HTA would flag here, with the numbers and
        thresholds beside them; ``.checked`` says which rules did not apply here and why."""
        return shortcut("advise")(self, **kw)

    def explain(self, baseline: Any = None) -> Any:
        """Why this window was slower than ``baseline`` (a window or its folder; default: the
        job's last untriggered window before it): the rank, step phase and operators that
        account for the difference, in time and share."""
        return shortcut("explain")(self, baseline=baseline)

    def critical_path(
        self,
        step: int | None = None,
        *,
        annotation: str | None = None,
        instance: int = 0,
        rank: int | None = None,
    ) -> Any:
        """HTA's lightweight critical path of ``step`` (default: the first) on ``rank``: a frame
        of its segments (start, end, duration, kind, name, lane) with ``.summary`` by kind
        (compute / communication / host / idle). ``annotation``/``instance`` pick HTA's region
        instead (the ``instance``-th event whose name contains it; ``""``: the whole trace)."""
        return shortcut("critical_path")(
            self, step=step, annotation=annotation, instance=instance, rank=rank
        )

    def thread_cpu(self) -> pd.DataFrame:
        """Per rank: the training thread's on-CPU time and run-queue delay (runnable, waiting
        for a core) over the window, in total and per step, from the ``thread_cpu.json`` each
        backend writes (Linux's per-thread scheduler statistics); ``missing`` says why a rank
        has none. What tells a rank slowed by CPU contention from one with more work. Units
        are the column suffixes: the window's totals in ns (``on_cpu_ns``, as the rank wrote
        them), per step in µs (``on_cpu_us_per_step``, as ``w.steps``)."""
        from .formats.common.threadcpu import thread_cpu

        return thread_cpu(self)

    def sql(self, query: str) -> pd.DataFrame:
        """The answer to SQL ``query`` over this window's frames, as a DataFrame: tables
        ``events``, ``ops``, ``steps``, ``kernels``, ``memory``, ``communication`` (and
        ``communication_links``, ``communication_bandwidth``, ``memory_copies``), with the
        frames' columns (``rank`` on several ranks). DuckDB, in this process, reads a frame
        cached as Parquet in place and only the tables the query names (docs/sql.md); it
        needs ``pip install 'dynprof_nb[sql]'``."""
        return shortcut("sql")(self, query)

    def plot_timeline(self, **kw: Any) -> Any:
        """The ranks' events on a timeline (a matplotlib Figure); ``interactive=True``: a widget
        that zooms and pans down to one kernel."""
        if kw.pop("interactive", False):
            kw.pop("max_events", None)  # the per-pixel choice bounds what any zoom sends
            return shortcut("timeline_view")(self, **kw)
        return shortcut("timeline")(self, **kw)

    def timeline(self, **kw: Any) -> Any:
        """The interactive timeline: ``plot_timeline(interactive=True, **kw)``, the widget that
        zooms from the whole window to one kernel (``ranks=``, ``lanes=``, ``align=`` as
        there); the name the getting-started pages use."""
        return self.plot_timeline(interactive=True, **kw)

    def plot_ops(self, **kw: Any) -> Any:
        """The top operations, across ranks."""
        return shortcut("top_ops")(self, **kw)

    def plot_steps(self, **kw: Any) -> Any:
        """The step breakdown."""
        return shortcut("step_breakdown")(self, **kw)

    def plot_memory(self, **kw: Any) -> Any:
        """Memory per rank and device."""
        return shortcut("memory_over_time")(self, **kw)

    # ---- cluster analyses (msprof-analyze's, under their names) ---------------------------
    def compute_ops(self, per_rank: bool = True, by_name: bool = False) -> pd.DataFrame:
        """Device time by op type and core, per rank (msprof-analyze compute_op_sum)."""
        return shortcut("compute_ops")(self, per_rank=per_rank, by_name=by_name)

    def communication_ops(self, per_rank: bool = True) -> pd.DataFrame:
        """Communication ops per rank: count, time, wait, transit, bandwidth (hccl_sum)."""
        return shortcut("communication_ops")(self, per_rank=per_rank)

    def step_breakdown(self) -> pd.DataFrame:
        """Per rank and step: computing, communication (not) overlapped, free
        (msprof-analyze's cluster_time_summary)."""
        return shortcut("cluster_step_breakdown")(self)

    def step_trace(self) -> pd.DataFrame:
        """msprof-analyze's ClusterStepTraceTime under its names (Computing, Free, Stage,
        Bubble, Preparing ...) and definitions."""
        return shortcut("step_trace")(self)

    def time_summary(self) -> pd.DataFrame:
        """msprof-analyze's cluster_time_summary under its names and definitions (whole-step
        Step Time, Free without memory copies)."""
        return shortcut("time_summary")(self)

    def communication_matrix(self, step: int | None = None) -> pd.DataFrame:
        """Bandwidth per link and transport type (communication_matrix / slow_link)."""
        return shortcut("communication_matrix")(self, step=step)

    def slow_ranks(self) -> pd.DataFrame:
        """Per rank against the median rank, with a plain-language note (slow_rank)."""
        return shortcut("slow_ranks")(self)

    def plot_rank_steps(self, **kw: Any) -> Any:
        """Each rank's step time, stacked by what it spent it on."""
        return shortcut("rank_step_breakdown")(self, **kw)

    def plot_bandwidth(self, **kw: Any) -> Any:
        """A rank x rank bandwidth heat map of the window's communication links."""
        return shortcut("bandwidth_heatmap")(self, **kw)
