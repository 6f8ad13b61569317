"""Garbage-collection pauses, recorded from gc.callbacks by the built-in and torch backends
while a window records (dynprof_nb.training.gcpauses), become GC events that w.advise()'s GC
rule reads: one event per collection seen by a listener of our own, and a finding for those
of >= its threshold."""

from __future__ import annotations

import gc
import json
import time
import warnings

import pytest

import dynprof_nb
from dynprof_nb.analysis.advise import ascend
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.training.gcpauses import GC_CATEGORY, GC_EVENT, GcPauses


def garbage(n: int) -> None:
    """``n`` objects in reference cycles: only the collector frees them."""
    for _ in range(n):
        a: list = []
        a.append(a)


def record(backend, directory, collect: int) -> list[float]:
    """A 3-step window with ``collect`` full collections of cycles in step 2; the pauses (ms)
    that a gc.callbacks listener of the test saw meanwhile."""
    seen: list[float] = []
    t0: list[int] = []

    def listen(phase, info):
        if phase == "start":
            t0.append(time.perf_counter_ns())
        elif t0:
            seen.append((time.perf_counter_ns() - t0.pop()) / 1e6)

    cfg = ProfilerConfig(start_step=1, stop_step=3)
    backend.start(directory, cfg, 1, {"rank": 0, "world_size": 1, "job": "gc"})
    gc.callbacks.append(listen)
    try:
        backend.step(1)
        for _ in range(collect):
            garbage(100_000)
            gc.collect()
        backend.step(2)
        backend.step(3)
    finally:
        gc.callbacks.remove(listen)
        backend.stop()
    backend.save()
    return seen


def load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dynprof_nb.load_trace(path)


def check(w, seen: list[float]) -> None:
    e = w.events
    gcs = e[e["name"].astype(str) == GC_EVENT]
    assert len(gcs) == len(seen) >= 2
    long = gcs[gcs["dur_ns"] >= ascend.GC_US * 1e3]
    adv = w.advise()
    if len(long):
        (f,) = adv.rule("GC")
        assert f.numbers["count"] == len(long)
        assert f.numbers["total_ms"] == pytest.approx(long["dur_ns"].sum() / 1e6)
    else:
        assert adv.status("GC") == "not found"
    # the listener's and the backend's pauses are the same collections: same order of size
    assert gcs["dur_ns"].sum() / 1e6 == pytest.approx(sum(seen), rel=0.5)


def test_builtin_backend_records_gc_pauses(tmp_path):
    from dynprof_nb.training.backends.builtin import BuiltinBackend

    seen = record(BuiltinBackend(), tmp_path, collect=3)
    w = load(tmp_path / "trace.json")
    check(w, seen)
    assert set(w.events.loc[w.events["name"] == GC_EVENT, "cat"].astype(str)) == {GC_CATEGORY}


def test_torch_backend_records_gc_pauses(tmp_path):
    from dynprof_nb.training.backends.torch import TorchBackend

    seen = record(TorchBackend(), tmp_path, collect=3)
    (trace,) = tmp_path.glob("*.pt.trace.json")
    check(load(trace), seen)


def test_recorder_is_off_outside_the_window():
    got = []
    rec = GcPauses(lambda *a: got.append(a))
    rec.start()
    gc.collect()
    rec.stop()
    n = len(got)
    gc.collect()
    assert n >= 1 and len(got) == n and rec._callback not in gc.callbacks


MS_SCRIPT = """
import gc, json, sys, time
from pathlib import Path
import numpy as np
import mindspore as ms
from mindspore import ops
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.training.backends.mindspore import MindSporeBackend

ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
x = ms.Tensor(np.ones((64, 64), np.float32))
seen, t0 = [], []

def listen(phase, info):
    if phase == "start":
        t0.append(time.perf_counter_ns())
    elif t0:
        seen.append((time.perf_counter_ns() - t0.pop()) / 1e6)

def garbage(n):
    for _ in range(n):
        a = []
        a.append(a)

b = MindSporeBackend()
b.start(Path(sys.argv[1]), ProfilerConfig(start_step=1, stop_step=3, activities=["CPU"]), 1,
        {"rank": 0, "world_size": 1, "job": "gc"})
gc.callbacks.append(listen)
try:
    for step in (1, 2, 3):
        ops.matmul(x, x).asnumpy()  # real MindSpore work in each step
        if step == 2:
            for _ in range(3):
                garbage(100_000)
                gc.collect()
        b.step(step)
finally:
    gc.callbacks.remove(listen)
    b.stop()
b.save()
print(json.dumps(seen))
"""


def test_mindspore_backend_records_gc_pauses(tmp_path):
    """Real MindSpore 2.7 (its Profiler on CPU, PyNative matmuls in the steps) with three
    forced collections of cycles in step 2: the backend's pauses land in dynprof_steps.csv
    as GC events of category gc, one per collection a listener of the test saw, and the GC
    rule counts those of >= 1 ms."""
    from framework_jobs import EXAMPLES, mindspore_python
    from jobutil import run_script

    run = run_script([mindspore_python(), "-c", MS_SCRIPT, tmp_path], timeout=300,
                     cwd=EXAMPLES.parent, env={**__import__("os").environ, "GLOG_v": "3"})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert (tmp_path / "dynprof_steps.csv").is_file()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_window(tmp_path)
    assert w.framework == "mindspore"
    check(w, seen)
    gcs = w.events[w.events["name"].astype(str) == GC_EVENT]
    assert set(gcs["cat"].astype(str)) == {GC_CATEGORY}
    # each pause sits inside step 2, where the collections ran
    steps = w.steps.set_index("step")
    lo = steps.loc[2, "start_ns"]
    hi = lo + steps.loc[2, "duration_us"] * 1e3
    forced = gcs.sort_values("dur_ns").tail(3)
    assert ((forced["ts_ns"] >= lo) & (forced["ts_ns"] + forced["dur_ns"] <= hi + 1e3)).all()
