"""The job segment: one POSIX shared-memory block per job, shared by controllers and ranks.

Layout (all integers little-endian int64 unless noted, so a slot field is one aligned word)::

    header   0..127      magic, layout version, slot count, config seqlock, generation, ...
    config   128..       config bytes (JSON, opaque here) under a seqlock, with a CRC32
    slots    ...         SLOT_COUNT fixed rank slots: numbers, error text, output root, window

Why this shape (the flaws of MindSpore's DynamicProfilerMonitor):

* one segment per *job name* and user (``dynprof_nb.<uid>.<job>``), never per hour, in the
  user's private directory in ``/dev/shm`` (:func:`dynprof_nb.locks.private_dir`), where no
  other user can create a name first;
* the config is guarded by a seqlock plus a CRC, so a reader never sees a torn config, and
  writers take an ``flock`` on the segment so two writers cannot interleave. The kernel drops
  that lock when a writer dies, and a sequence number left odd by a dead writer is repaired by
  the next writer, so nothing is ever stuck;
* ``generation`` changes on every config write; an idle rank compares one word per step;
* each rank owns a slot it alone writes, so status flows back without any lock;
* every process that has the segment open holds a shared lock on its first byte (an
  open-file-description lock, which the kernel drops when the process dies), so the last
  process to leave can tell it is the last: it removes the segment when the job is finished
  (no rank left that has not closed, no request that no rank has applied). A finished job
  leaves nothing in ``/dev/shm``;
* nobody maps the segment file. Any process of the user can truncate, replace or remove it,
  and a mapping of a truncated file raises SIGBUS in whoever touches it (a training rank
  included). So the segment is read and written with ``pread``/``pwrite``, where a truncated
  file is a short read (:class:`SegmentLost`), never a signal. The one word a rank reads per
  step lives in its :class:`Doorbell`, a sealed ``memfd`` (it cannot shrink, so its mapping
  cannot fault) that writers ring through ``/proc/<pid>/fd/<n>`` and the rank's heartbeat
  thread also keeps in step with the segment;
* a segment is created under a temporary name, initialised, then linked into place, so a
  segment under its job's name is always whole: anything shorter is damage, never a creator
  still at work.

This module knows bytes, not config keys: it never parses the JSON it carries.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import fcntl
import logging
import mmap
import os
import re
import secrets
import stat
import struct
import time
import weakref
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from dynprof_nb.locks import LockError, forget_job, private_dir
from dynprof_nb.ownfd import FdLost, OwnedFd
from dynprof_nb.pids import PID_LIMIT, pid_alive

log = logging.getLogger("dynprof_nb")

MAGIC = int.from_bytes(b"DYNPROF\x01", "little")
# 2: slots grew to 2 KiB so a full error message fits; 3: attached processes hold a presence
# lock (a process of layout 2 would not, so the last one leaving could not see it); 4: step-time
# rings and the trigger region after the slots; 5: the run (a header counter and the run each
# slot's rank joined), so a restarted job inherits nothing of the run before it
LAYOUT_VERSION = 5
PREFIX = "dynprof_nb"
HEADER_BYTES = 128
CONFIG_CAPACITY = 64 * 1024
# The last NOTE_BYTES of the config area hold a helper process's status text (the relay's, see
# relay.py) under its own seqlock, so a controller can show that helper's errors. Configs are
# limited to CONFIG_LIMIT bytes.
NOTE_BYTES = 1024
CONFIG_LIMIT = CONFIG_CAPACITY - NOTE_BYTES
SLOT_COUNT = 256
SLOT_BYTES = 2048
SLOT_WORDS = 16  # numeric words at the start of each slot
ERROR_BYTES = 512  # room for a whole message: what went wrong and what to do
ROOT_BYTES = 640
WINDOW_BYTES = 768
CONFIG_OFFSET = HEADER_BYTES
SLOTS_OFFSET = CONFIG_OFFSET + CONFIG_CAPACITY
SLOTS_END = SLOTS_OFFSET + SLOT_COUNT * SLOT_BYTES
# Step-time rings (their words are laid out in contract/shared_layout.py): one per slot, written
# only by that rank's heartbeat thread: RING_HEADER_WORDS words of summary, then (step, end_ns)
# pairs.
RING_OFFSET = SLOTS_END
RING_BYTES = 4096
RING_HEADER_WORDS = 8
RING_ENTRIES = (RING_BYTES // 8 - RING_HEADER_WORDS) // 2
# The trigger (its words are laid out in dynprof_nb.contract.shared_layout): numeric words, then its
# definition and the last reason as text, each under the trigger's seqlock (T_SEQ).
TRIGGER_OFFSET = RING_OFFSET + SLOT_COUNT * RING_BYTES
TRIGGER_WORDS = 16
TRIGGER_DEF_BYTES = 2048
TRIGGER_REASON_BYTES = 1024
TRIGGER_BYTES = TRIGGER_WORDS * 8 + TRIGGER_DEF_BYTES + TRIGGER_REASON_BYTES
SEGMENT_BYTES = TRIGGER_OFFSET + TRIGGER_BYTES

# header words (index into the int64 view)
(
    H_MAGIC,
    H_LAYOUT,
    H_SLOTS,
    H_SEQ,
    H_GEN,
    H_LEN,
    H_CRC,
    H_CREATED,
    H_CREATOR,
    H_WRITER,
    H_CREATOR_START,
    H_WRITER_START,
) = range(12)
H_NOTE_SEQ, H_NOTE_BEAT_NS = 12, 13  # the helper note's seqlock and its last heartbeat
# The run: a counter bumped by the first rank to join when no rank of the run before is live
# (a job restarted under its name is a new run), and when that run began (wall clock, ns)
H_RUN, H_RUN_STARTED = 14, 15
NOTE_OFFSET = CONFIG_OFFSET + CONFIG_LIMIT

# slot words (index relative to the slot's first word)
S_PID, S_RANK, S_STEP, S_STATE, S_START, S_STOP, S_APPLIED, S_BEAT_NS, S_PID_START, S_SEQ = range(
    10
)
S_ERR_GEN = 10  # generation the error text belongs to
S_RATE = 11  # steps per second x 1000, as the rank's heartbeat thread last measured it
S_BELL_FD, S_BELL_TOKEN = 12, 13  # the rank's doorbell: its fd number and token (see Doorbell)
S_RUN = 14  # the run this slot's rank joined (H_RUN when it claimed the slot)
TEXT_OFFSET = SLOT_WORDS * 8
ERROR_OFFSET = TEXT_OFFSET
ROOT_OFFSET = ERROR_OFFSET + ERROR_BYTES
WINDOW_OFFSET = ROOT_OFFSET + ROOT_BYTES
assert WINDOW_OFFSET + WINDOW_BYTES == SLOT_BYTES

STATES = ("free", "idle", "armed", "recording", "saving", "excluded", "closed")
STATE = {name: i for i, name in enumerate(STATES)}

_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # whole name: fullmatch


class SegmentError(RuntimeError):
    """The segment cannot be used: wrong owner, incompatible layout, bad name."""


class NoSuchJob(SegmentError):
    """No segment by that name (asked not to create one)."""


class DamagedSegment(SegmentError):
    """A file under a job's segment name that is not a usable segment (cut short, garbage, a
    planted file): that one job's problem, reported with what is wrong, never anyone else's."""


class SegmentLost(SegmentError):
    """The segment file was cut short under us (``truncate`` by a cleanup script, say)."""


def check_job_name(job: str) -> str:
    if not isinstance(job, str) or not _JOB_NAME.fullmatch(job):
        raise SegmentError(
            f"job name {job!r} is not usable: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit (e.g. 'llama-7b')."
        )
    return job


def segment_name(job: str) -> str:
    return f"/{PREFIX}.{os.getuid()}.{check_job_name(job)}"


def pid_start_time(pid: int) -> int:
    """The process's start time in clock ticks, to tell a live pid from a reused one."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def process_alive(pid: int, start_time: int) -> bool:
    if not pid_alive(pid):
        return False
    return start_time == 0 or pid_start_time(pid) in (0, start_time)


