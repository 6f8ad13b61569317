"""Summaries, ranks view, compare and plots on real and built-in windows."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure
from testdata import write_builtin_window

import dynprof_nb
from dynprof_nb.analysis.summary import ranks_view
from dynprof_nb.traces.formats.derived.op_table import op_table


def test_summary_notes_slow_step_and_slow_rank(tmp_path: Path):
    for r in range(3):
        write_builtin_window(tmp_path, rank=r, start=1, stop=6, step_us=1000 * (1 + 0.25 * (r == 2)),
                             slow_step=4, slow_factor=2.3)
    w = dynprof_nb.load_window(tmp_path)
    s = w.summary()
    text = str(s)
    # one note for a step slow on every rank, against each rank's own median step
    assert "step 4 was slow on ranks 0, 1, 2: up to 2.3x rank 0's median step" in text
    assert "rank 2 is the slowest by 25%" in text
    ranks_table = text.split("Ranks:")[1]
    assert "25.0%" in ranks_table  # vs_fastest read as a percentage, not 0.250
    html = s._repr_html_()
    assert "<table" in html and "rank 2 is the slowest" in html
    rv = ranks_view(w)
    assert rv["rank"].iloc[0] == 2 and rv["vs_fastest"].iloc[0] == pytest.approx(0.25, rel=1e-3)
    assert s.header["ranks"] == [0, 1, 2] and s.header["steps"] == "1..6"


def test_summary_on_real_ascend_trace(fixtures: Path):
    w = dynprof_nb.load_trace(fixtures / "ascend" / "torch_npu_trace_view.json")
    s = w.summary()
    assert "device idle (free)" in str(s)
    assert s.top_ops["name"].iloc[0] == w.ops["name"].iloc[0]
    assert w.ops["share"].sum() == pytest.approx(1.0)


def test_communication_note(fixtures: Path):
    w = dynprof_nb.load_trace(fixtures / "kineto" / "hta__nccl_parser_config__nccl_data.json.gz")
    assert "communication not overlapped" in str(w.summary())


def test_compare_finds_the_op_that_changed(tmp_path: Path):
    a = dynprof_nb.load_window(write_builtin_window(tmp_path / "a", step_us=1000))
    b = dynprof_nb.load_window(write_builtin_window(tmp_path / "b", step_us=2000))
    diff = dynprof_nb.compare(a, b)
    assert diff["name"].iloc[0] == "ProfilerStep*" or diff["name"].iloc[0] == "backward"
    row = diff.set_index("name").loc["backward"]
    assert row["ratio"] == pytest.approx(2.0, rel=1e-3)


def test_self_time_nesting():
    import pandas as pd

    ev = pd.DataFrame({"name": ["outer", "a", "b", "inner", "other_thread"],
                       "cat": "cpu_op", "ph": "X", "pid": 1, "tid": [1, 1, 1, 1, 2],
                       "process": "p", "thread": "t",
                       "ts_ns": [0, 10, 50, 55, 0], "dur_ns": [100, 30, 40, 10, 1000]})
    ops = op_table(ev).set_index("name")
    assert ops.loc["outer", "self_us"] == pytest.approx(0.030)  # 100 - 30 - 40
    assert ops.loc["b", "self_us"] == pytest.approx(0.030)  # 40 - 10
    assert ops.loc["other_thread", "self_us"] == pytest.approx(1.0)


@pytest.mark.parametrize("plot", ["plot_timeline", "plot_ops", "plot_steps", "plot_memory"])
def test_plots_return_figures(tmp_path: Path, fixtures: Path, plot: str):
    for w in (dynprof_nb.load_trace(next((fixtures / "torch_cpu").glob("*.json"))),
              dynprof_nb.load_trace(fixtures / "ascend" / "torch_npu_trace_view.json"),
              dynprof_nb.load_window(write_builtin_window(tmp_path, rank=1))):
        fig = getattr(w, plot)()
        assert isinstance(fig, Figure)
        assert fig.axes
        fig.savefig(tmp_path / f"{plot}.png")
        assert (tmp_path / f"{plot}.png").stat().st_size > 1000


def test_the_step_marker_has_one_name_in_every_table():
    """``ProfilerStep*`` in ``ops`` (as torch's key_averages has it) is the steps' time outside
    every op: the summary, the ops plot and compare call it by that same name, so a row read in
    one is found in the others, and the summary says once what it is."""
    from dynprof_nb import samples
    from dynprof_nb.analysis.summary import STEP_FOLDED_NOTE

    w = samples.load("pytorch_cpu")
    assert "ProfilerStep*" in set(w.ops["name"])  # the peer's row stays in the frame
    s = w.summary()
    assert "ProfilerStep*" in set(s.top_ops["name"])
    assert [n for n in s.notes if "ProfilerStep*" in n and "no operator" in n] == [STEP_FOLDED_NOTE]
    assert "outside any range)" not in str(s)
    labels = [t.get_text() for t in w.plot_ops().axes[0].get_yticklabels()]
    assert "ProfilerStep*" in labels
    assert not any("device idle" in n for n in s.notes)  # a CPU-only window has no device


def test_no_device_idle_note_without_a_device(tmp_path):
    from dynprof_nb.analysis.summary import notes_for

    w = dynprof_nb.load_window(write_builtin_window(tmp_path))  # a CPU-only window
    steps = w.steps.assign(free_us=w.steps["duration_us"] * 0.5)  # half its step time "free"
    assert w.kernels.empty
    assert not any("device idle" in n for n in notes_for(steps, w.ops, device=False))
    assert any("device idle (free) for 50%" in n for n in notes_for(steps, w.ops, device=True))


def test_a_multi_rank_summary_leads_with_the_trigger_reason(tmp_path: Path):
    """The reason a trigger recorded a window is in each rank's manifest: a multi-rank
    summary leads with it too, as a single-rank one does."""
    import json

    reason = "rank 1 steps 40-44 took 21, 20, 22, 20, 21 ms = 2.0x its median 10.2 ms"
    for r in range(2):
        d = write_builtin_window(tmp_path, rank=r, start=1, stop=4)
        manifest = json.loads((d / "window.json").read_text())
        (d / "window.json").write_text(json.dumps(dict(manifest, reason=reason)))
    text = str(dynprof_nb.load_window(tmp_path).summary())
    assert f"triggered because {reason}" in text, text[:400]
