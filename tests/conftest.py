"""Shared test helpers: where the real fixture files live, and small trace builders."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from testdata import REPO, fixtures_dir, write_builtin_window  # noqa: F401 (re-exported)

from dynprof_nb.contract import segment
from dynprof_nb.contract.shared_layout import StackDirError, stack_dir

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


def child_processes() -> dict[int, str]:
    """This process's live children (zombies, already dead, left out): ``{pid: command}``,
    read from /proc (no psutil; /proc/PID/task/TID/children is not in every kernel)."""
    me, found = os.getpid(), {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            if int(fields[1]) != me or fields[0] == b"Z":
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                found[int(entry)] = fh.read().replace(b"\0", b" ").decode(errors="replace")[:200]
        except (OSError, IndexError, ValueError):
            continue  # gone while we looked
    return found


LEFTOVER_GRACE_S = 10.0  # a process killed at the end may take this long to be gone


@pytest.fixture(scope="module", autouse=True)
def no_process_outlives_its_module() -> Iterator[None]:
    """Fail a test module that leaves a child process of this run running (a training rank, a
    server, a script): what a module's tests and fixtures start, they end. Checked once the
    module's own fixtures are torn down (this one is set up before them, so it ends after
    them), not after each test: a test may rightly add to a module's fixture (a node joins
    the module's cluster, a killed worker is restarted), and killing that would break every
    later test of the module. Processes of session fixtures were started before the
    snapshot. One that is still going away is waited for (a fact, bounded); the ones left
    are killed, so that one module's leftover does not fail the next. Then the files of this
    run's jobs left in the stacks directory (:func:`leftover_stack_files`) fail it too."""
    before = set(child_processes())
    yield
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while True:
        left = {p: c for p, c in child_processes().items() if p not in before}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if left:
        pytest.fail(f"{len(left)} process(es) started by this module's tests still run after "
                    "them: " + "; ".join(f"pid {p}: {c}" for p, c in left.items())
                    + ". End what a test starts (jobutil.finish, kill_process).", pytrace=False)
    files = leftover_stack_files()
    for path in files:
        path.unlink(missing_ok=True)  # so that one module's leftover does not fail the next
    if files:
        pytest.fail(f"{len(files)} file(s) of this module's jobs remain in {files[0].parent}: "
                    + ", ".join(p.name for p in files) + ". A job's kept stacks go with its "
                    "segment: end every rank and close every handle of the job.", pytrace=False)


def leftover_stack_files() -> list[Path]:
    """Files in the user's stacks directory (``/dev/shm/dynprof_nb.<uid>/stacks``) named after
    a job of this run (:func:`jobutil.unique_job` puts this process's pid in each name), once
    the module's processes are gone: the stacks kept at a stall, a rank's side file. Only this
    run's names, so the runs of other people under the same uid never count."""
    try:
        folder = stack_dir(create=False)
    except (OSError, StackDirError):
        return []
    mark = f"-{os.getpid()}-"
    return sorted(p for p in folder.iterdir() if mark in p.name)


@pytest.fixture(scope="session")
def fixtures() -> Path:
    d = fixtures_dir()
    assert d.is_dir(), f"test data not found at {d}"
    return d


# -- the magics, for the control and UI tests that type them ---------------------------------


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    """One IPython shell per module with ``%load_ext dynprof_nb``, as a notebook has."""
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "dynprof_nb")
    return shell


@pytest.fixture
def magics(ip: InteractiveShell) -> Iterator[object]:
    """The shell's ``DynprofMagics``, detached from any job before the test, and its job
    closed after it (a handle left open would keep a prepared job's segment)."""
    instance = ip.magics_manager.registry["DynprofMagics"]
    instance.job = None
    yield instance
    if instance.job is not None:
        instance.job.close()
    instance.job = None