@dataclass
class SlotView:
    """A snapshot of one rank slot, as the controller sees it."""

    index: int
    pid: int
    rank: int
    step: int
    state: str
    start: int
    stop: int
    applied: int
    heartbeat_ns: int
    pid_start: int
    error: str
    error_generation: int
    root: str
    window: str
    rate_milli: int = 0
    bell_fd: int = 0
    bell_token: int = 0
    run: int = 0

    @property
    def alive(self) -> bool:
        """The slot's process still runs (pid and start time match)."""
        return process_alive(self.pid, self.pid_start)

    @property
    def live(self) -> bool:
        """A rank that counts: its process runs and it has not closed its Monitor."""
        return self.state != "closed" and self.alive

    def estimated_step(self, now_ns: int, horizon_s: float = 5.0) -> int:
        """The step the rank is probably at now: the published step is up to one heartbeat
        old, so extrapolate with the measured step rate (at most ``horizon_s`` ahead)."""
        age = min(max(0, now_ns - self.heartbeat_ns) / 1e9, horizon_s)
        return self.step + int(self.rate_milli / 1000 * age)


SHM_DIR = "/dev/shm"
_OPEN_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _shm_path(name: str) -> str:
    """Where segment ``name`` lives: in this user's private directory in ``/dev/shm``
    (:func:`dynprof_nb.locks.private_dir`), not in ``/dev/shm`` itself, where another user
    could create the name first and so turn dynprof_nb off for this job."""
    return _dir() + name


def _dir() -> str:
    try:
        return private_dir(SHM_DIR)
    except LockError as exc:
        raise SegmentError(str(exc)) from None


def segment_path(job: str) -> str:
    """The file of job ``job``'s segment."""
    return _shm_path(segment_name(job))


