"""Ranks loaded in parallel: the parent parses its share in-process while forked workers parse
the rest; either way a rank's frame equals a serial load, a failing rank raises its own error,
warnings from workers reach the caller, and no file is left behind."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pandas as pd
import pytest
from jobutil import wait_until
from testdata import npu_text_window

import dynprof_nb
from dynprof_nb.traces import parallel
from dynprof_nb.traces.errors import TraceFormatError, TraceRepairWarning


def _trace(root: Path, rank: int) -> Path:
    return root / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"


def _load(children: list, here: list, first: set[int], scratch: Path) -> None:
    """parallel.load_events over ``children`` on two processes (whatever this machine has),
    steering the ranks in ``first`` to the worker (the largest go to a worker first); ``here``
    collects the ranks loaded in this process."""
    pid = os.getpid()

    def load(c):
        if os.getpid() == pid:
            here.append(c.rank)
        return c.parsed_events()

    parallel.load_events(children, load, lambda c: 100 if c.rank in first else 1, max_procs=2)
    assert list(scratch.iterdir()) == []  # every frame file and the private directory are gone


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "scratch"
    d.mkdir()
    monkeypatch.setattr(parallel, "_scratch", lambda need: str(d))
    return d


@pytest.mark.usefixtures("frame_cache_off")  # the serial load parses, not reads the cache
@pytest.mark.parametrize(("ranks", "first", "parent"), [(3, {1}, [0, 2]), (4, {1, 3}, [2, 3])])
def test_parent_and_worker_ranks_equal_a_serial_load(tmp_path: Path, scratch: Path, ranks: int,
                                                     first: set[int], parent: list[int]):
    root = npu_text_window(tmp_path / "w", ranks)
    par, here = dynprof_nb.load_window(root), []
    _load(par.children, here, first, scratch)
    assert here == parent  # the parent parsed these, one worker the others (two, one by one)
    assert all(c.loaded("events") for c in par.children)
    ser = dynprof_nb.load_window(root)
    for a, b in zip(par.children, ser.children, strict=True):
        pd.testing.assert_frame_equal(a.frame("events"), b.frame("events"))
        assert a.sources["events"] == b.sources["events"]
        assert a._chrome[0].meta == b._chrome[0].meta and a._chrome[0].meta
    assert not par.children[1]._chrome[0].counters.empty  # the side tables came back too
    pd.testing.assert_frame_equal(par.events, ser.events)


@pytest.mark.parametrize("where", ["worker", "parent"])
def test_a_failing_rank_raises_its_own_error(tmp_path: Path, scratch: Path,
                                             where: str):
    root = npu_text_window(tmp_path / "w", 3)
    _trace(root, 1).write_bytes(b"\x00\x01 not json")
    w, here = dynprof_nb.load_window(root), []
    _load(w.children, here, {1} if where == "worker" else {0}, scratch)
    assert here == ([0, 2] if where == "worker" else [1])  # the parent stops at its failure
    assert not w.children[1].loaded("events")  # left for the caller, which raises in order
    assert w.children[0].loaded("events")
    with pytest.raises(TraceFormatError, match="binary"):
        w.events  # noqa: B018


def test_a_workers_warnings_reach_the_caller(tmp_path: Path, scratch: Path):
    root = npu_text_window(tmp_path / "w", 2)
    cut = _trace(root, 1)
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])  # truncated mid-array: repaired, with a warning
    w, here = dynprof_nb.load_window(root), []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _load(w.children, here, {1}, scratch)
    assert here == [0]
    assert any(issubclass(c.category, TraceRepairWarning) and str(cut) in str(c.message)
               for c in caught)
    assert w.children[1].loaded("events") and len(w.children[1].frame("events")) > 0


def test_a_worker_that_dies_leaves_its_ranks_to_the_caller(tmp_path: Path, scratch: Path):
    root = npu_text_window(tmp_path / "w", 2)
    w, pid = dynprof_nb.load_window(root), os.getpid()

    def load(c):
        if os.getpid() != pid:
            os._exit(3)  # the worker is killed mid-parse (out of memory, say)
        return c.parsed_events()

    parallel.load_events(w.children, load, lambda c: 100 if c.rank == 1 else 1, max_procs=2)
    assert list(scratch.iterdir()) == []
    assert w.children[0].loaded("events") and not w.children[1].loaded("events")
    pd.testing.assert_frame_equal(w.events, dynprof_nb.load_window(root).events)


def test_scratch_is_tmpfs_only_where_the_frames_fit():
    assert parallel._scratch(0) in ("/dev/shm", None)
    assert parallel._scratch(1 << 62) is None  # no tmpfs that large: the temp dir instead


def test_a_rank_window_loads_in_parallel_through_its_public_protocol(tmp_path: Path):
    from dynprof_nb.traces.interface import LoadsInParallel, is_window

    w = dynprof_nb.load_window(npu_text_window(tmp_path / "w", 2))
    for c in w.children:
        assert isinstance(c, LoadsInParallel) and is_window(c)
    assert is_window(w)


def test_prime_runs_ahead_in_both_processes_and_returns_each_result():
    """prime(): each item's result, in order, from the parent's share and a worker's; None for
    one that raised (the caller meets it again); a worker's changes stay in the worker; with
    one process nothing runs ahead (the caller's own run is the serial one)."""
    pid = os.getpid()
    items = [{"n": n} for n in range(4)]

    def work(item: dict) -> tuple[int, bool]:
        if item["n"] == 2:
            raise ValueError("refused")
        item["done"] = True
        return item["n"] * 10, os.getpid() == pid

    got = parallel.prime(items, work, lambda item: 1 + item["n"] % 2, max_procs=2)
    assert [g and g[0] for g in got] == [0, 10, None, 30]
    here = {g[1] for g in got if g}
    assert here == {True, False}  # shared out
    assert ["done" in item for item in items] == [bool(g and g[1]) for g in got]
    assert parallel.prime(items, work, max_procs=1) == [None] * 4


def test_a_load_killed_mid_way_leaves_no_frame_files_past_the_next_load(tmp_path: Path):
    """A notebook SIGKILLed while its ranks load (no ``finally`` runs) leaves its private
    directory of frame files in /dev/shm, which is memory until the machine reboots. The next
    parallel load removes it; one of a load still running is kept."""
    import signal
    import subprocess
    import sys
    import tempfile

    from dynprof_nb.traces import owner

    script = (
        "import os, sys, time, dynprof_nb\n"
        "from dynprof_nb.traces import parallel\n"
        "w, pid = dynprof_nb.load_window(sys.argv[1]), os.getpid()\n"
        "def load(c):\n"
        "    if os.getpid() == pid:\n"
        "        print('parsing', flush=True)\n"
        "        time.sleep(120)\n"
        "    return c.parsed_events()\n"
        "parallel.load_events(w.children, load, lambda c: 100 if c.rank == 1 else 1, 2)\n"
    )
    where = parallel._scratch(0) or tempfile.gettempdir()
    first = npu_text_window(tmp_path / "a", 2)
    killed = subprocess.Popen([sys.executable, "-c", script, str(first)],
                              stdout=subprocess.PIPE, text=True)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    live = Path(where) / f"{parallel.FRAMES_PREFIX}{owner.HOST}-{alive.pid}-x"
    try:
        live.mkdir()
        assert killed.stdout is not None and killed.stdout.readline() == "parsing\n"
        mine = f"{parallel.FRAMES_PREFIX}{owner.HOST}-{killed.pid}-"
        left = [p for p in Path(where).iterdir() if p.name.startswith(mine)]
        assert len(left) == 1, "the load made no frame directory of its own"
        wait_until(lambda: any(left[0].iterdir()), 30, "the worker to write rank 1's frame")
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        assert left[0].exists()  # what the kill leaves

        w = dynprof_nb.load_window(npu_text_window(tmp_path / "b", 2))
        parallel.load_events(w.children, lambda c: c.parsed_events(), max_procs=2)
        assert all(c.loaded("events") for c in w.children)
        assert not left[0].exists(), "the killed load's frame files are still in memory"
        assert live.is_dir(), "a running load's directory was removed"
    finally:
        killed.kill()
        alive.kill()
        live.rmdir()
