"""msprof-analyze 26.2.0 as the oracle on the Level1 and Level2 torch_npu .db windows (their
analysis.db has the CommAnalyzer tables the communication recipes read): it runs
communication_matrix_sum, communication_time_sum and cluster_time_summary (and its default mode,
ClusterStepTraceTime) on a copy, and dynprof_nb's numbers for the same files must be its own:
counts exact, times and ratios within 0.5%."""

from __future__ import annotations

import shutil

import msprof
import numpy as np
import pandas as pd
import pytest
from testdata import fixtures_dir

import dynprof_nb
from dynprof_nb.analysis import ranks

pytestmark = pytest.mark.timeout(600)

RECIPES = ("communication_matrix_sum", "communication_time_sum", "cluster_time_summary")
TOL = 5e-3


@pytest.fixture(scope="module", params=["db_level1", "db_level2"])
def oracle(request, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("msprof_levels") / request.param
    shutil.copytree(fixtures_dir() / "ascend_real" / request.param, root)
    for recipe in RECIPES:
        msprof.run(root, recipe)
    msprof.run(root)
    return {
        "src": fixtures_dir() / "ascend_real" / request.param,
        "out": root / "cluster_analysis_output",
        "step_trace": msprof.cluster_step_trace(root),
        "window": dynprof_nb.load_window(root),
    }


def _close(m: pd.DataFrame) -> None:
    worst = m.filter(like="_rel_diff").abs().max().max()
    assert worst < TOL, m.to_string()


def test_communication_time_sum_per_op(oracle):
    t = pd.read_csv(oracle["out"] / "CommunicationTimeSum" / "cluster_communication_time.csv")
    ops = t[t["hccl_op_name"] != "Total Op Info"].rename(
        columns={"rank_id": "rank", "hccl_op_name": "name"}
    )
    ops["step"] = ops["step"].str.removeprefix("step").astype(int)
    for c in ("elapsed_time", "transit_time", "wait_time", "synchronization_time", "idle_time"):
        ops[c] = ops[c] * 1000.0
    ours = oracle["window"].communication
    m = ranks.compare(
        ours,
        ops,
        ["rank", "step", "name"],
        {
            "elapse_us": "elapsed_time",
            "transit_us": "transit_time",
            "wait_us": "wait_time",
            "idle_us": "idle_time",
        },
    )
    assert len(m) == len(ops) == len(ours) > 0 and m.notna().all().all()
    _close(m)
    # its per rank totals ("Total Op Info") and ratios
    tot = t[t["hccl_op_name"] == "Total Op Info"].set_index("rank_id")
    for r, part in ours.groupby("rank"):
        assert part["elapse_us"].sum() == pytest.approx(tot.loc[r, "elapsed_time"] * 1e3, rel=TOL)
        w, tr = part["wait_us"].sum(), part["transit_us"].sum()
        assert w / (w + tr) == pytest.approx(tot.loc[r, "wait_time_ratio"], abs=1e-4)


def test_raw_tasks_give_communication_time_sums_numbers(oracle, tmp_path):
    """Without analysis.db the .db reader computes each op's times from the HCCL tasks of its
    main plane: they must be communication_time_sum's for the same run (elapsed, transit, wait,
    synchronization, idle), and within the op (wait + transit <= elapsed)."""
    raw_root = tmp_path / "raw"
    shutil.copytree(oracle["src"], raw_root)
    for ana in raw_root.glob("rank*/ASCEND_PROFILER_OUTPUT/analysis.db"):
        ana.unlink()
    ours = dynprof_nb.load_window(raw_root).communication
    assert "analysis.db" not in set(ours["source"])
    t = pd.read_csv(oracle["out"] / "CommunicationTimeSum" / "cluster_communication_time.csv")
    ops = t[t["hccl_op_name"] != "Total Op Info"].rename(
        columns={"rank_id": "rank", "hccl_op_name": "name"}
    )
    ops["step"] = ops["step"].str.removeprefix("step").astype(int)
    cols = {
        "elapse_us": "elapsed_time",
        "transit_us": "transit_time",
        "wait_us": "wait_time",
        "synchronization_us": "synchronization_time",
        "idle_us": "idle_time",
    }
    for c in cols.values():
        ops[c] = ops[c] * 1000.0
    m = ours.merge(ops, on=["rank", "step", "name"], how="inner")
    assert len(m) == len(ops) == len(ours) > 0
    for mine, theirs in cols.items():  # synchronization is often 0: an absolute floor of 0.05 µs
        assert np.allclose(m[mine], m[theirs], rtol=TOL, atol=0.05), (mine, m[[mine, theirs]])
    assert (ours["wait_us"] + ours["transit_us"] <= ours["elapse_us"]).all()


def test_level0_op_times_are_unknown_as_msprof_analyze_has_none(tmp_path):
    """A Level0 export's HCCL tasks carry no plane id, so the op's main plane cannot be told
    apart: summing every plane's Notify Waits gave rank 1 a wait of 198,676 µs in 93,994 µs of
    ops. msprof-analyze computes no per-op times there (communication_time_sum writes nothing);
    dynprof_nb leaves them NaN, says why, and keeps what is known (elapse, from the ops)."""
    root = tmp_path / "db_level0"
    shutil.copytree(fixtures_dir() / "ascend_real" / "db_level0", root)
    msprof.run(root, "communication_time_sum")
    assert not list((root / "cluster_analysis_output").rglob("*.csv"))
    w = dynprof_nb.load_window(root)
    c = w.communication
    assert len(c) == 8 and (c["elapse_us"] > 0).all()
    for col in ("transit_us", "wait_us", "synchronization_us", "idle_us"):
        assert c[col].isna().all(), col
    notes = " ".join(w.rank_window(1).sources["communication"]["notes"])
    assert "no plane id" in notes


def test_communication_time_sum_bandwidth(oracle):
    b = pd.read_csv(oracle["out"] / "CommunicationTimeSum" / "cluster_communication_bandwidth.csv")
    per_op = b[b["hccl_op_name"] != "Total Op Info"].drop_duplicates(
        ["rank_id", "hccl_op_name", "band_type"]
    )
    per_op = per_op.rename(
        columns={"rank_id": "rank", "hccl_op_name": "name", "band_type": "transport"}
    )
    per_op["transit_us"] = per_op["transit_time"] * 1000.0
    ours = oracle["window"].communication_bandwidth()
    m = ranks.compare(
        ours,
        per_op,
        ["rank", "name", "transport"],
        {"size_mb": "transit_size", "transit_us": "transit_us", "bandwidth_gbps": "bandwidth"},
    )
    assert len(m) == len(per_op) == len(ours) > 0
    _close(m)
    # the op rows: size and bandwidth are the SDMA row's (SDMA totals the links: not summed twice)
    sdma = per_op[per_op["transport"] == "SDMA"]
    m = ranks.compare(
        oracle["window"].communication,
        sdma,
        ["rank", "name"],
        {"size_mb": "transit_size", "bandwidth_gbps": "bandwidth"},
    )
    assert len(m) == len(sdma)
    _close(m)
    # the per rank and transport totals ("Total Op Info": size sum over time sum)
    tot = b[b["hccl_op_name"] == "Total Op Info"].drop_duplicates(["rank_id", "band_type"])
    mine = ours.groupby(["rank", "transport"])[["size_mb", "transit_us"]].sum().reset_index()
    mine["bandwidth_gbps"] = mine["size_mb"] / (mine["transit_us"] / 1000.0)
    m = ranks.compare(
        mine,
        tot.rename(columns={"rank_id": "rank", "band_type": "transport"}),
        ["rank", "transport"],
        {"size_mb": "transit_size", "bandwidth_gbps": "bandwidth"},
    )
    assert len(m) == len(tot) > 0
    _close(m)


def test_communication_matrix_sum(oracle):
    cm = pd.read_csv(oracle["out"] / "CommMatrixSum" / "cluster_communication_matrix.csv")
    tot = cm[(cm["hccl_op_name"] == "Total Op Info") & (cm["src_rank"] != cm["dst_rank"])]
    tot = tot.rename(columns={"transport_type": "transport"}).assign(
        transit_us=lambda f: f["transit_time"] * 1000.0
    )
    ours = oracle["window"].communication_matrix()
    m = ranks.compare(
        ours,
        tot,
        ["src_rank", "dst_rank", "transport"],
        {"size_mb": "transit_size", "transit_us": "transit_us", "bandwidth_gbps": "bandwidth"},
    )
    assert len(m) == len(tot) == len(ours) > 0
    _close(m)


def test_cluster_time_summary(oracle):
    (csv,) = (oracle["out"] / "ClusterTimeSummary").glob("cluster_time_summary_*.csv")
    theirs = pd.read_csv(csv)
    ours = oracle["window"].time_summary()
    assert list(ours.columns) == list(theirs.columns)
    value_cols = [c for c in theirs.columns if c not in ("Rank", "Step")]
    m = ranks.compare(ours, theirs, ["Rank", "Step"], {c: c for c in value_cols})
    assert len(m) == len(theirs) == len(ours) > 0
    _close(m)
    # the step breakdown's own Free differs on purpose: memory copies are in it
    br = oracle["window"].step_breakdown().set_index(["rank", "step"])
    for row in theirs.itertuples(index=False):
        free = br.loc[(row.Rank, row.Step), "free_us"]
        assert free - row[7] == pytest.approx(row[11], rel=TOL)


def test_cluster_step_trace_time(oracle):
    st = oracle["step_trace"].query("type == 'rank'")
    theirs = st.assign(Index=st["index"].astype(int), Step=st["step"].astype(int))
    ours = oracle["window"].step_trace()
    names = {
        "Computing": "computing",
        "Communication(Not Overlapped)": "communication_not_overlapped",
        "Overlapped": "overlapped",
        "Communication": "communication",
        "Free": "free",
        "Stage": "stage",
        "Bubble": "bubble",
        "Communication(Not Overlapped and Exclude Receive)": (
            "communication_not_overlapped_and_exclude_receive"
        ),
        "Preparing": "preparing",
    }
    m = ranks.compare(ours, theirs, ["Index", "Step"], names)
    assert len(m) == len(theirs) == len(ours) > 0
    _close(m)
