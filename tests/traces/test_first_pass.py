"""A Kineto trace's summaries never build its events, at any size (issue 32 item 2).

With no override, loading a window of one Kineto trace streams it once
(:mod:`dynprof_nb.traces.formats.chrome.first_pass`): ``ops``, ``steps``, ``kernels``, the
summary and the step analyses come from that pass, with the trace never parsed whole (a spy on
the whole parse fails the test) and the events frame never loaded; the same pass writes the
events to the frame cache, so asking for them afterwards, or loading again in a new window,
reads the cache and never the trace. Every frame equals the whole parse's, exactly.
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from testdata import fixtures_dir

import dynprof_nb
from dynprof_nb.traces import cache, parallel
from dynprof_nb.traces.formats.chrome import first_pass as fp
from dynprof_nb.traces.formats.chrome import out_of_core
from dynprof_nb.traces.formats.chrome import summaries as stream
from dynprof_nb.traces.window import FRAMES, TraceWindow

TRACES = [
    fixtures_dir() / "kineto" / "hta__timeline_analysis__sampled_rank-0.json.gz",  # GPU, steps
    fixtures_dir() / "torch_cpu" / "rank0.1795968823191922673.pt.trace.json",  # CPU only
]
SUMMARIES = ("ops", "steps", "kernels")
ANALYSES = ("step_breakdown", "compute_ops", "step_trace", "slow_ranks")
#: these read the communication frame or memory copies, derived from the events: from the
#: entry the pass wrote, never from a parse
WITH_EVENTS = ("communication_ops", "time_summary")


def _whole(path: Path, load: Any = dynprof_nb.load_trace) -> TraceWindow:
    """The trace (or with ``load_window``, the window's ranks) parsed whole, as before issue
    32 (no stream, no cache)."""
    mp = pytest.MonkeyPatch()
    mp.setenv(stream.STREAM_ENV, "0")
    mp.setenv(cache.ENV_DIR, "off")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load(path).load_all()
    finally:
        mp.undo()


class _NoParse:
    """Fails the test on a whole parse of the trace (what building events from it needs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(TraceWindow, "chrome_traces", self)

    def __get__(self, obj: object, owner: type) -> object:
        raise AssertionError("the trace was parsed whole")


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:30])
def test_summaries_never_build_events(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = _whole(path)
    monkeypatch.delenv(stream.STREAM_ENV, raising=False)
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    monkeypatch.setattr(fp, "EVENT_ROWS", 1000)  # the events entry in several row groups
    _NoParse(monkeypatch)
    w = dynprof_nb.load_trace(path)
    for kind in SUMMARIES:
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    assert str(w.summary()) == str(ref.summary())
    for name in ANALYSES:
        pd.testing.assert_frame_equal(getattr(w, name)(), getattr(ref, name)(), obj=name)
    assert not w.loaded("events"), "a summary loaded the events"
    assert (w.rank, w.framework) == (ref.rank, ref.framework)
    # asked for afterwards, the events come from the entry the pass wrote
    hits = cache.counts["hits"]
    pd.testing.assert_frame_equal(w.events, ref.events, check_exact=True)
    assert cache.counts["hits"] == hits + 1
    for name in WITH_EVENTS:
        pd.testing.assert_frame_equal(getattr(w, name)(), getattr(ref, name)(), obj=name)
    # the memory frame came from the same pass (the spy would catch a parse for it)
    pd.testing.assert_frame_equal(w.memory, ref.memory, check_exact=True)
    strip = ("provider", "path", "source")
    for kind in FRAMES:
        got = {k: v for k, v in w.sources[kind].items() if k not in strip}
        assert got == {k: v for k, v in ref.sources[kind].items() if k not in strip}, kind
    assert w.sources["ops"]["path"] == "stream"
    # a second load (a new window: what a new process sees) reads no trace either
    again = dynprof_nb.load_trace(path)
    assert repr(again) == repr(dynprof_nb.load_trace(path))  # nothing held at load
    assert str(again.summary()) == str(ref.summary()) and not again.loaded("events")
    for kind in FRAMES:
        pd.testing.assert_frame_equal(again.frame(kind), ref.frame(kind), check_exact=True)
    assert not list((tmp_path / "cache").glob(".tmp-*")), "the pass left its raw parts"


def test_with_the_cache_off_the_trace_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cache to write the events to: a trace whose events fit is parsed whole at load, as
    before (a later ``events`` would otherwise parse it a second time); forced, it streams."""
    path = TRACES[0]
    ref = _whole(path)
    monkeypatch.delenv(stream.STREAM_ENV, raising=False)
    monkeypatch.setenv(cache.ENV_DIR, "off")
    w = dynprof_nb.load_trace(path)
    assert w.streamed is None and w.loaded("events")
    monkeypatch.setenv(stream.STREAM_ENV, "1")
    w = dynprof_nb.load_trace(path)
    assert w.streamed is not None and w.sources["ops"]["path"] == "stream"
    for kind in SUMMARIES:
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    assert not w.loaded("events")
    pd.testing.assert_frame_equal(w.events, ref.events, check_exact=True)


# ---- a window of several ranks, one Kineto trace each ------------------------------------------
def _ranks_window(root: Path, trace: Path, layout: str) -> Path:
    """Two ranks of one real trace, laid out as a multi-rank load finds them: window
    directories (``rank{r}_start1_stop5/``) or a folder of ``*.pt.trace.json`` files."""
    for r in (0, 1):
        name = f"rank{r}.pt.trace.json" + (".gz" if trace.name.endswith(".gz") else "")
        d = root / f"rank{r}_start1_stop5" if layout == "dirs" else root
        d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(trace, d / name)
    return root


def _notes(sources: dict, strip: tuple[str, ...] = ("provider", "path", "source")) -> Any:
    """A multi-rank window's ``sources`` without who built each rank's frame."""
    return {
        kind: {
            **note,
            "ranks": {
                r: {k: v for k, v in (n or {}).items() if k not in strip}
                for r, n in note["ranks"].items()
            },
        }
        for kind, note in sources.items()
    }


def _two_processes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Ranks spread over two processes (whatever this machine has); returns the traces this
    process decodes in a pass, as it decodes them (a worker's are its own)."""
    monkeypatch.setattr(parallel, "_cores", lambda: 2)
    parent, decoded = os.getpid(), []
    real = out_of_core.decode_to_parts

    def decode(*args: Any, **kw: Any) -> Any:
        if os.getpid() == parent:
            decoded.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(out_of_core, "decode_to_parts", decode)
    return decoded


@pytest.mark.parametrize("layout", ["dirs", "files"])
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:30])
def test_a_multi_rank_window_never_builds_a_ranks_events(
    path: Path, layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rank of a multi-rank window takes the first pass a lone trace takes, ahead in a
    forked worker (two processes here, whatever this machine has) or in this process, and
    then recalls it from the cache in order: no rank is parsed whole, no rank's events are
    loaded, every frame, the summary and the analyses are the whole parse's, and a later
    ``w.events`` reads the entries the passes wrote."""
    root = _ranks_window(tmp_path / "window", path, layout)
    ref = _whole(root, dynprof_nb.load_window)
    monkeypatch.delenv(stream.STREAM_ENV, raising=False)
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    monkeypatch.setattr(fp, "EVENT_ROWS", 1000)
    decoded = _two_processes(monkeypatch)
    _NoParse(monkeypatch)
    w = dynprof_nb.load_window(root)
    for kind in SUMMARIES:
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    assert len(decoded) == 1, "the worker's rank was not left to it, or a pass ran twice"
    assert str(w.summary()) == str(ref.summary())
    for name in ANALYSES:
        pd.testing.assert_frame_equal(getattr(w, name)(), getattr(ref, name)(), obj=name)
    assert not w.loaded("events") and not any(c.loaded("events") for c in w.children)
    assert [w.sources["ops"]["ranks"][r]["path"] for r in w.ranks] == ["stream", "stream"]
    for a, b in zip(w.children, ref.children, strict=True):  # identified as before
        assert (a.rank, a.framework) == (b.rank, b.framework)
    assert (w.ranks, w.framework) == (ref.ranks, ref.framework)
    hits = cache.counts["hits"]
    pd.testing.assert_frame_equal(w.events, ref.events, check_exact=True)
    assert cache.counts["hits"] == hits + 2  # each rank's events entry
    for name in WITH_EVENTS:
        pd.testing.assert_frame_equal(getattr(w, name)(), getattr(ref, name)(), obj=name)
    for kind in ("memory", "communication"):
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    assert _notes(w.sources) == _notes(ref.sources)
    # a second load (a new process's) reads no trace either, nor streams one again
    again = dynprof_nb.load_window(root)
    assert str(again.summary()) == str(ref.summary()) and len(decoded) == 1
    for kind in FRAMES:
        pd.testing.assert_frame_equal(again.frame(kind), ref.frame(kind), check_exact=True)
    assert not list((tmp_path / "cache").glob(".tmp-*")), "a pass left its raw parts"


def test_a_multi_rank_windows_summary_asked_first_never_builds_a_ranks_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load_window(root).summary()``, the first thing a notebook asks of a fresh window,
    takes the ranks' first passes as ``w.ops`` would: no rank is parsed whole and no rank's
    events are loaded, and the summary is the whole parse's."""
    root = _ranks_window(tmp_path / "window", TRACES[0], "files")
    ref = _whole(root, dynprof_nb.load_window)
    monkeypatch.delenv(stream.STREAM_ENV, raising=False)
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    _two_processes(monkeypatch)
    _NoParse(monkeypatch)
    w = dynprof_nb.load_window(root)
    assert str(w.summary()) == str(ref.summary())
    assert not w.loaded("events") and not any(c.loaded("events") for c in w.children)


def test_a_multi_rank_window_asked_again_after_ctrl_c_still_streams_its_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during the ranks' first passes (the first ``w.ops``): asked again, the window
    takes the passes it did not finish, rather than parse every rank whole, and its frames
    are the whole parse's."""
    root = _ranks_window(tmp_path / "window", TRACES[0], "files")
    ref = _whole(root, dynprof_nb.load_window)
    monkeypatch.delenv(stream.STREAM_ENV, raising=False)
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    monkeypatch.setattr(parallel, "_cores", lambda: 1)  # the passes in this process, in order
    real = out_of_core.decode_to_parts

    def interrupted(*args: Any, **kw: Any) -> Any:
        monkeypatch.setattr(out_of_core, "decode_to_parts", real)  # once
        raise KeyboardInterrupt

    monkeypatch.setattr(out_of_core, "decode_to_parts", interrupted)
    w = dynprof_nb.load_window(root)
    with pytest.raises(KeyboardInterrupt):
        w.ops  # noqa: B018
    _NoParse(monkeypatch)
    for kind in SUMMARIES:
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    assert [w.sources["ops"]["ranks"][r]["path"] for r in w.ranks] == ["stream", "stream"]
    assert not any(c.loaded("events") for c in w.children)


def _two_ranks_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A two-rank window whose ranks stream over two processes into a fresh frame cache:
    (the window, the cache directory)."""
    root = _ranks_window(tmp_path / "window", TRACES[0], "files")
    monkeypatch.delenv(stream.STREAM_ENV, raising=False)
    d = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV_DIR, str(d))
    _two_processes(monkeypatch)
    return root, d


def test_ctrl_c_during_the_ranks_passes_leaves_no_scratch_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in this process while a forked worker is in its rank's first pass: the worker
    is stopped so that it removes its raw parts, as this process's pass does, and nothing of
    either pass is left in the cache directory (where no size bound counts it)."""
    root, d = _two_ranks_cached(tmp_path, monkeypatch)
    parent, real = os.getpid(), out_of_core.decode_to_parts

    def decode(path: Path, out: Path, *args: Any, **kw: Any) -> Any:
        if os.getpid() != parent:  # the worker, amid its pass, its scratch directory made
            time.sleep(30)
            return real(path, out, *args, **kw)
        others = [p for p in d.glob(".tmp-parts-*") if p != out]
        deadline = time.monotonic() + 20
        while not others and time.monotonic() < deadline:  # the worker's pass is under way
            time.sleep(0.01)
            others = [p for p in d.glob(".tmp-parts-*") if p != out]
        raise KeyboardInterrupt

    monkeypatch.setattr(out_of_core, "decode_to_parts", decode)
    w = dynprof_nb.load_window(root)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        w.ops  # noqa: B018
    assert time.monotonic() - start < 15, "the worker was waited for, not stopped"
    assert not list(d.glob(".tmp-*")), "a pass left its raw parts"


def test_a_worker_killed_amid_its_pass_leaves_no_scratch_once_the_load_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forked worker SIGKILLed in its rank's first pass (the OOM killer: no ``finally``
    runs) leaves its raw parts in the cache directory; this process then passes the rank
    itself, and its entry writes remove the dead worker's scratch at once, not an hour later.
    The frames are the whole parse's."""
    import signal

    root, d = _two_ranks_cached(tmp_path, monkeypatch)
    ref = _whole(root, dynprof_nb.load_window)
    parent, real = os.getpid(), out_of_core.decode_to_parts

    def decode(path: Path, out: Path, *args: Any, **kw: Any) -> Any:
        if os.getpid() != parent:  # the worker, its scratch directory made
            (out / "raw-part").write_bytes(b"x" * 4096)
            os.kill(os.getpid(), signal.SIGKILL)
        return real(path, out, *args, **kw)

    monkeypatch.setattr(out_of_core, "decode_to_parts", decode)
    w = dynprof_nb.load_window(root)
    for kind in SUMMARIES:
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    assert list(d.glob("*.parquet")), "nothing was cached: the test shows nothing"
    assert not list(d.glob(".tmp-*")), "the killed worker's raw parts were left"


