"""Plots of the multi-rank analyses of :mod:`dynprof_nb.analysis.ranks` (matplotlib Figures,
never pyplot state)."""

from __future__ import annotations

import numpy as np

from dynprof_nb.analysis import ranks
from dynprof_nb.analysis.figure import Figure
from dynprof_nb.traces.interface import Window

PARTS = [
    ("computing_us", "computing", "#4C72B0"),
    ("communication_not_overlapped_us", "communication (not overlapped)", "#DD8452"),
    ("overlapped_us", "overlapped", "#55A868"),
    ("free_us", "free", "#C7C7C7"),
]


def rank_step_breakdown(window: Window, step: int | None = None) -> Figure:
    """One stacked bar per rank: computing, communication not overlapped, overlapped, free (ms).
    A slow rank stands out by its computing; the ranks waiting for it by their communication."""
    br = ranks.step_breakdown(window)
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.add_subplot()
    if br.empty:
        ax.text(0.5, 0.5, "no step breakdown in this window", ha="center", va="center")
        return fig
    if step is not None:
        br = br[br["step"] == step]
    per = br.groupby("rank")[[c for c, _, _ in PARTS]].mean()
    x = np.arange(len(per))
    bottom = np.zeros(len(per))
    for col, label, color in PARTS:
        vals = per[col].fillna(0).to_numpy() / 1000.0
        if col == "overlapped_us":  # overlapped time is inside computing already: hatch on top
            ax.bar(
                x,
                vals,
                bottom=bottom - vals,
                color="none",
                edgecolor=color,
                hatch="//",
                label=label,
            )
            continue
        ax.bar(x, vals, bottom=bottom, color=color, label=label)
        bottom += vals
    ax.set_xticks(x, [f"rank {r}" for r in per.index])
    ax.set_ylabel("ms per step")
    ax.set_title(
        "Step time by rank" + (f" (step {step})" if step is not None else " (mean over steps)")
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def bandwidth_heatmap(window: Window, step: int | None = None) -> Figure:
    """Rank x rank heat map of link bandwidth (GB/s): slow links are the dark cells."""
    m = ranks.communication_matrix(window, step=step)
    fig = Figure(figsize=(5, 4), layout="constrained")
    ax = fig.add_subplot()
    if m.empty:
        ax.text(0.5, 0.5, "no communication matrix in this window", ha="center", va="center")
        ax.set_axis_off()
        return fig
    g = m.groupby(["src_rank", "dst_rank"]).agg(
        size_mb=("size_mb", "sum"), transit_us=("transit_us", "sum")
    )
    bw = (g["size_mb"] / (g["transit_us"] / 1000.0)).unstack()
    # rows: the ranks this window has (a 2-rank window of a 16-rank job drew 8 empty rows)
    sources, targets = sorted(bw.index), sorted(bw.columns)
    bw = bw.reindex(index=sources, columns=targets)
    fig.set_size_inches(5, min(4.0, 1.4 + 0.3 * len(sources)))
    im = ax.imshow(bw.to_numpy(dtype=float), cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(targets)), targets)
    ax.set_yticks(range(len(sources)), sources)
    ax.set_xlabel("destination rank")
    ax.set_ylabel("source rank")
    ax.set_title("Link bandwidth (GB/s)")
    fig.colorbar(im, ax=ax)
    return fig
