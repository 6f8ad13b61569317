"""The format registry: every source module is registered, frames say which source built them,
and a new format (PyTorch's saved key_averages() table) is one module plus one registry line."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import dynprof_nb
from dynprof_nb.traces import sources
from dynprof_nb.traces.interface import Window

SAMPLES = Path(dynprof_nb.__file__).parent / "samples"
KINETO = SAMPLES / "pytorch_cpu" / "rank0.1795968823191922673.pt.trace.json"


def test_every_source_module_is_in_the_registry():
    names = [m.name for m in pkgutil.iter_modules(sources.__path__) if m.name != "base"]
    modules = [importlib.import_module(f"{sources.__name__}.{n}") for n in names]
    assert {m.SOURCE.name for m in modules} == {s.name for s in sources.SOURCES}


def test_frames_say_which_source_built_them():
    w = dynprof_nb.load_trace(KINETO).load_all()
    assert (w.sources["events"]["source"], w.sources["events"]["path"]) == ("kineto", "read")
    assert (w.sources["ops"]["source"], w.sources["ops"]["path"]) == ("kineto", "derived")
    t = dynprof_nb.load_window(SAMPLES / "ascend_text").load_all()
    assert t.sources["kernels"]["source"] == "ascend_text"
    assert [s.name for s in sources.providers(t._files, "events")][0] == "ascend_text"


def test_windows_implement_the_window_protocol():
    w = dynprof_nb.load_trace(KINETO)
    m = dynprof_nb.load_window(SAMPLES / "ascend_db")
    for window in (w, m):
        assert isinstance(window, Window)
        assert window.frame("steps").equals(window.steps)
    with pytest.raises(KeyError, match="no frame 'bogus'"):
        w.frame("bogus")


def test_a_saved_key_averages_table_is_its_own_source(tmp_path):
    import torch
    from torch.profiler import profile

    with profile() as prof:
        a = torch.randn(128, 128)
        for _ in range(5):
            (a @ a).relu()
    peer = {e.key: e for e in prof.key_averages()}
    path = tmp_path / "train_key_averages.txt"
    path.write_text(prof.key_averages().table(row_limit=-1))

    w = dynprof_nb.load_trace(path)
    ops = w.ops.set_index("name")
    assert set(ops.index) == set(peer)
    for name, e in peer.items():
        assert ops.loc[name, "count"] == e.count
        # the table prints 3 significant decimals of its unit (us, ms, s)
        assert ops.loc[name, "self_us"] == pytest.approx(e.self_cpu_time_total, rel=2e-3, abs=1e-3)
        assert ops.loc[name, "total_us"] == pytest.approx(e.cpu_time_total, rel=2e-3, abs=1e-3)
    assert w.sources["ops"]["source"] == "key_averages"
    assert w.events.empty and "holds no events" in w.sources["events"]["missing"]


def test_a_damaged_key_averages_table_is_a_trace_format_error(tmp_path):
    from dynprof_nb.traces import TraceFormatError

    path = tmp_path / "key_averages.txt"
    rule = "-" * 10 + "  " + "-" * 12 + "  " + "-" * 12 + "  " + "-" * 12
    header = f"{'Name':>10}  {'Self CPU':>12}  {'CPU total':>12}  {'# of Calls':>12}"
    row = f"{'aten::mm':>10}  {'12.5parsecs':>12}  {'1.000ms':>12}  {'3':>12}"
    path.write_text("\n".join([rule, header, rule, row, rule]) + "\n")
    with pytest.raises(TraceFormatError, match="cannot read it: ValueError: not a time"):
        dynprof_nb.load_trace(path)
    path.write_text("just text\n")
    with pytest.raises(TraceFormatError, match="not a key_averages"):
        dynprof_nb.load_trace(path)