def test_a_rank_that_cannot_stream_loads_whole_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged rank (cut short: the repairing reader's) is refused by the pass it tries once,
    ahead, and is then read whole, as before, with the same frames and the same warning; the
    other rank still streams."""
    root = _ranks_window(tmp_path / "window", TRACES[1], "files")
    cut = root / "rank1.pt.trace.json"
    cut.write_bytes(cut.read_bytes()[:-5000])  # smaller: the parent's share, the other a worker's

    def ops_and_warnings(w: Any) -> tuple[pd.DataFrame, list[str]]:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            ops = w.ops
        return ops, [f"{x.category.__name__}: {x.message}" for x in said]

    monkeypatch.setenv(stream.STREAM_ENV, "0")
    monkeypatch.setenv(cache.ENV_DIR, "off")
    ref_ops, ref_said = ops_and_warnings(dynprof_nb.load_window(root))
    assert any("TraceRepairWarning" in s for s in ref_said)
    ref = _whole(root, dynprof_nb.load_window)
    monkeypatch.delenv(stream.STREAM_ENV)
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    decoded = _two_processes(monkeypatch)
    w = dynprof_nb.load_window(root)
    ops, said = ops_and_warnings(w)
    pd.testing.assert_frame_equal(ops, ref_ops, check_exact=True)
    assert said == ref_said
    assert decoded == [cut], "the refused rank's pass ran twice, or in the worker"
    assert [w.sources["ops"]["ranks"][r]["path"] == "stream" for r in w.ranks] == [True, False]
    assert not w.children[0].loaded("events") and w.children[1].loaded("events")
    for kind in FRAMES:
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)


def test_with_the_cache_off_a_forced_pass_leaves_the_events_to_the_parallel_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DYNPROF_NB_STREAM=1`` with no cache: each rank's pass gives its summaries alone (no
    entry to write its events to), so ``w.events`` parses the ranks in parallel, as before."""
    root = _ranks_window(tmp_path / "window", TRACES[0], "dirs")
    ref = _whole(root, dynprof_nb.load_window)
    monkeypatch.setenv(stream.STREAM_ENV, "1")
    monkeypatch.setenv(cache.ENV_DIR, "off")
    handed: list[list] = []
    real = parallel.load_events
    monkeypatch.setattr(
        parallel, "load_events", lambda c, *a, **k: handed.append(c) or real(c, *a, **k)
    )
    w = dynprof_nb.load_window(root)
    for kind in SUMMARIES:
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    assert all(c.streamed is not None and not c.loaded("events") for c in w.children)
    pd.testing.assert_frame_equal(w.events, ref.events, check_exact=True)
    assert handed == [w.children]


@pytest.mark.parametrize("odd", ["memory-complete-event", "ts-past-int64-ns"])
def test_a_piece_read_a_second_way_gives_the_first_pass_its_rows_once(
    odd: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A piece the typed decode must read again (a complete event named ``[memory]``, whose
    args are not typed; a whole-µs ts past what int64 ns hold) reaches the pass's reducer
    once: the first reached it twice and raised ``IndexError: pop from empty list``."""
    import json

    events = [{"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "pid": 1,
               "tid": 1, "ts": 1000, "dur": 500}]
    events += [{"ph": "X", "name": f"aten::op{i % 3}", "cat": "cpu_op", "pid": 1, "tid": 1,
                "ts": 1001 + i, "dur": 1, "args": {"External id": i}} for i in range(300)]
    if odd == "memory-complete-event":
        events.append({"ph": "X", "name": "[memory]", "cat": "cpu_op", "pid": 1, "tid": 1,
                       "ts": 1400, "dur": 1, "args": {"Bytes": 512}})
    else:
        events.append({"ph": "X", "name": "aten::late", "cat": "cpu_op", "pid": 1, "tid": 1,
                       "ts": 10**17, "dur": 1})
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    ref = _whole(path)
    monkeypatch.delenv(stream.STREAM_ENV, raising=False)
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_trace(path)
        for kind in (*SUMMARIES, "events"):
            pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
