"""w.advise(): each rule fires on its threshold's side and not below it, each finding's numbers
are recomputed here from the window's frames, a rule without its data says "not applicable"
(never a finding), and the places people look (CLI, summary, HTML) show them.

The host-event rules run on a small stand-in window (frames only); the rest on real fixture
windows. Thresholds come from the rule modules, not typed here."""

from __future__ import annotations

import warnings
from functools import cache

import numpy as np
import pandas as pd
import pytest
from testdata import fixtures_dir

import dynprof_nb
from dynprof_nb.analysis.advise import advise, ascend, common, copies, gpu, host
from dynprof_nb.analysis.advise.findings import Findings
from dynprof_nb.ui import cli


class Frames:
    """A window of frames only (what the rules read), for the host-event rules: a stand-in
    for a torch_npu window (the Ascend rules apply to it)."""

    framework = "torch_npu"
    rank = 0
    ranks = [0]

    def __init__(self, events: pd.DataFrame) -> None:
        self.events = events
        self.kernels = pd.DataFrame(columns=["name", "type", "core", "start_ns", "duration_us"])
        self.steps = pd.DataFrame(columns=["step", "start_ns", "duration_us"])
        self.communication = pd.DataFrame(columns=["name", "start_ns"])
        self.ops = pd.DataFrame(columns=["name", "count", "total_us"])

    def step_trace(self) -> pd.DataFrame:
        return pd.DataFrame(columns=["Step", "Index", "Computing",
                                     "Communication(Not Overlapped)", "Free"])

    def step_breakdown(self) -> pd.DataFrame:
        return pd.DataFrame(columns=["rank", "step", "duration_us", "communication_us",
                                     "communication_not_overlapped_us", "free_us"])

    def communication_bandwidth(self) -> pd.DataFrame:
        return pd.DataFrame()


def events(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    """(name, cat, duration µs) one after another, 1 ms apart."""
    ts = np.arange(len(rows), dtype=np.int64) * 1_000_000 + 10**15
    return pd.DataFrame({
        "name": pd.Categorical([r[0] for r in rows]),
        "cat": pd.Categorical([r[1] for r in rows]),
        "ts_ns": ts,
        "dur_ns": np.array([round(r[2] * 1000) for r in rows], dtype=np.int64),
        "step": pd.array([1] * len(rows), dtype="Int64"),
        "rank": 0,
    })


def test_host_event_rules_fire_over_their_thresholds_only():
    over_mem = ascend.MEMORY_MAX_US / 2 + 1  # two calls: just over the total
    slow_loader = ascend.DATALOADER_US
    gc_long = ascend.GC_US
    rows = [("AscendCL@aclrtFree", "cann_api", over_mem), ("aclrtFree", "cann_api", over_mem),
            ("aclMallocMemInner", "cann_api", ascend.MEMORY_MAX_US / 3),  # under: none
            ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "cpu_op",
             slow_loader),
            ("torch/utils/data/dataloader.py(625): __next__", "python_function", slow_loader - 1),
            ("GC", "gc", gc_long), ("GC", "GC", gc_long * 2), ("GC", "gc", gc_long - 1)]
    # three launches, two followed by a synchronize: 2/3 > 0.5
    rows += [("Node@launch", "cann_api", 5), ("AscendCL@aclrtSynchronizeStream", "cann_api", 5),
             ("Node@launch", "cann_api", 5), ("aclrtSynchronizeStream", "cann_api", 5),
             ("Node@launch", "cann_api", 5)]
    w = Frames(events(rows))
    adv = advise(w)
    e = w.events

    (mem,) = adv.rule("memory operators")
    free = e[e["name"].astype(str).str.endswith("aclrtFree")]
    assert mem.numbers["name"] == "aclrtFree" and mem.numbers["count"] == len(free) == 2
    assert mem.numbers["total_us"] == pytest.approx(free["dur_ns"].sum() / 1e3)
    assert mem.numbers["total_us"] > ascend.MEMORY_MAX_US

    (dl,) = adv.rule("slow dataloader")
    assert dl.numbers["calls"] == 1 and dl.numbers["max_us"] == pytest.approx(slow_loader)
    assert dl.start_ns == int(e["ts_ns"].iloc[3])

    (gc,) = adv.rule("GC")
    long_gc = e[(e["cat"].astype(str).str.lower() == "gc") & (e["dur_ns"] >= ascend.GC_US * 1e3)]
    assert gc.numbers["count"] == len(long_gc) == 2
    assert gc.numbers["total_ms"] == pytest.approx(long_gc["dur_ns"].sum() / 1e6)

    (sync,) = adv.rule("synchronize stream")
    assert (sync.numbers["launches"], sync.numbers["synchronize"]) == (3, 2)
    assert sync.numbers["ratio"] == pytest.approx(round(2 / 3, 4))

    # the Ascend communication and device rules have no data here: not applicable, no finding
    for rule in ("slow rank", "slow link", "byte alignment", "small packets", "AICPU operators"):
        assert adv.status(rule) == "not applicable" and not adv.rule(rule), rule
    assert "error" not in set(adv.checked["status"])


