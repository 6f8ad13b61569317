"""Reliability matrix, locks on a shared machine: another local user (a real uid 65534 process)
plants symlinks at every lock path dynprof_nb uses or used, holds locks there, and squats the
private lock directory's name. Nothing is followed, nothing waits in silence: the agent's
election and the file-mode relay's lock work, or say exactly what is in the way and whose it
is. See docs/reliability.md and dynprof_nb/locks.py.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest
from jobutil import unique_job, wait_until

from dynprof_nb import locks
from dynprof_nb.cluster.node import ElectionLock
from dynprof_nb.control.relay import relay_lock

NOBODY = 65534
pytestmark = pytest.mark.timeout(120)

# What the other user runs: plant each path as a symlink to a file it wants us to create, or
# as a file it holds an flock on, then wait to be killed.
SQUATTER = textwrap.dedent("""
    import fcntl, os, sys, time
    held = []
    for kind, path, target in zip(sys.argv[1::3], sys.argv[2::3], sys.argv[3::3]):
        if kind == "link":
            os.symlink(target, path)
        elif kind == "dir":
            os.mkdir(path, 0o700)
        else:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(fd, fcntl.LOCK_EX)
            held.append(fd)
    print("ready", flush=True)
    time.sleep(600)
""")


def _as_nobody(*plants: tuple[str, str, str]) -> subprocess.Popen:
    if os.getuid() != 0:
        pytest.fail("this test needs root to run a process as another user")
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to run a process as another user"
    args = [a for plant in plants for a in plant]
    proc = subprocess.Popen([setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}",
                             "--clear-groups", sys.executable, "-c", SQUATTER, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "ready", proc.stderr.read()
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=30)


def test_planted_links_and_held_locks_at_every_lock_path_are_neither_followed_nor_waited_on():
    """uid 65534 plants symlinks at the agent's and relay's old shared lock paths and holds
    flocks on files at others; the agent election and the relay lock still work at once,
    in the private directory, and no link target is created."""
    job = unique_job("locks")
    uid = os.getuid()
    bait = Path(tempfile.mkdtemp(prefix="dynprof-bait-"))
    os.chmod(bait, 0o777)
    shm, tmp = "/dev/shm", tempfile.gettempdir()
    old_paths = [f"{shm}/dynprof_nb-agent.{uid}.lock", f"{tmp}/dynprof_nb.{uid}.{job}.relay.lock"]
    held = [f"{shm}/dynprof_nb-agent.{uid}.held", f"{tmp}/dynprof_nb.{uid}.{job}.held"]
    for path in old_paths + held:
        if os.path.lexists(path):
            os.unlink(path)
    squatter = _as_nobody(*[("link", p, str(bait / f"made{i}")) for i, p in
                            enumerate(old_paths)], *[("hold", p, "-") for p in held])
    try:
        election = ElectionLock()
        assert election.try_acquire(), election.why
        assert Path(election.path).parent == Path(locks.private_dir())
        with relay_lock(job, threading.Event()) as acquired:
            assert acquired
        election.release()
        assert not list(bait.iterdir()), "a planted symlink was followed"
        private = os.lstat(locks.private_dir())
        assert private.st_uid == uid and private.st_mode & 0o777 == 0o700
    finally:
        _stop(squatter)
        for path in old_paths + held:
            if os.path.lexists(path):
                os.unlink(path)
        shutil.rmtree(bait)


@pytest.mark.parametrize("kind", ["link", "dir"])
def test_a_squatted_private_lock_directory_is_refused_and_reported_with_its_owner(kind):
    """The one name another user could take first, the private directory's, in a sticky
    world-writable directory like /dev/shm: a symlink or a directory of theirs is never used.
    private_dir() then makes (once, recorded for the user's other processes) a private
    directory with an unguessable name instead; an election pointed at the squatted name
    says so instead of waiting."""
    base = Path(tempfile.mkdtemp(prefix="dynprof-shm-"))
    os.chmod(base, 0o1777)
    name = base / f"dynprof_nb.{os.getuid()}"
    target = base / "elsewhere"
    squatter = _as_nobody((kind, str(name), str(target)))
    try:
        with pytest.raises(locks.LockError, match=str(NOBODY) if kind == "dir" else "symlink"):
            locks._open_dir(str(name))
        private = locks.private_dir(str(base))
        assert Path(private).parent == base and Path(private) != name
        assert Path(private).name.startswith(f"dynprof_nb-{os.getuid()}-")
        st = os.lstat(private)
        assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
        locks._KNOWN.clear()  # as another process of the user: it finds the same one
        assert locks.private_dir(str(base)) == private
        with open(locks._record_path(str(base))) as fh:
            assert fh.read().strip() == Path(private).name
        election = ElectionLock(str(name))
        assert not election.try_acquire()
        assert str(name) in election.why and "refusing" in election.why
        assert not target.exists(), "a planted symlink was followed"
    finally:
        _stop(squatter)
        shutil.rmtree(base)


def test_a_standby_names_the_process_that_holds_the_lock(tmp_path):
    """Two agents of one user on a node: the standby's ``why`` names the acting one's pid."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from dynprof_nb.cluster.node import ElectionLock; "
         f"assert ElectionLock({str(tmp_path)!r}).try_acquire(); print('held', flush=True); "
         "time.sleep(600)"], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout.readline().strip() == "held"
        standby = ElectionLock(str(tmp_path))
        assert not standby.try_acquire()
        assert f"pid {holder.pid}" in standby.why, standby.why
    finally:
        holder.kill()
        holder.wait()
    wait_until(lambda: ElectionLock(str(tmp_path)).try_acquire(), what="the handover")


