"""The few reads every rule family shares: a window's ranks, one rank's window, a frame with a
rank column. Only public window methods and frames (no trace reader is imported here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.analysis.ranked import ranks_of as ranks_of
from dynprof_nb.analysis.ranked import with_rank as with_rank

# ranks_of and with_rank live in a leaf module (the same-work rule needs them too); the advise
# rules take them from here
from dynprof_nb.traces.interface import Window

from .findings import NotApplicable


def rank_window(w: Window, rank: int) -> Any:
    """One rank's window of a multi-rank window, or the window itself."""
    sub = getattr(w, "rank_window", None)
    return sub(rank) if callable(sub) and len(ranks_of(w)) > 1 else w


def names_where(names: pd.Series, test: Callable[[pd.Series], pd.Series]) -> np.ndarray:
    """Boolean mask of ``names`` for which ``test`` (on a string Series) is true; on a
    categorical column it tests each distinct name once (a window has 100k's of events and a
    few thousand names)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = pd.Series(names.cat.categories.astype(str))
        hit = test(cats).fillna(False).to_numpy(bool)
        codes = names.cat.codes.to_numpy()
        return np.where(codes >= 0, hit[np.maximum(codes, 0)], False)
    return test(names.astype(str)).fillna(False).to_numpy(bool)


def need(frame: pd.DataFrame, cols: tuple[str, ...], what: str) -> pd.DataFrame:
    """``frame`` if it has rows and ``cols``, else :class:`NotApplicable` naming ``what``."""
    missing = [c for c in cols if c not in frame.columns]
    if frame.empty or missing:
        raise NotApplicable(f"the window has no {what}")
    return frame


def span(
    frame: pd.DataFrame,
    start: str = "start_ns",
    dur_us: str | None = "duration_us",
    end: str | None = None,
) -> tuple[int | None, int | None]:
    """[first start, last end] of ``frame``'s rows, ns (None, None without rows)."""
    if frame.empty or start not in frame:
        return None, None
    s = pd.to_numeric(frame[start], errors="coerce")
    if end is not None and end in frame:
        e = pd.to_numeric(frame[end], errors="coerce")
    elif dur_us is not None and dur_us in frame:
        e = s + pd.to_numeric(frame[dur_us], errors="coerce").fillna(0) * 1000
    else:
        e = s
    if s.notna().sum() == 0:
        return None, None
    return int(s.min()), int(e.max())


__all__ = ["names_where", "need", "rank_window", "ranks_of", "span", "with_rank"]
