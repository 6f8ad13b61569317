"""Ascend communication: sizes, bandwidth and steps against Ascend's own numbers, read by the
test from the real files (communication.json, analysis.db CommAnalyzer* tables) of real torch_npu
runs (Level1 and Level2 windows of Ascend/msinsight's test data, tests/data/ascend_real)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from testdata import fixtures_dir

import dynprof_nb
from dynprof_nb import samples
from dynprof_nb.traces.formats.ascend import db_comm as ascend_db_comm
from dynprof_nb.traces.formats.ascend import text as ascend
from dynprof_nb.traces.formats.ascend.db import AscendDb

REAL = fixtures_dir() / "ascend_real"
TEXT_FILES = sorted(
    [
        *REAL.glob("text_level*_comm/rank*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json"),
        *REAL.glob("cluster_2rank/test_rank_*/ASCEND_PROFILER_OUTPUT/communication.json"),
    ]
)
DB_WINDOWS = [REAL / "db_level1", REAL / "db_level2"]


def _ops_in_file(path: Path) -> list[tuple[int, str, dict]]:
    """(step, op name, its "Communication Bandwidth Info") of every op in communication.json."""
    out = []
    for step, kinds in json.loads(path.read_text()).items():
        for ops in kinds.values():
            for key, op in ops.items():
                if "@" in key:
                    out.append((int(step.removeprefix("step")), key.split("@")[0], op))
    return out


def _sql(db: Path, query: str) -> pd.DataFrame:
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        return pd.read_sql_query(query, con)
    finally:
        con.close()


def test_there_are_real_files_to_check():
    assert len(TEXT_FILES) == 6 and all(p.is_file() for p in TEXT_FILES)


@pytest.mark.parametrize("path", TEXT_FILES, ids=lambda p: "/".join(p.parts[-4:-2]))
def test_text_sizes_and_bandwidth_are_ascends_own(path):
    """SDMA already totals HCCS/PCIE/SIO: an op moved SDMA + RDMA, and its bandwidth is the
    transport's own (size over that transport's transit time), not size over the op's transit
    time (which made 240 GB/s of Ascend's 15.8)."""
    ours = ascend.communication_json(path)
    ours = ours[ours["name"].notna()].set_index(["step", "name"])
    per = ascend.communication_bandwidth_json(path)
    per = per[per["name"].notna()].set_index(["step", "name", "transport"])
    ops = _ops_in_file(path)
    assert len(ops) == len(ours) > 0
    checked = 0
    for step, name, op in ops:
        bw = op["Communication Bandwidth Info"]
        moved = {t: v for t, v in bw.items() if t in ("SDMA", "RDMA") and v["Transit Size(MB)"]}
        row = ours.loc[(step, name)]
        assert row["size_mb"] == pytest.approx(sum(v["Transit Size(MB)"] for v in moved.values()))
        for t, v in bw.items():  # every transport that moved something, Ascend's numbers
            if not v["Transit Size(MB)"] and not v["Transit Time(ms)"]:
                assert (step, name, t) not in per.index
                continue
            mine = per.loc[(step, name, t)]
            assert mine["size_mb"] == pytest.approx(v["Transit Size(MB)"], rel=1e-9)
            assert mine["transit_us"] == pytest.approx(v["Transit Time(ms)"] * 1000, rel=1e-9)
            assert mine["bandwidth_gbps"] == pytest.approx(v["Bandwidth(GB/s)"], rel=1e-9)
        if len(moved) == 1:  # one transport carried the op: its bandwidth is the op's
            (v,) = moved.values()
            # within 0.5%, or the 4 decimals Ascend rounds Bandwidth(GB/s) to
            assert row["bandwidth_gbps"] == pytest.approx(
                v["Bandwidth(GB/s)"], rel=5e-3, abs=5e-5
            )
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("root", DB_WINDOWS, ids=lambda p: p.name)
def test_db_communication_matches_commanalyzer_tables(root):
    """The .db reader's op rows and per-transport rows are analysis.db's CommAnalyzerTime /
    CommAnalyzerBandwidth (the numbers of communication.json), steps included ("step50")."""
    w = dynprof_nb.load_window(root)
    comm, per = w.communication, w.communication_bandwidth()
    for r in (0, 1):
        ana = root / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "analysis.db"
        t = _sql(ana, "SELECT * FROM CommAnalyzerTime")
        b = _sql(ana, "SELECT * FROM CommAnalyzerBandwidth")
        mine = comm[comm["rank"] == r].set_index("name")
        assert len(mine) == len(t) > 0
        for row in t.itertuples():
            assert mine.loc[row.hccl_op_name, "step"] == int(row.step.removeprefix("step"))
            assert mine.loc[row.hccl_op_name, "transit_us"] == pytest.approx(row.transit_time * 1e3)
        sdma = b[b["transport_type"] == "SDMA"].drop_duplicates("hccl_op_name")
        assert len(sdma) == len(mine)
        for row in sdma.itertuples():
            assert mine.loc[row.hccl_op_name, "size_mb"] == pytest.approx(row.transit_size)
            assert mine.loc[row.hccl_op_name, "bandwidth_gbps"] == pytest.approx(
                row.bandwidth, rel=5e-3
            )
        p = per[per["rank"] == r]
        uniq = b.drop_duplicates(["hccl_op_name", "transport_type"])
        assert len(p) == len(uniq) and set(p["step"]) == {50}
        m = p.merge(
            uniq, left_on=["name", "transport"], right_on=["hccl_op_name", "transport_type"]
        )
        assert len(m) == len(uniq)
        assert np.allclose(m["transit_us"], m["transit_time"] * 1e3, rtol=1e-9)
        links = w.communication_links()
        assert links["step"].notna().all() and set(links["step"]) == {50}


@pytest.mark.parametrize("root", DB_WINDOWS, ids=lambda p: p.name)
def test_db_from_raw_tasks_agrees_with_ascends_analysis(root):
    """Without analysis.db (a Level0 export, or an analysis not run) the reader computes the
    same numbers from the HCCL tasks: op times from the op's main plane, per-transport size and
    time from the tasks that moved data to another rank. Checked against Ascend's own analysis
    of the same run, within 0.5%; the text and .db readers share the op-size rule."""
    w = dynprof_nb.load_window(root)
    for r in (0, 1):
        adb = w.rank_window(r).database()
        raw = ascend_db_comm.communication(adb.db, None, adb.step_time())
        ana = w.communication[w.communication["rank"] == r].reset_index(drop=True)
        assert raw["name"].tolist() == ana["name"].tolist() and raw["step"].tolist() == [50] * 4
        for col in ("elapse_us", "transit_us", "wait_us", "size_mb", "bandwidth_gbps"):
            rel = ((raw[col] - ana[col]) / ana[col]).abs().max()
            assert rel < 5e-3, (col, rel)
        for col in ("synchronization_us", "idle_us"):  # synchronization is often 0
            assert np.allclose(raw[col], ana[col], rtol=5e-3, atol=0.05), col
        per = ascend_db_comm.bandwidth(adb.db, None, adb.step_time())
        theirs = w.communication_bandwidth()
        theirs = theirs[theirs["rank"] == r]
        m = per.merge(theirs, on=["name", "transport"], suffixes=("", "_ana"))
        assert len(m) == len(per) == len(theirs)
        for col in ("size_mb", "transit_us", "bandwidth_gbps"):
            assert ((m[col] - m[f"{col}_ana"]) / m[f"{col}_ana"]).abs().max() < 5e-3


ALL_DBS = sorted(
    p
    for root in (fixtures_dir(), Path(samples.path("ascend_db")).parent)
    for p in root.rglob("*.db")
    if p.name != "analysis.db"
)


def test_every_fixture_db_is_checked():
    assert len(ALL_DBS) >= 9, ALL_DBS


@pytest.mark.parametrize("db", ALL_DBS, ids=lambda p: "/".join(p.parts[-4:]))
def test_op_times_fit_in_the_op_for_every_fixture_db(db):
    """No time inside an op can exceed the op: wait + transit <= elapse (so each <= elapse),
    synchronization <= wait and idle >= 0, whether read from analysis.db or computed from the
    raw tasks; where a number is not known it is NaN, never a sum over parallel planes."""
    ana = db.parent / "analysis.db"
    for adb in (AscendDb(db, ana if ana.is_file() else None), AscendDb(db)):
        c = adb.communication()
        known = c["wait_us"].notna()
        assert (known == c["transit_us"].notna()).all()
        k = c[known]
        slack = 1e-6 * k["elapse_us"] + 0.01  # Ascend's ms values carry 1e-8 ms rounding
        assert (k["wait_us"] + k["transit_us"] <= k["elapse_us"] + slack).all(), k.to_string()
        assert (k["synchronization_us"].fillna(0) <= k["wait_us"] + 0.01).all()
        assert (k["idle_us"].fillna(0) >= -0.01).all()
        assert (c["elapse_us"] > 0).all()


def test_level0_sample_communication_has_its_step():
    """The shipped .db sample (no CommAnalyzer tables): each op in the STEP_TIME step it runs
    in, and sizes that count SDMA once."""
    root = Path(samples.path("ascend_db"))
    w = dynprof_nb.load_window(root)
    c = w.communication
    assert len(c) > 0 and c["step"].notna().all()
    for r in (0, 1):
        out = root / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        db = out / f"ascend_pytorch_profiler_{r}.db"
        steps = _sql(db, "SELECT id FROM STEP_TIME")["id"].astype(int).tolist()
        assert set(c.loc[c["rank"] == r, "step"]) <= set(steps)
    per = w.communication_bandwidth()
    sdma = per[per["transport"] == "SDMA"].groupby(["rank", "name"])["size_mb"].sum()
    mine = c.set_index(["rank", "name"])["size_mb"]
    assert np.allclose(mine.loc[sdma.index], sdma)
