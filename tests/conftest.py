"""Shared test helpers: where the real fixture files live, and small trace builders."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from testdata import REPO, fixtures_dir, write_builtin_window  # noqa: F401 (re-exported)

from dynprof_nb import segment

# The frame cache (dynprof_nb.traces.cache) is off for the suite and every process its tests
# start: a reader test that loads a fixture an earlier test loaded would otherwise read that
# load's frames back and test nothing (two such tests were fooled while it was on), and a user's
# ~/.cache is never written. tests/traces/test_cache.py points it at a directory of each test's
# own, and loads every frame of every fixture through it.
os.environ["DYNPROF_NB_CACHE"] = "off"


@pytest.fixture
def frame_cache_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test that compares two reader paths over the same files: with the cache on, the
    second load would read the first one's frames back and compare a path with itself."""
    monkeypatch.setenv("DYNPROF_NB_CACHE", "off")


def leftover_segments(since_ns: int, before: set[str]) -> list[str]:
    """Segments of this uid created since ``since_ns`` (and not there before) that outlived
    every process of their job: what a finished job must not leave in /dev/shm. This process
    does not count as alive (the session is over). Read without attaching as a user would:
    nothing is reclaimed or removed by looking."""
    found = []
    for name in segment.list_jobs():
        if name in before:
            continue
        try:
            fd = segment._shm_open(segment.segment_name(name))
        except (FileNotFoundError, segment.SegmentError):
            continue
        if os.fstat(fd).st_size < segment.SEGMENT_BYTES:
            os.close(fd)
            found.append(f"{name} (never initialised)")
            continue
        seg = segment.Segment(name, fd, created=False)
        try:
            if seg.words[segment.H_CREATED] < since_ns:
                continue
            if not [p for p in seg.live_pids() if p != os.getpid()]:
                slots = ", ".join(f"rank {s.rank} pid {s.pid} {s.state}" for s in seg.slots())
                found.append(f"{name} (generation {seg.generation}; creator pid "
                             f"{seg.words[segment.H_CREATOR]}; {slots or 'no rank'})")
        finally:
            seg.close(tidy=False)
    return found


@pytest.fixture(scope="session", autouse=True)
def no_segment_outlives_its_job() -> Iterator[None]:
    """Fail the run if a segment created during it remains after all its processes are gone
    (the last process of a finished job removes it; tests clean up what they leave). Segments
    are told apart by creation time, so two test runs at once under one uid can see each
    other's leftovers."""
    since, before = time.time_ns(), set(segment.list_jobs())
    yield
    left = leftover_segments(since, before)
    if left:
        pytest.fail(f"{len(left)} segment(s) in /dev/shm outlived their job: " + "; ".join(left)
                    + ". The last process leaving a finished job should remove it; a test that "
                    "kills its processes should unlink it.", pytrace=False)


@pytest.fixture(scope="session")
def fixtures() -> Path:
    d = fixtures_dir()
    assert d.is_dir(), f"test data not found at {d}"
    return d