def test_host_event_rules_quiet_under_their_thresholds():
    rows = [("aclrtFree", "cann_api", ascend.MEMORY_MAX_US - 1),
            ("DataLoader.__next__", "cpu_op", ascend.DATALOADER_US - 1),
            ("GC", "gc", ascend.GC_US - 1),
            ("Node@launch", "cann_api", 5), ("aclrtSynchronizeStream", "cann_api", 5),
            ("Node@launch", "cann_api", 5), ("Node@launch", "cann_api", 5)]
    adv = advise(Frames(events(rows)))
    for rule in ("memory operators", "slow dataloader", "GC", "synchronize stream"):
        assert adv.status(rule) == "not found" and not adv.rule(rule), rule


@cache
def level1():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_window(fixtures_dir() / "ascend_real" / "db_level1")
        return w, w.advise()


def test_findings_numbers_recompute_from_the_frames():
    w, adv = level1()
    assert isinstance(adv, Findings) and len(adv) == len(adv.frame) > 0
    # slow link: per (step, rank) SDMA size / time, from communication_bandwidth()
    b = w.communication_bandwidth()
    sdma = b[b["transport"] == "SDMA"].groupby(["step", "rank"])[["size_mb", "transit_us"]].sum()
    bw = (sdma["size_mb"] / (sdma["transit_us"] / 1000)).round(4)
    (link,) = [f for f in adv.rule("slow link") if f.numbers["transport"] == "SDMA"]
    assert link.numbers["mean_gbps"] == pytest.approx(round(bw.mean(), 3))
    assert link.numbers["gap_gbps"] == pytest.approx(round(bw.max() - bw.min(), 3))
    # communication not overlapped: the steps frame's own columns
    st = w.steps
    for f in adv.rule("communication not overlapped"):
        s = st[st["rank"] == f.ranks[0]]
        share = s["communication_not_overlapped_us"].sum() / s["duration_us"].sum()
        assert f.numbers["share"] == pytest.approx(share)
        assert share >= common.NOT_OVERLAPPED_SHARE
    # slow rank: max - min of each step trace column under 5% of the mean step: none
    tr = w.step_trace()
    mean = tr[["Computing", "Communication(Not Overlapped)", "Free"]].sum(axis=1).mean()
    gaps = [tr[c].max() - tr[c].min() for c in ("Computing", "Communication(Not Overlapped)",
                                                  "Free")]
    assert (max(gaps) / mean > ascend.SLOW_RANK_RATIO) == bool(adv.rule("slow rank"))
    # byte alignment's tasks are in the window: its ops and sizes
    for f in adv.rule("byte alignment"):
        assert f.numbers["ops"] >= 1 and f.start_ns is not None and f.end_ns >= f.start_ns
    # operator compile: aclopCompileAndExecute's self time over the rank's host self time
    ops = w.ops
    for f in adv.rule("operator compile"):
        o = ops[ops["rank"] == f.ranks[0]]
        comp = o[o["name"].astype(str).str.contains("CompileAndExecute")]["self_us"].sum()
        assert f.numbers["share"] == pytest.approx(comp / o["self_us"].sum())
        assert f.numbers["share"] >= ascend.COMPILE_SHARE
    assert adv.rule("operator compile")
    # affinity API: each rule it names matches the rank's operator sequence in the events
    from dynprof_nb.analysis.advise import affinity

    for f in adv.rule("affinity API"):
        e = w.events
        seqs = affinity.sequences(e[e["rank"] == f.ranks[0]])
        for api, rules in f.numbers["matches"].items():
            for rule, n in rules:
                mode = "aten" if rule in affinity.RULES["aten"] else "optimizer"
                assert api in affinity.RULES[mode][rule].split("/")
                assert len(affinity.matches(seqs[mode], rule)) == n >= 1
    assert adv.rule("affinity API")
    # every row says where (ranks or all), what, and the threshold beside the number
    for f in adv:
        assert "threshold" in f.evidence or f.rule == "byte alignment", f.evidence
        assert any(k.startswith("threshold") for k in f.numbers), f.numbers


