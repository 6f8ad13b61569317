"""ops agrees with torch.profiler's own key_averages() on a real profiled run."""

from __future__ import annotations

from pathlib import Path

import pytest

import dynprof_nb

torch = pytest.importorskip("torch")  # installed by `make test` (torch==2.13.0 CPU)


def test_ops_agree_with_key_averages(tmp_path: Path):
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))
    act = torch.profiler.ProfilerActivity.CPU
    with torch.profiler.profile(activities=[act], schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(str(tmp_path)),
                                profile_memory=True, record_shapes=True) as prof:
        for _ in range(5):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            prof.step()
    ref = {e.key: e for e in prof.key_averages()}
    trace = next(tmp_path.glob("*.pt.trace.json"))
    w = dynprof_nb.load_window(tmp_path)  # a folder holding one torch trace
    ops = w.ops.set_index("name")
    assert w.steps["step"].tolist() == [3, 4, 5] or len(w.steps) == 3
    assert str(trace) in w.sources["events"]["files"]
    # No op class is excluded: ProfilerStep#N rows are folded into "ProfilerStep*" exactly as
    # key_averages() does; python_function frames would be excluded but with_stack is off here.
    assert set(ref) == set(ops.index)
    checked = 0
    for key, e in ref.items():
        row = ops.loc[key]
        assert row["count"] == e.count, key
        if e.self_cpu_time_total >= 5.0:  # µs; below that 1% is under the trace's 1 ns grid noise
            assert row["self_us"] == pytest.approx(e.self_cpu_time_total, rel=0.01), key
            checked += 1
        assert row["total_us"] == pytest.approx(e.cpu_time_total, rel=0.01, abs=0.01), key
    assert checked >= 20
