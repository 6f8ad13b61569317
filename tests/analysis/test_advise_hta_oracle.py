"""HTA 0.5.0 as the oracle of w.advise()'s GPU rules: its get_idle_time_breakdown (per stream:
host wait, kernel wait, other) and get_cuda_kernel_launch_stats (per launch: cpu and gpu
duration, launch delay), run live in .venv/hta (tests/hta_advise_oracle.py) on HTA's own test
traces, against dynprof_nb's for the same files (HTA's trace selection, ``kernels="hta"``).

HTA keeps whole microseconds on these traces even with HTA_DISABLE_NS_ROUNDING=1 (its parse
casts ts and dur to integers): each number may differ by 1 µs a kernel time, and by 0.5% overall.
No expected number is typed here."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from functools import cache
from pathlib import Path

import pytest

import dynprof_nb
from dynprof_nb.analysis.advise import NotApplicable, gpu

ROOT = Path(__file__).resolve().parents[2]
HTA_PY = Path(os.environ.get("DYNPROF_HTA_PYTHON", ROOT / ".venv" / "hta" / "bin" / "python"))
KINETO = ROOT / "tests" / "data" / "kineto"
TRACES = [
    "hta__critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "hta__nccl_parser_config__nccl_data.json.gz",
    "hta__timeline_analysis__sampled_rank-0.json.gz",
] + [p.name for p in sorted(KINETO.glob("*.json.gz")) if "alexnet" not in p.name
     and "nccl_parser" not in p.name and "timeline_analysis" not in p.name]
pytestmark = pytest.mark.timeout(600)


@cache
def hta(name: str) -> dict:
    assert HTA_PY.is_file(), f"HTA not found at {HTA_PY}: run `make .venv/hta/.stamp` (make test)"
    env = {**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"}
    r = subprocess.run([str(HTA_PY), str(ROOT / "tests" / "hta_advise_oracle.py"),
                        str(KINETO / name)], capture_output=True, text=True, timeout=500, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@cache
def window(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dynprof_nb.load_trace(KINETO / name)


@pytest.mark.parametrize("name", TRACES, ids=[n[5:35] for n in TRACES])
def test_idle_time_breakdown_matches_hta(name):
    h = hta(name)
    if "idle" not in h:  # HTA has no device rows to break down: neither has dynprof_nb
        with pytest.raises(NotApplicable):
            gpu.idle_time_breakdown(window(name), kernels_sel="hta")
        return
    mine = gpu.idle_time_breakdown(window(name), kernels_sel="hta")
    got = {(int(r.stream), r.idle_category.replace(" ", "_")): r for r in mine.itertuples()}
    theirs = {(x["stream"], x["category"]): x for x in h["idle"]}
    assert set(got) == set(theirs)
    # HTA compares a launch with the previous kernel's end in float µs since the epoch (a
    # quarter of a µs apart at best): a gap whose launch is within 1 µs of that end may land
    # in either category there. dynprof_nb compares exact ns.
    gaps = gpu.idle_gaps(window(name), kernels_sel="hta")
    for key, x in theirs.items():
        g = gaps[gaps["stream"] == key[0]]
        borderline = float(g.loc[g["launch_margin_us"].abs() < 1.0, "gap_us"].sum())
        total = float(g["gap_us"].sum())
        t = got[key].idle_time_us
        # and whole µs on the µs traces: 2 µs a gap at most
        slack = max(0.005 * abs(x["time"]), 2.0 * got[key].gaps) + borderline
        assert abs(t - x["time"]) <= slack, (key, t, x, borderline)
        ratio_slack = 0.005 + (borderline / total if total else 0.0)  # HTA rounds to 0.01
        assert got[key].idle_time_ratio == pytest.approx(x["ratio"], abs=ratio_slack,
                                                         nan_ok=True)


@pytest.mark.parametrize("name", TRACES, ids=[n[5:35] for n in TRACES])
def test_kernel_launch_stats_match_hta(name):
    h = hta(name)
    if not h["launch"]:
        try:
            mine = gpu.kernel_launch_stats(window(name), kernels_sel="hta")
        except NotApplicable:
            return
        assert mine.empty
        return
    mine = gpu.kernel_launch_stats(window(name), kernels_sel="hta").set_index("correlation")
    assert sorted(mine.index) == sorted(x["correlation"] for x in h["launch"])
    for x in h["launch"]:
        row = mine.loc[x["correlation"]]
        for col, k in (("cpu_duration_us", "cpu"), ("gpu_duration_us", "gpu"),
                       ("launch_delay_us", "delay")):
            assert abs(row[col] - x[k]) <= max(0.005 * abs(x[k]), 1.0), (x, col, row[col])


def test_rules_report_what_the_breakdown_and_stats_say():
    """The findings' numbers are the functions' numbers (recomputable from the frames)."""
    w = window(TRACES[0])
    adv = w.advise()
    (idle,) = adv.rule("GPU idle time")
    br = gpu.idle_time_breakdown(w).groupby("idle_category")["idle_time_us"].sum()
    for cat in ("host wait", "kernel wait", "other"):
        assert idle.numbers[f"{cat}_us"] == pytest.approx(br.get(cat, 0.0))
    (launch,) = adv.rule("kernel launches")
    s = gpu.kernel_launch_stats(w)
    assert launch.numbers["launches"] == len(s)
    assert launch.numbers["runtime_outliers"] == int((s["cpu_duration_us"] > 50).sum())
    assert launch.numbers["delay_outliers"] == int((s["launch_delay_us"] > 100).sum())


def four_ranks(directory: Path) -> list[Path]:
    """Four ranks made from HTA's NCCL trace: rank r starts every NCCL kernel later (0, 5, 30,
    50% of its duration) and runs it 0.2% x r longer, so the ranks differ where HTA looks."""
    import gzip

    src = json.loads(gzip.decompress((KINETO / TRACES[1]).read_bytes()))
    paths = []
    for r, late in enumerate((0.0, 0.05, 0.3, 0.5)):
        t = json.loads(json.dumps(src))
        t.setdefault("distributedInfo", {})["rank"] = r
        for e in t["traceEvents"]:
            if str(e.get("name", "")).startswith("ncclKernel"):
                e["ts"] = round(e["ts"] + e.get("dur", 0) * late, 3)
                e["dur"] = round(e.get("dur", 0) * (1 + 0.002 * r), 3)
        p = directory / f"rank{r}.trace.json.gz"
        p.write_bytes(gzip.compress(json.dumps(t).encode()))
        paths.append(p)
    return paths


def test_potential_stragglers_match_hta(tmp_path):
    paths = four_ranks(tmp_path)
    env = {**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"}
    r = subprocess.run([str(HTA_PY), str(ROOT / "tests" / "hta_advise_oracle.py"),
                        "--stragglers", str(tmp_path)], capture_output=True, text=True,
                       timeout=500, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    h = json.loads(r.stdout.strip().splitlines()[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_window([str(p) for p in paths])
    m = gpu.straggler_metric(w).set_index(["rank", "step"])["normalized_start_time"]
    theirs = {(x["rank"], x["step"]): x["normalized_start_time"] for x in h["metric"]}
    assert set(m.index) == set(theirs)
    for key, v in theirs.items():  # HTA's float µs since the epoch hold ~0.25 µs: 1e-5 of a step
        assert m[key] == pytest.approx(v, rel=1e-5), key
    t = gpu.potential_stragglers(w)
    assert set(t.loc[t["straggler"], "rank"]) == set(h["stragglers"])
    (f,) = w.advise(only=["potential stragglers"]).rule("potential stragglers")
    assert set(f.ranks) == set(h["stragglers"])
