"""Transient directories named for their process (dynprof_nb.traces.owner): a later load
removes those whose process has ended, and nothing else: never a running load's, another
host's, another user's, a symlink's target, or a name that merely looks like one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dynprof_nb.traces import owner

PREFIX = "dynprof_nb-frames-"


def _ended_pid() -> int:
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    return gone.pid


def test_a_name_tells_whether_its_process_has_ended() -> None:
    dead = _ended_pid()
    assert owner.ended(f"{owner.owner_tag()}-x") is False  # this process
    assert owner.ended(f"{owner.HOST}-{dead}-x") is True
    for name in (f"otherhost-{dead}-x", f"{owner.HOST}-{dead}", f"{owner.HOST}--x",
                 f"{owner.HOST}-0-x", f"{owner.HOST}-{'٣'}-x", f"{owner.HOST}-+5-x",
                 f"{owner.HOST}-{2**31}-x", f"{owner.HOST}-{10**20}-x", ""):
        assert owner.ended(name) is None, name  # cannot tell: the caller's age rule decides


def test_a_killed_process_its_parent_has_not_reaped_yet_has_ended(tmp_path: Path) -> None:
    """A worker SIGKILLed (the OOM killer) stays a zombie until its pool's manager thread waits
    on it, later on a loaded machine: its scratch is removed now, not left as a live load's.
    (CI saw a killed worker's raw parts left when ``os.kill(pid, 0)`` alone judged it.)"""
    zombie = subprocess.Popen([sys.executable, "-c", "import os; os._exit(0)"])
    try:
        stat = Path(f"/proc/{zombie.pid}/stat")
        while stat.read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z":  # it exits; none reaps
            os.sched_yield()
        assert owner.ended(f"{owner.HOST}-{zombie.pid}-x") is True
        scratch = tmp_path / f"{PREFIX}{owner.HOST}-{zombie.pid}-a"
        scratch.mkdir()
        assert owner.sweep(tmp_path, PREFIX) == 1 and not scratch.exists()
    finally:
        zombie.wait()


def test_sweep_removes_only_ended_processes_directories_of_ours(tmp_path: Path) -> None:
    dead = _ended_pid()
    gone = tmp_path / f"{PREFIX}{owner.HOST}-{dead}-a"
    (gone / "sub").mkdir(parents=True)
    (gone / "sub" / "frame").write_bytes(b"x" * 1000)
    live = tmp_path / f"{PREFIX}{owner.owner_tag()}-b"
    live.mkdir()
    elsewhere = tmp_path / f"{PREFIX}otherhost-{dead}-c"
    elsewhere.mkdir()
    other_prefix = tmp_path / f"dynprof_nb-parts-{owner.HOST}-{dead}-d"
    other_prefix.mkdir()
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("mine")
    link = tmp_path / f"{PREFIX}{owner.HOST}-{dead}-e"
    link.symlink_to(precious)  # planted: a link to a directory of ours
    theirs = tmp_path / f"{PREFIX}{owner.HOST}-{dead}-f"
    theirs.mkdir()
    if os.geteuid() == 0:
        os.chown(theirs, 65534, 65534)  # another user's (nobody's)
    assert owner.sweep(tmp_path, PREFIX) == (1 if os.geteuid() == 0 else 2)
    assert not gone.exists()
    assert live.is_dir() and elsewhere.is_dir() and other_prefix.is_dir()
    assert link.is_symlink() and (precious / "keep").read_text() == "mine"
    assert theirs.is_dir() == (os.geteuid() == 0)
    assert owner.sweep(tmp_path / "missing", PREFIX) == 0  # no directory: nothing, no error
