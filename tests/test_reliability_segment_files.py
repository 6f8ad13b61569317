"""Reliability matrix, the segment file under attack: ``truncate -s 0``, ``rm``, a file moved
over it, ``chmod 000``, done to the live ``/dev/shm`` segment while real training ranks run.

A mapping of a truncated file raises SIGBUS in whoever reads it, which used to kill every rank of
the job. Each rank here is a real ``tests/train_loop.py`` process: it must train to its last step
and exit 0, republish the segment (config kept), and a notebook's Job must drive the job again
(a window recorded on both ranks) without being told anything. See docs/reliability.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobutil import finish, spawn_rank, trace_steps, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment

pytestmark = pytest.mark.timeout(180)

STEPS = 2500


def _truncate(path: str) -> None:
    subprocess.run(["truncate", "-s", "0", path], check=True)


def _unlink(path: str) -> None:
    os.unlink(path)


def _replace(path: str) -> None:
    other = path + ".other"
    with open(other, "wb") as fh:  # a whole-size file of another program
        fh.write(os.urandom(segment.SEGMENT_BYTES))
    os.chmod(other, 0o600)
    os.rename(other, path)


def _chmod(path: str) -> None:
    os.chmod(path, 0)


@pytest.mark.parametrize("operation", [_truncate, _unlink, _replace, _chmod],
                         ids=["truncate", "unlink", "replace", "chmod000"])
def test_ranks_survive_any_operation_on_their_segment_file(tmp_path: Path, operation) -> None:
    job = unique_job("segfile")
    path = segment.segment_path(job)
    control = dynprof_nb.attach(job, create=True)
    procs = [spawn_rank(job, r, tmp_path, step_ms=1.0, steps=STEPS) for r in range(2)]
    try:
        wait_until(lambda: len(control.live_slots()) == 2
                   and all(s.step > 0 for s in control.live_slots()),
                   what="two ranks stepping", proc=procs[0])
        control.set(with_stack=True)  # a standing config the ranks must keep
        gen = control.generation
        wait_until(lambda: all(s.applied == gen for s in control.live_slots()),
                   what="the config applied")
        before = os.stat(path).st_ino
        operation(path)

        def republished() -> bool:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                return False
            if (operation is not _chmod and st.st_ino == before) or st.st_mode & 0o777 != 0o600:
                return False
            slots = control.live_slots()
            return len(slots) == 2 and all(s.step > 0 for s in slots)

        wait_until(republished, timeout=30, what="the ranks to republish their segment",
                   proc=procs[0])
        assert control.config.with_stack, "the republished segment lost the standing config"
        control.start("+150", "+160")  # a lead a loaded 2-core machine keeps at 1 ms a step
        first, last = control.config.start_step, control.config.stop_step
        control.wait(timeout=60, progress=False)
        found = control.windows()
        assert sorted(found[found.status == "complete"]["rank"]) == [0, 1], control.status()
        for window in found.path:
            assert trace_steps(window) == list(range(first, last + 1))
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, f"rank died ({proc.returncode}):\n{err[-3000:]}"
            assert f"steps={STEPS}" in out, out
    finally:
        for proc in procs:
            finish(proc)
        control.close()
        segment.unlink(job)


def _plant_garbage(job: str) -> str:
    """A 0600 segment with the right magic and layout and random content after them."""
    raw = bytearray(os.urandom(segment.SEGMENT_BYTES))
    raw[:16] = segment.MAGIC.to_bytes(8, "little") + segment.LAYOUT_VERSION.to_bytes(8, "little")
    path = segment.segment_path(job)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, raw)
    os.close(fd)
    return path


def _plant_old_layout(job: str) -> str:
    """A segment of layout 2 whose creator (this process) is alive."""
    raw = bytearray(segment.SEGMENT_BYTES)
    for index, value in ((segment.H_MAGIC, segment.MAGIC), (segment.H_LAYOUT, 2),
                         (segment.H_SLOTS, segment.SLOT_COUNT),
                         (segment.H_CREATOR, os.getpid()),
                         (segment.H_CREATOR_START, segment.pid_start_time(os.getpid()))):
        raw[index * 8:index * 8 + 8] = value.to_bytes(8, "little")
    path = segment.segment_path(job)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, raw)
    os.close(fd)
    return path


def test_damaged_segments_are_each_their_own_jobs_problem(tmp_path: Path) -> None:
    """Garbage, an older layout still in use, a short file, a FIFO and a symlink at segment
    names, beside a live job: jobs() lists every one (owner, what is wrong), attach of the live
    job works, attach of a damaged or unknown name is a JobError, and the CLI lists them and
    removes the caller's damaged ones (a symlink, never its target)."""
    live = unique_job("live")
    names = {kind: unique_job(kind) for kind in ("garbage", "oldlayout", "short", "fifo", "link")}
    paths = [_plant_garbage(names["garbage"]), _plant_old_layout(names["oldlayout"])]
    for kind in ("short", "fifo", "link"):
        paths.append(segment.segment_path(names[kind]))
    Path(paths[2]).write_bytes(b"not a segment")
    os.chmod(paths[2], 0o600)
    os.mkfifo(paths[3], 0o600)
    target = tmp_path / "target"
    target.write_text("secret")
    os.symlink(target, paths[4])
    rank = spawn_rank(live, 0, tmp_path, step_ms=2.0)
    try:
        wait_until(lambda: live in segment.list_jobs(), what="the live job", proc=rank)
        listed = dynprof_nb.jobs().set_index("job")
        assert listed.loc[live, "problem"] == "" and listed.loc[live, "owner"] == os.getuid()
        for kind, name in names.items():
            assert name in listed.index, f"{kind} segment not listed:\n{listed}"
            assert listed.loc[name, "problem"], f"{kind} segment listed as sound"
            assert listed.loc[name, "owner"] == os.getuid()
        assert "garbage" in listed.loc[names["garbage"], "problem"]
        assert "layout" in listed.loc[names["oldlayout"], "problem"]
        assert "symbolic link" in listed.loc[names["link"], "problem"]
        control = dynprof_nb.attach(live)
        wait_until(lambda: control.live_slots(), what="the live rank", proc=rank)
        control.set(with_stack=True)
        for name in (*names.values(), unique_job("unknown")):
            with pytest.raises(dynprof_nb.JobError):
                dynprof_nb.attach(name)
        control.close()
        cli = [sys.executable, "-m", "dynprof_nb.ui.cli", "jobs"]
        shown = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
        assert live in shown.stdout and f"damaged: {names['garbage']}" in shown.stdout
        removed = subprocess.run([*cli, "--remove-damaged"], capture_output=True, text=True,
                                 timeout=60)
        assert removed.returncode == 0, removed.stderr
        assert not any(os.path.lexists(p) for p in paths), removed.stdout
        assert target.read_text() == "secret"
        after = set(dynprof_nb.jobs().job)  # other tests' jobs may be listed too
        assert live in after and not after & set(names.values())
    finally:
        finish(rank)
        for path in paths:
            if os.path.lexists(path):
                os.unlink(path)
        segment.unlink(live)


def test_the_doorbell_cannot_be_shrunk_and_rings_only_with_its_token() -> None:
    """The word step() reads: nobody can truncate its memfd (not through /proc either), and a
    writer rings it only when the slot's token matches what it holds."""
    bell = segment.Doorbell(unique_job("bell"))
    try:
        for fd in (bell.fd, os.open(f"/proc/self/fd/{bell.fd}", os.O_RDWR)):
            with pytest.raises(PermissionError):
                os.ftruncate(fd, 0)
        view = segment.SlotView(index=0, pid=os.getpid(), rank=0, step=0, state="idle",
                                start=-1, stop=-1, applied=0, heartbeat_ns=0,
                                pid_start=segment.pid_start_time(os.getpid()), error="",
                                error_generation=0, root="", window="", bell_fd=bell.fd,
                                bell_token=bell.token + 1)
        assert not segment.ring(view, 7) and bell.words[segment.BELL_GEN] == 0
        view.bell_token = bell.token
        assert segment.ring(view, 7) and bell.words[segment.BELL_GEN] == 7
    finally:
        bell.close()