def _shm_open(name: str) -> int:
    """Open the segment ``name`` without following a link or blocking on a FIFO; anything that
    is not a plain file is refused (a planted symlink, FIFO or directory)."""
    try:
        fd = os.open(_shm_path(name), _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SegmentError(
                f"{_shm_path(name)} is a symbolic link, not a job segment; "
                "refusing to follow it. Remove it, or use another job "
                "name."
            ) from None
        if exc.errno in (errno.EISDIR, errno.ENXIO, errno.EACCES, errno.EPERM):
            raise SegmentError(
                f"{_shm_path(name)} cannot be opened as a job segment "
                f"({exc.strerror}). Remove it, or use another job "
                "name."
            ) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise SegmentError(
            f"{_shm_path(name)} is not a plain file (mode "
            f"{stat.filemode(st.st_mode)}); refusing it. Remove it, or use "
            "another job name."
        )
    return fd


def _shm_create(name: str, content: bytes | None = None) -> int | None:
    """A new, whole segment under ``name``: made under a temporary name, sized, initialised
    (by ``content`` when given, a copy of a lost segment), then linked into place. Returns its
    fd, or None if a segment by that name appeared first (attach to that one)."""
    # not under the jobs' prefix, so list_jobs() never sees a segment still being made
    tmp = f"{_dir()}/.{PREFIX}-new.{os.getuid()}.{os.getpid()}.{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, SEGMENT_BYTES)
        if content is not None:
            os.pwrite(fd, content[:SEGMENT_BYTES], 0)
        else:
            header = struct.pack(
                "<8q", MAGIC, LAYOUT_VERSION, SLOT_COUNT, 0, 0, 0, 0, time.time_ns()
            )
            os.pwrite(fd, header, 0)
            os.pwrite(fd, struct.pack("<2q", os.getpid(), 0), H_CREATOR * 8)
            os.pwrite(fd, struct.pack("<q", pid_start_time(os.getpid())), H_CREATOR_START * 8)
        try:
            os.link(tmp, _shm_path(name))
        except FileExistsError:
            os.close(fd)
            return None
        return fd
    except BaseException:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        raise
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def _shm_unlink(name: str) -> None:
    try:
        os.unlink(_shm_path(name))
    except FileNotFoundError:
        pass


def _read_at(fd: int, offset: int, size: int) -> bytes:
    raw = os.pread(fd, size, offset)
    if len(raw) != size:
        raise SegmentLost(
            f"the job segment was cut short (truncated to {os.fstat(fd).st_size} "
            "bytes by another process)."
        )
    return raw


class _Words:
    """The segment's int64 words, each access a ``pread``/``pwrite`` (never a mapping: see the
    module docstring) on a descriptor checked to still be the segment's (a job may have
    closed it and opened its own file on the number). ``words[i]`` and ``words[i] = v`` as
    on a memoryview."""

    __slots__ = ("own",)

    def __init__(self, own: OwnedFd) -> None:
        self.own = own

    def __getitem__(self, index: int) -> int:
        return int.from_bytes(_read_at(self.own.get(), index * 8, 8), "little", signed=True)

    def __setitem__(self, index: int, value: int) -> None:
        os.pwrite(self.own.get(), int(value).to_bytes(8, "little", signed=True), index * 8)

    def lost(self) -> bool:
        """The descriptor was closed under us, or its number now names another file."""
        return self.own.fd >= 0 and not self.own.mine()


class _Bytes:
    """The segment's bytes, by ``pread``/``pwrite``: ``data[a:b]`` and ``data[a:b] = raw``."""

    __slots__ = ("own",)

    def __init__(self, own: OwnedFd) -> None:
        self.own = own

    def __getitem__(self, key: slice | int) -> bytes | int:
        if isinstance(key, slice):
            start, stop, _ = key.indices(SEGMENT_BYTES)
            return _read_at(self.own.get(), start, max(0, stop - start))
        return _read_at(self.own.get(), key, 1)[0]

    def __setitem__(self, key: slice | int, value: bytes | int) -> None:
        if isinstance(key, slice):
            start, stop, _ = key.indices(SEGMENT_BYTES)
            data = bytes(value)
            if len(data) != stop - start:
                raise ValueError("a segment slice assignment must keep the size")
        else:
            start, data = key, bytes([value])
        os.pwrite(self.own.get(), data, start)


def _reclaim(name: str, fd: int) -> bool:
    """Unlink ``name`` if it still names the file open as ``fd``; True if we did.

    Done under that file's writer lock, so that of two processes reclaiming the same stale
    segment at once, the second cannot unlink the fresh segment the first has just created
    under the same name (which would leave the first, and every rank attached to it, on an
    orphaned segment that no controller can reach).
    """
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        if not _names_file(name, fd):
            return False
        _shm_unlink(name)
        return True
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


# Presence: a read lock on byte 0 held by every process that has the segment open. These are
# open-file-description locks: they belong to the open file, not the process (so a process's
# other opens of the segment cannot drop them), they do not interact with the writer's flock,
# and the kernel drops them when the last descriptor of that open file goes, dead process
# included. Linux only; elsewhere nobody ever counts as the last to leave.
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", None)


def _presence(fd: int, kind: int, wait: bool = False) -> bool:
    """Set this open file's presence lock to ``kind`` (F_RDLCK, F_WRLCK, F_UNLCK); False if
    another open file's lock conflicts (never when ``wait``)."""
    if _OFD_SETLK is None:
        return kind != fcntl.F_WRLCK
    flock = struct.pack("hhqqi4x", kind, os.SEEK_SET, 0, 1, 0)  # struct flock, l_pid 0
    try:
        fcntl.fcntl(fd, _OFD_SETLKW if wait else _OFD_SETLK, flock)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


# Watching: a read lock on byte 1, held by every controller (a notebook's Job, an agent) for as
# long as it has the segment open. Ranks do not take it, so a job whose ranks all died is stale
# to its restarted ranks unless a controller still has it open: then the restarted ranks join
# the segment the notebook is watching instead of leaving it on an orphan.
_WATCH_BYTE = 1


def _watch_lock(fd: int) -> None:
    if _OFD_SETLK is not None:
        flock = struct.pack("hhqqi4x", fcntl.F_RDLCK, os.SEEK_SET, _WATCH_BYTE, 1, 0)
        fcntl.fcntl(fd, _OFD_SETLK, flock)


def _watched_by_others(fd: int) -> bool:
    """True if another open file holds the watch lock (a live controller has the segment)."""
    if _OFD_SETLK is None:
        return False
    query = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, _WATCH_BYTE, 1, 0)
    answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, query)
    return struct.unpack("hhqqi4x", answer)[0] != fcntl.F_UNLCK


