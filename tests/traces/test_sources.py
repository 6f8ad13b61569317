"""The format registry: every source module is registered, frames say which source built them,
and a new format (PyTorch's saved key_averages() table) is one module plus one registry line."""

from __future__ import annotations

import importlib
import os
import pkgutil
import warnings
from pathlib import Path

import pytest

import dynprof_nb
from dynprof_nb.traces import TraceFormatError, TraceRepairWarning
from dynprof_nb.traces import formats as sources
from dynprof_nb.traces.interface import is_window
from dynprof_nb.traces.window import FRAMES

SAMPLES = Path(dynprof_nb.__file__).parent / "samples"
KINETO = SAMPLES / "pytorch_cpu" / "rank0.1795968823191922673.pt.trace.json"


def test_every_source_module_is_in_the_registry():
    """A format's source is its folder's ``source.py`` (or ``*_source.py``, Ascend's two)."""
    names = [m.name for m in pkgutil.walk_packages(sources.__path__, sources.__name__ + ".")
             if m.name.rpartition(".")[2].endswith("source")]
    modules = [importlib.import_module(n) for n in names]
    assert {m.SOURCE.name for m in modules} == {s.name for s in sources.SOURCES}


def _who(w, kind: str) -> tuple:
    note = w.sources[kind]
    return note.get("source"), note["provider"], note["path"]


def test_frames_say_which_source_and_path_built_them():
    w = dynprof_nb.load_trace(KINETO).load_all()
    assert _who(w, "events") == ("kineto", "kineto", "pieces")
    assert _who(w, "ops") == ("kineto", "derived", "op_table")  # from the kineto events
    t = dynprof_nb.load_window(SAMPLES / "ascend_text").load_all()
    assert _who(t, "kernels") == ("ascend_text", "ascend_text", "csv")
    assert [s.name for s in sources.providers(t.files, "events")][0] == "ascend_text"
    d = dynprof_nb.load_window(SAMPLES / "ascend_db" / "rank0_ascend_pt").load_all()
    assert _who(d, "kernels") == ("ascend_db", "ascend_db", "fast")
    assert _who(d, "steps") == ("ascend_db", "ascend_db", "StepTraceTime")


def test_every_provider_has_a_reader_and_derived_ops_come_first():
    for s in sources.SOURCES:
        for kind, (priority, read) in s.frames.items():
            assert kind in FRAMES and isinstance(priority, int) and callable(read), (s.name, kind)
    derived = next(s for s in sources.SOURCES if s.name == "derived")
    assert derived.frames["ops"].priority < min(
        s.frames["ops"].priority for s in sources.SOURCES if s is not derived and "ops" in s.frames
    )


