"""Step time, one definition for every place that says "the median step" of a window.

A step's time is its duration on one rank (``steps.duration_us``), and a rank's step time is
the **median of its own steps**. The summary's notes, its ``Ranks`` table
(``median_step_us``) and ``w.advise()``'s "step outliers" all use it (docs/definitions.md,
"Step time"), so one window never shows two "median" steps for one rank. A median per step
of the slowest rank's times is another number (the job's step, which ``w.explain()`` uses,
under that name): ranks that drift apart without a barrier have their slow steps at different
step numbers, so that maximum is larger than any rank's own median.
"""

from __future__ import annotations

import pandas as pd

#: a step this many times its rank's median step or more stands out
OUTLIER_FACTOR = 1.5
#: a rank with fewer steps has no median to stand out from
MIN_STEPS = 3

OUTLIER_COLUMNS = ["rank", "step", "duration_us", "median_us", "factor", "start_ns"]


def rank_medians(steps: pd.DataFrame) -> pd.Series:
    """Each rank's step time: the median of its steps' ``duration_us``, indexed by rank (a
    frame without a ``rank`` column is one rank, 0)."""
    st = _timed(steps)
    return st.groupby("rank")["duration_us"].median()


def step_outliers(steps: pd.DataFrame, factor: float = OUTLIER_FACTOR) -> pd.DataFrame:
    """The steps that took ``factor`` x their rank's median step or more (ranks with at least
    :data:`MIN_STEPS` timed steps), by rank then step: ``rank``, ``step``, ``duration_us``,
    ``median_us`` (the rank's, :func:`rank_medians`), ``factor`` (duration / median) and
    ``start_ns`` (NA where the steps frame has none)."""
    st = _timed(steps)
    rows = []
    for rank, part in st.groupby("rank", sort=True):
        if len(part) < MIN_STEPS:
            continue
        med = float(part["duration_us"].median())
        if not med > 0:
            continue
        slow = part[part["duration_us"] >= factor * med].sort_values("step")
        for row in slow.itertuples(index=False):
            d = float(row.duration_us)
            start = getattr(row, "start_ns", None)
            rows.append((int(rank), int(row.step), d, med, d / med, start))
    out = pd.DataFrame(rows, columns=OUTLIER_COLUMNS)
    out["start_ns"] = out["start_ns"].astype("Int64")
    return out


def _timed(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps that have a duration, with a ``rank`` column (0 where the frame has none)."""
    if steps.empty or "duration_us" not in steps:
        return pd.DataFrame(columns=["rank", "step", "duration_us", "start_ns"])
    st = steps[steps["duration_us"].notna()]
    return st if "rank" in st else st.assign(rank=0)
