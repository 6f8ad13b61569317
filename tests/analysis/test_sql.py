"""``w.sql(...)``: SQL over a window's frames gives what pandas gives for the same question, on
every format (Kineto, the built-in backend's, Ascend text and .db, MindSpore CPU; one rank and
several), with the frame cache off and on (where it reads the cache's Parquet in place)."""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from testdata import REPO, fixtures_dir, write_builtin_window

import dynprof_nb
from dynprof_nb import optional
from dynprof_nb.traces import cache
from dynprof_nb.traces.multirank import MultiRankWindow
from dynprof_nb.traces.window import FRAMES

pytest.importorskip("duckdb")

SAMPLES = REPO / "dynprof_nb" / "samples"
KINETO = fixtures_dir() / "kineto"


def _kineto_ranks(root: Path) -> Path:
    """Two Kineto ranks in one folder: the A100 sample and a CPU-only trace."""
    d = root / "kineto_ranks"
    d.mkdir()
    shutil.copy(SAMPLES / "kineto_gpu" / "sampled_rank-0.json.gz", d / "rank0.1.pt.trace.json.gz")
    cpu = KINETO / "hta__cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    shutil.copy(cpu, d / "rank1.2.pt.trace.json.gz")
    return d


def _builtin_ranks(root: Path) -> Path:
    d = root / "builtin_ranks"
    for rank in (0, 1):
        write_builtin_window(d, rank=rank, slow_step=2 if rank else None)
    return d


#: every fixture format, one rank and several: name -> how to make its path in a folder
WINDOWS: dict[str, Callable[[Path], Path]] = {
    "kineto_gpu": lambda _: SAMPLES / "kineto_gpu" / "sampled_rank-0.json.gz",
    "kineto_two_ranks": _kineto_ranks,
    "torch_cpu": lambda _: fixtures_dir() / "torch_cpu" / "rank0.1795968823191922673.pt.trace.json",
    "builtin": lambda root: write_builtin_window(root / "builtin"),
    "builtin_two_ranks": _builtin_ranks,
    "ascend_text": lambda _: SAMPLES / "ascend_text" / "rank0_ascend_pt",
    "ascend_text_comm": lambda _: fixtures_dir() / "ascend_real" / "text_level1_comm",
    "ascend_db_two_ranks": lambda _: SAMPLES / "ascend_db",
    "mindspore_cpu": lambda _: SAMPLES / "mindspore_cpu" / "rank0_start5_stop8",
}


def _load(path: Path) -> Any:
    return dynprof_nb.load_trace(path) if path.is_file() else dynprof_nb.load_window(path)


@pytest.fixture(params=["cache off", "cache on"])
def cached(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bool:
    on = request.param == "cache on"
    if on:
        monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "frame-cache"))
        monkeypatch.delenv(cache.ENV_LIMIT, raising=False)
    return on


@pytest.fixture(params=list(WINDOWS))
def window(request: pytest.FixtureRequest, tmp_path: Path, cached: bool) -> Any:
    """A freshly loaded window, nothing read yet; with the cache on, a first load in this
    process wrote every frame to the cache, so this one's tables are its Parquet entries."""
    path = WINDOWS[request.param](tmp_path)
    if cached:
        _load(path).load_all()
    return _load(path)


def _cells(values: pd.Series, as_text: bool) -> list[Any]:
    out = []
    for v in values.astype(object).tolist():
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        elif as_text:
            out.append(str(v))
        elif isinstance(v, (np.integer, np.floating, np.bool_)):
            out.append(v.item())
        else:
            out.append(v)
    return out


def assert_same(answer: pd.DataFrame, frame: pd.DataFrame, ordered: bool = False) -> None:
    """The SQL answer holds the frame's columns, in order, and its rows (in order with
    ``ordered``), cell for cell: text where SQL has text (a categorical of mixed ints and
    strings, Kineto's pids), numbers exact, missing as missing."""
    assert list(answer.columns) == list(frame.columns)
    assert len(answer) == len(frame)
    cols = []
    for c in frame.columns:
        text = not pd.api.types.is_numeric_dtype(answer[c].dtype) or answer[c].dtype == bool
        cols.append((_cells(answer[c], text), _cells(frame[c], text)))
    got = list(zip(*(a for a, _ in cols), strict=True))
    want = list(zip(*(f for _, f in cols), strict=True))
    if not ordered:
        got, want = sorted(got, key=repr), sorted(want, key=repr)
    assert got == want


