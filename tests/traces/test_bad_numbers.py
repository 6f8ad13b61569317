"""Bad numbers are named, not fatal (issue 42 item 3): a window whose files hold impossible
times (NaN, inf, negative, 1e300, days away from the rest) or a repeated step id loads on
every read path; the bad rows are gone, ONE warning per frame says how many, which field and
which file, the window keeps it (sources, repr), and every analysis and both timelines work
on the rest, within a time bound.

The cases are tests/data/hostile/bad_numbers.py's (two committed Kineto traces; a built-in
window, a real .db and a real text window damaged in the test)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import time
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from testdata import REPO

import dynprof_nb
from dynprof_nb.traces import cache, validate
from dynprof_nb.traces.validate import BadValuesWarning

matplotlib.use("Agg")
sys.path.insert(0, str(REPO / "tests" / "data" / "hostile"))
import bad_numbers  # noqa: E402

#: a load and every analysis of one of these small windows (a few MB at most); generous for a
#: box with two CPU burners, far below the hang or the crash it guards against
BOUND_S = 90.0


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bad_numbers.Case]:
    return {c.name: c for c in bad_numbers.make(tmp_path_factory.mktemp("bad_numbers"))}


def _load(path: Path) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        w = dynprof_nb.load_trace(path) if path.is_file() else dynprof_nb.load_window(path)
        w.load_all()
    return w, [str(x.message) for x in said if issubclass(x.category, BadValuesWarning)]


def _analyses(w: object, baseline: object) -> None:
    """Every analysis and both timelines answer (the issue: a raw pandas error each)."""
    import matplotlib.pyplot as plt

    assert str(w.summary())
    w.advise()
    if len(w.steps):
        w.explain(baseline)
    else:  # (a MindSpore CPU window has no steps, bad rows or not: explain says so)
        with pytest.raises(ValueError, match="no steps with durations"):
            w.explain(baseline)
    fig = w.plot_timeline()
    plt.close("all")
    assert fig is not None
    view = w.plot_timeline(interactive=True)
    assert view is not None


def _check_frames(w: object, case: bad_numbers.Case) -> None:
    for kind, n in case.dropped.items():
        assert w.sources[kind]["dropped"] == n, (kind, w.sources[kind])
    for kind, n in case.rows.items():
        assert len(w.frame(kind)) == n
    ev = w.events
    if len(ev):  # what is left is drawable: times known, in range, durations too
        ts = ev["ts_ns"].to_numpy(np.int64)
        assert str(ev["ts_ns"].dtype) == "int64"
        assert (ts > 0).all() and (ev["dur_ns"] >= 0).all()
        assert ts.max() - ts.min() < validate.PLAUSIBLE_SPAN_NS
    k = w.kernels
    assert not k["duration_us"].isna().any() and (k["duration_us"] >= 0).all()
    assert np.isfinite(k["duration_us"]).all()
    assert not w.steps.duplicated("step").any()
    assert "impossible values dropped" in repr(w)


@pytest.mark.parametrize(
    "name", ["kineto_nonstandard", "kineto_plain", "builtin", "db", "text", "mindspore"]
)
def test_bad_numbers_are_dropped_and_named_in_memory(
    cases: dict[str, bad_numbers.Case], name: str
) -> None:
    case = cases[name]
    t0 = time.perf_counter()
    w, said = _load(case.path)
    per_frame = {s.split(": ")[1] for s in said if ": " in s}
    assert len(said) == len(per_frame), said  # one warning per frame, never one per row
    text = " ".join(said)
    for word in case.words:
        assert word in text, (word, said)
    _check_frames(w, case)
    baseline, _ = _load(case.path)
    _analyses(w, baseline)
    assert time.perf_counter() - t0 < BOUND_S


def test_the_warning_names_count_field_and_file(cases: dict[str, bad_numbers.Case]) -> None:
    w, said = _load(cases["kineto_plain"].path)
    [msg] = said
    assert msg.startswith(f"{bad_numbers.PLAIN}: events: ")
    assert "2 rows had an impossible (negative, inf or implausible" in msg
    assert "1 row had no readable (missing, NaN, inf or beyond 2262) ts_ns" in msg
    assert "3 rows had an impossible (negative, NaN/inf or longer than 7 days) dur_ns" in msg
    assert "dropped 6 rows" in msg
    assert msg in w.sources["events"]["notes"]


@pytest.mark.parametrize("how", ["stream", "out-of-core"])
def test_the_streamed_pass_drops_the_same_rows(
    cases: dict[str, bad_numbers.Case],
    how: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The one-pass reading of a Kineto trace (with the frame cache on, and out of core)
    drops the rows the whole parse drops, before it sums them, and says so once."""
    case = cases["kineto_plain"]
    ref, _ = _load(case.path)
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    if how == "out-of-core":
        monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        w = dynprof_nb.load_trace(case.path)
        for kind in ("ops", "steps", "kernels"):
            pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
            assert w.sources[kind]["dropped"] == 6
        assert len(w.events) == 46 and w.sources["events"]["dropped"] == 6
    bad = [str(x.message) for x in said if issubclass(x.category, BadValuesWarning)]
    assert len(set(bad)) == 1 and "dropped 6 rows" in bad[0]
    if how == "stream":
        pd.testing.assert_frame_equal(w.events, ref.events, check_exact=True)
        _analyses(w, ref)
    else:
        assert str(w.summary()) and w.advise() is not None
    assert time.perf_counter() - t0 < BOUND_S