def _names_file(name: str, fd: int) -> bool:
    """True if the segment name still refers to the file open as ``fd``."""
    try:
        current = os.stat(_shm_path(name), follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return False
    mine = os.fstat(fd)
    return (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino)


_OPEN: weakref.WeakSet = weakref.WeakSet()  # this process's open segments, tidied at exit


@atexit.register
def _leave_at_exit() -> None:
    """At interpreter exit, leave every segment still open the way ``close()`` would: the
    last process of a finished job removes it. Memory stays mapped (a thread may still use it
    until the process is gone)."""
    for seg in list(_OPEN):
        try:
            _tidy(seg, exiting=True)
        except Exception:  # never raise at exit
            pass


def _leave_dropped(job: str, own: OwnedFd, opener: int) -> None:
    """A Segment garbage-collected without ``close()`` (``attach(job).start(...)`` as a
    one-liner, a function's local Job): leave as ``close()`` would, through a fresh Segment
    on the same open file (when its descriptor is still ours)."""
    try:
        if os.getpid() == opener:
            Segment(job, os.dup(own.get()), created=False).close()
    except Exception:  # a finalizer must not raise
        pass
    finally:
        own.close()


class Segment:
    """An open job segment. ``Segment.open(job)`` creates it or attaches to the live one."""

    def __init__(self, job: str, fd: int, created: bool) -> None:
        self.job = job
        self.name = segment_name(job)
        self.created = created
        self.removed = False  # set when this process removed the name on leaving
        # a high, close-on-exec number checked before each use: the job may close it
        self._own = OwnedFd(fd, f"job {job!r}'s segment")
        self.opener = os.getpid()  # a forked child shares our open file: it must not unlock it
        _presence(self.fileno(), fcntl.F_RDLCK, wait=True)  # waits out a last leaver removing it
        #: the segment's bytes and its int64 words, each access a pread/pwrite (see _Words)
        self.raw = _Bytes(self._own)
        self.words = _Words(self._own)
        _OPEN.add(self)
        # dropped without close(): leave all the same (at exit, _leave_at_exit does)
        self._finalizer = weakref.finalize(self, _leave_dropped, job, self._own, self.opener)
        self._finalizer.atexit = False

    def fileno(self) -> int:
        """The segment's descriptor, checked to be still ours (:class:`FdLost` if not)."""
        return self._own.get()

    # -- lifecycle ------------------------------------------------------------------------

    @classmethod
    def open(
        cls, job: str, *, create: bool = True, quiet: bool = False, content: bytes | None = None
    ) -> Segment:
        """Attach to the job's segment, creating it when missing (and ``create``).

        A segment whose processes are all dead is reclaimed (one log line, at debug level when
        ``quiet``); one with a live process is never replaced. A segment owned by another user,
        or anything that is not a plain 0600 file, is refused. Without ``create``, a missing
        job raises :class:`NoSuchJob`. ``content``: what a new segment starts as (a rank
        republishing the segment it had, see :meth:`republish`).
        """
        name = segment_name(job)
        for _ in range(5):
            try:
                fd = _shm_open(name)
            except FileNotFoundError:
                if not create:
                    raise NoSuchJob(
                        f"no job named {job!r} on this machine: start the training side "
                        "(Monitor) first, or check the name with dynprof_nb.jobs()."
                    ) from None
                fd = _shm_create(name, content)
                if fd is None:
                    continue  # somebody created it between our two calls: attach to theirs
                return cls(job, fd, created=True)
            seg = _attach_fd(
                job, name, fd, logging.DEBUG if quiet else logging.WARNING, repair=create
            )
            if seg is not None:
                return seg
            if not create and not os.path.lexists(_shm_path(name)):
                raise NoSuchJob(
                    f"no job named {job!r} on this machine (its segment was stale "
                    "or finished and is gone): start the training side first."
                )
        raise SegmentError(f"could not create or attach the segment for job {job!r}; retry.")

    def problem(self) -> str:
        """What is wrong with this open segment as a rank holding it sees it ("" when
        nothing): cut short, overwritten, or no longer under its name. A changed mode is
        mended here (we own the file), not reported."""
        if self.words.lost():
            return (
                f"descriptor {self._own.fd} was closed under the job (os.closerange?) or "
                "now names one of its files"
            )
        st = os.fstat(self.fileno())
        if st.st_size < SEGMENT_BYTES:
            return f"was truncated to {st.st_size} bytes"
        if not _names_file(self.name, self.fileno()):
            what = (
                "replaced by another file" if os.path.lexists(_shm_path(self.name)) else "removed"
            )
            return f"was {what}"
        if self.words[H_MAGIC] != MAGIC:
            return "was overwritten"
        if stat.S_IMODE(st.st_mode) != 0o600:
            os.fchmod(self.fileno(), 0o600)
            log.warning(
                "dynprof_nb: the segment of job %r had mode %o; set it back to 0600",
                self.job,
                stat.S_IMODE(st.st_mode),
            )
        return ""

    def republish(self, keep: tuple[int, bytes] | None = None) -> Segment:
        """This job's segment again, after :meth:`problem` found this one lost: the one now
        under the name when it is usable (another rank may have republished first), else a
        new one made from what this segment still holds (config, slots), or, when it was cut
        short, from the config ``keep`` (generation, bytes) the caller last applied. Closes
        this one once the other is open. Raises SegmentError when the name is taken by
        something unusable (this one then stays open)."""
        content = _snapshot(self)
        if content is None and keep is not None:
            content = _fresh_with_config(*keep)
        if content is not None:
            content = _with_creator(content)
        new = Segment.open(self.job, create=True, quiet=True, content=content)
        try:  # only now: if that failed, the caller keeps this one and tries again later
            self.close(tidy=False)
        except OSError:
            pass
        return new

    def is_stale(self) -> bool:
        """True when neither the creator, the last writer nor any rank is alive, and the
        segment is not a request waiting for its job (written, and no rank has come yet:
        ``dynprof start JOB 20 30`` before the training starts), and no controller has it open
        (see :meth:`watch`)."""
        if self.live_pids() or _watched_by_others(self.fileno()):
            return False
        return not (self.words[H_GEN] > 0 and not self.slots())

    def watch(self) -> None:
        """Mark this process as a controller of the job for as long as it has the segment open:
        ranks that restart after all of theirs died then join this segment (and its config)
        rather than take it for stale. Dropped by the kernel with the open file."""
        _watch_lock(self.fileno())

    def live_pids(self) -> list[int]:
        w = self.words
        pids = []
        creator = w[H_CREATOR]
        if creator and process_alive(creator, w[H_CREATOR_START]):
            pids.append(creator)
        writer = w[H_WRITER]
        if writer and writer != creator and process_alive(writer, w[H_WRITER_START]):
            pids.append(writer)
        for slot in self.slots():
            if slot.alive and slot.pid not in pids:
                pids.append(slot.pid)
        return pids

    def close(self, tidy: bool = True, unjoined: bool = False) -> bool:
        """Detach. The segment stays for the other processes of the job; the last process to
        leave a finished job (see :func:`_finished`) removes it, and with ``unjoined`` also one
        that no rank ever joined, whatever it asks. True if this call removed it."""
        if self._own.fd < 0:
            return False
        _OPEN.discard(self)
        self._finalizer.detach()
        if not self._own.mine():  # closed under us (the kernel dropped its locks): forget it
            self._own.close()
            return False
        removed = _tidy(self, unjoined=unjoined) if tidy else False
        if os.getpid() == self.opener:
            _presence(self.fileno(), fcntl.F_UNLCK)
        self._own.close()
        return removed

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- config (seqlock) -------------------------------------------------------------------

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Exclusive writer lock; the kernel releases it if the holder dies."""
        fcntl.flock(self.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self.fileno(), fcntl.LOCK_UN)

    @property
    def generation(self) -> int:
        return self.words[H_GEN]

    def write_config(self, data: bytes, locked: bool = False) -> int:
        """Publish new config bytes; returns the new generation. ``locked``: the caller
        already holds :meth:`write_lock` (a trigger checks and writes in one hold)."""
        if len(data) > CONFIG_LIMIT:
            raise SegmentError(
                f"config is {len(data)} bytes; the segment holds at most {CONFIG_LIMIT}."
            )
        # each rank sees the write at its next step: its doorbell is rung right after the
        # generation, with descriptors opened beforehand so nothing slow sits in between
        bells = [fd for fd in map(open_bell, self.slots()) if fd is not None]
        try:
            return _write_config(self, data, bells, locked)
        finally:
            for fd in bells:
                os.close(fd)

    def read_config(self, attempts: int = 1000) -> tuple[int, bytes] | None:
        """(generation, bytes) from a consistent snapshot, or None if no snapshot was had.

        None means a writer is mid-write (or died there); the caller keeps its last good config
        and tries again later. Never blocks.
        """
        w = self.words
        for attempt in range(attempts):
            seq1 = w[H_SEQ]
            if not seq1 & 1:
                gen = w[H_GEN]
                length = w[H_LEN]
                crc = w[H_CRC]
                if 0 <= length <= CONFIG_CAPACITY:
                    data = bytes(self.raw[CONFIG_OFFSET : CONFIG_OFFSET + length])
                    if w[H_SEQ] == seq1 and zlib.crc32(data) == crc:
                        return gen, data
            if attempt > 10:
                time.sleep(0)
        return None

    # -- helper note (the relay's status text) ----------------------------------------------

    def write_note(self, text: str) -> None:
        """Publish a helper's status text (one writer: the job's relay) and beat its heart."""
        raw = text.encode("utf-8", "replace")[: NOTE_BYTES - 1]
        w = self.words
        w[H_NOTE_SEQ] += 1
        self.raw[NOTE_OFFSET : NOTE_OFFSET + NOTE_BYTES] = raw + bytes(NOTE_BYTES - len(raw))
        w[H_NOTE_SEQ] += 1
        w[H_NOTE_BEAT_NS] = time.monotonic_ns()

    def beat_note(self) -> None:
        self.words[H_NOTE_BEAT_NS] = time.monotonic_ns()

    def read_note(self) -> tuple[str, int]:
        """(text, heartbeat ns) of the helper note; ``("", 0)`` when no helper wrote one."""
        w = self.words
        for attempt in range(150):  # a writer preempted mid-note on a loaded machine: ~50 ms
            seq = w[H_NOTE_SEQ]
            raw = bytes(self.raw[NOTE_OFFSET : NOTE_OFFSET + NOTE_BYTES]).split(b"\0", 1)[0]
            if not seq & 1 and w[H_NOTE_SEQ] == seq:
                return raw.decode("utf-8", "replace"), w[H_NOTE_BEAT_NS]
            time.sleep(0 if attempt < 100 else 0.001)
        return "", w[H_NOTE_BEAT_NS]

    # -- slots ------------------------------------------------------------------------------

    def ring_base(self, index: int) -> int:
        """Index of the first word of slot ``index``'s step-time ring in ``words``."""
        return (RING_OFFSET + index * RING_BYTES) // 8

    @property
    def trigger_base(self) -> int:
        """Index of the trigger region's first word in ``words``."""
        return TRIGGER_OFFSET // 8

    def write_trigger_text(self, definition: str, reason: str) -> None:
        """Write the trigger's definition and last reason under its seqlock (callers hold
        the write lock: there is one writer at a time)."""
        w, base = self.words, self.trigger_base
        start = TRIGGER_OFFSET + TRIGGER_WORDS * 8
        w[base] += 1
        for text, size in ((definition, TRIGGER_DEF_BYTES), (reason, TRIGGER_REASON_BYTES)):
            raw = text.encode("utf-8", "replace")[: size - 1]
            self.raw[start : start + size] = raw + bytes(size - len(raw))
            start += size
        w[base] += 1

    def read_trigger_text(self) -> tuple[str, str]:
        """(definition, last reason) from a consistent snapshot; ``("", "")`` if none."""
        w, base = self.words, self.trigger_base
        start = TRIGGER_OFFSET + TRIGGER_WORDS * 8
        for _ in range(100):
            seq = w[base]
            raw = bytes(self.raw[start : start + TRIGGER_DEF_BYTES + TRIGGER_REASON_BYTES])
            if not seq & 1 and w[base] == seq:
                parts = (raw[:TRIGGER_DEF_BYTES], raw[TRIGGER_DEF_BYTES:])
                return tuple(p.split(b"\0", 1)[0].decode("utf-8", "replace") for p in parts)
            time.sleep(0)
        return "", ""

    def read_slot(self, index: int, raw: bytes | None = None) -> SlotView:
        """Slot ``index``; ``raw``: its bytes as :meth:`slots` just read them all at once."""
        b = slot_base(index)
        w = self.words
        for _ in range(100):
            if raw is None:
                raw = _read_at(self.fileno(), b * 8, SLOT_BYTES)
            nums = struct.unpack_from(f"<{SLOT_WORDS}q", raw)
            seq = nums[S_SEQ]
            texts = {
                f: raw[off : off + size].split(b"\0", 1)[0]
                for f, (off, size) in TEXT_FIELDS.items()
            }
            if not seq & 1 and w[b + S_SEQ] == seq:
                break
            raw = None
            time.sleep(0)
        state = nums[S_STATE]
        return SlotView(
            index=index,
            pid=nums[S_PID],
            rank=nums[S_RANK],
            step=nums[S_STEP],
            state=STATES[state] if 0 <= state < len(STATES) else f"unknown({state})",
            start=nums[S_START],
            stop=nums[S_STOP],
            applied=nums[S_APPLIED],
            heartbeat_ns=nums[S_BEAT_NS],
            pid_start=nums[S_PID_START],
            error=texts["error"].decode("utf-8", "replace"),
            error_generation=nums[S_ERR_GEN],
            root=texts["root"].decode("utf-8", "replace"),
            window=texts["window"].decode("utf-8", "replace"),
            rate_milli=nums[S_RATE],
            bell_fd=nums[S_BELL_FD],
            bell_token=nums[S_BELL_TOKEN],
            run=nums[S_RUN],
        )

    def slots(self) -> list[SlotView]:
        """Every claimed slot (live or dead), in slot order (one read of the slot area)."""
        area = slot_area(self)
        views = []
        for i in range(SLOT_COUNT):
            off = i * SLOT_BYTES
            if struct.unpack_from("<q", area, off + S_PID * 8)[0] != 0:
                views.append(self.read_slot(i, area[off : off + SLOT_BYTES]))
        return views