def _events(text: str, tmp_path: Path, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _ev(ts: int, dur: object) -> str:
    return f'{{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": {ts}, "dur": {dur}}}'


def test_the_chrome_path_named_is_the_one_that_ran(tmp_path, monkeypatch, frame_cache_off):
    """A clean trace, one a field of an odd type forces untyped, a cut-short one the repair
    forces, and a large one streamed: each names its path, and the repair ran exactly when the
    path says so."""
    from dynprof_nb.traces.formats.chrome import reader as chrome

    repairs = []
    real = chrome.repair_json
    monkeypatch.setattr(chrome, "repair_json", lambda *a: repairs.append(1) or real(*a))
    body = ", ".join(_ev(10 * i, 5) for i in range(20))
    clean = _events(f'{{"traceEvents": [{body}]}}', tmp_path, "clean.json")
    odd = _ev(300, "true")  # a duration of an odd type (a string one stays typed)
    loose = _events(f'{{"traceEvents": [{body}, {odd}]}}', tmp_path, "l.json")
    cut = _events(f'{{"traceEvents": [{body}', tmp_path, "cut.json")

    got = {}
    for p in (clean, loose, cut):
        before = len(repairs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            w = dynprof_nb.load_trace(p)
        got[p.name] = (w.sources["events"]["path"], len(repairs) - before, len(w.events))
    assert got == {
        "clean.json": ("pieces", 0, 20),
        "l.json": ("pieces+loose", 0, 21),
        "cut.json": ("repaired+pieces", 1, 20),
    }
    with pytest.warns(TraceRepairWarning, match="cut short"):
        repaired = dynprof_nb.load_trace(cut)
    assert dynprof_nb.load_trace(clean).events.equals(repaired.events)

    monkeypatch.setattr(chrome, "STREAM_MIN", 0)  # every plain file is large enough to stream
    streamed = dynprof_nb.load_trace(clean)
    assert streamed.sources["events"]["path"] == "streaming"
    monkeypatch.setattr(chrome.fastjson, "event_pieces", _not_fast)
    monkeypatch.setattr(chrome, "STREAM_MIN", 1 << 40)
    split = dynprof_nb.load_trace(clean)
    assert split.sources["events"]["path"] == "split"
    assert split.events.equals(streamed.events)


def _not_fast(data):
    from dynprof_nb.traces.formats.chrome import pieces as fastjson

    raise fastjson.NotFast("forced by the test")


def test_the_db_kernels_path_named_is_the_one_that_ran(tmp_path, monkeypatch, frame_cache_off):
    """The column-wise fast path, the generic one where the fast one declines, and the
    repaired one (no COMPUTE_TASK_INFO): each named in sources["kernels"]["path"]."""
    import shutil
    import sqlite3

    from dynprof_nb.traces.formats.ascend import db_kernels as ascend_db_kernels

    src = SAMPLES / "ascend_db" / "rank0_ascend_pt"
    fast = dynprof_nb.load_window(src)
    assert (len(fast.kernels), fast.sources["kernels"]["path"]) == (191, "fast")

    calls = []
    monkeypatch.setattr(ascend_db_kernels, "kernels", lambda *a: calls.append(1))  # declines
    generic = dynprof_nb.load_window(src)
    assert generic.kernels.equals(fast.kernels)
    assert generic.sources["kernels"]["path"] == "generic" and calls

    d = tmp_path / "rank0_ascend_pt"
    shutil.copytree(src, d)
    db = next(d.rglob("ascend_pytorch_profiler_*.db"))
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE COMPUTE_TASK_INFO")
    con.close()
    repaired = dynprof_nb.load_window(d)
    with pytest.warns(TraceRepairWarning, match="COMPUTE_TASK_INFO"):
        assert len(repaired.kernels) > 0
    assert repaired.sources["kernels"]["path"] == "repaired"


def test_windows_implement_the_window_protocol():
    w = dynprof_nb.load_trace(KINETO)
    m = dynprof_nb.load_window(SAMPLES / "ascend_db")
    for window in (w, m):
        assert is_window(window)
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

    # the same table in a window directory: found, detected and read by its own module
    win = tmp_path / "window"
    win.mkdir()
    (win / path.name).write_text(path.read_text())
    d = dynprof_nb.load_window(win)
    assert d.ops.equals(w.ops)
    assert (d.sources["ops"]["provider"], d.sources["ops"]["path"]) == ("key_averages", "table")


def test_a_key_averages_table_is_recognised_by_its_content_under_any_name(tmp_path):
    """People save the table as ``ops.txt`` or ``prof.log``: load_trace and a window directory
    read it by what it holds; a text file that is not a table is not taken for one."""
    import torch
    from torch.profiler import profile

    with profile() as prof:
        a = torch.randn(64, 64)
        (a @ a).relu()
    table = prof.key_averages().table(row_limit=-1)
    peer = {e.key: e.count for e in prof.key_averages()}
    for name in ("ops.txt", "prof.log", "table"):
        path = tmp_path / name
        path.write_text(table)
        w = dynprof_nb.load_trace(path)
        assert dict(zip(w.ops.name, w.ops["count"], strict=True)) == peer, name
        assert w.sources["ops"]["source"] == "key_averages"

    win = tmp_path / "window"
    win.mkdir()
    (win / "after_epoch_3.txt").write_text(table)
    (win / "notes.txt").write_text("Name  Self CPU  CPU total  # of Calls, but no table\n")
    os.mkfifo(win / "planted.txt")  # never opened: a read of a FIFO would block the load
    d = dynprof_nb.load_window(win)
    assert dict(zip(d.ops.name, d.ops["count"], strict=True)) == peer
    assert (d.sources["ops"]["provider"], d.sources["ops"]["path"]) == ("key_averages", "table")
    assert [Path(f).name for f in d.sources["ops"]["files"]] == ["after_epoch_3.txt"]
    with pytest.raises(TraceFormatError, match=r"unrecognised .* or a saved key_averages\(\)"):
        dynprof_nb.load_trace(win / "notes.txt")


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


def test_the_window_is_the_readers_context():
    """The formats' readers are typed against ``ReadContext`` / ``OpenContext`` (formats/base.py),
    never the concrete window: the window implements both, so a format imports no window."""
    from dynprof_nb.traces.formats.base import OpenContext, ReadContext

    w = dynprof_nb.load_trace(KINETO)
    assert isinstance(w, ReadContext) and isinstance(w, OpenContext)
    assert not isinstance(object(), ReadContext)
