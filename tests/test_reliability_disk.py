"""Reliability matrix, bad output paths: not writable, disk full, a symlink into another user's
directory. The window must fail cleanly with the reason in the rank's status, training must go
on, and no partial window may be listed as complete. See docs/reliability.md.

Permission checks are only real for a process without root's capabilities, so the "not
writable" and "another user" cases run the training rank under ``setpriv`` with every capability
dropped: same uid (so it shares the controller's per-user segment), but the kernel checks file
modes as for any user. "Another user's directory" is one owned by uid 12345, mode 0700. The disk
is made full for real: a 256 KiB tmpfs mounted by the test (as root); where mounting is not
permitted, the rank gets an ``RLIMIT_FSIZE`` instead, which makes the same writes fail (EFBIG
instead of ENOSPC).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from jobutil import TRAIN_LOOP, finish, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment

pytestmark = pytest.mark.timeout(180)

OTHER_UID = 12345  # "another user": any uid that is not the rank's
SETPRIV = shutil.which("setpriv")


@pytest.fixture
def sandbox() -> Iterator[Path]:
    """A directory every user can traverse (pytest's tmp_path is 0700 root)."""
    if os.getuid() != 0:
        pytest.fail("these tests need root: they make another user's directory and a tmpfs")
    d = Path(tempfile.mkdtemp(prefix="dynprof-rel-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def spawn(job: str, out: Path, *, unprivileged: bool = False, fsize: int | None = None,
          step_ms: float = 3) -> subprocess.Popen:
    """A real training rank (tests/train_loop.py); ``unprivileged`` drops every capability."""
    def preexec() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    cmd = [sys.executable, str(TRAIN_LOOP), "--job", job, "--rank", "0", "--out", str(out),
           "--step-ms", str(step_ms), "--backend", "builtin"]
    if unprivileged:
        assert SETPRIV, "setpriv (util-linux) is needed to drop root's capabilities"
        cmd = [SETPRIV, "--bounding-set", "-all", "--inh-caps", "-all", "--", *cmd]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=preexec)


@contextmanager
def job_and_rank(job: str, out: Path, **spawn_kw: object
                 ) -> Iterator[tuple[dynprof_nb.Job, subprocess.Popen]]:
    """The job's controller and its one rank (``spawn``); afterwards the rank is killed if it
    still runs and the job removed."""
    control = dynprof_nb.attach(job, create=True)
    rank = spawn(job, out, **spawn_kw)
    try:
        yield control, rank
    finally:
        if rank.poll() is None:
            rank.kill()
        control.close()
        segment.unlink(job)


def _started(control: dynprof_nb.Job) -> bool:
    live = control.live_slots()
    return bool(live) and live[0].step > 0


def _run_window(control: dynprof_nb.Job, **changes: object) -> str:
    """Ask for a window and return the error the rank reports once it has passed it."""
    wait_until(lambda: _started(control), what="the rank to step")
    gen = control.start("+100", "+103", **changes)  # margin: a loaded machine is slow
    stop = control.config.stop_step
    wait_until(lambda: control.status().generation[0] == gen
               and control.status().step[0] > stop and control.status().state[0] == "idle",
               timeout=60, what="the rank to pass the window")
    return control.status().error[0]


def _assert_failed_cleanly(control: dynprof_nb.Job, rank: subprocess.Popen) -> None:
    listed = control.windows()
    assert not (listed.status == "complete").any(), listed  # nothing partial listed complete
    assert bool(control.status().alive[0]) and rank.poll() is None  # training goes on
    out, err = finish(rank)
    assert int(out.split("=")[1]) > 0 and "Traceback" not in err


def test_output_path_not_writable_fails_the_window_not_the_job(sandbox):
    job = unique_job("rdonly")
    locked = sandbox / "locked"
    locked.mkdir(mode=0o755)
    os.chown(locked, OTHER_UID, OTHER_UID)  # readable, not writable, for the rank
    with job_and_rank(job, locked / "windows", unprivileged=True) as (control, rank):
        error = _run_window(control)
        assert "could not start" in error and "Training goes on" in error
        assert "Permission denied" in error or "not writable" in error, error
        assert not any(locked.rglob("*"))  # nothing written, not even a temporary dir
        _assert_failed_cleanly(control, rank)


@pytest.mark.parametrize("unprivileged", [False, True], ids=["root", "unprivileged"])
def test_prof_path_symlink_into_another_users_directory_is_refused(sandbox, tmp_path,
                                                                   unprivileged):
    """As root the link would be followed and windows written into someone else's directory;
    without root's powers the write would fail half-way. Both are refused up front."""
    theirs = sandbox / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    link = sandbox / "prof"
    link.symlink_to(theirs)
    job = unique_job("link")
    with job_and_rank(job, tmp_path, unprivileged=unprivileged) as (control, rank):
        error = _run_window(control, prof_path=str(link / "windows"))
        assert "could not start" in error and "symlink" in error, error
        assert f"uid {OTHER_UID}" in error
        assert not any(theirs.rglob("*")), "files were written into the other user's directory"
        _assert_failed_cleanly(control, rank)


def test_symlink_to_a_directory_you_own_is_followed(tmp_path):
    """The refusal above is about other users' directories, not symlinks as such."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    job = unique_job("ownlink")
    control = dynprof_nb.attach(job, create=True)
    monitor = dynprof_nb.Monitor(job=job, rank=0, output_path=tmp_path / "unused",
                                 backend="builtin")
    control.start(2, 3, prof_path=str(tmp_path / "link"))
    for _ in range(5):
        monitor.step()
    monitor.close()
    assert (real / "rank0_start2_stop3" / "window.json").exists() and monitor.last_error == ""
    control.close()
    segment.unlink(job)


@pytest.fixture
def small_disk(sandbox) -> Iterator[tuple[Path, int | None]]:
    """(directory, fsize limit): a real 256 KiB tmpfs, or the RLIMIT_FSIZE fallback."""
    mnt = sandbox / "disk"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs",
                              str(mnt)], capture_output=True).returncode == 0
    try:
        yield mnt, None if mounted else 16 * 1024
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt: Path, leave: int) -> Path:
    """Fill the tmpfs until at most ``leave`` bytes are free (a real full disk)."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    if leave > free:
        os.truncate(filler, max(0, filler.stat().st_size - (leave - free)))
    return filler


@pytest.mark.parametrize("full_at", ["save", "start"])
def test_disk_full_fails_the_window_cleanly_and_training_goes_on(small_disk, full_at):
    mnt, fsize = small_disk
    job = unique_job("full")
    if fsize is None:
        filler = _fill(mnt, leave=24 * 1024 if full_at == "save" else 0)
    else:
        filler, fsize = None, fsize if full_at == "save" else 0
    with job_and_rank(job, mnt, fsize=fsize, step_ms=2) as (control, rank):
        wait_until(lambda: _started(control), what="the rank to step")
        # with_stack makes a trace of a few hundred KB: more than the disk has left
        gen = control.start("+100", "+215", with_stack=True)
        wait_until(lambda: control.status().error[0], timeout=60, what="the failure report")
        wait_until(lambda: control.status().state[0] == "idle"
                   and control.status().generation[0] == gen, timeout=60)
        error = control.status().error[0]
        reason = "No space left on device" if fsize is None else "File too large"
        assert reason in error, error
        if full_at == "save":
            assert "could not be written" in error and "kept as incomplete" in error
        else:
            assert "could not start" in error
        listed = control.windows()
        assert not (listed.status == "complete").any(), listed
        if full_at == "save":
            assert list(listed.status) == ["incomplete"], listed  # not "recording" forever
        assert rank.poll() is None and bool(control.status().alive[0])

        # free the space: the next window works, the job never noticed
        if filler is not None:
            filler.unlink()
            control.start("+100", "+103")
            control.wait(timeout=60, progress=False)
            listed = control.windows()
            assert (listed.status == "complete").sum() == 1
        out, err = finish(rank)
        assert int(out.split("=")[1]) > 0 and "Traceback" not in err