# -- attaching: is the file there a sound segment? ----------------------------------------


def _attach_fd(
    job: str, name: str, fd: int, level: int = logging.WARNING, repair: bool = True
) -> Segment | None:
    """The segment open as ``fd`` when it is usable; None when it was reclaimed (try
    again). A damaged one nobody uses is reclaimed when ``repair`` (a rank, a writer that
    would create the job) and refused with :class:`DamagedSegment` otherwise (a listing
    or an attach must not destroy what a person may want to look at)."""
    if not _usable_file(name, fd, level, repair):
        return None
    seg = Segment(job, fd, created=False)
    if not _names_file(name, seg.fileno()):  # the last process of a finished job just removed it
        seg.close(tidy=False)
        return None
    w = seg.words
    magic, layout = w[H_MAGIC], w[H_LAYOUT]
    if magic != MAGIC or layout != LAYOUT_VERSION:
        live = seg.live_pids() if magic == MAGIC else []
        if live:
            seg.close(tidy=False)
            raise SegmentError(
                f"segment {name} has another layout (version {layout}) and is in use "
                f"by pids {live}; use another job name or stop those processes."
            )
        if not repair:
            seg.close(tidy=False)
            what = "no dynprof_nb magic number" if magic != MAGIC else f"layout {layout}"
            raise DamagedSegment(f"segment {name} is damaged or foreign ({what}, nobody uses it).")
        if _reclaim(name, seg.fileno()):
            log.log(
                level,
                "dynprof_nb: reclaiming segment %s with an old layout or no magic number",
                name,
            )
        seg.close(tidy=False)
        return None
    damage = _damage(seg)
    if damage:
        live = seg.live_pids()
        if live or not repair:
            seg.close(tidy=False)
            users = f"in use by pids {live}" if live else "nobody uses it"
            raise DamagedSegment(f"segment {name} is damaged: {damage} ({users}).")
        if _reclaim(name, seg.fileno()):
            log.log(level, "dynprof_nb: reclaiming damaged segment %s: %s", name, damage)
        seg.close(tidy=False)
        return None
    if seg.is_stale():
        if _reclaim(name, seg.fileno()):
            forget_job(job)  # its locks and kept stacks went with every process of it
            log.log(
                level,
                "dynprof_nb: reclaiming stale segment for job %r (every process that used "
                "it is gone); starting from the default config.",
                job,
            )
        seg.close(tidy=False)
        return None
    return seg


