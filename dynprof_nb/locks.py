"""Lock files nobody else can plant, follow or hold.

A lock file at a predictable name in a shared directory (``/tmp``, ``/dev/shm``) is an attack
surface: another local user can put a symlink there (root's agent then creates a file wherever
it points) or create the file and hold an ``flock`` on it (every agent waits in standby forever,
the file-mode relay never runs, and nobody is told). So every lock of dynprof_nb lives in one
private directory per user and node, ``/dev/shm/dynprof_nb.<uid>/`` (``/dev/shm`` because
what a lock elects is per node: the ranks and agents that share that ``/dev/shm``):

* created 0700; a directory already there is used only if it is a real directory (not a
  link), owned by us, and not open to others; anything else is a :class:`LockError` naming
  the path and its owner, never silently worked around;
* lock files are opened relative to that directory's descriptor with ``O_NOFOLLOW``;
* a lock someone holds is described (:func:`holder`: pid, uid and command from
  ``/proc/locks``), so a standby says whom it waits for.

The same directory holds the user's job segments and stack dumps (:mod:`.contract.segment`,
:func:`dynprof_nb.contract.shared_layout.stack_dir`): a name in ``/dev/shm`` itself is one another
user can create first. The directory's own name is predictable, so another user can take it
first too (a directory or a symlink of theirs, which this user cannot remove). Then a
**private directory with an unguessable name** is made beside it
(``dynprof_nb-<uid>-<128 random bits>``, 0700) and its name recorded in the user's home
directory (``~/.cache/dynprof_nb/``, from the password database, not ``$HOME``, so every
process of the user reads the same record), one record per host, ``/dev/shm`` device and base
directory, so every process of the user on that node finds the same one and the planted name
costs the victim nothing. The record is trusted only in a directory of ours that no one else
can write (a home in a shared ``/tmp`` is one another user can): else, or with no home, the
private directory is found by listing the base for this user's unguessable names, since no
one else can make a directory that is ours. ``$XDG_RUNTIME_DIR`` is not used as the base: it
is set in some of a user's processes and not in others (a SLURM step, a service-started
Jupyter), is removed when the user's last login session ends (under a ``nohup`` job), and is
not the node-private ``/dev/shm`` a node agent elects in.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import pwd
import secrets
import socket
import stat
import tempfile
import threading

log = logging.getLogger("dynprof_nb")

SHM_DIR = "/dev/shm"
PREFIX = "dynprof_nb"


class LockError(RuntimeError):
    """The private lock directory is not ours: someone planted it (or a link) first."""


_KNOWN: dict[tuple[str, int], str] = {}  # (base, uid) -> the private directory in use
_KNOWN_LOCK = threading.Lock()


def private_dir(base: str = SHM_DIR) -> str:
    """This user's private directory in ``base``: ``base/dynprof_nb.<uid>``, created 0700 if
    missing, or, when another user took that name first, the recorded private directory with
    an unguessable name (see the module docstring). Raises LockError only when neither can be
    had (the name is taken and there is no home directory to record another in)."""
    key = (base, os.getuid())
    known = _KNOWN.get(key)
    if known is not None and _still_mine(known):  # one lstat on the common path
        return known
    with _KNOWN_LOCK:
        path = os.path.join(base, f"{PREFIX}.{os.getuid()}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        try:
            os.close(_open_dir(path))
        except LockError as taken:
            path = _unguessable(base, taken)
        _KNOWN[key] = path
        return path


def _still_mine(path: str) -> bool:
    """A directory of ours closed to others (in a sticky directory nobody else can replace
    it, so one ``lstat`` suffices)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(st.st_mode)
        and st.st_uid == os.getuid()
        and not stat.S_IMODE(st.st_mode) & 0o077
    )


def _home() -> str:
    """The user's home from the password database (not ``$HOME``: every process agrees)."""
    return pwd.getpwuid(os.getuid()).pw_dir


def _record_name(base: str) -> str:
    """The record's file name for ``base`` on this node (host, device and path)."""
    try:
        dev = os.stat(base).st_dev
    except OSError:
        dev = 0
    digest = hashlib.sha256(f"{socket.gethostname()}|{dev}|{os.path.abspath(base)}".encode())
    return f"private-dir.{digest.hexdigest()[:20]}"


def _record_path(base: str) -> str:
    """Where this user's processes on this node find the private directory of ``base``."""
    return os.path.join(_home(), ".cache", "dynprof_nb", _record_name(base))


def _record_dir() -> int:
    """A descriptor of ``~/.cache/dynprof_nb``, only when it is a real directory of ours that
    no one else can write in. A home another user can write (a shared ``/tmp`` home) lets them
    plant that directory, a symlink in it at the record's temporary name (which would truncate
    whatever file of ours it points to), or a lock file they hold forever; a record kept there
    is not trusted (:func:`_scan` finds the private directory instead)."""
    path = os.path.join(_home(), ".cache", "dynprof_nb")
    os.makedirs(path, mode=0o700, exist_ok=True)
    fd = _open_dir_fd(path)
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o022:
        os.close(fd)
        raise PermissionError(
            f"{path} belongs to uid {st.st_uid} with mode {oct(stat.S_IMODE(st.st_mode))}"
        )
    return fd


