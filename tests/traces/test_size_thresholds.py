"""Every path switch of the Chrome reader gives the same frames, and times past int64 ns load.

Issue 25: the 94 MB benchmark trace repeated 10 times "with its times shifted" (844 MB) failed
with ``cannot convert NA to integer`` while 5 times (421 MB) loaded. The cause was not the size:
each copy was shifted by about its own start time (1.67e15 µs), so copies 6 to 10 had
timestamps of 1.0e16 µs and more, beyond what int64 nanoseconds hold (9223372036854775.807 µs,
2262-04-11 as Unix time). Those ts were read as NA without a word, and the step derivation then
cast NA to int64. Here a small real trace is shifted the same way and read across every
threshold the readers switch paths at (each one a module constant set low), so no large file
is needed.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from testdata import fixtures_dir

import dynprof_nb
from dynprof_nb.traces.errors import TraceRepairWarning
from dynprof_nb.traces.formats.chrome import pieces as fastjson
from dynprof_nb.traces.formats.chrome import reader as chrome
from dynprof_nb.traces.formats.common import timestamps as _time
from dynprof_nb.traces.formats.common.timestamps import NA_NS, tokens_us_to_ns
from dynprof_nb.traces.validate import PLAUSIBLE_SPAN_NS

SRC = fixtures_dir() / "kineto" / "hta__df_index_resolver__df_index_resolver.json.gz"
SHIFT_US = 1669783687352244  # the fixture's first ts: copy k is shifted by k times it, as in
COPIES = 7  # the file; copies 0-4 stay below 2**63 ns, 5 and 6 go beyond
NS_MAX_US = Decimal(2**63 - 1) / 1000


@pytest.fixture(scope="module")
def shifted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few thousand real events (with the step markers) in 7 copies, each shifted by k x
    1.67e15 µs, written compactly like the issue's file."""
    doc = json.loads(gzip.decompress(SRC.read_bytes()))
    evs = doc["traceEvents"]
    part = evs[:3000] + [e for e in evs if str(e.get("name", "")).startswith("ProfilerStep")]
    meta = [e for e in evs if e.get("ph") == "M"]
    out = []
    for k in range(COPIES):
        out += [dict(e, ts=e["ts"] + k * SHIFT_US) for e in part] + meta
    doc["traceEvents"] = out
    path = tmp_path_factory.mktemp("shifted") / "shifted.json"
    path.write_text(json.dumps(doc, separators=(",", ":")))
    return path


def _same(a: chrome.ChromeTrace, b: chrome.ChromeTrace) -> None:
    pd.testing.assert_frame_equal(a.events, b.events)
    pd.testing.assert_frame_equal(a.memory, b.memory)
    pd.testing.assert_frame_equal(a.counters, b.counters)
    assert a.ph_counts == b.ph_counts
    assert a.repairs == b.repairs


def _careful(data: bytes) -> None:
    raise fastjson.NotFast("test: the careful path")


# (what is set low, so the small file crosses it) -> the path it sends the read down
THRESHOLDS = {
    "stream_min": [(chrome, "STREAM_MIN", 0)],  # read piece by piece from the file
    "stream_small_pieces": [(chrome, "STREAM_MIN", 0), (fastjson, "PIECE_BYTES", 4096)],
    "stream_edge": [(chrome, "STREAM_MIN", 0), (fastjson, "STREAM_EDGE", 64)],  # head: whole
    "whole_small_pieces": [(fastjson, "PIECE_BYTES", 4096)],  # many cuts of the text in memory
    "careful_split": [(fastjson, "event_pieces", _careful), (fastjson, "SPLIT_EVENTS", 333)],
    "ts_block": [(_time, "_BLOCK", 97), (fastjson, "PIECE_BYTES", 1 << 16)],  # ts parse blocks
    "ts_general": [(_time, "_MAX_SHAPES", 0)],  # every piece's ts through the general parse
    "ts_one_by_one": [(_time, "_MAX_SHAPES", 0), (_time, "_MAX_WIDTH", 4)],  # token by token
}