def _usable_file(name: str, fd: int, level: int, repair: bool) -> bool:
    """The file's owner, mode and size allow attaching (else it is refused, or reclaimed and
    closed: False, try again)."""
    st = os.fstat(fd)
    if st.st_uid != os.getuid():
        os.close(fd)
        raise SegmentError(
            f"segment {name} belongs to uid {st.st_uid}, not you (uid {os.getuid()}); "
            "refusing to attach. Use another job name."
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.close(fd)
        raise SegmentError(
            f"segment {name} has mode {oct(stat.S_IMODE(st.st_mode))}, readable by others; "
            "refusing to attach. Remove it (dynprof_nb.contract.segment.unlink) and restart."
        )
    if st.st_size < SEGMENT_BYTES:
        # Segments are linked into place whole (see _shm_create): this one was cut short
        # (truncate) or is a foreign file. Nothing in it can be trusted.
        if not repair:
            os.close(fd)
            raise DamagedSegment(
                f"segment {name} is damaged: {st.st_size} bytes, not "
                f"{SEGMENT_BYTES} (truncated, or not a segment)."
            )
        if _reclaim(name, fd):
            log.log(level, "dynprof_nb: reclaiming unusable segment %s (size %d)", name, st.st_size)
        os.close(fd)
        return False
    return True


def _damage(seg: Segment) -> str:
    """What makes this segment's content impossible ("" when it is sound): words no
    dynprof_nb process writes (a slot count, a config length or a pid out of range)."""
    head = struct.unpack("<14q", seg.raw[0:112])
    if head[H_SLOTS] != SLOT_COUNT:
        return f"its header counts {head[H_SLOTS]} slots, not {SLOT_COUNT}"
    if not 0 <= head[H_LEN] <= CONFIG_CAPACITY or head[H_GEN] < 0 or head[H_SEQ] < 0:
        return (
            f"its config header is garbage (length {head[H_LEN]}, generation "
            f"{head[H_GEN]}, sequence {head[H_SEQ]})"
        )
    for who in (H_CREATOR, H_WRITER):
        if not 0 <= head[who] <= PID_LIMIT:
            return f"its header names pid {head[who]}, which cannot exist"
    area = slot_area(seg)
    for i in range(SLOT_COUNT):
        pid, rank, _, state = struct.unpack_from("<4q", area, i * SLOT_BYTES)
        if pid == 0:
            continue
        if not 0 < pid <= PID_LIMIT or not 0 <= state < len(STATES) or rank < 0:
            return f"rank slot {i} is garbage (pid {pid}, rank {rank}, state {state})"
    return ""


# -- leaving: is the job finished, and removing its name -----------------------------------


def _snapshot(seg: Segment) -> bytes | None:
    """The whole segment's bytes, or None when they cannot be trusted (cut short,
    overwritten)."""
    try:
        raw = _read_at(seg.fileno(), 0, SEGMENT_BYTES)
    except (OSError, SegmentError):
        return None
    return raw if struct.unpack_from("<q", raw)[0] == MAGIC else None


def _pending(seg: Segment) -> bool:
    """A request is pending: the config was written and no rank has applied it yet (a
    window asked for before the job starts, say). It keeps the segment for the ranks."""
    gen = seg.words[H_GEN]
    slots = seg.slots()
    if slots:
        return gen > 0 and max(s.applied for s in slots) < gen
    return gen > 0 and _asks_something(seg)


def _asks_something(seg: Segment) -> bool:
    """No rank has joined: is anything written for the ranks to come (a window, a standing
    key off its default)? A job prepared by mistake and then stopped asks nothing, and
    the last process to leave removes it."""
    from dynprof_nb.contract.protocol import decode  # the segment holds bytes; this reads them once

    got = seg.read_config()
    if got is None or not got[1]:
        return got is None  # mid-write: keep it
    try:
        cfg = decode(got[1]).config
    except Exception:  # bytes no controller wrote: keep them for a person to look at
        return True
    return cfg.has_window or cfg.to_dict() != type(cfg)().to_dict()


def _finished(seg: Segment, exiting: bool = False) -> bool:
    """Nothing left to do: every rank has closed (or is gone) and no request is pending.
    ``exiting``: this process's own ranks are leaving too."""
    me = os.getpid()
    return not _pending(seg) and not any(
        s.live and not (exiting and s.pid == me) for s in seg.slots()
    )


def _tidy(seg: Segment, exiting: bool = False, unjoined: bool = False) -> bool:
    """On leaving: remove the name if no other process is attached and the job is finished.

    We let go of our own presence first, then try for it exclusively, so that of several
    processes leaving at once none is held back by another that is itself leaving. Holding
    it exclusively shuts out newcomers (they wait for it, then see the name gone and create
    a fresh segment). Only called by ``close()`` and at exit: we stay detached. True if we
    removed the name."""
    if seg.removed or os.getpid() != seg.opener:
        return False
    try:
        fd = seg.fileno()
    except FdLost:  # closed (or closed under us): nothing of ours to let go of
        return False
    _presence(fd, fcntl.F_UNLCK)
    if not _presence(fd, fcntl.F_WRLCK):  # someone else is attached
        return False
    try:
        if (
            _snapshot(seg) is not None  # a damaged file is left to the next reclaim
            and (_finished(seg, exiting) or (unjoined and not seg.slots()))
            and _names_file(seg.name, fd)
        ):
            _shm_unlink(seg.name)
            seg.removed = True
            forget_job(seg.job)  # the node's relay files of this job go with it
            log.debug("dynprof_nb: job %r is finished; removed its segment", seg.job)
    finally:
        _presence(fd, fcntl.F_UNLCK)
    return seg.removed


# -- the config and the slots, read and written whole -------------------------------------


def _write_config(seg: Segment, data: bytes, bells: list[int], locked: bool) -> int:
    """The seqlocked write itself: bytes, length, crc, writer, generation, then the bells."""
    w = seg.words
    with nullcontext() if locked else seg.write_lock():
        seq = w[H_SEQ]
        if seq & 1:  # the previous writer died mid-write: its bytes are garbage anyway
            seq += 1
        w[H_SEQ] = seq + 1
        seg.raw[CONFIG_OFFSET : CONFIG_OFFSET + len(data)] = data
        w[H_LEN] = len(data)
        w[H_CRC] = zlib.crc32(data)
        w[H_WRITER] = os.getpid()
        w[H_WRITER_START] = pid_start_time(os.getpid())
        w[H_GEN] = gen = w[H_GEN] + 1
        w[H_SEQ] = seq + 2
        word = struct.pack("<q", gen)
        for fd in bells:
            try:
                os.pwrite(fd, word, BELL_GEN * 8)
            except OSError:
                pass
    return gen


def slot_base(index: int) -> int:
    """Index of slot ``index``'s first word in ``Segment.words`` (see :mod:`.slot`)."""
    return (SLOTS_OFFSET + index * SLOT_BYTES) // 8


def slot_area(seg: Segment) -> bytes:
    """Every slot's bytes, in one read (a claim and a damage check look at them all)."""
    return _read_at(seg.fileno(), SLOTS_OFFSET, SLOT_COUNT * SLOT_BYTES)


#: a slot's text fields: (offset in the slot, size in bytes)
TEXT_FIELDS = {
    "error": (ERROR_OFFSET, ERROR_BYTES),
    "root": (ROOT_OFFSET, ROOT_BYTES),
    "window": (WINDOW_OFFSET, WINDOW_BYTES),
}


def _fresh_with_config(generation: int, data: bytes) -> bytes:
    """A new segment's bytes holding ``data`` as config generation ``generation``."""
    raw = bytearray(SEGMENT_BYTES)
    data = data[:CONFIG_LIMIT]
    struct.pack_into(
        "<8q",
        raw,
        0,
        MAGIC,
        LAYOUT_VERSION,
        SLOT_COUNT,
        0,
        generation,
        len(data),
        zlib.crc32(data),
        time.time_ns(),
    )
    raw[CONFIG_OFFSET : CONFIG_OFFSET + len(data)] = data
    return bytes(raw)


def _with_creator(content: bytes) -> bytes:
    """``content`` with this process as its creator (the one that republished it)."""
    raw = bytearray(content)
    struct.pack_into("<q", raw, H_CREATOR * 8, os.getpid())
    struct.pack_into("<q", raw, H_CREATOR_START * 8, pid_start_time(os.getpid()))
    return bytes(raw)


# -- the doorbell: the one word a rank reads per step ------------------------------------------

BELL_BYTES = 4096
BELL_MAGIC = int.from_bytes(b"DYNBELL\x01", "little")
BELL_GEN = 4  # Monitor.step() reads this literal index
_SEALS = 0x0002 | 0x0004 | 0x0001  # F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL
_F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)


