"""plot_step_times: ranks x steps, folded per node (or block of ranks) above 64 ranks, stragglers
marked and named; readable at 1,024 ranks (docs/img/step_times_1024.png)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from dynprof_nb.analysis.steptimes import plot_step_times, step_grid  # noqa: E402


def frame(ranks: int, per_node: int, slow: int) -> pd.DataFrame:
    rows = [{"rank": r, "node": f"n{r // per_node}", "step": s, "end_s": s * 0.01,
             "duration_s": 0.06 if r == slow else 0.01, "kind": "step"}
            for r in range(ranks) for s in range(1, 31)]
    return pd.DataFrame(rows)


def test_small_jobs_show_ranks_and_mark_the_straggler() -> None:
    grid, slow = step_grid(frame(8, 2, slow=3))
    assert grid.index.name == "rank" and list(grid.index) == list(range(8))
    assert slow == [r == 3 for r in range(8)]
    fig = plot_step_times(frame(8, 2, slow=3))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[3].startswith("* ")


def test_large_jobs_fold_per_node() -> None:
    grid, slow = step_grid(frame(128, 8, slow=77))
    assert grid.index.name == "node" and len(grid) == 16
    assert slow == [n == "n9" for n in grid.index]


def synthetic_1024(nodes: int) -> pd.DataFrame:
    """1,024 ranks x 200 steps on ``nodes`` nodes: ranks 100, 517 and 900 are 30% slow for
    good, every rank 3x slow over steps 120-126 (what docs/img/step_times_1024.png shows)."""
    import numpy as np

    rng = np.random.default_rng(1)
    rank = np.repeat(np.arange(1024), 200)
    step = np.tile(np.arange(1, 201), 1024)
    duration = 1.0 + rng.normal(0, 0.02, rank.size)
    duration[np.isin(rank, [100, 517, 900])] *= 1.3
    duration[(step >= 120) & (step <= 126)] *= 3.0
    node = pd.Series(rank // (1024 // nodes)).map(lambda n: f"node{n}")
    return pd.DataFrame({"rank": rank, "node": node, "step": step, "end_s": step * 1.0,
                         "duration_s": duration, "kind": "step"})


@pytest.mark.parametrize("nodes, rows, outlier_rows", [
    (32, 32, ["* node3: rank 100", "* node16: rank 517", "* node28: rank 900"]),
    (1, 64, ["* ranks 96-111: rank 100", "* ranks 512-527: rank 517",
             "* ranks 896-911: rank 900"]),
])
def test_1024_ranks_fold_and_name_each_outlier_rank(nodes, rows, outlier_rows) -> None:
    """At 1,024 ranks the picture has one row per node (32), or per 16 ranks on one machine
    (64), in rank order; the three slow ranks are named on their rows, in red, and nothing
    else is starred; a short slowdown of every rank does not wash them out: the colour scale
    stops a little over the slowest row and the slowdown's steps saturate."""
    frame = synthetic_1024(nodes)
    fig = plot_step_times(frame, steps=200)
    ax = fig.axes[0]
    ticks = ax.get_yticklabels()
    labels = [t.get_text() for t in ticks]
    assert len(labels) == rows
    assert [x for x in labels if x.startswith("*")] == outlier_rows
    assert labels[:2] == (["node0", "node1"] if nodes > 1 else ["ranks 0-15", "ranks 16-31"])
    assert all(t.get_color() == "red" for t in ticks if t.get_text().startswith("*"))
    image = ax.images[0]
    shade = image.norm(image.get_array())  # 0..1 along the colour bar, >1 above its top
    starred = [i for i, x in enumerate(labels) if x.startswith("*")]
    calm = [i for i in range(rows) if i not in starred]
    steady = list(range(0, 110))  # before the slowdown
    assert shade[starred][:, steady].mean() > 0.4  # the outliers' rows: mid-scale and up
    assert shade[calm][:, steady].mean() < 0.2  # the others: the bottom shades
    assert (shade[:, 119:126] >= 1).all()  # the slowdown: over the top, saturated
    assert "or more: top colour" in fig.axes[1].get_ylabel()


def test_stalled_rank_in_a_folded_row_is_named() -> None:
    frame = synthetic_1024(32)
    frame = frame[~((frame["rank"] == 700) & (frame.step > 150))]
    frame.attrs["stalled"] = {700: {"step": 150, "seconds": 60.0, "first": True}}
    labels = [t.get_text() for t in plot_step_times(frame, steps=200).axes[0].get_yticklabels()]
    assert "node21; rank 700 STALLED at 150" in labels
