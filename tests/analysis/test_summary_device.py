"""Summaries of real device windows lead with the device: kernels, busy/idle, host overhead,
communication overlap; host operators come after. A summary's span is each rank's own."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from testdata import write_builtin_window

import dynprof_nb
from dynprof_nb.analysis.summary import device_table, kernel_summary


def load(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dynprof_nb.load_trace(path) if path.is_file() else dynprof_nb.load_window(path)


def order_of(text: str, *titles: str) -> list[int]:
    return [text.index(t) for t in titles]


def test_cuda_trace_leads_with_kernels(fixtures: Path):
    w = load(fixtures / "kineto" / "hta__nccl_parser_config__nccl_data.json.gz")
    s = w.summary()
    text = str(s)
    pos = order_of(text, "Device (", "Top kernels (device time)", "Host time driving the device",
                   "Top operations (host self time)")
    assert pos == sorted(pos)
    assert s.kernels["name"].iloc[0].startswith("ncclKernel_AllReduce")
    assert s.kernels["total_us"].is_monotonic_decreasing
    k = w.kernels
    assert s.kernels["total_us"].iloc[0] == pytest.approx(
        k[k["name"] == s.kernels["name"].iloc[0]]["duration_us"].sum())
    # communication overlap agrees with the step breakdown computed independently (derive.py)
    st = w.steps
    dev = s.device.iloc[0]
    assert dev["comm_overlapped"] == pytest.approx(st["overlapped_us"].sum()
                                                   / st["communication_us"].sum(), rel=0.02)
    assert 0 < dev["busy"] < 1
    assert dev["busy_ms"] + dev["idle_ms"] == pytest.approx(dev["span_ms"])
    launch = s.overhead.set_index("overhead").loc["kernel launch"]
    assert "cudaLaunchKernel" in launch["ops"] and launch["share"] > 0
    html = s._repr_html_()
    assert html.index("Top kernels") < html.index("Top operations")


def test_npu_trace_shows_op_compilation_on_the_hot_path(fixtures: Path):
    """The torch_npu trace of the issue: aclopCompileAndExecute is 18% of host time."""
    w = load(fixtures / "ascend" / "torch_npu_trace_view.json")
    s = w.summary()
    text = str(s)
    assert text.index("Top kernels") < text.index("Top operations")
    ops = w.ops.set_index("name")
    compile_ = s.overhead.set_index("overhead").loc["op compile"]
    assert compile_["self_us"] == pytest.approx(
        ops.loc[["AscendCL@aclopCompileAndExecute", "AscendCL@opCompile"], "self_us"].sum())
    assert compile_["share"] == pytest.approx(0.18, abs=0.01)
    assert any("compiled at run time" in n and "jit_compile=False" in n for n in s.notes)
    assert s.notes.index(next(n for n in s.notes if "compiled" in n)) < \
        s.notes.index(next(n for n in s.notes if "device idle" in n))


def test_real_npu_two_ranks_span_per_rank(fixtures: Path):
    w = load(fixtures / "ascend_real" / "text_level0")
    s = w.summary()
    by = s.header["span_by_rank"]
    assert sorted(by) == [0, 1]
    ev = w.events
    for r, span in by.items():
        e = ev[ev["rank"] == r]
        assert span == pytest.approx(((e["ts_ns"] + e["dur_ns"]).max() - e["ts_ns"].min()) / 1e6)
    assert s.header["span_ms"] == pytest.approx(max(by.values()))
    assert "per rank" in str(s).splitlines()[0]
    assert list(s.device["rank"]) == [0, 1]
    assert s.kernels["name"].iloc[0].startswith("hcom_allReduce")
    # busy within each rank's step, from the kernels alone
    assert (s.device["busy_ms"] <= s.device["span_ms"]).all()
    st = w.steps.set_index("rank")
    for row in s.device.itertuples():
        assert row.span_ms == pytest.approx(st.loc[row.rank, "duration_us"] / 1000, rel=1e-6)


def test_skewed_ranks_do_not_stretch_the_span(tmp_path: Path):
    """Two ranks whose windows start 28 s apart (no barrier, or skewed clocks): each rank's
    span is its own window, not the 28 s between them."""
    import json

    for r in range(2):
        d = write_builtin_window(tmp_path, rank=r, start=1, stop=10)
        trace = json.loads((d / "trace.json").read_text())
        for e in trace["traceEvents"]:
            if "ts" in e:
                e["ts"] += r * 28e6
        (d / "trace.json").write_text(json.dumps(trace))
    s = dynprof_nb.load_window(tmp_path).summary()
    assert s.header["span_ms"] < 20  # ten 1 ms steps
    assert "Top kernels" not in str(s) and s.kernels is None  # a host-only window


def test_kernel_and_device_tables_handle_empty_frames():
    import pandas as pd

    from dynprof_nb.traces import schema

    assert kernel_summary(schema.empty("kernels")).empty
    assert device_table(schema.empty("kernels"), schema.empty("steps")).empty
    assert isinstance(device_table(schema.empty("kernels"), pd.DataFrame()), pd.DataFrame)


@pytest.mark.parametrize("name", ["hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                                  "hta__critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
                                  "hta__triton_example__triton_example.json.gz",
                                  "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"])
def test_every_real_gpu_trace_leads_with_kernels(fixtures: Path, name: str):
    w = load(fixtures / "kineto" / name)
    s = w.summary()
    assert s.kernels is not None and not s.kernels.empty
    text = str(s)
    assert text.index("Top kernels") < text.index("Top operations")
    assert (s.device["busy"] <= 1.0 + 1e-9).all()
