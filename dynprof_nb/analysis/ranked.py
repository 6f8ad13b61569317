"""The rank of each row of a window's frames: a one-rank window's frames carry no ``rank``
column, and every per-rank table (advise, explain, the same-work rule) must group them the same
way. A leaf module, so that the rules and the advise package can both import it."""

from __future__ import annotations

import pandas as pd

from dynprof_nb.traces.interface import Window


def ranks_of(w: Window) -> list[int]:
    """The window's ranks (one window without a rank: ``[0]``)."""
    ranks = getattr(w, "ranks", None)
    if ranks:
        return [int(r) for r in ranks]
    r = getattr(w, "rank", None)
    return [int(r) if r is not None else 0]


def with_rank(frame: pd.DataFrame, w: Window) -> pd.DataFrame:
    """``frame`` with a ``rank`` column (a one-rank window's frames may have none)."""
    if "rank" in frame.columns:
        return frame
    return frame.assign(rank=ranks_of(w)[0])
