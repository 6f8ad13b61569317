"""plot_step_times: ranks x steps, folded per node above 64 ranks, stragglers marked."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

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
