"""The few pandas calls whose signature changed inside the declared range (pandas>=2.0), in one
place: a reader calls these, so a user on the oldest pandas the package declares loads
what a user on the newest does."""

from __future__ import annotations

from typing import Any

import pandas as pd

PANDAS = tuple(int(p) for p in pd.__version__.split(".")[:2])


def categorical_from_codes(codes: Any, **kw: Any) -> pd.Categorical:
    """``pd.Categorical.from_codes(codes, ..., validate=False)``: no validation pass, for codes
    that are category codes by construction. ``validate`` is pandas 2.1+; on 2.0 the codes
    are validated (correct, one more pass over them)."""
    if PANDAS >= (2, 1):
        return pd.Categorical.from_codes(codes, validate=False, **kw)
    return pd.Categorical.from_codes(codes, **kw)
