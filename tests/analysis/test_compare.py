"""compare() of two windows: per step per rank whatever the windows' lengths and ranks, totals
(said so) for bare traces, ranks folded per name, a warning when their settings differ."""

import json
import time
import warnings
from pathlib import Path

import pytest
from jobutil import unique_job
from testdata import fixtures_dir, write_builtin_window

import dynprof_nb
from dynprof_nb.analysis.configdiff import ConfigMismatchWarning, WindowLengthWarning
from dynprof_nb.contract import segment

PER_STEP = ["name", "calls_per_step_a", "calls_per_step_b", "self_us_per_step_a",
            "self_us_per_step_b", "delta_us", "ratio"]


def test_compare_two_multi_rank_windows_folds_ranks_per_name(tmp_path: Path):
    for r in (0, 1):
        write_builtin_window(tmp_path / "a", rank=r)
        write_builtin_window(tmp_path / "b", rank=r, step_us=3000.0)
    a, b = dynprof_nb.load_window(tmp_path / "a"), dynprof_nb.load_window(tmp_path / "b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same length, same settings: nothing to warn about
        table = dynprof_nb.compare(a, b)
    assert table["name"].is_unique and list(table.columns) == PER_STEP
    fwd = table.set_index("name").loc["forward"]
    assert fwd.calls_per_step_a == 1 and fwd.ratio == pytest.approx(3.0, rel=1e-3)
    assert table.attrs["note"] == "per step per rank: both windows have 3 steps x 2 ranks"


def test_a_slower_op_reads_slower_whatever_the_windows_lengths(tmp_path: Path):
    """The finding: a 10-step window against a 5-step one said allreduce 0.9x although every
    call was 1.8x slower. Per step the ratio is 1.8 both ways round."""
    a = dynprof_nb.load_window(write_builtin_window(tmp_path / "a", start=1, stop=10,
                                                    extra_ops={"allreduce": 50.0}))
    b = dynprof_nb.load_window(write_builtin_window(tmp_path / "b", start=11, stop=15,
                                                    extra_ops={"allreduce": 90.0}))
    with pytest.warns(WindowLengthWarning, match=r"a: 10 steps x 1 rank, b: 5 steps x 1 rank"):
        table = dynprof_nb.compare(a, b)
    rows = table.set_index("name")
    assert rows.loc["allreduce", "ratio"] == pytest.approx(1.8, rel=1e-3)
    assert (rows.loc["allreduce", ["calls_per_step_a", "calls_per_step_b"]] == 1).all()
    assert rows.loc["allreduce", "delta_us"] == pytest.approx(40.0, rel=1e-3)
    assert rows.loc["forward", "ratio"] == pytest.approx(1.0)
    # sorted by the size of the change: allreduce's 40 µs more came out of the step's own time
    # (the step's time outside every op: ProfilerStep*'s self time, by the name w.ops has)
    assert set(table["name"].iloc[:2]) == {"allreduce", "ProfilerStep*"}
    assert table.attrs["basis"] == "per step per rank"
    assert (table.attrs["steps_a"], table.attrs["steps_b"]) == (10, 5)
    with pytest.warns(WindowLengthWarning, match=r"a: 5 steps x 1 rank, b: 10 steps x 1 rank"):
        back = dynprof_nb.compare(b, a).set_index("name")
    assert back.loc["allreduce", "ratio"] == pytest.approx(1 / 1.8, rel=1e-3)


def test_two_ranks_against_one_compare_per_rank(tmp_path: Path):
    for r in (0, 1):  # ranks count steps on their own: rank 1 is at steps 101..106
        write_builtin_window(tmp_path / "a", rank=r, start=1 + 100 * r, stop=6 + 100 * r,
                             extra_ops={"allreduce": 50.0})
    write_builtin_window(tmp_path / "b", rank=0, stop=3, extra_ops={"allreduce": 90.0})
    a, b = dynprof_nb.load_window(tmp_path / "a"), dynprof_nb.load_window(tmp_path / "b")
    assert a.ranks == [0, 1] and b.ranks == [0]
    with pytest.warns(WindowLengthWarning, match=r"a: 6 steps x 2 ranks, b: 3 steps x 1 rank"):
        rows = dynprof_nb.compare(a, b).set_index("name")
    assert rows.loc["allreduce", "ratio"] == pytest.approx(1.8, rel=1e-3)
    assert rows.loc["allreduce", "self_us_per_step_a"] == pytest.approx(50.0, rel=1e-3)
    assert rows.loc["backward", "ratio"] == pytest.approx(1.0)
    assert rows.loc["backward", "calls_per_step_a"] == 1


def test_without_steps_the_totals_are_compared_and_said_so(tmp_path: Path):
    bare = dynprof_nb.load_trace(fixtures_dir() / "kineto" /
                                 "hta__critical_path__alexnet__benchmark_result_2869224_"
                                 "1695835535_trace.json.gz")
    assert bare.steps.empty
    with pytest.warns(WindowLengthWarning, match="neither window has steps"):
        table = dynprof_nb.compare(bare, bare)
    assert list(table.columns) == ["name", "calls_a", "calls_b", "self_us_a", "self_us_b",
                                   "delta_us", "ratio"]
    assert table.attrs["basis"] == "total" and (table["ratio"] == 1.0).all()
    stepped = dynprof_nb.load_window(write_builtin_window(tmp_path / "w"))
    with pytest.warns(WindowLengthWarning, match="window a has no steps"):
        mixed = dynprof_nb.compare(bare, stepped)
    assert "self_us_a" in mixed and mixed.attrs["steps_b"] == 3


def _busy(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def test_real_monitor_windows_of_different_lengths(tmp_path: Path):
    """Two windows a real Monitor recorded in this process (built-in backend): 10 steps with a
    1 ms ``allreduce``, then 5 steps with 1.8 ms. Only ratios are asserted."""
    name = unique_job("cmp")
    control = dynprof_nb.attach(name, create=True)
    monitor = dynprof_nb.Monitor(job=name, rank=0, output_path=tmp_path, backend="builtin")
    try:
        def run(n: int, allreduce_ms: float) -> None:
            for _ in range(n):
                with dynprof_nb.range("forward"):
                    _busy(0.5)
                with dynprof_nb.range("allreduce"):
                    _busy(allreduce_ms)
                monitor.step()
            assert monitor.wait_saved(60)

        control.start(3, 12)
        run(14, 1.0)
        control.start(17, 21)
        run(9, 1.8)
    finally:
        monitor.close()
        control.close()
        segment.unlink(name)
    a = dynprof_nb.load_window(tmp_path / "rank0_start3_stop12")
    b = dynprof_nb.load_window(tmp_path / "rank0_start17_stop21")
    with pytest.warns(WindowLengthWarning, match="a: 10 steps x 1 rank, b: 5 steps x 1 rank"):
        rows = dynprof_nb.compare(a, b).set_index("name")
    # what each call took, from the events themselves (a preempted busy wait is long: the
    # machine is shared, so the truth is the recorded calls, not the 1.8 asked for)
    calls = {w: w.events[w.events["name"] == "allreduce"]["dur_ns"] for w in (a, b)}
    assert len(calls[a]) == 10 and len(calls[b]) == 5
    per_call = calls[b].mean() / calls[a].mean()  # one call per step: per call is per step
    # (the totals compare of before gave half of this: 5 calls of b against 10 of a)
    assert rows.loc["allreduce", "ratio"] == pytest.approx(per_call, rel=1e-6)
    assert (rows.loc["allreduce", ["calls_per_step_a", "calls_per_step_b"]] == 1).all()


def test_compare_warns_when_the_profiler_settings_differ(tmp_path: Path):
    for name, stack in (("a", False), ("b", True)):
        d = write_builtin_window(tmp_path / name, rank=0)
        manifest = json.loads((d / "window.json").read_text())
        manifest["config"] = {"with_stack": stack}
        (d / "window.json").write_text(json.dumps(manifest))
    a, b = dynprof_nb.load_window(tmp_path / "a"), dynprof_nb.load_window(tmp_path / "b")
    with pytest.warns(ConfigMismatchWarning, match="with_stack"):
        dynprof_nb.compare(a, b)
    assert "recorded with with_stack=True" in str(b.summary())
