"""Step times as a picture: ranks x recent steps, stragglers marked (``plot_step_times``).

Input: ``job.step_times()`` (``rank, node, step, end_s, duration_s, kind``). Above
:data:`FOLD_RANKS` ranks the rows are nodes, or blocks of consecutive ranks where there are more
than :data:`MAX_ROWS` nodes or only one (each step the row's slowest rank's), so 1,024 ranks stay
one readable picture of at most 64 rows. A rank whose median is :data:`SLOW_MARK` over the median
rank's is a straggler: its row's label is red and starred, and a folded row names it
(``* node16: rank 517``). The colour scale tops out at :data:`CLIP` x the slowest row's median,
so a few steps every rank took 3x longer saturate instead of squeezing a rank 30% slow for good
into the bottom shades. A stalled rank (``.attrs["stalled"]``) keeps its row, its steps after the
last one it ended drawn solid red, its label saying where it stopped (a folded row names it).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

FOLD_RANKS = 64  # more ranks than this: one row per node (or per block of ranks)
MAX_ROWS = 64  # never more rows: more nodes than this (or one node) fold into blocks of ranks
SLOW_MARK = 0.2
RECENT_STEPS = 100
CLIP = 1.25  # the colour scale tops out at this x the slowest row's median step
NAMED = 3  # slow ranks named in a folded row's label


def row_of(frame: pd.DataFrame) -> tuple[str, pd.Series]:
    """What a row of the picture is, and each record's row: ``"rank"`` up to FOLD_RANKS ranks;
    above, ``"node"`` (2 to MAX_ROWS nodes) or else ``"ranks"``, blocks of consecutive ranks
    (a single machine's 1,000 ranks, or 256 nodes), so the picture never has more than
    MAX_ROWS rows."""
    ranks = sorted(frame["rank"].unique())
    if len(ranks) <= FOLD_RANKS:
        return "rank", frame["rank"]
    nodes = frame["node"].nunique() if "node" in frame else 0
    if 1 < nodes <= MAX_ROWS:
        return "node", frame["node"].astype(str)
    size = -(-len(ranks) // MAX_ROWS)
    blocks = [ranks[i : i + size] for i in range(0, len(ranks), size)]
    label = {r: f"ranks {b[0]}-{b[-1]}" for b in blocks for r in b}
    return "ranks", frame["rank"].map(label)


def step_grid(frame: pd.DataFrame, steps: int = RECENT_STEPS) -> tuple[pd.DataFrame, list[bool]]:
    """(rows x step table of duration_s, which rows hold a straggler); rows are ranks, or above
    FOLD_RANKS ranks nodes or blocks of ranks (:func:`row_of`), each step the slowest rank's.
    A stalled rank (``frame.attrs["stalled"]``) keeps its row even when its last step is
    older than the steps shown."""
    grid, slow = _grid(frame, steps)
    return grid, [bool(s) for s in slow]


def _grid(frame: pd.DataFrame, steps: int) -> tuple[pd.DataFrame, list[list[int]]]:
    """The grid and, per row, its straggler ranks: a rank whose median step over the steps
    shown is SLOW_MARK over the median rank's (judged per rank, so a folded row names the
    rank, not the node)."""
    if frame.empty:
        return pd.DataFrame(), []
    by, key = row_of(frame)
    recent = frame[frame.step > frame.step.max() - steps]
    rows = key.loc[recent.index]
    grid = recent.assign(_row=rows).pivot_table(
        index="_row", columns="step", values="duration_s", aggfunc="max"
    )
    if by == "rank":
        missing = [r for r in stalled_ranks(frame) if r not in grid.index]
        if missing:
            grid = grid.reindex(sorted([*grid.index, *missing]))
    else:  # node10 after node9: rows in the order of their first rank
        first = frame.groupby(key.to_numpy())["rank"].min()
        grid = grid.loc[sorted(grid.index, key=lambda k: first[k])]
    grid.index.name = by
    medians = recent.groupby("rank")["duration_s"].median()
    job = medians.median()
    slow_ranks = set(medians.index[medians > (1 + SLOW_MARK) * job]) if job else set()
    pairs = pd.DataFrame({"rank": recent["rank"], "row": rows}).drop_duplicates("rank")
    row_of_rank = dict(zip(pairs["rank"].tolist(), pairs["row"].tolist(), strict=True))
    per_row: dict[Any, list[int]] = {}
    for rank in sorted(slow_ranks):  # a dict lookup each: half the ranks slow stays linear
        per_row.setdefault(row_of_rank[rank], []).append(int(rank))
    return grid, [per_row.get(i, []) for i in grid.index]


def _ranks_named(ranks: list[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:NAMED])
    more = f" +{len(ranks) - NAMED} more" if len(ranks) > NAMED else ""
    return f"rank{'s' * (len(ranks) > 1)} {shown}{more}"


def stalled_ranks(frame: pd.DataFrame) -> dict[int, dict]:
    """The stalled ranks ``job.step_times()`` names: ``{rank: {"step", "seconds", "first"}}``."""
    found = frame.attrs.get("stalled") or {}
    return {int(r): v for r, v in found.items()}


def plot_step_times(frame: pd.DataFrame, steps: int = RECENT_STEPS, ax: Any = None) -> Any:
    """A heat map of recent step times, rank (or node) by step; stragglers in red.

    Without ``ax`` the Figure is built without pyplot (as every plot here is): returned from a
    cell it shows once, and assigned to a variable it shows nothing, under ``%matplotlib
    inline`` too (a pyplot figure would also be shown by the backend when the cell ends)."""
    grid, slow_lists = _grid(frame, steps)
    slow = [bool(x) for x in slow_lists]
    if ax is None:
        from dynprof_nb.analysis.figure import Figure

        ax = Figure(figsize=(9, 0.3 * max(4, len(grid)) + 1.2)).subplots()
    if grid.empty:
        ax.text(0.5, 0.5, "no step times yet", ha="center", va="center")
        ax.set_axis_off()
        return ax.figure

    import numpy as np

    values = grid.to_numpy() * 1e3
    # a robust scale: its top a little over the slowest row's median, so a rank 30% slow for
    # good stays a colour of its own beside a few steps every rank took 3x longer (those
    # saturate, the bar's arrow says so) instead of being squeezed into the bottom shades
    top = float(grid.median(axis=1).max()) * 1e3 * CLIP  # a stalled rank's row may be empty
    clipped = bool(np.nanmax(values) > top)
    image = ax.imshow(
        values,
        aspect="auto",
        cmap="viridis",
        interpolation="nearest",
        vmin=float(np.nanmin(values)),
        vmax=top if clipped else None,
    )
    over = f"; {top:,.0f} or more: top colour" if clipped else ""
    ax.figure.colorbar(
        image, ax=ax, label=f"step time (ms{over})", extend="max" if clipped else "neither"
    )
    stalled = stalled_ranks(frame)
    cols = list(grid.columns)
    if stalled and grid.index.name == "rank":  # after a stalled rank's last step: solid red
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
    by, key = row_of(frame)
    first = pd.DataFrame({"rank": frame["rank"], "row": key}).drop_duplicates("rank")
    rows_of_ranks = dict(zip(first["rank"].tolist(), first["row"].tolist(), strict=True))
    labels = [
        _label(by, i, named, stalled, rows_of_ranks)
        for i, named in zip(grid.index, slow_lists, strict=True)
    ]
    ax.set_yticklabels(labels)
    for tick, s in zip(ax.get_yticklabels(), slow, strict=True):
        if s or "STALLED" in tick.get_text():
            tick.set_color("red")
    if grid.index.name != "rank":
        per_row = frame["rank"].nunique() / len(grid)
        ax.set_ylabel(
            f"{grid.index.name} (~{per_row:.0f} ranks a row: each step its slowest rank's)"
        )
    ticks = list(range(0, len(cols), max(1, len(cols) // 8)))
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(cols[i]) for i in ticks])
    ax.set_xlabel("step")
    title = "step times (no profiling; * = straggler"
    ax.set_title(title + ("; red = stalled)" if stalled else ")"))
    return ax.figure


def _label(
    by: str, row: Any, slow: list[int], stalled: dict[int, dict], rows_of_ranks: dict[int, Any]
) -> str:
    """A row's label: ``rank 3``, ``node7``, ``ranks 0-15``; a straggler starred, with its
    slow ranks named when the row folds several (``* node16: rank 517``); a stalled rank
    with where it stopped."""
    if by == "rank":
        if row in stalled:
            v = stalled[row]
            first = " (first)" if v.get("first") else ""
            return f"rank {row} STALLED at {v['step']}{first}"
        return f"{'* ' if slow else ''}rank {row}"
    label = f"{'* ' if slow else ''}{row}" + (f": {_ranks_named(slow)}" if slow else "")
    inside = [r for r in sorted(stalled) if rows_of_ranks.get(r) == row]
    if inside:
        label += f"; rank {inside[0]} STALLED at {stalled[inside[0]]['step']}"
    return label
