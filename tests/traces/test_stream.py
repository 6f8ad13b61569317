"""A big Kineto trace's summaries in one pass, and its events out of core (issue 25 items 1, 2).

Streamed (``DYNPROF_NB_STREAM=1``): ``ops``, ``steps``, ``kernels`` and ``summary()`` of every
Kineto fixture equal the in-memory ones exactly, with the events never loaded; small pieces and
small self-time windows make every fixture cross the piece and window merges. Out of core
(``DYNPROF_NB_OUT_OF_CORE=1``): ``events`` is a Dask frame over Parquet partitions whose
``compute()`` is the in-memory events frame, dtypes and categories included. Both are also
chosen by size against the memory a load may use, and a trace that cannot stream (Ascend rows,
a damaged file) loads whole as before.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dask.dataframe as dd
import pandas as pd
import pytest
from testdata import fixtures_dir

import dynprof_nb
from dynprof_nb.traces.cache import partitions
from dynprof_nb.traces.formats.chrome import (
    out_of_core as ooc,
)
from dynprof_nb.traces.formats.chrome import (
    pieces as fastjson,
)
from dynprof_nb.traces.formats.chrome import (
    summaries as stream,
)

KINETO = sorted((fixtures_dir() / "kineto").glob("*.json.gz")) + sorted(
    (fixtures_dir() / "torch_cpu").glob("*.json")
)
FRAMES = ("ops", "steps", "kernels")


@pytest.fixture(scope="module")
def in_memory() -> dict[Path, dynprof_nb.TraceWindow]:
    """Each fixture loaded the usual way, with its events and summary."""
    mp = pytest.MonkeyPatch()
    mp.setenv(stream.STREAM_ENV, "0")
    mp.setenv(ooc.OOC_ENV, "0")
    out = {}
    with _quiet():
        for p in KINETO:
            w = dynprof_nb.load_trace(p)
            w.load_all()
            out[p] = w
    mp.undo()
    return out


class _quiet:
    def __enter__(self) -> None:
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc: object) -> None:
        self._w.__exit__(*exc)


@pytest.fixture
def small_cuts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Pieces of 32 KB, self-time windows of 97 rows, partitions of 5000 rows, own cache."""
    monkeypatch.setattr(fastjson, "PIECE_BYTES", 1 << 15)
    monkeypatch.setattr(stream, "WINDOW_ROWS", 97)
    monkeypatch.setattr(ooc, "PART_ROWS", 5000)
    monkeypatch.setenv("DYNPROF_NB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name[:40])
def test_streamed_summaries_equal_in_memory(
    path: Path, in_memory: dict, small_cuts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(stream.STREAM_ENV, "1")
    monkeypatch.setenv(ooc.OOC_ENV, "0")
    ref = in_memory[path]
    with _quiet():
        w = dynprof_nb.load_trace(path)
    assert w.streamed is not None and not w.loaded("events")
    for kind in FRAMES:
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    assert str(w.summary()) == str(ref.summary())
    assert not w.loaded("events"), "the summary loaded the events"
    assert (w.rank, w.framework) == (ref.rank, ref.framework)
    assert w.sources["ops"]["files"] == [str(path)]


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name[:40])
def test_out_of_core_events_compute_to_the_in_memory_frame(
    path: Path, in_memory: dict, small_cuts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(stream.STREAM_ENV, "0")
    monkeypatch.setenv(ooc.OOC_ENV, "1")
    ref = in_memory[path]
    with _quiet():
        w = dynprof_nb.load_trace(path)
        ev = w.events
    assert isinstance(ev, dd.DataFrame)
    assert "out of core" in repr(ev) and "Parquet partitions" in ev._repr_html_()
    assert "events[out of core]" in repr(w)  # the window's repr computes nothing
    pd.testing.assert_frame_equal(ev.compute(), ref.events, check_exact=True)
    for kind in FRAMES:  # filled by the same pass
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    parts = list(small_cuts.glob("events-parts/*/part-*.parquet"))
    assert len(parts) == ev.npartitions
    assert ev.npartitions > 1 or len(ref.events) < 10_000  # partitions of ~5000 rows


def test_chosen_by_size_against_memory(
    tmp_path: Path, small_cuts: Path, monkeypatch: pytest.MonkeyPatch, in_memory: dict
) -> None:
    """No override: a trace whose events would not fit in half the load memory streams, and
    its events go out of core; with room, both load in memory."""
    path = fixtures_dir() / "torch_cpu" / "rank0.1795968823191922673.pt.trace.json"
    monkeypatch.delenv(stream.STREAM_ENV, raising=False)
    monkeypatch.delenv(ooc.OOC_ENV, raising=False)
    monkeypatch.setenv("DYNPROF_NB_LOAD_MEMORY", "1M")  # 4 x 176 KB > 1 MB / 2
    w = dynprof_nb.load_trace(path)
    assert w.streamed is not None and not w.loaded("events")
    assert isinstance(w.events, dd.DataFrame)
    pd.testing.assert_frame_equal(w.events.compute(), in_memory[path].events)
    monkeypatch.setenv("DYNPROF_NB_LOAD_MEMORY", "1G")
    w = dynprof_nb.load_trace(path)
    assert w.streamed is not None and not w.loaded("events")  # streamed at any size
    assert isinstance(w.events, pd.DataFrame)  # but its events fit: in memory


def test_a_window_directory_streams(
    tmp_path: Path, small_cuts: Path, in_memory: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = fixtures_dir() / "kineto" / "hta__nccl_parser_config__nccl_data.json.gz"
    d = tmp_path / "w"
    d.mkdir()
    shutil.copy(src, d / "rank0.1.pt.trace.json.gz")
    monkeypatch.setenv(stream.STREAM_ENV, "0")
    ref = dynprof_nb.load_window(d)
    monkeypatch.setenv(stream.STREAM_ENV, "1")
    w = dynprof_nb.load_window(d)
    assert w.streamed is not None and not w.loaded("events")
    for kind in FRAMES:
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    assert (w.rank, w.framework) == (ref.rank, ref.framework)
    # the events the pass left (the collectives' group args with them) are the whole parse's
    pd.testing.assert_frame_equal(w.events, ref.events, check_exact=True)
    assert set(w.events["pg_name"].dropna()) == {"0"}


def test_what_cannot_stream_loads_whole(
    tmp_path: Path, small_cuts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ascend rows change which rows are ops, and a damaged file needs the repairing reader:
    both are read whole, with the same frames as without streaming."""
    monkeypatch.setenv(stream.STREAM_ENV, "1")
    monkeypatch.setenv(ooc.OOC_ENV, "1")
    ascend = next((fixtures_dir() / "ascend_real").rglob("trace_view.json"))
    renamed = tmp_path / "npu.json"
    shutil.copy(ascend, renamed)
    src = fixtures_dir() / "torch_cpu" / "rank0.1795968823191922673.pt.trace.json"
    cut = tmp_path / "cut.pt.trace.json"
    cut.write_bytes(src.read_bytes()[:-5000])  # cut short: repaired
    for p in (renamed, cut):
        with _quiet():
            w = dynprof_nb.load_trace(p)
        assert w.streamed is None and isinstance(w.events, pd.DataFrame), p.name
        monkeypatch.setenv(stream.STREAM_ENV, "0")
        monkeypatch.setenv(ooc.OOC_ENV, "0")
        with _quiet():
            ref = dynprof_nb.load_trace(p)
        pd.testing.assert_frame_equal(w.ops, ref.ops)
        pd.testing.assert_frame_equal(w.events, ref.events)
        monkeypatch.setenv(stream.STREAM_ENV, "1")
        monkeypatch.setenv(ooc.OOC_ENV, "1")


def test_pruning_keeps_partitions_in_use(
    tmp_path: Path, small_cuts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many loads: the partitions of a frame still alive here, or written by a process still
    running, are kept; those of dropped frames and of ended processes go."""
    import gc
    import subprocess
    import sys

    monkeypatch.setenv(stream.STREAM_ENV, "0")
    monkeypatch.setenv(ooc.OOC_ENV, "1")
    path = fixtures_dir() / "torch_cpu" / "rank0.1795968823191922673.pt.trace.json"
    parts = small_cuts / "events-parts"
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        parts.mkdir(parents=True)
        live_dir = f"ab-{partitions.HOST}-{alive.pid}-00"  # another kernel's, still running
        (parts / live_dir).mkdir()
        gone = subprocess.Popen([sys.executable, "-c", ""])
        gone.wait()
        (parts / f"cd-{partitions.HOST}-{gone.pid}-00").mkdir()  # a kernel that exited
        frames = [dynprof_nb.load_trace(path).events for _ in range(6)]
        assert {d.name for d in parts.iterdir()} >= {f.dynprof_dir.name for f in frames}
        assert (parts / live_dir).is_dir()
        assert not (parts / f"cd-{partitions.HOST}-{gone.pid}-00").exists()
        pd.testing.assert_frame_equal(frames[0].compute(), frames[-1].compute())
        del frames
        gc.collect()
        last = dynprof_nb.load_trace(path).events
        left = {d.name for d in parts.iterdir()}
        assert left == {last.dynprof_dir.name, live_dir}
    finally:
        alive.kill()
        alive.wait()


def test_out_of_core_events_pickle(small_cuts: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A window whose events are out of core pickles (to another kernel, a Dask worker) and
    comes back with the same out-of-core frame, its note included."""
    import pickle

    monkeypatch.setenv(stream.STREAM_ENV, "0")
    monkeypatch.setenv(ooc.OOC_ENV, "1")
    path = fixtures_dir() / "torch_cpu" / "rank0.1795968823191922673.pt.trace.json"
    w = dynprof_nb.load_trace(path)
    ev = w.events
    back = pickle.loads(pickle.dumps(w)).events
    assert type(back).__name__ == "OutOfCoreEvents" and isinstance(back, dd.DataFrame)
    assert repr(back).startswith("out of core") and back.dynprof_dir == ev.dynprof_dir
    pd.testing.assert_frame_equal(back.compute(), ev.compute(), check_exact=True)


def test_a_stream_id_that_is_no_whole_number_is_na_on_every_read_path(
    tmp_path: Path, small_cuts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``args.stream`` 7.5 names no stream: NA in the events frame read whole and out of
    core (it was truncated to 7), and the streamed pass's kernels are the whole parse's."""
    import json

    events = [{"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "pid": 1,
               "tid": 1, "ts": 0, "dur": 100},
              {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "pid": 1,
               "tid": 1, "ts": 1, "dur": 2, "args": {"correlation": 5}},
              {"ph": "X", "name": "k", "cat": "kernel", "pid": 0, "tid": 7, "ts": 10,
               "dur": 5, "args": {"stream": 7.5, "correlation": 5, "device": 0}},
              {"ph": "X", "name": "k", "cat": "kernel", "pid": 0, "tid": 7, "ts": 20,
               "dur": 5, "args": {"stream": 7, "correlation": 6, "device": 0}}]
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setenv(stream.STREAM_ENV, "0")
    monkeypatch.setenv(ooc.OOC_ENV, "0")
    ref = dynprof_nb.load_trace(path)
    whole = ref.events
    assert whole["stream_arg"].tolist()[2:] == [pd.NA, 7]
    monkeypatch.setenv(ooc.OOC_ENV, "1")
    with _quiet():
        ev = dynprof_nb.load_trace(path).events.compute()
    pd.testing.assert_frame_equal(ev, whole, check_exact=True)
    monkeypatch.setenv(stream.STREAM_ENV, "1")
    monkeypatch.setenv(ooc.OOC_ENV, "0")
    streamed = dynprof_nb.load_trace(path)
    assert streamed.sources["kernels"]["path"] == "stream"
    pd.testing.assert_frame_equal(streamed.kernels, ref.kernels, check_exact=True)
