"""Step times as a picture: ranks x recent steps, stragglers marked (``plot_step_times``).

Input: ``job.step_times()`` (``rank, node, step, end_s, duration_s, kind``). Above
:data:`FOLD_RANKS` ranks the rows are nodes (each node's slowest rank per step), so 1,000 ranks
stay one readable picture. A rank (or node) whose median is :data:`SLOW_MARK` over the job's
median is a straggler: its label is red and starred. A stalled rank (``.attrs["stalled"]``) keeps
its row, its steps after the last one it ended drawn solid red, its label saying where it
stopped.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

FOLD_RANKS = 64
SLOW_MARK = 0.2
RECENT_STEPS = 100


def step_grid(frame: pd.DataFrame, steps: int = RECENT_STEPS) -> tuple[pd.DataFrame, list[bool]]:
    """(rows x step table of duration_s, which rows are stragglers); rows are ranks, or
    nodes above FOLD_RANKS ranks. A stalled rank (``frame.attrs["stalled"]``) keeps its row
    even when its last step is older than the steps shown."""
    if frame.empty:
        return pd.DataFrame(), []
    by = "node" if frame["rank"].nunique() > FOLD_RANKS else "rank"
    recent = frame[frame.step > frame.step.max() - steps]
    grid = recent.pivot_table(index=by, columns="step", values="duration_s", aggfunc="max")
    if by == "rank":
        missing = [r for r in stalled_ranks(frame) if r not in grid.index]
        if missing:
            grid = grid.reindex(sorted([*grid.index, *missing]))
            grid.index.name = by
    medians = grid.median(axis=1)
    job = medians.median()
    slow = [bool(job and m > (1 + SLOW_MARK) * job) for m in medians]
    return grid, slow


def stalled_ranks(frame: pd.DataFrame) -> dict[int, dict]:
    """The stalled ranks ``job.step_times()`` names: ``{rank: {"step", "seconds", "first"}}``."""
    found = frame.attrs.get("stalled") or {}
    return {int(r): v for r, v in found.items()}


def plot_step_times(frame: pd.DataFrame, steps: int = RECENT_STEPS, ax: Any = None) -> Any:
    """A heat map of recent step times, rank (or node) by step; stragglers in red.

    Without ``ax`` the Figure is built without pyplot (as every plot here is): returned from a
    cell it shows once, and assigned to a variable it shows nothing, under ``%matplotlib
    inline`` too (a pyplot figure would also be shown by the backend when the cell ends)."""
    grid, slow = step_grid(frame, steps)
    if ax is None:
        from dynprof_nb.analysis.figure import Figure

        ax = Figure(figsize=(9, 0.3 * max(4, len(grid)) + 1.2)).subplots()
    if grid.empty:
        ax.text(0.5, 0.5, "no step times yet", ha="center", va="center")
        ax.set_axis_off()
        return ax.figure
    import numpy as np

    image = ax.imshow(grid.to_numpy() * 1e3, aspect="auto", cmap="viridis", interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, label="step time (ms)")
    stalled = stalled_ranks(frame) if grid.index.name == "rank" else {}
    cols = list(grid.columns)
    if stalled:  # the steps after a stalled rank's last one: solid red, not white holes
        mask = np.zeros(grid.shape)
        for row, rank in enumerate(grid.index):
            if rank in stalled:
                mask[row] = [1.0 if c > stalled[rank]["step"] else np.nan for c in cols]
        from matplotlib.colors import ListedColormap

        ax.imshow(
            np.ma.masked_invalid(mask),
            aspect="auto",
            cmap=ListedColormap(["#d62728"]),
            interpolation="nearest",
        )
    ax.set_yticks(range(len(grid)))
    labels = []
    for i, s in zip(grid.index, slow, strict=True):
        label = f"{'* ' if s else ''}{grid.index.name} {i}"
        if i in stalled:
            v = stalled[i]
            first = " (first)" if v.get("first") else ""
            label = f"{grid.index.name} {i} STALLED at {v['step']}{first}"
        labels.append(label)
    ax.set_yticklabels(labels)
    for tick, s, i in zip(ax.get_yticklabels(), slow, grid.index, strict=True):
        if s or i in stalled:
            tick.set_color("red")
    ticks = list(range(0, len(cols), max(1, len(cols) // 8)))
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(cols[i]) for i in ticks])
    ax.set_xlabel("step")
    title = "step times (no profiling; * = straggler"
    ax.set_title(title + ("; red = stalled)" if stalled else ")"))
    return ax.figure