def _open_dir_fd(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PermissionError(f"{path} is a symlink or not a directory") from None
        raise


def _mine(base: str, name: str) -> str | None:
    """``base/name`` when ``name`` is one of this user's unguessable names and a private
    directory of ours."""
    if not name.startswith(f"{PREFIX}-{os.getuid()}-") or "/" in name:
        return None
    path = os.path.join(base, name)
    return path if _still_mine(path) else None


def _unguessable(base: str, taken: LockError) -> str:
    """The recorded private directory (made, and recorded, when there is none yet), under
    the record's lock so that processes starting at once agree on one."""
    try:
        rdir = _record_dir()
    except (OSError, KeyError) as exc:
        return _scan(base, taken, f"the record directory is not usable ({exc})")
    record = _record_name(base)
    try:
        lock = os.open(
            record + ".lock",
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=rdir,
        )
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            name = _read_record(rdir, record)
            path = _mine(base, name)
            if path is not None:
                return path
            name = f"{PREFIX}-{os.getuid()}-{secrets.token_hex(16)}"
            path = os.path.join(base, name)
            os.mkdir(path, 0o700)
            _write_record(rdir, record, name)
            log.warning(
                "dynprof_nb: %s Using the private directory %s instead (its name is recorded "
                "in %s).",
                taken,
                path,
                _record_path(base),
            )
            return path
        finally:
            os.close(lock)
    finally:
        os.close(rdir)


def _read_record(rdir: int, record: str) -> str:
    try:
        fd = os.open(record, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=rdir)
    except OSError:
        return ""
    try:
        return os.read(fd, 4096).decode("ascii", "replace").strip()
    finally:
        os.close(fd)


def _write_record(rdir: int, record: str, name: str) -> None:
    """Write the record atomically, never through a link (``O_EXCL`` on a fresh name)."""
    tmp = f"{record}.{os.getpid()}.tmp"
    try:
        os.unlink(tmp, dir_fd=rdir)
    except FileNotFoundError:
        pass
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=rdir
    )
    try:
        os.write(fd, (name + "\n").encode("ascii"))
    finally:
        os.close(fd)
    os.replace(tmp, record, src_dir_fd=rdir, dst_dir_fd=rdir)


_SCAN_SAID: set[str] = set()


def _scan(base: str, taken: LockError, why: str) -> str:
    """Without a record to trust: the first (by name) private directory of ours in ``base``
    with an unguessable name, made when there is none. No one else can make a directory that
    is ours, so what is found is safe; two processes that both find none at the same instant
    may each make one (then they agree again from the next process on)."""
    try:
        names = sorted(os.listdir(base))
    except OSError:
        names = []
    found = [p for p in (_mine(base, n) for n in names) if p is not None]
    if found:
        path = found[0]
    else:
        path = os.path.join(base, f"{PREFIX}-{os.getuid()}-{secrets.token_hex(16)}")
        os.mkdir(path, 0o700)
    if base not in _SCAN_SAID:
        _SCAN_SAID.add(base)
        log.warning(
            "dynprof_nb: %s Using the private directory %s instead; %s, so its name is not "
            "recorded: it is found by listing %s.",
            taken,
            path,
            why,
            base,
        )
    return path


def _open_dir(path: str) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LockError(
                _foreign(path, "is not a directory (a planted symlink or file?)")
            ) from None
        raise
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        os.close(fd)
        raise LockError(
            f"dynprof_nb's private lock directory {path} belongs to uid "
            f"{st.st_uid} with mode {oct(stat.S_IMODE(st.st_mode))}; refusing to use "
            "it. Remove it (as its owner or root) and retry."
        )
    return fd


def _foreign(path: str, what: str) -> str:
    try:
        owner = f", owner uid {os.lstat(path).st_uid}"
    except OSError:
        owner = ""
    return (
        f"dynprof_nb's private lock directory {path} {what}{owner}; refusing to use it. "
        f"Remove it (as its owner or root) and retry."
    )


def open_lock(name: str, directory: str | None = None) -> int:
    """Open (creating, 0600) the lock file ``name`` in ``directory`` (default: the private
    directory), never through a symbolic link."""
    dir_fd = _open_dir(directory or private_dir())
    try:
        return os.open(
            name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LockError(
                f"the lock file {name} in {directory or private_dir()} is a "
                "symbolic link; refusing to follow it. Remove it."
            ) from None
        raise
    finally:
        os.close(dir_fd)


def still_named(fd: int, name: str, directory: str | None = None) -> bool:
    """Whether the lock file open as ``fd`` is still the one named ``name``: a lock file is
    removed (:func:`remove_lock`) by whoever holds it, so a process that opened it before
    holds a lock on a file nobody else will open again, and must reopen the name."""
    dir_fd = _open_dir(directory or private_dir())
    try:
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    finally:
        os.close(dir_fd)
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino)


