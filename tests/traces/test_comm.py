"""Communication beyond NCCL/HCCL: one configurable set of patterns decides what counts, for the
step breakdown, the ``communication`` frame and the summary's notes alike.

The DeepEP trace is HTA's real A100 Kineto trace ``timeline_analysis/sampled_rank-0`` (two
ProfilerSteps, 1,204 GPU kernels of which 10 are ``ncclKernel_SendRecv_RING_SIMPLE...``) with
those 10 NCCL kernels renamed to DeepEP's ``deep_ep::internode::dispatch`` /
``deep_ep::internode::combine`` kernels, as an H800 trace of a DeepSeek MoE shows them. Nothing
else in the file changes.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import dynprof_nb
from dynprof_nb.traces import comm

SOURCE = "kineto/hta__timeline_analysis__sampled_rank-0.json.gz"
NCCL_KERNEL = "ncclKernel_SendRecv"
DEEPEP = ("void deep_ep::internode::dispatch<8, 1024>(int4*, float*, int*, long*, "
          "deep_ep::SourceMeta*, int4 const*, float const*, long const*)",
          "void deep_ep::internode::combine<__nv_bfloat16, 8, 1024>(int4*, float*, bool const*, "
          "int4 const*, float const*)")


def _renamed(fixtures: Path, tmp_path: Path, names: tuple[str, ...]) -> tuple[Path, int]:
    data = json.load(gzip.open(fixtures / SOURCE))
    n = 0
    for e in data["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("name", "").startswith(NCCL_KERNEL):
            e["name"] = names[n % len(names)]
            n += 1
    out = tmp_path / "rank-0.deepep.pt.trace.json.gz"
    with gzip.open(out, "wt") as fh:
        json.dump(data, fh)
    return out, n


def test_deepep_dispatch_and_combine_count_as_communication(fixtures, tmp_path):
    original = dynprof_nb.load_trace(fixtures / SOURCE)
    path, renamed = _renamed(fixtures, tmp_path, DEEPEP)
    assert renamed == 10
    deepep = dynprof_nb.load_trace(path)
    assert not deepep.kernels["name"].astype(str).str.contains("nccl", case=False).any()
    # the same time counts as communication whatever the library's kernels are called
    before, after = original.steps, deepep.steps
    assert before["communication_us"].sum() > 0
    assert after["communication_us"].tolist() == before["communication_us"].tolist()
    assert after["computing_us"].tolist() == before["computing_us"].tolist()
    assert sorted(deepep.communication["name"].unique()) == sorted(DEEPEP)
    assert len(deepep.communication) == len(original.communication) == 10
    # and the summary says what it said for NCCL (its notes name the top kernel, renamed here)
    ours, theirs = deepep.summary(), original.summary()
    assert [n for n in ours.notes if not n.startswith("kernel ")] == \
        [n for n in theirs.notes if not n.startswith("kernel ")]
    assert ours.device["comm_ms"].tolist() == theirs.device["comm_ms"].tolist()
    assert ours.device["comm_ms"].iloc[0] > 0
    assert "10 matched the communication patterns" in deepep.sources["steps"]["notes"][0]


def test_patterns_are_configurable_per_load_and_per_session(fixtures, tmp_path):
    path, _ = _renamed(fixtures, tmp_path, ("my_fused_moe_a2a_kernel",))
    assert dynprof_nb.load_trace(path).steps["communication_us"].sum() == 0  # unknown name
    mine = dynprof_nb.load_trace(path, comm_patterns={**comm.DEFAULT_PATTERNS,
                                                       "moe": r"fused_moe_a2a"})
    assert mine.steps["communication_us"].sum() > 0 and len(mine.communication) == 10
    assert r"fused_moe_a2a" in mine.comm_patterns

    comm.patterns["moe"] = r"fused_moe_a2a"  # the session's default from now on
    try:
        later = dynprof_nb.load_window(path)
        assert later.steps["communication_us"].tolist() == mine.steps["communication_us"].tolist()
    finally:
        del comm.patterns["moe"]
    assert dynprof_nb.load_trace(path).steps["communication_us"].sum() == 0

    # only NCCL: DeepEP kernels are then compute, consistently in every frame
    deepep, _ = _renamed(fixtures, tmp_path, DEEPEP)
    nccl_only = dynprof_nb.load_trace(deepep, comm_patterns=[r"nccl"])
    assert nccl_only.steps["communication_us"].sum() == 0 and nccl_only.communication.empty


def test_default_patterns_cover_the_libraries():
    names = ["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "rccl_AllGather", "hcom_allReduce__521_0",
             "HcclAllreduce", "gloo:all_reduce", "c10d::allreduce_", "aten::all_to_all_single",
             "void deep_ep::internode::dispatch<8>(int4*)", "deep_ep::intranode::combine",
             "deep_ep::internode_ll::dispatch", "internode::cached_notify_combine",
             "ReduceScatter", "broadcast_kernel", "nccl:broadcast", "c10d::broadcast_",
             "ncclKernel_Broadcast_RING_LL_Sum_int8_t", "Default/Broadcast-op12"]
    assert comm.is_communication(names).all(), [n for n, c in zip(
        names, comm.is_communication(names), strict=True) if not c]
    compute = ["aten::mm", "volta_sgemm_128x64_nn", "void at::native::dispatch_kernel<float>",
               "elementwise_kernel", "aten::combinations",
               # compute ops that broadcast a tensor's shape, not a collective (a real Ascend
               # kernel of the bundled ascend_db sample; PyTorch's and MindSpore's ops)
               "aclnnEqTensor_BroadcastToAiCore_BroadcastTo", "aten::broadcast_tensors",
               "aten::broadcast_to", "Default/BroadcastTo-op3", "BroadcastGradientArgs"]
    assert not comm.is_communication(compute).any()


def test_a_bad_pattern_is_a_clear_error(fixtures):
    with pytest.raises(ValueError, match=r"communication pattern '\(unclosed' is not a regular"):
        dynprof_nb.load_trace(fixtures / SOURCE, comm_patterns=["(unclosed"])
