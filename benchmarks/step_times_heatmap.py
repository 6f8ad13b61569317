"""The step-times heat map at 1,024 ranks: the picture in docs/cluster.md, and its cost.

    PYTHONPATH=$PWD python benchmarks/step_times_heatmap.py --out docs/img/step_times_1024.png

A synthetic ``job.step_times()`` frame (32 nodes x 32 ranks, 200 steps of about 1 s, 2% noise):
ranks 100, 517 and 900 are 30% slower for good, and every rank takes 3x longer over steps
120-126 (a checkpoint, say). The heat map is drawn as ``job.plot_step_times(200)`` would, saved
as a PNG, and the CPU time to draw it is printed for 256, 1,024 and 4,096 ranks (the picture
has at most 64 rows, so the cost is the frame's pivot: linear in ranks x steps).
"""

from __future__ import annotations

import argparse
import time

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dynprof_nb.analysis.steptimes import plot_step_times  # noqa: E402

OUTLIERS = (100, 517, 900)
SLOWDOWN = (120, 126)


def synthetic(ranks: int = 1024, per_node: int = 32, steps: int = 200) -> pd.DataFrame:
    """``job.step_times()`` of ``ranks`` ranks: OUTLIERS 1.3x slow, every rank 3x in SLOWDOWN."""
    rng = np.random.default_rng(0)
    rank = np.repeat(np.arange(ranks), steps)
    step = np.tile(np.arange(1, steps + 1), ranks)
    duration = 1.0 + rng.normal(0, 0.02, rank.size)
    duration[np.isin(rank, OUTLIERS)] *= 1.3
    duration[(step >= SLOWDOWN[0]) & (step <= SLOWDOWN[1])] *= 3.0
    node = pd.Series(rank // per_node).map(lambda n: f"node{n}")
    end = pd.Series(duration).groupby(rank).cumsum()
    return pd.DataFrame(
        {"rank": rank, "node": node, "step": step, "end_s": end, "duration_s": duration,
         "kind": "step"}
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="step_times_1024.png")
    args = parser.parse_args()
    for ranks in (256, 1024, 4096):
        frame = synthetic(ranks)
        t0 = time.process_time()
        figure = plot_step_times(frame, steps=200)
        figure.savefig(args.out if ranks == 1024 else "/dev/null", format="png", dpi=72,
                       bbox_inches="tight")
        rows = len(figure.axes[0].get_yticklabels())
        print(f"{ranks:>5} ranks: {rows} rows, drawn and saved in "
              f"{time.process_time() - t0:.2f} s CPU")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