def _map_shared(fd: int, size: int) -> Any:
    """``size`` bytes of ``fd`` mapped shared, as a ctypes array that is never unmapped.

    Not :class:`mmap.mmap`: it keeps a ``dup`` of the descriptor on the lowest free number
    and closes that number when the object goes (at exit at the latest), which after a
    job's ``os.closerange`` is one of the job's own files. Python 3.13's ``trackfd=False``
    would avoid it; this works on every supported Python."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    addr = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        err = ctypes.get_errno()
        raise OSError(err, f"mmap of the doorbell failed: {os.strerror(err)}")
    return (ctypes.c_char * size).from_address(addr)


class Doorbell:
    """A rank's private word of shared memory that cannot fault.

    A ``memfd`` sealed against shrinking and growing: no process, this user's included, can
    truncate it, so reading its mapping can never raise SIGBUS (which reading a mapping of a
    ``/dev/shm`` file can, once anyone truncates that file). Writers ring it through
    ``/proc/<pid>/fd/<n>`` (published in the rank's slot, with a random token it checks);
    the rank's heartbeat thread also copies the segment's generation into it, for a writer
    that cannot reach ``/proc`` of the rank.
    """

    def __init__(self, job: str) -> None:
        fd = os.memfd_create(f"dynprof_nb.bell.{job}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        # a high number, checked by lost(): writers reach it as /proc/<pid>/fd/<n>, so a job
        # that closes it must not leave that path naming a file of its own
        self._own = OwnedFd(fd, f"job {job!r}'s doorbell")
        os.ftruncate(self.fd, BELL_BYTES)
        fcntl.fcntl(self.fd, _F_ADD_SEALS, _SEALS)
        self.token = secrets.randbits(62) + 1
        self._map = _map_shared(self.fd, BELL_BYTES)
        self.words = memoryview(self._map).cast("B").cast("q")
        self.words[0], self.words[1] = BELL_MAGIC, self.token

    @property
    def fd(self) -> int:
        """The number published in the slot (writers check the token before ringing)."""
        return self._own.fd

    def lost(self) -> bool:
        """Its descriptor was closed under the rank, or the number names another file: writers
        can no longer ring it (the mapping, and so ``step()``, still works)."""
        return not self._own.mine()

    def close(self) -> None:
        """Leaves the mapping in place (``step()`` may still read it on another thread):
        it goes with the process. The descriptor is closed only while it is still ours."""
        self._own.close()


def open_bell(slot: SlotView) -> int | None:
    """The doorbell of ``slot``'s rank, opened through ``/proc/<pid>/fd/<n>`` and checked
    (ours, its size, its magic and the slot's token); None when it cannot be reached or is
    not the one the slot names (the rank's heartbeat then catches up)."""
    # pid_alive, not slot.alive: the token already tells a reused pid apart, and a writer
    # need not read every rank's /proc/<pid>/stat before each write
    if slot.state == "closed" or not pid_alive(slot.pid) or not 0 < slot.bell_fd < 1 << 20:
        return None
    try:
        fd = os.open(f"/proc/{slot.pid}/fd/{slot.bell_fd}", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid == os.getuid() and st.st_size == BELL_BYTES and stat.S_ISREG(st.st_mode):
            if struct.unpack("<2q", os.pread(fd, 16, 0)) == (BELL_MAGIC, slot.bell_token):
                fd, mine = -1, fd
                return mine
    except (OSError, struct.error):
        pass
    finally:
        if fd >= 0:
            os.close(fd)
    return None


def ring(slot: SlotView, generation: int) -> bool:
    """Tell the rank of ``slot`` that config ``generation`` is there; False when its doorbell
    cannot be reached or is not the one the slot names."""
    fd = open_bell(slot)
    if fd is None:
        return False
    try:
        os.pwrite(fd, struct.pack("<q", generation), BELL_GEN * 8)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def list_jobs() -> list[str]:
    """Names of this user's job segments on this machine. A file there whose name is no job
    name (planted, or left by a foreign tool) is not one: none of ours could have made it,
    and listing it made ``jobs()`` and ``dynprof status`` fail on every job."""
    prefix = f"{PREFIX}.{os.getuid()}."
    try:
        names = os.listdir(_dir())
    except SegmentError:  # no private directory can be had: no job of ours either
        return []
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EACCES):
            return []
        raise
    jobs = (n[len(prefix) :] for n in names if n.startswith(prefix))
    return sorted(j for j in jobs if _JOB_NAME.fullmatch(j))


def run_of(seg: Segment) -> tuple[int, int]:
    """The job's current run and when it began (wall clock, ns): run 1 for the first ranks,
    bumped each time ranks join after every rank of the run before is gone (see
    :meth:`dynprof_nb.contract.slot.RankSlot.claim`); ``(0, 0)`` before any rank joined."""
    return seg.words[H_RUN], seg.words[H_RUN_STARTED]


def other_users() -> list[int]:
    """The uids of other users with a dynprof_nb directory in ``/dev/shm`` on this machine:
    users whose jobs this one cannot list (their private directories are closed to others),
    so a job name that is not this user's may still be theirs."""
    mine = os.getuid()
    uids = set()
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return []
    for name in names:
        if not name.startswith((f"{PREFIX}.", f"{PREFIX}-")):
            continue
        try:
            st = os.lstat(os.path.join(SHM_DIR, name))
        except OSError:
            continue
        if st.st_uid != mine:
            uids.add(st.st_uid)
    return sorted(uids)


def unlink(job: str) -> None:
    """Remove a job's segment by name (for a segment refused as unusable), and the node's
    relay files of that job with it."""
    _shm_unlink(segment_name(job))
    forget_job(job)
