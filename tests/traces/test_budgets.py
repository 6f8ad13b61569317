"""Read budgets (dynprof_nb/traces/budget.py): each limit stops the read with a TraceFormatError
naming the file, the limit and the variable that raises it; raised, the same file loads."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

import dynprof_nb
from dynprof_nb import TraceFormatError
from dynprof_nb.traces.errors import TraceRepairWarning


def _trace(n: int = 3000, pad: int = 0) -> bytes:
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
           "ts": 1000 + i, "dur": 1, "args": {"pad": " " * pad}} for i in range(n)]
    return json.dumps({"traceEvents": ev}).encode()


def test_gzip_ratio_limit_names_the_variable_and_raising_it_loads(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(_trace(pad=2000)))  # whitespace: compresses far beyond 50x
    ratio = len(gzip.decompress(p.read_bytes())) / p.stat().st_size
    assert ratio > 50
    with pytest.raises(TraceFormatError, match=rf"{p}.*inflates: over the limit of 50x.*"
                       "DYNPROF_NB_GZIP_RATIO"):
        dynprof_nb.load_trace(p).events  # noqa: B018
    monkeypatch.setenv("DYNPROF_NB_GZIP_RATIO", str(int(ratio) + 1))
    assert len(dynprof_nb.load_trace(p).events) == 3000


def test_absolute_text_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(_trace()))
    monkeypatch.setenv("DYNPROF_NB_MAX_TEXT", "64K")
    with pytest.raises(TraceFormatError, match=r"over the limit of 64\.0 KiB.*DYNPROF_NB_MAX_TEXT"):
        dynprof_nb.load_trace(p).events  # noqa: B018


def test_load_memory_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Over the budget a Kineto trace streams and its events go out of core (issue 25); with
    both turned off it is refused, as any trace that must be read whole."""
    p = tmp_path / "t.json"
    p.write_bytes(_trace())
    monkeypatch.setenv("DYNPROF_NB_LOAD_MEMORY", "100K")
    monkeypatch.setenv("DYNPROF_NB_CACHE", str(tmp_path / "cache"))
    ev = dynprof_nb.load_trace(p).events
    assert type(ev).__name__ == "OutOfCoreEvents" and len(ev) == 3000
    monkeypatch.setenv("DYNPROF_NB_STREAM", "0")
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "0")
    with pytest.raises(TraceFormatError, match=r"t\.json: reading this trace whole would take "
                       r"about .* over the load budget of 100\.0 KiB.*DYNPROF_NB_LOAD_MEMORY"):
        dynprof_nb.load_trace(p).events  # noqa: B018
    monkeypatch.delenv("DYNPROF_NB_LOAD_MEMORY")
    assert len(dynprof_nb.load_trace(p).events) == 3000


def test_a_concatenated_gzip_reads_every_member(tmp_path: Path):
    text = _trace()
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(text[:5000]) + gzip.compress(text[5000:]))
    assert len(dynprof_nb.load_trace(p).events) == 3000


def test_binary_past_the_first_megabyte_is_not_read_for(tmp_path: Path):
    """Zeros are found in the first megabyte, before the rest is read: a 2 GB sparse file
    of zeros is refused from its head (its time is bounded in test_reliability_hostile)."""
    p = tmp_path / "t.json"
    with open(p, "wb") as fh:
        fh.truncate(1 << 31)
    with pytest.raises(TraceFormatError, match="at byte 0: binary data"):
        dynprof_nb.load_trace(p).events  # noqa: B018


def test_error_messages_are_capped():
    exc = TraceFormatError("f.json", "x" * 100_000)
    assert len(str(exc)) < 2100 and "more characters" in str(exc)


def test_a_symlink_inside_the_window_is_read(tmp_path: Path):
    """Only links that lead out of the window are refused."""
    win = tmp_path / "rank0_start1_stop2"
    (win / "data").mkdir(parents=True)
    (win / "data" / "real.json").write_bytes(_trace(10))
    os.symlink(win / "data" / "real.json", win / "trace.json")
    assert len(dynprof_nb.load_window(win).events) == 10
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(_trace(5))
    (win / "trace.json").unlink()
    os.symlink(outside, win / "trace.json")
    with pytest.warns(TraceRepairWarning, match="symlink.*lead out of the window.*trace.json"):
        with pytest.raises(TraceFormatError, match="no trace files"):
            dynprof_nb.load_window(win)


def test_database_string_table_within_the_load_memory_budget(monkeypatch: pytest.MonkeyPatch):
    from testdata import fixtures_dir

    db = next((fixtures_dir() / "ascend_real" / "db_level0").glob("rank0*/*/ascend_*.db"))
    monkeypatch.setenv("DYNPROF_NB_LOAD_MEMORY", "10K")
    with pytest.raises(TraceFormatError, match=r"reading its STRING_IDS would take about .*"
                       "over the load budget of 10.0 KiB.*DYNPROF_NB_LOAD_MEMORY"):
        dynprof_nb.load_trace(db).events  # noqa: B018
    monkeypatch.delenv("DYNPROF_NB_LOAD_MEMORY")
    assert len(dynprof_nb.load_trace(db).events) > 1000
