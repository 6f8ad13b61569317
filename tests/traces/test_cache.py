"""The columnar frame cache (dynprof_nb.traces.cache): a second load gives exactly the frames,
notes and warnings of the first, from any process, faster; a hostile or damaged cache never
breaks a load."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from testdata import REPO

from dynprof_nb.traces import cache, load_trace, load_window
from dynprof_nb.traces.window import FRAMES

KINETO = REPO / "tests" / "data" / "kineto"
BIG = KINETO / "hta__df_index_resolver__df_index_resolver.json.gz"  # 216k events
SMALL = KINETO / "hta__timeline_analysis__sampled_rank-0.json.gz"


def _compare_frames() -> Any:
    """benchmarks/compare_frames.py: its enumeration of every fixture window is the one used."""
    spec = importlib.util.spec_from_file_location(
        "compare_frames", REPO / "benchmarks" / "compare_frames.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "frame-cache"
    monkeypatch.setenv(cache.ENV_DIR, str(d))
    monkeypatch.delenv(cache.ENV_LIMIT, raising=False)
    return d


def _load(path: Path) -> dict[str, Any]:
    """Everything a user sees of one load: frames, warnings, notes, identity, repr."""
    out: dict[str, Any] = {}
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        w = load_trace(path) if path.is_file() else load_window(path)
        out["repr"] = repr(w)
        out["frames"] = {k: w.frame(k) for k in FRAMES}
    out["warnings"] = [(x.category, str(x.message)) for x in said]
    out["sources"] = json.loads(json.dumps(w.sources, default=str, sort_keys=True))
    out["identity"] = (w.rank, w.device, w.framework, w.ranks)
    return out


def _assert_same(a: dict[str, Any], b: dict[str, Any], where: str) -> None:
    for kind in FRAMES:
        fa, fb = a["frames"][kind], b["frames"][kind]
        pd.testing.assert_frame_equal(
            fa, fb, check_exact=True, check_categorical=True, obj=f"{where} {kind}"
        )
        for col in fa.columns:  # the categories' own dtype and order too
            if isinstance(fa[col].dtype, pd.CategoricalDtype):
                pd.testing.assert_index_equal(
                    fa[col].cat.categories, fb[col].cat.categories, exact=True
                )
        assert fa.attrs == fb.attrs, f"{where} {kind} attrs"
    for key in ("repr", "warnings", "sources", "identity"):
        assert a[key] == b[key], f"{where}: {key} differs"


@pytest.mark.slow  # every fixture loaded twice: ~45 s on 2 busy cores
def test_every_frame_of_every_fixture_comes_back_exactly(
    cache_dir: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cf = _compare_frames()
    windows = [(str(p.relative_to(REPO)), p) for p in cf.fixture_paths()]
    windows += cf.built_windows(tmp_path / "built")
    checked = cached = 0
    for name, path in windows:
        try:
            first = _load(path)
        except Exception:  # noqa: BLE001  (a fixture that does not load: nothing to cache)
            continue
        before = dict(cache.counts)
        second = _load(path)
        _assert_same(first, second, name)
        assert cache.counts["misses"] == before["misses"], f"{name}: a frame was read again"
        checked += 1
        cached += cache.counts["hits"] - before["hits"]
    assert checked > 100 and cached > 500


def test_a_second_load_in_a_new_process_is_identical_and_faster(
    cache_dir: Path, tmp_path: Path
) -> None:
    trace = tmp_path / BIG.name
    shutil.copy(BIG, trace)
    script = textwrap.dedent(
        """
        import json, pickle, sys, time, warnings
        from dynprof_nb.traces import cache, load_trace
        from dynprof_nb.traces.window import FRAMES
        t = time.perf_counter()  # after the imports, which both loads pay alike
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            w = load_trace(sys.argv[1])
            frames = {k: w.frame(k) for k in FRAMES}
        seconds = time.perf_counter() - t
        with open(sys.argv[2], "wb") as fh:
            pickle.dump({"frames": frames, "sources": w.sources, "rank": w.rank,
                         "framework": w.framework,
                         "warnings": [(x.category.__name__, str(x.message)) for x in said]}, fh)
        print(json.dumps({"seconds": seconds, "counts": cache.counts}))
        """
    )
    runs = []
    for i in range(2):
        r = subprocess.run(
            [sys.executable, "-c", script, str(trace), str(tmp_path / f"run{i}.pkl")],
            capture_output=True,
            text=True,
            timeout=240,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    first, second = (pickle.loads((tmp_path / f"run{i}.pkl").read_bytes()) for i in range(2))
    for kind in FRAMES:
        pd.testing.assert_frame_equal(
            first["frames"][kind], second["frames"][kind], check_exact=True, obj=kind
        )
    for key in ("sources", "rank", "framework", "warnings"):
        assert first[key] == second[key], key
    assert runs[0]["counts"]["stored"] == len(FRAMES) + 1  # and the rank read from the trace
    assert runs[1]["counts"]["hits"] == len(FRAMES) + 1 and runs[1]["counts"]["misses"] == 0
    # the ratio on the 94 MB trace is benchmarks/cache_reload.py's; here a margin for a busy box
    assert runs[0]["seconds"] >= 3 * runs[1]["seconds"], runs


def test_two_processes_filling_the_cache_at_once(cache_dir: Path, tmp_path: Path) -> None:
    trace = tmp_path / SMALL.name
    shutil.copy(SMALL, trace)
    script = (
        "import sys, pickle; from dynprof_nb.traces import load_trace;"
        "w = load_trace(sys.argv[1]); w.load_all();"
        "pickle.dump(w.events, open(sys.argv[2], 'wb'))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(trace), str(tmp_path / f"ev{i}.pkl")], env=env
        )
        for i in range(2)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".tmp-")]
    got = load_trace(trace).events
    for i in range(2):
        pd.testing.assert_frame_equal(got, pickle.loads((tmp_path / f"ev{i}.pkl").read_bytes()))
    assert all(cache.decode(p.read_bytes()) for p in cache_dir.iterdir())


def _entries(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.suffix == ".parquet")


def test_a_planted_symlink_entry_is_removed_and_never_followed(
    cache_dir: Path, tmp_path: Path
) -> None:
    trace = tmp_path / SMALL.name
    shutil.copy(SMALL, trace)
    expected = load_trace(trace).load_all()
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's file")
    for entry in _entries(cache_dir):
        entry.unlink()
        entry.symlink_to(victim)
    w = load_trace(trace).load_all()
    for kind in FRAMES:
        pd.testing.assert_frame_equal(w.frame(kind), expected.frame(kind))
    assert victim.read_text() == "someone's file"
    assert _entries(cache_dir) and not [p for p in _entries(cache_dir) if p.is_symlink()]


@pytest.mark.parametrize("planted", ["fifo", "huge"])
def test_a_fifo_or_a_huge_file_in_an_entrys_place_is_a_miss(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    """A FIFO where an entry should be would block the open until a writer came (the load
    hangs forever); a sparse 64 GB file would be read whole into memory. Both are misses,
    removed, and the trace is read again."""
    import threading

    trace = tmp_path / SMALL.name
    shutil.copy(SMALL, trace)
    expected = load_trace(trace).load_all()
    monkeypatch.setenv(cache.ENV_LIMIT, "50M")
    for entry in _entries(cache_dir):
        entry.unlink()
        if planted == "fifo":
            os.mkfifo(entry)
        else:
            with open(entry, "wb") as fh:
                fh.truncate(64 << 30)
    read: list[int] = []
    real = cache.read_entry

    def reading(fh: Any, size: int) -> Any:
        read.append(size)
        if size > 50 << 20:  # (never read it here: 64 GB of memory)
            raise MemoryError
        return real(fh, size)

    monkeypatch.setattr(cache, "read_entry", reading)
    got: dict[str, Any] = {}
    loader = threading.Thread(target=lambda: got.setdefault("w", load_trace(trace).load_all()),
                              daemon=True)
    loader.start()
    loader.join(60)
    assert not loader.is_alive(), "the load is stuck on a planted entry"
    for kind in FRAMES:
        pd.testing.assert_frame_equal(got["w"].frame(kind), expected.frame(kind))
    assert all(size <= 50 << 20 for size in read), "a file larger than the cache was read"
    assert _entries(cache_dir) and all(p.is_file() and p.stat().st_size < 50 << 20
                                       for p in _entries(cache_dir))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_entry_is_a_miss_and_replaced(
    cache_dir: Path, tmp_path: Path, damage: str
) -> None:
    trace = tmp_path / SMALL.name
    shutil.copy(SMALL, trace)
    expected = load_trace(trace).events
    (entry,) = [
        p for p in _entries(cache_dir) if "events" in cache.decode(p.read_bytes())[1]["kind"]
    ]
    data = entry.read_bytes()
    entry.write_bytes(
        {"truncated": data[: len(data) // 2], "garbage": os.urandom(len(data)), "empty": b""}[
            damage
        ]
    )
    before = dict(cache.counts)
    pd.testing.assert_frame_equal(load_trace(trace).events, expected, check_exact=True)
    assert cache.counts["discarded"] == before["discarded"] + 1
    assert cache.decode(entry.read_bytes())[1]["kind"] == "events"  # written again, whole


def test_an_unsafe_cache_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / SMALL.name
    shutil.copy(SMALL, trace)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "cache-link"
    link.symlink_to(elsewhere)
    monkeypatch.setenv(cache.ENV_DIR, str(link))
    with pytest.warns(cache.CacheWarning, match="symlink"):
        events = load_trace(trace).events
    assert len(events) and not list(elsewhere.iterdir())

    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o700)
    monkeypatch.setenv(cache.ENV_DIR, str(foreign))
    if os.geteuid() == 0:
        os.chown(foreign, 12345, 12345)
    else:  # an unprivileged run cannot give a folder away: this process is someone else
        real = os.geteuid()
        monkeypatch.setattr(cache.os, "geteuid", lambda: real + 1)
    with pytest.warns(cache.CacheWarning, match="belongs to uid"):
        assert len(load_trace(trace).events) == len(events)
    assert not list(foreign.iterdir())


def test_the_cache_directory_is_private(cache_dir: Path, tmp_path: Path) -> None:
    trace = tmp_path / SMALL.name
    shutil.copy(SMALL, trace)
    load_trace(trace).events  # noqa: B018
    assert cache_dir.stat().st_mode & 0o777 == 0o700
    assert all(p.stat().st_mode & 0o077 == 0 for p in cache_dir.iterdir())


def test_a_file_rewritten_within_its_mtime_tick_at_the_same_size_is_read_again(
    cache_dir: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "rank0.pt.trace.json"
    doc = {
        "traceEvents": [
            {"name": "aten::first", "ph": "X", "ts": 10, "dur": 5, "pid": 1, "tid": 1},
            {"name": "aten::other", "ph": "X", "ts": 20, "dur": 5, "pid": 1, "tid": 1},
        ]
    }
    trace.write_text(json.dumps(doc))
    st = trace.stat()
    assert set(load_trace(trace).events["name"]) == {"aten::first", "aten::other"}
    doc["traceEvents"][0]["name"] = "aten::again"  # same length: same size
    trace.write_text(json.dumps(doc))
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime
    assert trace.stat().st_size == st.st_size and trace.stat().st_mtime_ns == st.st_mtime_ns
    assert set(load_trace(trace).events["name"]) == {"aten::again", "aten::other"}


def test_a_window_still_being_written_is_not_cached(cache_dir: Path, tmp_path: Path) -> None:
    from testdata import write_builtin_window

    d = write_builtin_window(tmp_path / "out", rank=0)
    partial = d.with_name(d.name + ".tmp")
    d.rename(partial)
    with pytest.warns(UserWarning, match="incomplete"):
        load_window(partial).load_all()
    assert not cache_dir.exists() or not _entries(cache_dir)
    partial.rename(d)
    load_window(d).load_all()
    assert _entries(cache_dir)


def test_the_least_recently_used_entries_go_first(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = []
    for i in range(3):
        traces.append(tmp_path / f"t{i}" / SMALL.name)
        traces[-1].parent.mkdir()
        shutil.copy(SMALL, traces[-1])
    load_trace(traces[0]).load_all()  # every entry read: a load writes several
    one = sum(p.stat().st_size for p in _entries(cache_dir))
    monkeypatch.setenv(cache.ENV_LIMIT, str(int(one * 2.5)))
    load_trace(traces[1]).load_all()
    for p in _entries(cache_dir):  # the first trace's entries are the older ones...
        if str(traces[0]) in json.dumps(cache.decode(p.read_bytes())[1]["files"]):
            os.utime(p, (1, 1))
    load_trace(traces[0]).load_all()  # ...until read again: now the second's are
    load_trace(traces[2]).load_all()
    total = sum(p.stat().st_size for p in _entries(cache_dir))
    assert total <= one * 2.5
    kept = {(Path(e.window).parent.name, e.kind) for e in cache.entries()}
    assert {("t0", "events"), ("t2", "events")} <= kept and ("t1", "events") not in kept


def test_cache_command_lists_and_clears(cache_dir: Path, tmp_path: Path) -> None:
    from dynprof_nb.ui.cli import main

    traces = []
    for name in ("a", "b"):
        traces.append(tmp_path / name / SMALL.name)
        traces[-1].parent.mkdir()
        shutil.copy(SMALL, traces[-1])
        load_trace(traces[-1]).load_all()

    def run(*argv: str) -> str:
        r = subprocess.run(
            [sys.executable, "-m", "dynprof_nb.ui.cli", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    listed = run("cache")
    assert str(traces[0].resolve()) in listed and str(traces[1].resolve()) in listed
    assert "communication, events, kernels, memory, ops, steps" in listed
    assert "2 window(s)" in listed
    assert "removed 7 cached frame file(s)" in run("cache", "--clear", str(traces[0]))
    listed = run("cache")
    assert str(traces[0].resolve()) not in listed and "1 window(s)" in listed
    assert main(["cache", "--clear"]) == 0
    assert "is empty" in run("cache")


def test_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.ENV_DIR, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    trace = tmp_path / SMALL.name
    shutil.copy(SMALL, trace)
    load_trace(trace).load_all()
    assert not (tmp_path / "xdg").exists()
    monkeypatch.delenv(cache.ENV_DIR)
    assert cache.cache_dir() == tmp_path / "xdg" / "dynprof_nb"


def test_a_repaired_trace_warns_again_when_its_frames_come_from_the_cache(
    cache_dir: Path, tmp_path: Path
) -> None:
    from dynprof_nb.traces.errors import TraceRepairWarning

    trace = tmp_path / "cut.json"
    events = [
        {"name": "aten::mm", "ph": "X", "ts": 10 * i, "dur": 5, "pid": 1, "tid": 1}
        for i in range(50)
    ]
    trace.write_text(json.dumps({"traceEvents": events})[:-40])  # cut short mid-event
    first, second = _load(trace), _load(trace)
    _assert_same(first, second, "cut.json")
    assert [c for c, _ in second["warnings"]] == [TraceRepairWarning]
    assert "cut short" in second["warnings"][0][1]
    assert _entries(cache_dir)


def test_a_rank_file_that_is_a_symlink_loop_loads_as_with_the_cache_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder of ranks' traces where one is a symlink to itself (a careless ``ln -s``):
    the frame cache takes no part in what the load says, so the window loads as it does
    with the cache off, never with the cache's own error."""
    root = tmp_path / "ranks"
    root.mkdir()
    shutil.copy(SMALL, root / "rank0.pt.trace.json.gz")
    loop = root / "rank1.pt.trace.json"
    loop.symlink_to(loop)
    monkeypatch.setenv(cache.ENV_DIR, "off")
    ref = load_window(root).load_all()
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    w = load_window(root)
    assert w.ranks == ref.ranks
    for kind in ("ops", "steps", "kernels", "memory", "communication", "events"):
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)


def test_an_entry_is_read_into_memory_arrow_owns(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parquet's reader threads drop the entry's source when they finish with it. Were that a
    Python ``bytes``, dropping it takes the GIL, and a thread doing so while the interpreter
    exits aborts the whole process after its work is done ("terminate called without an active
    exception", exit -6: one script in about a hundred that loaded a window, seen in CI). So an
    entry is read into an Arrow buffer and never wrapped as a Python object."""
    import pyarrow as pa

    trace = tmp_path / SMALL.name
    shutil.copy(SMALL, trace)
    first = _load(trace)

    def wrapped(*args: Any, **kw: Any) -> Any:
        raise AssertionError("an entry's bytes were handed to Parquet as a Python object")

    monkeypatch.setattr(pa, "py_buffer", wrapped)
    before = dict(cache.counts)
    second = _load(trace)
    assert cache.counts["hits"] > before["hits"]
    assert cache.counts["misses"] == before["misses"]  # every frame came back from an entry
    _assert_same(first, second, SMALL.name)