def test_every_table_is_its_frame(window: Any, cached: bool) -> None:
    answers = {k: window.sql(f"select * from {k}") for k in FRAMES}
    if cached:  # read in place from the cache's Parquet: no frame was built for the query
        children = window.children if isinstance(window, MultiRankWindow) else [window]
        assert not any(c.loaded(k) for c in [window, *children] for k in FRAMES)
    for kind in FRAMES:
        assert_same(answers[kind], window.frame(kind))
    if not isinstance(window, MultiRankWindow):  # one rank, one piece: the frame's order
        assert_same(answers["events"], window.events, ordered=True)


def test_questions_answer_as_pandas_does(window: Any) -> None:
    by_name = window.sql(
        "select name, count(*) as n, sum(dur_ns) as total_ns, max(dur_ns) as longest_ns "
        "from events where ph = 'X' group by name"
    )
    top = window.sql("select name, self_us from ops order by self_us desc, name limit 5")
    per_step = window.sql(
        "select step, count(*) as n, sum(duration_us) as us from kernels "
        "where step is not null group by step order by step"
    )
    ev = window.events
    ev = ev[ev["ph"] == "X"]
    want = ev.groupby(ev["name"].astype(str), observed=True)["dur_ns"].agg(["count", "sum", "max"])
    got = by_name.set_index("name").sort_index()
    want = want.sort_index()
    assert list(got.index) == list(want.index)
    assert got["n"].tolist() == want["count"].tolist()
    assert got["total_ns"].astype("int64").tolist() == want["sum"].tolist()
    assert got["longest_ns"].tolist() == want["max"].tolist()

    ops = window.ops.assign(name=window.ops["name"].astype(str))
    want_top = ops.sort_values(["self_us", "name"], ascending=[False, True]).head(5)
    assert top["name"].tolist() == want_top["name"].tolist()
    assert top["self_us"].tolist() == want_top["self_us"].tolist()

    k = window.kernels.dropna(subset=["step"])
    want_steps = k.groupby("step")["duration_us"].agg(["count", "sum"])
    assert per_step["step"].tolist() == want_steps.index.tolist()
    assert per_step["n"].tolist() == want_steps["count"].tolist()
    assert per_step["us"].tolist() == pytest.approx(want_steps["sum"].tolist(), rel=1e-12)


@pytest.mark.parametrize("name", ["kineto_gpu", "ascend_text", "ascend_db_two_ranks"])
def test_only_the_tables_a_query_names_are_read(tmp_path: Path, name: str) -> None:
    """A query over ``ops`` and ``steps`` reads what ``w.ops`` and ``w.steps`` read, nothing
    more: no kernels or memory, and events only where those frames are derived from them."""
    w = _load(WINDOWS[name](tmp_path))
    got = w.sql("select count(*) as n from ops o join steps s on true")
    assert got["n"].tolist() == [len(w.ops) * len(w.steps)]
    plain = _load(WINDOWS[name](tmp_path))
    plain.ops, plain.steps  # noqa: B018  what the frames alone read
    assert [w.loaded(k) for k in FRAMES] == [plain.loaded(k) for k in FRAMES]
    assert not w.loaded("kernels") and not w.loaded("memory")


def test_a_multi_rank_window_has_a_rank_column(tmp_path: Path, cached: bool) -> None:
    w = _load(WINDOWS["kineto_two_ranks"](tmp_path))
    got = w.sql("select rank, count(*) as n from events group by rank order by rank")
    assert got["rank"].tolist() == [0, 1]
    if cached:  # each rank's events were written to the cache by its first pass, never built
        assert not any(c.loaded("events") for c in w.children)
    assert got["n"].tolist() == w.events.groupby("rank").size().tolist()