@pytest.mark.parametrize("attack", ["planted_links", "held_lock"])
def test_a_record_in_a_home_another_user_can_write_is_not_trusted(attack, monkeypatch, caplog):
    """A victim whose home another user can write (a shared /tmp home): uid 65534 squats the
    private directory's name, makes ``~/.cache/dynprof_nb`` its own, and there plants a record
    naming a directory of its own, a symlink at the record's temporary name pointing at a file
    of the victim's, and a symlink in the base with the victim's unguessable prefix pointing
    into a directory of the victim's; or holds the record's lock forever. The victim gets a
    private directory of its own at once, its file is untouched, nothing of the attacker's is
    used, and the log says why the record is not used."""
    top = Path(tempfile.mkdtemp(prefix="dynprof-home-"))
    os.chmod(top, 0o755)
    base, home, theirs = top / "shm", top / "home", top / "victim-private"
    base.mkdir(mode=0o1777)
    os.chmod(base, 0o1777)
    home.mkdir()
    os.chmod(home, 0o777)  # a home another user can write
    theirs.mkdir(mode=0o700)
    victim_file = top / "victim-notes.txt"
    victim_file.write_text("the victim's own file\n")
    uid = os.getuid()
    monkeypatch.setattr(locks, "_home", lambda: str(home))
    record = locks._record_name(str(base))
    cache = home / ".cache" / "dynprof_nb"
    attacker_dir = f"dynprof_nb-{uid}-{'f' * 32}"
    plant = textwrap.dedent(f"""
        import os
        os.mkdir({str(base / f"dynprof_nb.{uid}")!r}, 0o700)
        os.makedirs({str(cache)!r}, 0o777)
        os.chmod({str(cache)!r}, 0o777)
        os.mkdir({str(base / attacker_dir)!r}, 0o700)
        with open({str(cache / record)!r}, "w") as fh:
            fh.write({attacker_dir!r} + "\\n")
        os.symlink({str(theirs)!r}, {str(base / f"dynprof_nb-{uid}-{'0' * 32}")!r})
        if {attack == "planted_links"}:  # the victim's pid is no secret
            os.symlink({str(victim_file)!r}, {str(cache / record)!r} + ".{os.getpid()}.tmp")
    """)
    subprocess.run([shutil.which("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}",
                    "--clear-groups", sys.executable, "-c", plant], check=True, timeout=60)
    squatter = (_as_nobody(("file", str(cache / f"{record}.lock"), "-"))
                if attack == "held_lock" else None)
    locks._KNOWN.clear()
    try:
        got: list[str] = []
        caller = threading.Thread(target=lambda: got.append(locks.private_dir(str(base))),
                                  daemon=True)
        with caplog.at_level("WARNING", logger="dynprof_nb"):
            caller.start()
            caller.join(60)
        assert got, "private_dir() waited on a lock another user holds"
        private = Path(got[0])
        st = os.lstat(private)
        assert private.parent == base and private.name.startswith(f"dynprof_nb-{uid}-")
        assert private.name != attacker_dir and not private.is_symlink()
        assert st.st_uid == uid and stat.S_IMODE(st.st_mode) == 0o700
        assert victim_file.read_text() == "the victim's own file\n", "a planted link was followed"
        assert not list(theirs.iterdir())
        said = caplog.text
        assert f"{cache} belongs to uid {NOBODY}" in said and "not recorded" in said, said
        locks._KNOWN.clear()  # another process of the victim finds the same directory
        assert locks.private_dir(str(base)) == str(private)
    finally:
        if squatter is not None:
            _stop(squatter)
        locks._KNOWN.clear()
        shutil.rmtree(top)


def _relay_files(job: str) -> list[str]:
    return sorted(n for n in os.listdir(locks.private_dir()) if n.startswith(f"relay.{job}."))


def test_a_relay_leaving_hands_over_and_leaves_no_file_behind():
    """The elected relay removes its lock file as it leaves (under the lock); the standby that
    waited on the removed file locks a fresh one, which then shuts out a third process; once
    the standby leaves too, nothing of the job is left in the private directory (hundreds of
    these files piled up, one per job ever run)."""
    job = unique_job("handover")
    first, second = threading.Event(), threading.Event()
    stop_first, stop_second = threading.Event(), threading.Event()

    def relay(held: threading.Event, stop: threading.Event) -> None:
        with relay_lock(job, stop, check=0.01) as acquired:
            assert acquired
            held.set()
            stop.wait()

    a = threading.Thread(target=relay, args=(first, stop_first))
    a.start()
    assert first.wait(5)
    b = threading.Thread(target=relay, args=(second, stop_second))
    b.start()
    assert not second.wait(0.2)  # standby while the first holds it
    stop_first.set()
    a.join(5)
    assert second.wait(5), "the standby never took over"
    assert _relay_files(job) == [f"relay.{job}.lock"]  # the standby's fresh file, named
    assert locks.lock_fd(f"relay.{job}.lock", blocking=False) is None  # and really held
    stop_second.set()
    b.join(5)
    assert _relay_files(job) == []


def test_a_state_file_removed_under_a_reader_is_reopened_not_forked():
    """The node's relay state goes with the job's segment; a process that opened it before
    must not keep locking the removed file while a newcomer locks a new one (two processes
    would then both relay the same edit)."""
    job = unique_job("state")
    name = locks.job_lock_name(job, "state")
    early = locks.open_lock(name)
    try:
        locks.forget_job(job)
        assert _relay_files(job) == []
        assert not locks.still_named(early, name)
        late = locks.lock_fd(name)
        try:
            assert locks.still_named(late, name)
            assert locks.lock_fd(name, blocking=False) is None  # the name is the locked file
        finally:
            os.close(late)
    finally:
        os.close(early)
        locks.forget_job(job)
    assert _relay_files(job) == []
