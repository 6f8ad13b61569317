"""The kernels frame's categoricals, built from the events' codes, are the ones the long way
(``astype(object).astype("category")``) gives: values, category order and dtype, code width
(issue 32 item 3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_series_equal

from dynprof_nb.traces.formats.derived.from_events import used_categories

RNG = np.random.default_rng(32)
NAMES = {f"kernel_{i}" for i in range(700)} | {"", "Zz", "ä", "a b"}
SORTED = pd.Index(sorted(NAMES), dtype=object)


def _column(codes: np.ndarray, categories: pd.Index) -> pd.Series:
    cat = pd.Categorical.from_codes(codes, categories=categories)
    return pd.Series(cat, index=np.arange(len(codes)) * 3 + 1, name="name")


@pytest.mark.parametrize(
    "column",
    [
        _column(RNG.integers(-1, len(SORTED), 5000), SORTED),  # some NA, most names used
        _column(RNG.integers(3, 9, 300), SORTED),  # a few names of many
        _column(np.full(4, -1), SORTED),  # all NA
        _column(np.zeros(0, int), SORTED),  # no rows
        _column(RNG.integers(0, 3, 50), pd.Index(["z", "a", "m"], dtype=object)),  # unsorted
        pd.Series(pd.Categorical([3, 1, 3])),  # not strings: the long way
        pd.Series(["b", None, "a"], dtype=object),  # not a categorical
    ],
    ids=["na", "few", "all-na", "empty", "unsorted", "ints", "object"],
)
def test_same_as_the_long_way(column: pd.Series) -> None:
    want = column.astype(object).astype("category")
    got = used_categories(column)
    assert_series_equal(got, want)
    assert got.cat.categories.dtype == want.cat.categories.dtype
    assert got.cat.codes.dtype == want.cat.codes.dtype
