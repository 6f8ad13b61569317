"""Reading a Chrome trace takes time linear in its bytes, whatever their layout (issue 32 item 1).

One long run of whitespace between two events used to be searched again for each block the
streaming reader read: 32/64/128/256 MB took 1.2/3.9/14.5/58 s. The fit is of CPU time (not
wall time, which a loaded machine inflates at random) against size, the best of interleaved
runs, in one process; it fails on superlinear growth, not on any bound in seconds.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import pytest
from testdata import fixtures_dir

from dynprof_nb.traces.formats.chrome import reader

sys.path.insert(0, str(fixtures_dir() / "hostile"))
import make_corpus  # noqa: E402

SIZES_MB = (8, 16, 32, 64)
MAX_SLOPE = 1.35  # log-log slope of time against size: 1 is linear, quadratic measured 1.8-2


def _slope(sizes: tuple, seconds: list[float]) -> float:
    xs, ys = [math.log(s) for s in sizes], [math.log(t) for t in seconds]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread


def _cpu_load(path: Path) -> float:
    t = time.process_time()
    trace = reader.load_chrome_trace(path)
    spent = time.process_time() - t
    assert trace.read_path == "streaming" and len(trace.events) == 2, (path, trace.read_path)
    return spent


def test_one_long_whitespace_run_streams_in_linear_time(tmp_path: Path) -> None:
    paths = [make_corpus.whitespace_gap(tmp_path, mb).path for mb in SIZES_MB]
    best = [math.inf] * len(paths)
    for _ in range(3):  # interleaved: a burst of load hits every size alike
        for i, p in enumerate(paths):
            best[i] = min(best[i], _cpu_load(p))
    slope = _slope(SIZES_MB, best)
    seconds = dict(zip(SIZES_MB, best, strict=True))
    assert slope <= MAX_SLOPE, f"time grows as size^{slope:.2f}: {seconds}"


@pytest.mark.parametrize("side", sorted(make_corpus.GAP_SIDES))
def test_every_whitespace_layout_streams_to_the_compact_events(tmp_path: Path, side: str):
    """The run before, after or around the comma, or between two keys of an event: the
    streamed frame is the one of the same trace without the run."""
    big = make_corpus.whitespace_gap(tmp_path, 9, side).path
    text = big.read_bytes()
    compact = tmp_path / "compact.json"
    compact.write_bytes(b" ".join(text.split()))
    got = reader.load_chrome_trace(big)
    want = reader.load_chrome_trace(compact)
    assert got.read_path == "streaming" and want.read_path == "pieces"
    assert got.events.equals(want.events) and len(got.events) == 2


_PEAK = r"""
import sys
from dynprof_nb.traces.formats.chrome import reader
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
before = peak_mb()
trace = reader.load_chrome_trace(sys.argv[1])
assert trace.read_path == "streaming" and len(trace.events) == 2
print(peak_mb() - before)
"""


def _own_peak_mb(path: Path) -> float:
    """The load's own peak RSS (MB) of ``path``, in a fresh process."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path)], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return float(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("side", ["after", "before", "both", "inside"])
def test_a_whitespace_run_between_events_is_not_held_in_memory(tmp_path: Path, side: str):
    """Issue 49: the run between two events, or between two keys of one, is dropped as it is
    read, not carried block after block (64 MB of it peaked at 350 MB, 512 MB at 2.2 GB; inside
    an event at 230 MB). The load's own peak RSS, in a fresh process, stays a fraction of the
    run (measured: 8 MB for 64 MB)."""
    mb = 64
    own = _own_peak_mb(make_corpus.whitespace_gap(tmp_path, mb, side).path)
    assert own <= mb / 4, f"loading {mb} MB of whitespace raised peak RSS by {own:.0f} MB"


_EVENT = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":5}'
_HEADS = {  # blanks before the event array (issue 42, adversarial pass: 3.5x the file)
    "after the brace": (b"{", b'"traceEvents":['),
    "inside otherData": (b'{"otherData":{"x":', b'1},"traceEvents":['),
}


@pytest.mark.parametrize("where", sorted(_HEADS))
def test_blanks_before_the_event_array_stream_in_bounded_memory(tmp_path: Path, where: str):
    """64 MB of blanks after the opening brace, or inside an ``otherData`` ahead of the events,
    used to send the file to the whole read; the head is read with long runs outside strings
    squeezed, so it streams, gives the frame and metadata of the compact text, and the load's
    own peak stays a fraction of the run."""
    mb = 64
    before, after = _HEADS[where]
    big = tmp_path / "head.json"
    with open(big, "wb") as fh:
        fh.write(before + b" \n\t\r" * (mb << 18) + after)
        fh.write(_EVENT % 1 + b"," + _EVENT % 10 + b"]}")
    got = reader.load_chrome_trace(big)
    compact = tmp_path / "compact.json"
    compact.write_bytes(b" ".join(big.read_bytes().split()))
    want = reader.load_chrome_trace(compact)
    assert got.read_path == "streaming" and got.events.equals(want.events)
    assert got.meta == want.meta and len(got.events) == 2
    own = _own_peak_mb(big)
    assert own <= mb / 4, f"loading {mb} MB of whitespace raised peak RSS by {own:.0f} MB"


def test_blanks_inside_a_string_are_kept(tmp_path: Path):
    """An event name with a ``}`` and megabytes of spaces, read across blocks: the spaces are
    the name's, kept (a ``}`` followed by blanks to a block's end had its blanks dropped, as if
    it ended an event, and the streamed name lost them)."""
    name = b"z" * (8 << 20) + b"x}" + b" " * (3 << 20) + b"y"
    big = tmp_path / "name.json"
    big.write_bytes(
        b'{"traceEvents":['
        + _EVENT % 1
        + b',{"ph":"X","name":"'
        + name
        + b'","pid":1,"tid":1,"ts":10,"dur":5}]}'
    )
    got = reader.load_chrome_trace(big)
    assert got.read_path == "streaming"
    assert got.events["name"].str.len().tolist() == [8, len(name)]