def test_an_out_of_core_events_frame_is_read_a_partition_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A trace whose events are a Dask frame over partitions (forced here) answers as pandas
    does, a self-join included (the table is read twice)."""
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
    w = _load(KINETO / "hta__df_index_resolver__df_index_resolver.json.gz")
    got = w.sql(
        "select name, count(*) as n, sum(dur_ns) as ns from events group by name "
        "order by ns desc, name limit 5"
    )
    ev = w.events.compute()
    want = ev.groupby(ev["name"].astype(str))["dur_ns"].agg(["count", "sum"])
    want = want.reset_index().sort_values(["sum", "name"], ascending=[False, True]).head(5)
    assert got["name"].tolist() == want["name"].tolist()
    assert got["n"].tolist() == want["count"].tolist()
    assert got["ns"].astype("int64").tolist() == want["sum"].tolist()
    got = w.sql("select count(*) as n from events a join events b using (ts_ns)")
    assert got["n"].tolist() == [int(ev["ts_ns"].value_counts().pow(2).sum())]


def test_a_query_keeps_to_the_load_budget_and_spills_to_a_private_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's memory limit is the readers' budget (``DYNPROF_NB_LOAD_MEMORY``), and what does
    not fit goes to a private temporary folder, removed after the query: never ``./.tmp``."""
    monkeypatch.setenv("DYNPROF_NB_LOAD_MEMORY", str(300 << 20))
    monkeypatch.chdir(tmp_path)
    w = _load(WINDOWS["mindspore_cpu"](tmp_path))
    got = w.sql(
        "select current_setting('memory_limit') as m, current_setting('temp_directory') as t, "
        "(select count(*) from events) as n"
    )
    assert got["m"].iloc[0] in ("300.0 MiB", "314.5 MB")  # (DuckDB's units changed in 1.3)
    spill = Path(got["t"].iloc[0])
    assert spill.name.startswith("dynprof_nb-sql-") and not spill.exists()
    assert got["n"].tolist() == [len(w.events)]
    assert list(tmp_path.iterdir()) == []  # nothing beside the notebook


def test_an_entry_removed_under_a_query_is_read_from_the_trace_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process keeping the cache to its bound may remove an entry between the view
    over it and the query: the query is asked again without the cache's files."""
    from dynprof_nb.analysis import sql as sql_module

    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "frame-cache"))
    path = WINDOWS["ascend_text"](tmp_path)
    _load(path).load_all()
    w = _load(path)
    found = cache.entry_file

    def removed_at_once(window: Any, kind: str) -> Any:
        got = found(window, kind)
        if got is not None:
            got[0].unlink()  # as the size bound's trim does, from another process
        return got

    monkeypatch.setattr(sql_module.cache, "entry_file", removed_at_once)
    got = w.sql("select count(*) as n, sum(duration_us) as us from kernels")
    assert got["n"].tolist() == [len(w.kernels)]
    assert got["us"].iloc[0] == pytest.approx(w.kernels["duration_us"].sum(), rel=1e-12)


def test_the_side_tables(tmp_path: Path) -> None:
    w = _load(WINDOWS["ascend_text_comm"](tmp_path))
    links = w.sql("select * from communication_links")
    assert len(links) and len(links) == len(w.communication_links())
    bw = w.sql("select sum(size_mb) as mb from communication_bandwidth")
    assert bw["mb"].iloc[0] == pytest.approx(w.communication_bandwidth()["size_mb"].sum())


def test_a_table_the_window_has_not_is_named_with_those_it_has(tmp_path: Path) -> None:
    import duckdb

    w = _load(WINDOWS["mindspore_cpu"](tmp_path))
    with pytest.raises(duckdb.CatalogException) as info:
        w.sql("select * from evnts")
    assert "evnts" in str(info.value)
    assert "events, ops, steps, kernels, memory, communication" in str(info.value)


def test_without_duckdb_it_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = _load(WINDOWS["mindspore_cpu"](tmp_path))
    monkeypatch.setitem(sys.modules, "duckdb", None)  # as if not installed
    optional._forget()
    try:
        with pytest.raises(ImportError) as info:
            w.sql("select 1")
        assert "pip install 'dynprof_nb[sql]'" in str(info.value)
        assert "duckdb" in str(info.value)
    finally:
        monkeypatch.undo()
        optional._forget()
