"""The frame cache and the out-of-core partitions under a careless or hostile setup (issue 25;
docs/reliability.md row 28):
a size variable set to garbage, the cache turned off, another kernel's loads, a typo given to
``dynprof cache --clear``. Each case once failed a load, lost a live frame or wrote where it
should not."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.text import Text
from testdata import REPO

from dynprof_nb.traces import cache, load_trace
from dynprof_nb.traces.formats.common import budget

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


def _ooc_events(trace: Path) -> object:
    ev = load_trace(trace).events
    assert type(ev).__name__ == "OutOfCoreEvents"
    return ev


def test_out_of_core_partitions_with_the_cache_off_are_not_in_the_working_directory(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.ENV_DIR, "off")
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    ev = _ooc_events(trace)
    assert not (work / "off").exists()  # once ./off/events-parts/...
    assert ev.dynprof_dir.is_absolute()  # type: ignore[attr-defined]
    monkeypatch.chdir(tmp_path)  # a later chdir loses nothing
    assert len(ev.compute()) > 0  # type: ignore[attr-defined]


def test_loads_never_remove_a_live_frames_partitions(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "c"))
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
    first = _ooc_events(trace)
    n = len(first.compute())  # type: ignore[attr-defined]
    for _ in range(5):  # once: the fifth load removed the first's files (FileNotFoundError)
        _ooc_events(trace)
    gc.collect()
    assert len(first.compute()) == n  # type: ignore[attr-defined]
    where = first.dynprof_dir  # type: ignore[attr-defined]
    subset = first[first["dur_ns"] > 0]  # type: ignore[index]
    del first
    gc.collect()
    assert where.exists() and len(subset) > 0  # a derived frame still reads them
    del subset
    gc.collect()
    assert not where.exists()  # ...and they go with the last frame that reads them


@pytest.mark.parametrize(
    "name",
    ["hta__nccl_parser_config__nccl_data.json.gz", "hta__ns_resolution_trace__rank-0"],
)
def test_an_out_of_core_window_summarises_and_plots_as_in_memory(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """summary(), plot_ops(), communication and the cluster shortcuts reduce the events
    partition by partition (once each raised an AttributeError from inside Dask); the
    timeline, which needs every event, says why it draws nothing."""
    from dynprof_nb.analysis import plots
    from dynprof_nb.analysis.perfetto import open_in_perfetto
    from dynprof_nb.analysis.shortcuts import SHORTCUTS
    from dynprof_nb.traces.formats.chrome import out_of_core as ooc

    (path,) = (REPO / "tests" / "data" / "kineto").glob(name + "*")
    monkeypatch.setenv(cache.ENV_DIR, "off")
    monkeypatch.setattr(ooc, "PART_ROWS", 2000)  # several partitions to merge
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "0")
        whole = load_trace(path)
        monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
        parts = load_trace(path)
        assert parts.events.npartitions > 1
        pd.testing.assert_frame_equal(whole.communication, parts.communication)
        assert repr(whole.summary()) == repr(parts.summary())
        assert plots.op_colors(whole) == plots.op_colors(parts)
        for short in ("top_ops", "communication_ops", "time_summary", "step_trace"):
            got, want = SHORTCUTS[short](parts), SHORTCUTS[short](whole)
            if isinstance(want, pd.DataFrame):
                pd.testing.assert_frame_equal(got, want)
        fig = parts.plot_timeline()
        assert "out of core" in " ".join(t.get_text() for t in fig.figure.findobj(Text))
        with pytest.raises(ValueError, match="open the trace file itself"):  # not AttributeError
            open_in_perfetto(parts, tmp_path / "x.perfetto.json")


def test_dynprof_cache_says_a_typo_a_deleted_trace_and_ended_partitions(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    from dynprof_nb.ui.cli import cache_report

    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "c"))
    load_trace(trace).load_all()
    typo = str(trace) + "x"
    said = cache_report(typo)  # once "removed 0 cached frame file(s) of ...": as if done
    assert "no such file or folder" in said and "typo" in said
    trace.unlink()
    assert f"{trace.resolve()} (gone)" in cache_report()
    # a kernel that ended without collecting its out-of-core frame left its partitions
    script = (
        "import os; from dynprof_nb.traces import load_trace\n"
        f"ev = load_trace({str(SMALL)!r}).events; print(ev.dynprof_dir); os._exit(0)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "DYNPROF_NB_OUT_OF_CORE": "1"}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    left = Path(r.stdout.strip().splitlines()[-1])
    assert left.is_dir(), r.stderr[-2000:]
    said = cache_report("")
    assert "1 partition folder(s)" in said and not left.exists()


def test_partitions_removed_under_a_live_frame_say_so(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "c"))
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
    ev = _ooc_events(trace)
    shutil.rmtree(ev.dynprof_dir)  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="removed or damaged after the load") as got:
        ev.compute()  # type: ignore[attr-defined]  (once pyarrow's bare FileNotFoundError)
    assert str(ev.dynprof_dir) in str(got.value)  # type: ignore[attr-defined]


def test_a_multi_rank_window_of_out_of_core_ranks_loads_as_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two Kineto ranks whose events go out of core: the window's events once raised
    "Column assignment doesn't support type IntegerArray", its steps a misleading "the file
    is damaged" (the parallel loader shipped Dask frames without their summaries)."""
    import dynprof_nb
    from dynprof_nb.traces.formats.chrome import out_of_core as ooc

    kineto = REPO / "tests" / "data" / "kineto"
    paths = [
        kineto / "hta__timeline_analysis__sampled_rank-0.json.gz",
        kineto / "hta__nccl_parser_config__nccl_data.json.gz",
    ]
    monkeypatch.setenv(cache.ENV_DIR, "off")
    monkeypatch.setattr(ooc, "PART_ROWS", 2000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "0")
        whole = dynprof_nb.load_window(paths)
        whole.load_all()
        want = repr(whole.summary())
        monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
        parts = dynprof_nb.load_window(paths)
        ev = parts.events
        assert ooc_frame(ev) and ev.npartitions > 2
        pd.testing.assert_frame_equal(ev.compute().reset_index(drop=True), whole.events)
        for kind in ("ops", "steps", "kernels", "communication", "memory"):
            pd.testing.assert_frame_equal(parts.frame(kind), whole.frame(kind), obj=kind)
        assert repr(parts.summary()) == want
        parts.plot_ops()


