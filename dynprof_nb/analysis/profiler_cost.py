"""The profiler's own cost on a window's steps, in the window's words.

A window's steps run under the profiler, so they are slower than the job's steps outside it: a
new user saw a 416 ms median step in ``summary()`` for a job whose steps took 1.4 ms, and
nothing said why. Each rank writes the median of its last timed steps before the window
(unprofiled: ``steps_before_ms`` in ``window.json``, :func:`dynprof_nb.training.steptimes.
median_before`); where the window's median step is :data:`COST_RATIO` times that or more, the
summary says so, so that its times are read as the profiled job's, not the job's.
"""

from __future__ import annotations

import math

from dynprof_nb.traces.interface import Window

from .ranked import with_rank

#: a window whose median step is this many times the steps before it says the profiler's cost
COST_RATIO = 1.5


def profiler_cost_note(window: Window) -> str:
    """One sentence on the profiler's cost on this window's steps, or "" (no rank wrote its
    steps before the window, or the window's steps are within :data:`COST_RATIO` of them)."""
    from .explain import manifests

    before = {}
    for _, manifest in manifests(window):
        value = manifest.get("steps_before_ms")
        rank = manifest.get("rank")
        if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
            before[int(rank) if isinstance(rank, int) else 0] = float(value)
    if not before:
        return ""
    steps = with_rank(window.steps, window)
    if steps.empty or "duration_us" not in steps:
        return ""
    during = steps.groupby("rank")["duration_us"].median() / 1000.0
    pairs = [(during[r], before[r]) for r in before if r in during.index]
    if not pairs:
        return ""
    now = sorted(p[0] for p in pairs)[len(pairs) // 2]
    was = sorted(p[1] for p in pairs)[len(pairs) // 2]
    if not (now >= COST_RATIO * was):
        return ""
    return (
        f"steps in this window took {now:,.1f} ms (median) against {was:,.1f} ms just before it, "
        f"unprofiled ({now / was:,.1f}x): most of that is the profiler's own cost. Read this "
        "window's times as the profiled job's; its shares and its ranks' order still hold"
    )