@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_every_path_gives_the_same_frames(shifted: Path, name: str,
                                          monkeypatch: pytest.MonkeyPatch):
    ref = chrome.load_chrome_trace(shifted)  # under 8 MB: read whole, default pieces
    for module, attr, value in THRESHOLDS[name]:
        monkeypatch.setattr(module, attr, value)
    _same(chrome.load_chrome_trace(shifted), ref)
    if name.startswith("stream"):  # the streamed read was taken, or refused where it must be
        assert (chrome._load_streaming(shifted) is None) == (name == "stream_edge")


def test_gzip_of_the_same_text_gives_the_same_frames(shifted: Path, tmp_path: Path):
    gz = tmp_path / "shifted.json.gz"
    gz.write_bytes(gzip.compress(shifted.read_bytes(), compresslevel=1))
    _same(chrome.load_chrome_trace(gz), chrome.load_chrome_trace(shifted))


def test_times_beyond_int64_ns_load_with_a_warning(shifted: Path):
    """The issue's failure, small: the trace loads, the events past 2**63 ns are counted in the
    warning and dropped, every other time is exact, and steps come from the markers kept."""
    doc = json.loads(shifted.read_bytes(), parse_float=Decimal)
    kept = [e for e in doc["traceEvents"] if e.get("ph") in chrome.KEEP_PH]
    beyond = [Decimal(e["ts"]) > NS_MAX_US for e in kept]
    assert 0 < sum(beyond) < len(kept)
    with pytest.warns(TraceRepairWarning, match=f"{sum(beyond)} events have a ts that is not a "
                      "time dynprof_nb can hold.*2262"):
        w = dynprof_nb.load_trace(shifted)
        ev = w.events
    # the events past the edge are dropped (an impossible time, issue 42), and so are those more
    # than PLAUSIBLE_SPAN_NS from the median of the rest (this trace spreads them over centuries);
    # every one kept is exact, in order
    exact = [int(Decimal(e["ts"]) * 1000) for e, b in zip(kept, beyond, strict=True) if not b]
    anchor = float(np.median(exact))
    plausible = [t for t in exact if abs(t - anchor) <= PLAUSIBLE_SPAN_NS]
    assert plausible and ev["ts_ns"].tolist() == plausible
    steps = w.steps
    markers = ev[ev["name"].astype(str).str.match(r"ProfilerStep#\d+$") & ev["ts_ns"].notna()]
    assert sorted(steps["step"]) == sorted({int(n.split("#")[1]) for n in markers["name"]})
    assert (steps["start_ns"].notna()).all()


@pytest.mark.parametrize("quoted", [False, True])
def test_the_int64_edge_is_exact_on_every_token_path(quoted: bool):
    """µs at and around ±2**63 ns: read exactly up to the edge, NA past it, whichever path a
    piece takes (all tokens alike: the eight-digit bulk path; mixed: the general one)."""
    edge = ["9223372036854775.807", "-9223372036854775.807", "9223372036854775.808",
            "-9223372036854775.808", "9223372036854776.000", "9999999999999999.999",
            "9223372036854774.999", "1669783687352244.000"]
    want = []
    for s in edge:
        ns = int(Decimal(s) * 1000)
        want.append(ns if -(2**63) < ns < 2**63 else NA_NS)
    toks = [(f'"{s}"' if quoted else s).encode() for s in edge]
    for layout in (toks, toks + [b"null", b"17"]):  # same layout, then mixed
        got = tokens_us_to_ns(b"".join(layout), np.array([len(t) for t in layout]))
        assert got[: len(edge)].tolist() == want
        for t, w in zip(toks, want, strict=True):  # and one token at a time
            assert tokens_us_to_ns(t, np.array([len(t)])).tolist() == [w]
