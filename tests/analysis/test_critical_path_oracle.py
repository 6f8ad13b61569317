"""HTA 0.5.0 as the oracle of w.critical_path(): its critical_path_analysis, run live in .venv/hta
(tests/hta_critical_path_oracle.py) on HTA's own test traces, against dynprof_nb's for the same
region (HTA's annotation and instance: the AlexNet trace's measured forward pass, as HTA's own
test picks it, a warm-up pass and the whole run; the first ProfilerStep of the others).

The same path, edge by edge: as many nodes, the same edge types in the same order, each edge's
weight within HTA's whole-µs rounding (its parse casts ts and dur to integers on these traces),
so the same total per HTA bound_by category and per kind. No expected number is typed here."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from functools import cache
from pathlib import Path

import pytest

import dynprof_nb
from dynprof_nb.analysis.critical_path import KIND

ROOT = Path(__file__).resolve().parents[2]
HTA_PY = Path(os.environ.get("DYNPROF_HTA_PYTHON", ROOT / ".venv" / "hta" / "bin" / "python"))
KINETO = ROOT / "tests" / "data" / "kineto"
CASES = {
    "alexnet": ("hta__critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
                "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "alexnet_warmup": ("hta__critical_path__alexnet__benchmark_result_2869224_1695835535_trace."
                       "json.gz", "[param|pytorch.model.alex_net|0|0|0|warmup|forward]", 0),
    "alexnet_whole": ("hta__critical_path__alexnet__benchmark_result_2869224_1695835535_trace."
                      "json.gz", "[param|cuda]", 0),
    "ns_resolution": ("hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                      "ProfilerStep", 0),
    "timeline_sampled": ("hta__timeline_analysis__sampled_rank-0.json.gz", "ProfilerStep", 0),
    "amd_mi250": ("hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz", "ProfilerStep", 0),
    "triton": ("hta__triton_example__triton_example.json.gz", "ProfilerStep", 0),
    "nccl": ("hta__nccl_parser_config__nccl_data.json.gz", "ProfilerStep", 0),
}
pytestmark = pytest.mark.timeout(600)


@cache
def hta() -> dict:
    assert HTA_PY.is_file(), f"HTA not found at {HTA_PY}: run `make .venv/hta/.pandas2` (make test)"
    args = [str(x) for c in CASES.values() for x in (KINETO / c[0], c[1], c[2])]
    env = {**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"}
    r = subprocess.run([str(HTA_PY), str(ROOT / "tests" / "hta_critical_path_oracle.py"), *args],
                       capture_output=True, text=True, timeout=500, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return dict(zip(CASES, json.loads(r.stdout.strip().splitlines()[-1]), strict=True))


@pytest.mark.parametrize("case", list(CASES))
def test_critical_path_matches_hta(case):
    name, annotation, instance = CASES[case]
    theirs = hta()[case]
    assert theirs["ok"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_trace(KINETO / name)
    mine = w.critical_path(annotation=annotation, instance=instance)
    assert len(mine) + 1 == theirs["nodes"]
    edges = theirs["edges"]
    assert [e["type"].removeprefix("critical_path_") for e in edges] == mine["edge"].tolist()
    for (i, x), e in zip(mine.iterrows(), edges, strict=True):
        assert abs(x.duration_us - e["weight"]) <= 1.0, (i, x.to_dict(), e)
    # per HTA category and per kind: within 1 µs an edge of it
    n_by = mine.groupby("bound_by").size()
    got = mine.groupby("bound_by")["duration_us"].sum()
    assert set(got.index) == set(theirs["bound_by"])
    for b, t in theirs["bound_by"].items():
        assert abs(got[b] - t) <= n_by[b], (b, got[b], t)
    summ = mine.summary
    for k in ("compute", "communication", "host", "idle"):
        t = sum(v for b, v in theirs["bound_by"].items() if KIND.get(b) == k)
        n = int(n_by[[b for b in n_by.index if KIND.get(b) == k]].sum())
        assert abs(summ.loc[k, "time_us"] - t) <= max(n, 0), (k, summ.loc[k, "time_us"], t)
    assert abs(mine.length_us - sum(e["weight"] for e in edges)) <= len(edges)