def test_a_cached_load_says_it_again(
    cases: dict[str, bad_numbers.Case], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frame cache keeps the cleaned frames, and a load from it (another window, so
    another process would see the same) says the warning and keeps the note."""
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    for name in ("db", "kineto_nonstandard"):
        case = cases[name]
        first, said1 = _load(case.path)
        before = dict(cache.counts)
        again, said2 = _load(case.path)
        assert cache.counts["hits"] > before["hits"], name  # read back, not parsed
        assert said1 and sorted(set(said2)) == sorted(set(said1)), name
        _check_frames(again, case)
        for kind in case.dropped:
            pd.testing.assert_frame_equal(again.frame(kind), first.frame(kind))
        _analyses(again, first)


def test_several_ranks_each_drop_their_own(tmp_path: Path) -> None:
    """A folder of two built-in ranks, both with bad rows: the MultiRankWindow's frames hold
    neither rank's bad rows, and its analyses and timelines work."""
    for r in (0, 1):
        d = bad_numbers.builtin_window(tmp_path / f"r{r}")
        d.rename(tmp_path / f"rank{r}_start1_stop2")
    w, said = _load(tmp_path)
    assert len(said) == 2 and all("dropped 6 rows" in s for s in said)
    assert len(w.events) == 2 * 46
    assert w.events.groupby("rank")["ts_ns"].min().gt(0).all()
    _analyses(w, _load(tmp_path)[0])


def test_clean_is_vectorised_and_keeps_a_clean_frame_as_it_is() -> None:
    """The check gives a clean frame back as it is (no copy), and drops a million rows' bad
    ones in well under a second (no Python work per row)."""
    n = 1_000_000
    ts = np.arange(n, dtype=np.int64) * 1000 + 1_700_000_000 * 10**9
    frame = pd.DataFrame({"ts_ns": ts, "dur_ns": np.full(n, 500, np.int64)})
    out, dropped = validate.clean(frame, "events")
    assert out is frame and dropped.rows == 0
    frame.loc[::1000, "dur_ns"] = -1
    t0 = time.perf_counter()
    out, dropped = validate.clean(frame, "events")
    assert time.perf_counter() - t0 < 2.0
    assert dropped.rows == n // 1000 and len(out) == n - n // 1000


def test_the_timelines_skip_an_events_row_without_ts(monkeypatch: pytest.MonkeyPatch) -> None:
    """An events frame that still holds a row without a ts (one built some other way than the
    readers, here: the check turned off) draws the rest; both timelines raised pandas'
    ``ValueError: cannot convert to 'int64'-dtype NumPy array with missing values``."""
    monkeypatch.delitem(validate.CHECKS, "events")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_trace(bad_numbers.NONSTANDARD)
    assert w.events["ts_ns"].isna().sum() == 3
    _analyses(w, w)


def test_a_repeated_step_keeps_its_first_good_row() -> None:
    """De-duplication keeps the first row that survives the time checks: a bad first row
    does not take its good twin with it; per rank where the frame has ranks."""
    steps = pd.DataFrame(
        {
            "step": [1, 1, 2, 2, 1],
            "rank": [0, 0, 0, 0, 1],
            "start_ns": pd.array([-5, 10, 20, 20, 10], dtype="Int64"),
            "duration_us": [1.0, 1.0, 1.0, 1.0, 1.0],
        }
    )
    out, dropped = validate.clean(steps, "steps")
    assert out[["rank", "step"]].values.tolist() == [[0, 1], [0, 2], [1, 1]]
    assert out["start_ns"].tolist() == [10, 20, 10]
    assert dropped.rows == 2 and dropped.duplicates == 1
    assert "1 repeated a rank/step already seen (kept the first)" in dropped.message("steps", "x")


def _kineto_with(tmp_path: Path, name: str, extra: list[dict]) -> Path:
    """The plain trace's good rows and its step marker, plus ``extra``."""
    evs = bad_numbers.kineto_events(False)
    evs = [e for i, e in enumerate(evs[:51]) if i not in range(3, 9)] + extra
    path = tmp_path / f"{name}.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    return path


@pytest.mark.parametrize(
    ("marker", "words"),
    [
        ("ProfilerStep#99999999999999999999999", "beyond 2**53) step"),  # past int64
        ("ProfilerStep#9007199254740993", "beyond 2**53) step"),  # past any plausible step
        ("ProfilerStep#1", "1 repeated a step already seen"),  # the same step, other times
    ],
)
def test_a_bad_or_repeated_kineto_step_marker_is_dropped_and_named(
    tmp_path: Path, marker: str, words: str
) -> None:
    """A step marker with a huge id made the whole trace unreadable (OverflowError); one that
    repeats a step with other times was merged without a word. Now: the marker is dropped,
    one warning for the steps frame says so, the first marker's step stays."""
    extra = {"ph": "X", "cat": "user_annotation", "name": marker, "pid": 1, "tid": 1,
             "ts": bad_numbers.T0 + 5, "dur": 100}  # fmt: skip
    w, said = _load(_kineto_with(tmp_path, "marker", [extra]))
    assert [s for s in said if ": steps: " in s] == [s for s in said if words in s], said
    assert len(said) == 1 and "dropped 1 row" in said[0]
    assert w.steps["step"].tolist() == [1] and w.steps["duration_us"].tolist() == [600.0]
    assert w.sources["steps"]["dropped"] == 1
    assert w.events["step"].dropna().unique().tolist() == [1]
    _analyses(w, w)


def test_a_copied_task_row_of_a_db_counts_once_and_is_named(tmp_path: Path) -> None:
    """Every TASK (and COMMUNICATION_TASK_INFO) row of a real .db copied: the kernels were
    counted twice (378, not 191) without a word. Now each ``globalTaskId`` keeps its first
    row, on the fast and the generic path, and one warning per table says how many went."""
    src = REPO / "tests" / "data" / "ascend_real" / "db_level0" / "rank0_ascend_pt"
    ref, said = _load(src)
    assert not said
    d = tmp_path / "rank0_ascend_pt"
    shutil.copytree(src, d)
    con = sqlite3.connect(d / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")
    con.executescript("""
        INSERT INTO TASK SELECT * FROM TASK;
        INSERT INTO COMMUNICATION_TASK_INFO SELECT * FROM COMMUNICATION_TASK_INFO;
    """)
    con.commit()
    con.close()
    w, said = _load(d)
    assert len(said) == 2, said
    assert ": TASK: " in said[0] and "repeated a globalTaskId already seen" in said[0]
    assert ": COMMUNICATION_TASK_INFO: " in said[1]
    assert any(said[0] in n for n in w.sources["kernels"]["notes"]), w.sources["kernels"]
    for kind in ("kernels", "communication", "steps", "events"):
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind))
    _analyses(w, ref)


