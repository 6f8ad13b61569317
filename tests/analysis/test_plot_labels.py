"""What the plots say, as seen in JupyterLab (issue 15's browser pass): no raw values in titles
or legends ("[memory]", "cpu:-1"), no flat line for memory nobody recorded, one label per
operation across ranks, a legend that does not cover the bars, no empty rows of ranks the
window does not have. Real sample windows."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pandas as pd
from testdata import REPO

import dynprof_nb
from dynprof_nb import samples
from dynprof_nb.analysis import plots

ASCEND = REPO / "tests" / "data" / "ascend_real"


def test_cpu_memory_plot_names_the_host_and_draws_only_what_was_recorded():
    fig = samples.load("pytorch_cpu").plot_memory()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["CPU allocated"], labels  # not "cpu:-1 allocated" + a flat "reserved"
    title = ax.get_title()
    assert "[memory]" not in title and "rank x device" not in title, title
    assert "1 device" in title and "dashed" not in title, title


def test_npu_memory_plot_keeps_its_component_and_both_lines():
    ax = dynprof_nb.load_window(ASCEND / "db_level0").plot_memory().axes[0]
    assert "PTA+GE" in ax.get_title() and "2 ranks, 2 devices" in ax.get_title()
    assert "(solid: allocated, dashed: reserved)" in ax.get_title()


def _python_frames_only(tmp_path: Path) -> Path:
    """The real 2-rank .db window keeping only its with_stack Python frames and its step: a
    window of plain Python, whose frames are then its operations (with object addresses)."""
    dest = tmp_path / "db_frames"
    shutil.copytree(ASCEND / "db_level0", dest)
    for db in dest.glob("rank*/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db"):
        con = sqlite3.connect(db)
        con.execute(
            "DELETE FROM PYTORCH_API WHERE type != (SELECT id FROM ENUM_API_TYPE WHERE "
            "name = 'trace') AND name NOT IN (SELECT id FROM STRING_IDS WHERE value LIKE "
            "'ProfilerStep%')"
        )
        con.execute("DROP TABLE CANN_API")
        con.commit()
        con.close()
    return dest


def test_ops_that_differ_by_an_object_address_share_one_label(tmp_path: Path):
    w = dynprof_nb.load_window(_python_frames_only(tmp_path))
    assert w.ops["name"].str.contains("run_backward").sum() == 2  # one per rank, two addresses
    labels = [t.get_text() for t in w.plot_ops(n=40).axes[0].get_yticklabels()]
    backward = [s for s in labels if "run_backward" in s]
    assert len(backward) == 1 and "0x" not in backward[0], backward


def test_step_legend_sits_beside_the_bars():
    fig = samples.load("kineto_gpu").plot_steps()
    legend = fig.axes[0].get_legend()
    fig.canvas.draw()
    box = legend.get_window_extent()
    axes = fig.axes[0].get_window_extent()
    assert box.x0 >= axes.x1 - 1, (box, axes)  # right of the plot area, not over a bar


def test_bandwidth_rows_are_the_window_ranks():
    w = dynprof_nb.load_window(ASCEND / "cluster_2rank")
    m = w.communication_matrix()
    ax = w.plot_bandwidth().axes[0]
    rows = [int(t.get_text()) for t in ax.get_yticklabels()]
    cols = [int(t.get_text()) for t in ax.get_xticklabels()]
    assert rows == sorted(m["src_rank"].unique()) and len(rows) == 2, rows
    assert cols == sorted(m["dst_rank"].unique()), cols


def test_address_pattern_only_strips_addresses():
    names = pd.Series(["<x object at 0xfffdc7cc1890>", "aten::mm", "at 0x is text"])
    assert names.str.replace(plots._ADDRESS, "", regex=True).tolist() == [
        "<x object>", "aten::mm", "at 0x is text"]


def test_an_op_is_one_colour_in_every_plot_of_a_window():
    from matplotlib.colors import to_hex

    w = samples.load("pytorch_cpu")
    palette = plots.op_colors(w)
    timeline = w.plot_timeline()
    legend = {t.get_text(): to_hex(h.get_facecolor())
              for t, h in zip(timeline.legends[0].get_texts(),
                              timeline.legends[0].legend_handles, strict=True)}
    ops = w.plot_ops().axes[0]
    bars = {t.get_text(): to_hex(b.get_facecolor())
            for t, b in zip(ops.get_yticklabels(), ops.patches, strict=True)}
    both = (set(legend) & set(bars)) - {"other"}
    assert len(both) >= 3, (legend, bars)
    for name in both:
        assert legend[name] == bars[name] == palette[name], name


def test_long_names_cut_to_the_same_head_keep_distinct_labels():
    names = ["aten::convolution_backward_input_" + "x" * 20,
             "aten::convolution_backward_input_" + "y" * 20, "short"]
    labels = plots._distinct_labels(names, 30)
    assert len(set(labels)) == 3 and all(len(x) <= 34 for x in labels), labels
    assert labels[2] == "short"


def test_step_labels_say_every_2nd_not_2th():
    assert [plots._ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 102)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "102nd"]
