"""A full cache disk (a real 64 KiB tmpfs as the cache directory): an out-of-core load falls back
to memory, or, when the events would not fit in memory either, refuses naming the directory
and the size needed; a frame-cache write leaves the frame loaded. Never a raw OSError."""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from testdata import REPO

from dynprof_nb.traces import cache, load_trace, load_window
from dynprof_nb.traces.formats.chrome import out_of_core as ooc
from dynprof_nb.traces.formats.chrome import streamed
from dynprof_nb.traces.formats.chrome import summaries as stream

SMALL = REPO / "tests" / "data" / "kineto" / "hta__timeline_analysis__sampled_rank-0.json.gz"


@contextmanager
def _tmpfs(d: Path, options: str) -> Iterator[Path]:
    """A 64 KiB tmpfs of mode 0700 mounted at ``d`` (root only), with ``options`` besides."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"{options}size=64k,mode=0700", "tmpfs",
                    str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d = tmp_path / "small"
    d.mkdir()
    with _tmpfs(d, ""):
        yield d


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "t" / SMALL.name
    p.parent.mkdir()
    shutil.copy(SMALL, p)
    return p


def test_out_of_core_on_a_full_disk_falls_back_to_memory(
    trace: Path, full_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.ENV_DIR, str(full_disk))
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        events = load_trace(trace).events
    assert isinstance(events, pd.DataFrame) and len(events) > 0  # in memory, whole
    text = " ".join(str(w.message) for w in said)
    assert "do not fit in" in text and str(full_disk) in text and "into memory instead" in text
    assert not any(full_disk.joinpath("events-parts").iterdir())  # nothing half-written left
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "0")
    assert len(load_trace(trace).events) == len(events)


def test_out_of_core_that_fits_nowhere_says_where_and_how_much(
    trace: Path, full_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.ENV_DIR, str(full_disk))
    monkeypatch.delenv("DYNPROF_NB_OUT_OF_CORE", raising=False)
    monkeypatch.setattr(streamed, "too_big", lambda paths: True)  # nor would it fit in memory
    with pytest.raises(ooc.DiskFull) as info:
        _ = load_trace(trace).events
    message = str(info.value)
    assert not isinstance(info.value, OSError)
    assert str(full_disk / "events-parts") in message and "MB free there" in message
    assert f"{trace.stat().st_size / 1e6:.1f} MB" in message and "DYNPROF_NB_CACHE" in message


def test_a_frame_cache_write_on_a_full_disk_keeps_the_frame(
    trace: Path, full_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.ENV_DIR, str(full_disk))
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "0")
    filler = full_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:  # the rest of the disk
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        events = load_trace(trace).events
    assert isinstance(events, pd.DataFrame) and len(events) > 0
    assert any("is full" in str(w.message) for w in said), [str(w.message) for w in said]


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A cache directory of ours that cannot be written: a read-only tmpfs for root (whom
    permissions do not stop), else a directory of mode 0500."""
    d = tmp_path / "read-only"
    d.mkdir(mode=0o700)
    if os.geteuid() == 0:
        with _tmpfs(d, "ro,"):
            yield d
    else:
        d.chmod(0o500)
        try:
            yield d
        finally:
            d.chmod(0o700)


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_read_only_cache_directory_still_loads_every_frame(
    trace: Path, read_only_dir: Path, ranks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache directory that cannot be written (a read-only mount, a chmod) caches nothing,
    and the trace (or a window of ``ranks`` copies of it) loads as with the cache off."""
    for r in range(1, ranks):
        shutil.copy(trace, trace.parent / f"rank{r}.pt.trace.json.gz")
    if ranks > 1:
        trace.rename(trace.parent / "rank0.pt.trace.json.gz")

    def load() -> object:
        return load_window(trace.parent) if ranks > 1 else load_trace(trace)

    monkeypatch.delenv(stream.STREAM_ENV, raising=False)
    monkeypatch.setenv(cache.ENV_DIR, "off")
    ref = load().load_all()
    monkeypatch.setenv(cache.ENV_DIR, str(read_only_dir))
    w = load()
    for kind in ("ops", "steps", "kernels", "memory", "communication", "events"):
        pd.testing.assert_frame_equal(w.frame(kind), ref.frame(kind), check_exact=True)
    assert str(w.summary()) == str(ref.summary())