def ooc_frame(frame: object) -> bool:
    from dynprof_nb.traces.partitioned import is_out_of_core

    return is_out_of_core(frame)


def test_a_partition_root_another_user_made_is_not_written_into(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the cache off the partitions go to <tmp>/dynprof_nb-<uid>: someone who planted
    that first (any user can, in /tmp: a symlink, or a directory of theirs) gets nothing
    there; the load still goes out of core, in a fresh private directory, and says so."""
    import gc

    from dynprof_nb.traces.cache import partitions

    monkeypatch.setenv(cache.ENV_DIR, "off")
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(partitions.tempfile, "tempdir", None)  # TMPDIR is read again
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    (tmp_path / f"dynprof_nb-{os.geteuid()}").symlink_to(theirs)  # what any user can plant
    with pytest.warns(cache.CacheWarning, match="symlink"):
        ev = _ooc_events(trace)
    assert list(theirs.iterdir()) == []  # once events-parts/ and the partitions in it
    where = ev.dynprof_dir.parent  # type: ignore[attr-defined]
    assert where.stat().st_mode & 0o077 == 0 and len(ev) > 0  # type: ignore[arg-type]
    del ev
    gc.collect()
    assert not where.exists()


def test_the_out_of_core_reductions_stay_off_a_default_distributed_client(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """attach(cluster=...) makes its Client Dask's default: summary() of an out-of-core window
    must not send its partitions' tasks to workers (on other hosts, they cannot read this
    host's partition files)."""
    from distributed import Client, LocalCluster

    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "c"))
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
    w = load_trace(trace)
    assert type(w.events).__name__ == "OutOfCoreEvents"
    with (
        LocalCluster(n_workers=1, processes=False, dashboard_address=None) as lc,
        Client(lc) as client,
    ):
        w.summary()
        w.plot_ops()
        ran = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
    assert ran == 0


def test_a_frame_bigger_than_the_cache_bound_is_not_written_nor_empties_it(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "c"))
    monkeypatch.setenv(cache.ENV_LIMIT, "64K")  # the events entry is ~240 KB, the rest ~6 KB
    before = cache.counts["stored"]
    load_trace(trace).steps  # noqa: B018  the first pass: events (too big), identity, summaries
    kinds = sorted(e.kind for e in cache.entries())
    assert cache.counts["stored"] == before + len(kinds)  # the events entry is never stored...
    assert "events" not in kinds and {"identity", "steps"} <= set(kinds)  # ...nor empties it
