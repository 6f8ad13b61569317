"""Damaged inputs: a clear TraceFormatError or a repaired load with a warning; never a hang."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import dynprof_nb
from dynprof_nb import TraceFormatError
from dynprof_nb.traces.errors import TraceRepairWarning
from dynprof_nb.traces.validate import BadValuesWarning

pytestmark = pytest.mark.timeout(60)


def _events(n: int = 50) -> list[dict]:
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
    for i in range(n):
        ev.append({"ph": "X", "cat": "cpu_op", "name": f"op{i % 5}", "pid": 1, "tid": 1,
                   "ts": 1000.0 + 10 * i, "dur": 5.5})
    return ev


def _write(tmp_path: Path, text: str | bytes, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def test_truncated_json_keeps_complete_events(tmp_path: Path):
    text = json.dumps({"traceEvents": _events(50), "traceName": "x"}, indent=1)
    cut = text[: text.index('"op2"', len(text) // 2)]  # killed mid-event
    p = _write(tmp_path, cut)
    with pytest.warns(TraceRepairWarning, match="cut short"):
        w = dynprof_nb.load_trace(p)
    n = len(w.events)
    assert 20 < n < 50
    assert any("cut short" in note for note in w.sources["events"]["notes"])


def test_truncated_gzip(tmp_path: Path):
    raw = gzip.compress(json.dumps({"traceEvents": _events(2000)}).encode())
    p = _write(tmp_path, raw[: len(raw) * 2 // 3], "t.json.gz")
    with pytest.warns(TraceRepairWarning, match="gzip stream cut short"):
        w = dynprof_nb.load_trace(p)
    assert 100 < len(w.events) < 2000


@pytest.mark.parametrize("token", ["inf", "-inf", "NaN", "Infinity"])
def test_bare_inf_and_nan(tmp_path: Path, token: str):
    text = json.dumps({"traceEvents": _events(5)}).replace('"dur": 5.5}', f'"dur": {token}}}', 1)
    with pytest.warns(BadValuesWarning, match=r"events: 1 row had an impossible .* dur_ns"):
        w = dynprof_nb.load_trace(_write(tmp_path, text))
    # an impossible duration: its row dropped with a word (issue 42), not read as 0
    assert w.events["dur_ns"].tolist() == [5500] * 4
    assert w.sources["events"]["dropped"] == 1


def test_unquoted_na(tmp_path: Path):
    text = json.dumps({"traceEvents": _events(5)}).replace('"tid": 1', '"tid": N/A', 1)
    with pytest.warns(TraceRepairWarning, match="N/A"):
        w = dynprof_nb.load_trace(_write(tmp_path, text))
    assert len(w.events) == 5


def test_control_characters_and_backslashes(tmp_path: Path):
    text = json.dumps({"traceEvents": _events(5)})
    text = text.replace('"op1"', '"op1\x01\tline"', 1).replace('"op2"', '"C:\\data\\sub"', 1)
    with pytest.warns(TraceRepairWarning):
        w = dynprof_nb.load_trace(_write(tmp_path, text))
    names = set(w.events["name"].astype(str))
    assert "op1\x01\tline" in names and "C:\\data\\sub" in names


@pytest.mark.parametrize("content", ["", "   \n"])
def test_empty_file(tmp_path: Path, content: str):
    p = _write(tmp_path, content)
    with pytest.raises(TraceFormatError, match=r"t\.json at byte 0: file is empty"):
        dynprof_nb.load_trace(p)


def test_binary_file(tmp_path: Path):
    p = _write(tmp_path, b"{\x00\x01\x02" + bytes(range(256)) * 10)
    with pytest.raises(TraceFormatError, match=r"t\.json at byte 1: binary"):
        dynprof_nb.load_trace(p)


def test_wrong_format(tmp_path: Path):
    with pytest.raises(TraceFormatError, match="not JSON"):
        dynprof_nb.load_trace(_write(tmp_path, "a,b,c\n1,2,3\n"))
    with pytest.raises(TraceFormatError, match="no traceEvents"):
        dynprof_nb.load_trace(_write(tmp_path, '{"foo": [1, 2]}', "u.json"))
    with pytest.raises(TraceFormatError, match="unrecognised file name"):
        dynprof_nb.load_trace(_write(tmp_path, "a,b\n1,2\n", "random.csv"))


def test_garbage_json_names_line_and_column(tmp_path: Path):
    p = _write(tmp_path, '{"traceEvents": \n  [}}}}} nonsense')
    with pytest.raises(TraceFormatError) as info:
        dynprof_nb.load_trace(p)
    assert info.value.path == str(p) and info.value.line == 2 and info.value.column is not None


def test_broken_event_in_the_middle_is_skipped(tmp_path: Path):
    text = json.dumps({"traceEvents": _events(10)})
    text = text.replace('"name": "op3"', '"name": op3 oops', 1)
    with pytest.warns(TraceRepairWarning, match="skipped 1"):
        w = dynprof_nb.load_trace(_write(tmp_path, text))
    assert len(w.events) == 9


def test_empty_csv_and_bad_db(tmp_path: Path):
    with pytest.raises(TraceFormatError, match="kernel_details.csv"):
        dynprof_nb.load_trace(_write(tmp_path, "", "kernel_details.csv"))
    with pytest.raises(TraceFormatError, match="SQLite"):
        dynprof_nb.load_trace(_write(tmp_path, b"not a database at all" * 100, "x.db"))


def test_large_truncated_file_does_not_hang(tmp_path: Path):
    text = json.dumps({"traceEvents": _events(100_000)})
    p = _write(tmp_path, text[: len(text) - 12345] + "\x00garbage")
    with pytest.warns(TraceRepairWarning):
        w = dynprof_nb.load_trace(p)
    assert len(w.events) > 90_000
