"""HTA 0.5.0 itself, run on every Kineto trace the tests have, against dynprof_nb number by
number: device activity counted, temporal breakdown (kernel time, idle, compute, non-compute),
comm/comp overlap, kernel-type and per-kernel breakdown, per-step kernel counts and time,
NCCL message fields. Counts exact; times and ratios within 0.5%.

HTA runs in its own venv (``.venv/hta``, made by ``make test``) through tests/hta_oracle.py,
with ``HTA_DISABLE_NS_ROUNDING=1``: HTA's default rounds ns-resolution times inward to whole
microseconds (see dynprof_nb.analysis.gpu and docs/definitions.md), dynprof_nb keeps the ns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import dynprof_nb
from dynprof_nb.analysis import gpu
from dynprof_nb.traces.formats.derived.from_events import DEVICE_CATS, DTYPE_BYTES, device_kinds

ROOT = Path(__file__).resolve().parents[2]
HTA_PY = Path(os.environ.get("DYNPROF_HTA_PYTHON", ROOT / ".venv" / "hta" / "bin" / "python"))
DATA = ROOT / "tests" / "data"
TRACES = sorted(p.relative_to(DATA).as_posix() for p in (DATA / "kineto").glob("*.json.gz"))
TRACES += ["torch_cpu/rank0.1795968823191922673.pt.trace.json"]
SAMPLE = ROOT / "dynprof_nb" / "samples" / "kineto_gpu" / "sampled_rank-0.json.gz"
REL = 0.005


def trace_path(name: str) -> Path:
    return SAMPLE if name == "sample" else DATA / name


@cache
def hta(name: str, include_last: bool) -> dict:
    assert HTA_PY.is_file(), f"HTA not found at {HTA_PY}: run `make .venv/hta/.stamp` (make test)"
    args = [str(HTA_PY), str(ROOT / "tests" / "hta_oracle.py"), str(trace_path(name))]
    env = {**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"}
    r = subprocess.run(args + (["--include-last-step"] if include_last else []),
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["hta_version"] == "0.5.0", out["hta_version"]
    return out


@cache
def ours(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_trace(trace_path(name))
        return w, w.kernels, w.steps


def close(a: float, b: float, abs_us: float = 0.0) -> bool:
    return abs(a - b) <= max(REL * max(abs(a), abs(b)), abs_us)


CASES = [(n, False) for n in TRACES] + [("sample", False),
         ("kineto/hta__nccl_parser_config__nccl_data.json.gz", True),
         ("kineto/hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", True)]
IDS = [f"{Path(n).name[:40]}{'-last' if last else ''}" for n, last in CASES]


@pytest.mark.parametrize(("name", "last"), CASES, ids=IDS)
def test_device_activity_and_temporal_breakdown_match_hta(name: str, last: bool):
    h = hta(name, last)
    w, kernels, steps = ours(name)
    sel = gpu.select(kernels, steps, "hta", include_last_step=last)
    # HTA takes every row with an args.stream for device activity: a host op that carries one
    # (Triton's launcher cpu_op) too. dynprof_nb goes by Kineto's device categories.
    host_rows = {c: n for c, n in h["device_cats"].items() if c not in DEVICE_CATS}
    device = {c: n for c, n in h["device_cats"].items() if c in DEVICE_CATS}
    assert sel["type"].astype(str).value_counts().to_dict() == device
    assert len(sel) == h["device_count"] - sum(host_rows.values())
    if not h["device_count"] or host_rows:
        return
    tb = gpu.temporal_breakdown(kernels, steps, kernels_sel="hta",
                                include_last_step=last).iloc[0]
    t = h["temporal"]
    for hname, col in [("kernel_time(us)", "kernel_time_us"), ("idle_time(us)", "idle_time_us"),
                       ("compute_time(us)", "compute_time_us"),
                       ("non_compute_time(us)", "non_compute_time_us")]:
        assert close(tb[col], t[hname], abs_us=0.01 * 1), (hname, tb[col], t[hname])
    for hname, col in [("idle_time_pctg", "idle_time_pctg"),
                       ("compute_time_pctg", "compute_time_pctg")]:
        assert close(tb[col], t[hname], abs_us=0.005 + 1e-9), (hname, tb[col], t[hname])
    ov = h["overlap_pctg"]
    if ov is None or np.isnan(ov):
        assert np.isnan(tb["comm_overlap"]) or tb["comm_us"] == 0
    else:  # HTA rounds its percentage to two decimals
        assert close(100 * tb["comm_overlap"], ov, abs_us=0.005 + 1e-9), (tb["comm_overlap"], ov)


@pytest.mark.parametrize(("name", "last"), CASES, ids=IDS)
def test_kernel_breakdown_and_steps_match_hta(name: str, last: bool):
    h = hta(name, last)
    w, kernels, steps = ours(name)
    if not h["device_count"] or set(h["device_cats"]) - DEVICE_CATS:
        return  # nothing, or host rows HTA counts as device (see above)
    kt = gpu.kernel_type_breakdown(kernels, steps, kernels_sel="hta", include_last_step=last,
                                   hta_truncation=True)
    mine = dict(zip(kt["kernel_type"], kt["sum_us"], strict=True))
    # HTA truncates each stretch to whole microseconds: allow one microsecond a kernel
    sel = gpu.select(kernels, steps, "hta", include_last_step=last)
    assert set(mine) == set(h["kernel_types"]), (mine, h["kernel_types"])
    for k, v in h["kernel_types"].items():
        assert close(mine[k], v, abs_us=2.0), (k, mine[k], v)
    kinds = device_kinds(sel["name"], sel["type"], w.comm_patterns)
    label = {"computation": "COMPUTATION", "communication": "COMMUNICATION", "memory": "MEMORY"}
    per = sel.assign(kind=[label.get(x, "OTHER") for x in kinds]).groupby(
        ["kind", sel["name"].astype(str)])["duration_us"].agg(["sum", "max", "min", "mean"])
    for key, hv in h["kernel_names"].items():
        kind, kname = key.split("|", 1)
        row = per.loc[(kind, kname)]
        for stat in ("sum", "max", "min", "mean"):
            assert close(row[stat], hv[stat], abs_us=0.001), (key, stat, row[stat], hv[stat])
    assert sum(len(per.loc[k]) for k in set(label.values()) if k in per.index.levels[0]) == len(
        h["kernel_names"])
    if h["no_iteration"]:  # HTA gives stream-0 kernels no iteration; dynprof_nb gives them one
        assert h["no_iteration"] == h["stream0"] == int(sel["stream_arg"].eq(0).sum())
        sel = sel[sel["stream_arg"].ne(0)]
    by_step = gpu.step_kernels(sel).set_index("step")
    want = {int(s): v for s, v in h["steps"].items() if int(s) >= 0}
    assert sorted(by_step.index) == sorted(want)
    for s, v in want.items():
        assert by_step.loc[s, "count"] == v["count"]
        assert close(by_step.loc[s, "total_us"], v["dur"], abs_us=0.001)
    if "-1" in h["steps"]:
        assert int(sel["step"].isna().sum()) == h["steps"]["-1"]["count"]


def test_every_step_gets_the_kernels_its_host_ops_launched():
    """HTA gives each step of the ns-resolution trace the same 1,219 kernels; device time put
    them in the next step or none (446 / 971 / 1219 / 1219 / 1219, 1,021 in no step)."""
    name = "kineto/hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    h = hta(name, True)
    w, kernels, steps = ours(name)
    counts = kernels.groupby("step")["name"].size()
    assert kernels["step"].notna().all()
    assert list(counts.index) == sorted(steps["step"])
    assert counts.nunique() == 1
    assert counts.iloc[0] == next(iter(h["steps"].values()))["count"]


def test_nccl_message_fields_and_sizes_match_hta():
    name = "kineto/hta__nccl_parser_config__nccl_data.json.gz"
    h = hta(name, True)
    w, kernels, steps = ours(name)
    assert h["collectives"]
    c = w.communication
    c = c[c["collective"].notna()].sort_values("start_ns")
    sel = gpu.select(kernels, steps, "hta", include_last_step=True)
    c = c[c["start_ns"].isin(sel["start_ns"])]  # the collectives HTA kept
    assert len(c) == len(h["collectives"])
    for (_, row), hc in zip(c.iterrows(), sorted(h["collectives"], key=lambda x: x["ts"]),
                            strict=True):
        assert row["name"] == hc["name"]
        assert (row["collective"], row["dtype"], row["group_size"]) == (
            hc["collective"], hc["dtype"], hc["group"])
        # the communication group, as HTA parses Process Group Name / Description / Ranks
        at = w.events[(w.events["ts_ns"] == row["start_ns"]) & (w.events["name"] == row["name"])]
        assert [at[c].iloc[0] for c in ("pg_name", "pg_desc", "pg_ranks")] == hc["pg"]
        size = max(hc["in"], hc["out"]) * DTYPE_BYTES[hc["dtype"]] / 1e6
        assert row["size_mb"] == pytest.approx(size, rel=1e-12)
        algbw = size * 1e6 / (hc["dur"] * 1e-6) / 1e9
        assert close(row["algbw_gbps"], algbw)
        n = hc["group"]
        factor = {"allreduce": 2 * (n - 1) / n, "broadcast": 1.0}.get(hc["collective"])
        if factor is not None:
            assert close(row["busbw_gbps"], algbw * factor)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