def lock_fd(name: str, blocking: bool = True, directory: str | None = None) -> int | None:
    """Open the lock file ``name`` and take its ``flock`` exclusively: the descriptor, or
    None when ``blocking`` is False and another process holds it. A file removed between
    the open and the lock is opened again (see :func:`still_named`), so every holder locks
    the file the name points to."""
    while True:
        fd = open_lock(name, directory)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            named = still_named(fd, name, directory)
        except BaseException:  # never a descriptor left behind holding the lock
            os.close(fd)
            raise
        if named:
            return fd
        os.close(fd)


def remove_lock(name: str, directory: str | None = None) -> bool:
    """Remove the lock file ``name`` unless another process holds it now (then its holder
    or the next ``remove_lock`` does); False only then (a failed unlink is logged). Removed
    under its own lock, so a process that opened it earlier sees it gone when it locks it
    (:func:`still_named`) and opens a fresh one. Job-scoped lock files go with their job
    (:func:`forget_job`); without this, every job ever run left its files behind."""
    try:
        fd = lock_fd(name, blocking=False, directory=directory)
    except FileNotFoundError:
        return True
    if fd is None:
        return False
    drop_lock(fd, name, directory)
    return True


def drop_lock(fd: int, name: str, directory: str | None = None) -> None:
    """Remove the lock file ``name`` that this process holds locked as ``fd``, then close
    ``fd``: a holder leaving removes its file; a process waiting on it wakes on a removed
    file and opens a fresh one (:func:`lock_fd`, :func:`still_named`)."""
    try:
        if still_named(fd, name, directory):
            dir_fd = _open_dir(directory or private_dir())
            try:
                os.unlink(name, dir_fd=dir_fd)
            finally:
                os.close(dir_fd)
    except (OSError, LockError) as exc:
        log.debug("dynprof_nb: cannot remove %s: %r", name, exc)
    finally:
        os.close(fd)


def job_lock_name(job: str, what: str) -> str:
    """The name of one of job ``job``'s lock files on this node (``what``: ``state``,
    ``lock``), kept here so that whoever removes a job's files finds them all."""
    return f"relay.{job}.{what}"


JOB_LOCKS = ("state", "lock")


def forget_job(job: str) -> None:
    """Remove job ``job``'s lock files (each one nobody holds), the stacks kept at its stall
    and its dead ranks' side files: called when its segment goes, the last process of the job
    having left."""
    forget_stack_files(job)
    for what in JOB_LOCKS:
        try:
            remove_lock(job_lock_name(job, what))
        except (OSError, LockError) as exc:
            log.debug("dynprof_nb: cannot remove %s: %r", job_lock_name(job, what), exc)


STACKS = "stacks"  # the stack files' folder in the private directory (shared_layout.stack_dir)


def kept_stacks_name(key: str) -> str:
    """The stacks a controller took at a stall, kept in :data:`STACKS` for a notebook that
    attaches later (``key``: the job's name, or ``@cluster.<name>``). They go with the job:
    the process that removes its segment removes them (:func:`forget_stack_files`)."""
    return f"{key}.last_stacks.json"


def forget_stack_files(key: str) -> None:
    """Remove the stacks kept for job ``key`` at a stall (:func:`kept_stacks_name`, and a
    half-written copy) and the files its ranks left beside them, ``<key>.<rank>.<pid>.*``
    (the side file, the Flight Recorder's; a rank that ``exec``'d or was killed never
    removed its own). Called when the job's segment goes: the job they describe has ended and
    no later notebook can attach to it, so in ``/dev/shm`` (memory) they would only pile up,
    one set per hung job. A file of a process still alive is left to it; a missing folder is
    nothing to do."""
    base = SHM_DIR if os.path.isdir(SHM_DIR) else tempfile.gettempdir()
    try:
        folder = os.path.join(private_dir(base), STACKS)
        names = os.listdir(folder)
    except (OSError, LockError):
        return
    kept = kept_stacks_name(key)
    for name in names:
        rest = name[len(key) + 1 :].split(".") if name.startswith(f"{key}.") else []
        ranks = len(rest) == 3 and rest[0].isdigit() and rest[1].isdigit()
        if name in (kept, kept + ".tmp") or (ranks and not os.path.exists(f"/proc/{rest[1]}")):
            try:
                os.unlink(os.path.join(folder, name))
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.debug("dynprof_nb: cannot remove %s: %r", name, exc)


def holder(fd: int) -> str:
    """Who holds a lock on the file open as ``fd``: ``pid N (uid U: command)``, or ``""``
    when nobody is found (``/proc/locks`` shows pids of this pid namespace only)."""
    st = os.fstat(fd)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        parts = line.split()
        if "->" in parts:  # a waiter, not a holder
            continue
        if len(parts) >= 6 and parts[5] == key:
            return describe_pid(int(parts[4]))
    return ""


def describe_pid(pid: int) -> str:
    if pid <= 0:
        return "an open file of some process (an OFD lock, which names no pid)"
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:120]
    except OSError:
        return f"pid {pid}"
    return f"pid {pid} (uid {uid}: {cmd or '?'})"
