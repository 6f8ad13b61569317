"""The frame cache and the out-of-core partitions under a careless or hostile setup (issue 25):
a size variable set to garbage, the cache turned off, another kernel's loads, a typo given to
``dynprof cache --clear``. Each case once failed a load, lost a live frame or wrote where it
should not."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from testdata import REPO

from dynprof_nb.traces import budget, cache, load_trace

SMALL = REPO / "tests" / "data" / "kineto" / "hta__timeline_analysis__sampled_rank-0.json.gz"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "t" / SMALL.name
    p.parent.mkdir()
    shutil.copy(SMALL, p)
    return p


@pytest.mark.parametrize("value", ["inf", "1e400", "-5", "abc", "nan"])
def test_a_cache_size_that_is_not_a_size_never_fails_a_load(
    value: str, trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "c"))
    monkeypatch.setenv(cache.ENV_LIMIT, value)
    cache._bad_limits.clear()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert len(load_trace(trace).events) > 0  # "inf" once raised OverflowError here
    assert any(cache.ENV_LIMIT in str(w.message) for w in said), [str(w.message) for w in said]
    assert cache.limit_bytes() == cache.DEFAULT_LIMIT_BYTES
    assert list((tmp_path / "c").glob("*.parquet")), "the entries were kept under the default"


@pytest.mark.parametrize(
    ("value", "size"),
    [("2GB", 2 << 30), ("500MB", 500 << 20), ("2GiB", 2 << 30), ("1k", 1024), ("0", 0)],
)
def test_cache_size_units(value: str, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.ENV_LIMIT, value)  # "2GB" once meant 2 bytes: nothing kept
    assert cache.limit_bytes() == size


def test_a_load_limit_of_inf_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DYNPROF_NB_LOAD_MEMORY", "inf")  # once an OverflowError in every load
    assert budget.load_memory() > 0