def _memory(ts: int, args: dict) -> dict:
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
            "tid": 1, "ts": ts, "args": {"Device Type": 0, "Device Id": -1, **args}}  # fmt: skip


@pytest.mark.parametrize("how", ["whole", "stream"])
def test_impossible_memory_values_are_dropped_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A [memory] event of 1e300 bytes with a total of -1e300 was kept without a word (and
    drew the memory plot's axis to 1e300). Now its row goes, one warning says so; a free
    (a negative ``Bytes``) stays."""
    t0 = bad_numbers.T0
    path = _kineto_with(
        tmp_path,
        "memory",
        [
            _memory(t0 + 1, {"Bytes": 512, "Total Allocated": 1024, "Total Reserved": 4096}),
            _memory(
                t0 + 2, {"Bytes": 1e300, "Total Allocated": -1e300, "Total Reserved": 1e30}
            ),
            _memory(t0 + 3, {"Bytes": -256, "Total Allocated": 768, "Total Reserved": 4096}),
        ],
    )
    if how == "stream":
        monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    w, said = _load(path)
    assert len(said) == 1 and ": memory: 1 row had an impossible" in said[0], said
    assert "allocated_bytes" in said[0] and "dropped 1 row" in said[0]
    m = w.memory
    assert m["allocated_bytes"].tolist() == [1024, 768]
    assert m["delta_bytes"].tolist() == [512, -256]
    assert w.sources["memory"]["dropped"] == 1
    _analyses(w, w)


def test_clean_drops_impossible_byte_counts() -> None:
    """Totals must lie in [0, 2**63] bytes, changes within ±2**63; missing ones stay."""
    mem = pd.DataFrame(
        {
            "ts_ns": np.arange(6, dtype=np.int64) + 10**18,
            "allocated_bytes": [1.0, np.nan, -1.0, np.inf, 2.0**64, 5.0],
            "delta_bytes": [-1.0, np.nan, 0.0, 0.0, 0.0, -np.inf],
        }
    )
    out, dropped = validate.clean(mem, "memory")
    assert out["ts_ns"].tolist() == [10**18, 10**18 + 1]
    assert dropped.rows == 4