def test_a_cpu_window_gets_no_device_or_communication_claims():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_trace(
            fixtures_dir() / "torch_cpu" / "rank0.1795968823191922673.pt.trace.json")
    adv = w.advise()
    claimed = {f.rule for f in adv}
    device = {"slow link", "byte alignment", "small packets", "AICPU operators",
              "GPU idle time", "kernel launches", "potential stragglers",
              "communication not overlapped"}
    assert not claimed & device, adv.lines()
    assert "error" not in set(adv.checked["status"]), adv.checked
    assert set(adv.checked["rule"]) == {
        r for fam in (ascend.RULES, gpu.RULES, common.RULES, host.RULES, copies.RULES) for r in fam}


def test_where_people_look(capsys):
    w, adv = level1()
    html = adv._repr_html_()
    for f in adv:
        assert f.rule in html
    assert cli.main(["advise", str(fixtures_dir() / "ascend_real" / "db_level1")]) == 0
    out = capsys.readouterr().out.strip().splitlines()  # not a terminal: one line a finding
    assert out[:-1] == adv.lines() and out[-1].startswith("advise: ")
    text = str(w.summary())
    assert "Top findings" in text
    assert adv.top(1)[0].evidence in text


def test_show_opens_the_timeline_zoomed_where_the_finding_is():
    w, adv = level1()
    (i,) = [k for k, f in enumerate(adv) if f.rule == "byte alignment" and f.ranks == [0]]
    f = adv[i]
    view = adv.show(i)
    off = view.tl.offsets[0]
    lo, hi = view.visible_range
    assert lo <= f.start_ns - off < f.end_ns - off <= hi  # the finding's tasks are in view
    assert hi - lo < 2 * (f.end_ns - f.start_ns)  # and the view is about them, not the window
    assert view.drawn["count"] > 0


def test_bandwidth_contention_is_sdma_beside_a_matmul_under_its_threshold():
    limit = ascend.CONTENTION_RATIO * ascend.SDMA_BASELINE_GBPS
    t0 = 10**15
    w = Frames(events([("x", "cpu_op", 1.0)]))
    w.kernels = pd.DataFrame({"name": pd.Categorical(["MatMulV3", "Add"]), "type": ["a", "b"],
                              "core": ["AI_CORE", "AI_CORE"],
                              "start_ns": [t0 + 1000, t0 + 50_000], "duration_us": [20.0, 5.0],
                              "rank": 0})
    w.communication = pd.DataFrame({"name": ["ar_slow_beside", "ar_slow_alone", "ar_fast"],
                                    "start_ns": [t0, t0 + 40_000, t0 + 5000],
                                    "elapse_us": [10.0, 10.0, 10.0], "step": [1, 1, 1],
                                    "rank": 0})
    bw = pd.DataFrame({"name": ["ar_slow_beside", "ar_slow_alone", "ar_fast"],
                       "transport": "SDMA", "size_mb": 1.0,
                       "bandwidth_gbps": [limit - 1, limit - 1, limit + 1], "rank": 0})
    w.communication_bandwidth = lambda: bw
    (f,) = advise(w, only=["bandwidth contention"]).rule("bandwidth contention")
    assert f.numbers["names"] == ["ar_slow_beside"] and f.numbers["threshold_gbps"] == limit


def test_terminal_table_says_what_did_not_apply():
    from dynprof_nb.ui.advisecmd import advise_text

    _, adv = level1()
    text = advise_text(adv, tty=True)
    for f in adv:
        assert f.evidence in text and f.suggestion in text
    na = adv.checked[adv.checked["status"] == "not applicable"]
    assert "not applicable to this window:" in text and all(r in text for r in na["rule"])


def test_dynamic_shape_reads_op_state():
    """The advisor's dynamic-shape rule on a real kernel_details.csv with OP State (every
    operator dynamic: found, counted from the column) and on one without (not applicable:
    nothing shows which shapes are dynamic)."""
    from dynprof_nb.analysis.advise import dynamic_shape

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        newer = dynprof_nb.load_trace(fixtures_dir() / "ascend" / "kernel_details_newer.csv")
        older = dynprof_nb.load_trace(fixtures_dir() / "ascend" / "kernel_details_older.csv")
    (f,) = newer.advise(only=["dynamic shape"]).rule("dynamic shape")
    state = newer.kernels["OP State"].dropna().astype(str)
    assert f.numbers["operators"] == len(state) and not (state == dynamic_shape.STATIC).any()
    adv = older.advise(only=["dynamic shape"])
    assert adv.status("dynamic shape") == "not applicable"
    assert "no OP State" in adv.checked.set_index("rule").loc["dynamic shape", "note"]
