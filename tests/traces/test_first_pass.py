"""A Kineto trace's summaries never build its events, at any size (issue 32 item 2).

With no override, loading a window of one Kineto trace streams it once
(:mod:`dynprof_nb.traces.formats.chrome.first_pass`): ``ops``, ``steps``, ``kernels``, the
summary and the step analyses come from that pass, with the trace never parsed whole (a spy on
the whole parse fails the test) and the events frame never loaded; the same pass writes the
events to the frame cache, so asking for them afterwards, or loading again in a new window,
reads the cache and never the trace. Every frame equals the whole parse's, exactly.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest
from testdata import fixtures_dir

import dynprof_nb
from dynprof_nb.traces import cache
from dynprof_nb.traces.formats.chrome import first_pass as fp
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


def _whole(path: Path) -> TraceWindow:
    """The trace parsed whole, as before issue 32 (no stream, no cache)."""
    mp = pytest.MonkeyPatch()
    mp.setenv(stream.STREAM_ENV, "0")
    mp.setenv(cache.ENV_DIR, "off")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return dynprof_nb.load_trace(path).load_all()
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
