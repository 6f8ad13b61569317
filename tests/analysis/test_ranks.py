"""Multi-rank analyses (analysis/ranks.py) on the real text windows: matrix / slow links against
msprof-analyze's own cluster_communication_matrix.json, slow-rank detection, plots."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure
from testdata import fixtures_dir

import dynprof_nb
from dynprof_nb.analysis import ranks

CLUSTER = fixtures_dir() / "ascend_real" / "cluster_2rank"
TEXT = fixtures_dir() / "ascend_real" / "text_level0"


def test_matrix_equals_msprof_cluster_matrix_for_shared_links():
    w = dynprof_nb.load_window(CLUSTER)
    ours = w.communication_links()
    theirs = dynprof_nb.load_trace(
        CLUSTER / "cluster_analysis_output" / "cluster_communication_matrix.json"
    ).communication_links()
    assert len(theirs) > 0
    key = ["step", "name", "src_rank", "dst_rank"]
    m = theirs.merge(ours.drop_duplicates(key), on=key, suffixes=("_msprof", ""))
    assert len(m) > 0
    assert m["size_mb"].to_numpy() == pytest.approx(m["size_mb_msprof"].to_numpy())
    assert m["transit_us"].to_numpy() == pytest.approx(m["transit_us_msprof"].to_numpy())
    assert (m["transport"] == m["transport_msprof"]).all()


def test_communication_matrix_and_slow_links():
    w = dynprof_nb.load_window(CLUSTER)
    mat = w.communication_matrix()
    assert {"src_rank", "dst_rank", "transport", "bandwidth_gbps"} <= set(mat.columns)
    assert (mat["bandwidth_gbps"] > 0).all()
    slow = ranks.slow_links(w, threshold=0.9)
    assert set(slow["transport"]) <= set(mat["transport"])
    assert all("GB/s" in n for n in slow["note"])
    assert isinstance(w.plot_bandwidth(), Figure)


def test_slow_rank_is_found_and_explained(tmp_path: Path):
    job = tmp_path / "job"
    shutil.copytree(TEXT, job)
    p = job / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    st = pd.read_csv(p)
    st["Computing"] *= 1.5  # rank 1 computes half again as long
    st.to_csv(p, index=False)
    w = dynprof_nb.load_window(job)
    sr = w.slow_ranks()
    # with two ranks the median sits between them: rank 1 is 20% above it
    assert sr.set_index("rank")["slow"].to_dict() == {0: False, 1: True}
    note = ranks.slow_rank_note(w)  # the straggler rule: its own work (computing) is larger
    assert note.startswith("rank 1 is the straggler") and "most in computing" in note, note
    fig = w.plot_rank_steps()
    assert isinstance(fig, Figure) and len(fig.axes[0].patches) >= 6


def test_top_kernels_and_communication_share_text_window():
    w = dynprof_nb.load_window(TEXT)
    top = ranks.top_kernels(w, n=5)
    assert len(top) == 5 and top["sum_us"].is_monotonic_decreasing
    share = ranks.communication_share(w)
    st = w.steps
    expect = (st["communication_us"] - st["overlapped_us"]).sum() / st["duration_us"].sum()
    assert share == pytest.approx(expect)


def test_npu_summary_leads_with_device_time_communication_and_slow_rank():
    w = dynprof_nb.load_window(fixtures_dir() / "ascend_real" / "db_level0")
    notes = w.summary().notes
    assert notes[0].startswith("compute kernels 17.7 ms of device time; top: ")
    assert "HCCL" not in notes[0]
    assert notes[1].startswith("communication not hidden behind computation: 71%")
    assert notes[2].startswith("no slow rank")
    assert w.summary().header["device_time_ms"] > 0


def test_the_old_name_still_imports_with_a_warning():
    # notebooks/npu_cluster.ipynb told users `from dynprof_nb.analysis import cluster`
    with pytest.warns(DeprecationWarning, match="dynprof_nb.analysis.ranks"):
        from dynprof_nb.analysis import cluster
    assert cluster is ranks
