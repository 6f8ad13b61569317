"""The job segment: one POSIX shared-memory block per job, shared by controllers and ranks.

Layout (all integers little-endian int64 unless noted, so a slot field is one aligned word)::

    header   0..127      magic, layout version, slot count, config seqlock, generation, ...
    config   128..       config bytes (JSON, opaque here) under a seqlock, with a CRC32
    slots    ...         SLOT_COUNT fixed rank slots: numbers, error text, output root, window

Why this shape (the flaws of MindSpore's DynamicProfilerMonitor):

* one segment per *job name* and user (``dynprof_nb.<uid>.<job>``), never per hour;
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
  leaves nothing in ``/dev/shm``.

This module knows bytes, not config keys: it never parses the JSON it carries.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import logging
import mmap
import os
import re
import stat
import struct
import time
import weakref
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

try:  # CPython's own shm_open; used directly so no resource tracker ever unlinks our segment
    import _posixshmem
except ImportError:  # pragma: no cover - non-POSIX
    _posixshmem = None

log = logging.getLogger("dynprof_nb")

MAGIC = int.from_bytes(b"DYNPROF\x01", "little")
# 2: slots grew to 2 KiB so a full error message fits; 3: attached processes hold a presence
# lock (a process of layout 2 would not, so the last one leaving could not see it); 4: step-time
# rings and the trigger region after the slots
LAYOUT_VERSION = 4
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
# Step-time rings (dynprof_nb.training.steptimes): one per slot, written only by that rank's
# heartbeat thread: RING_HEADER_WORDS words of summary, then (step, end_ns) pairs.
RING_OFFSET = SLOTS_END
RING_BYTES = 4096
RING_HEADER_WORDS = 8
RING_ENTRIES = (RING_BYTES // 8 - RING_HEADER_WORDS) // 2
# The trigger (dynprof_nb.control.trigger): numeric words, then its definition and the last
# reason as text, each under the trigger's seqlock (T_SEQ).
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
NOTE_OFFSET = CONFIG_OFFSET + CONFIG_LIMIT

# slot words (index relative to the slot's first word)
S_PID, S_RANK, S_STEP, S_STATE, S_START, S_STOP, S_APPLIED, S_BEAT_NS, S_PID_START, S_SEQ = range(
    10
)
S_ERR_GEN = 10  # generation the error text belongs to
S_RATE = 11  # steps per second x 1000, as the rank's heartbeat thread last measured it
TEXT_OFFSET = SLOT_WORDS * 8
ERROR_OFFSET = TEXT_OFFSET
ROOT_OFFSET = ERROR_OFFSET + ERROR_BYTES
WINDOW_OFFSET = ROOT_OFFSET + ROOT_BYTES
assert WINDOW_OFFSET + WINDOW_BYTES == SLOT_BYTES

STATES = ("free", "idle", "armed", "recording", "saving", "excluded", "closed")
STATE = {name: i for i, name in enumerate(STATES)}

_JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class SegmentError(RuntimeError):
    """The segment cannot be used: wrong owner, incompatible layout, bad name."""


class NoSuchJob(SegmentError):
    """No segment by that name (asked not to create one)."""


def check_job_name(job: str) -> str:
    if not isinstance(job, str) or not _JOB_NAME.match(job):
        raise SegmentError(
            f"job name {job!r} is not usable: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit (e.g. 'llama-7b')."
        )
    return job


def segment_name(job: str) -> str:
    return f"/{PREFIX}.{os.getuid()}.{check_job_name(job)}"


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


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


def _shm_open(name: str, create: bool) -> int:
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
    if _posixshmem is not None:
        return _posixshmem.shm_open(name, flags, mode=0o600)
    return os.open("/dev/shm" + name, flags | os.O_NOFOLLOW, 0o600)  # pragma: no cover


def _shm_unlink(name: str) -> None:
    try:
        if _posixshmem is not None:
            _posixshmem.shm_unlink(name)
        else:  # pragma: no cover
            os.unlink("/dev/shm" + name)
    except FileNotFoundError:
        pass


def _reclaim(name: str, fd: int) -> bool:
    """Unlink ``name`` if it still names the file open as ``fd``; True if we did.

    Done under that file's writer lock, so that of two processes reclaiming the same stale
    segment at once, the second cannot unlink the fresh segment the first has just created
    under the same name (which would leave the first, and every rank attached to it, on an
    orphaned segment that no controller can reach).
    """
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        try:
            current = os.stat("/dev/shm" + name)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        if (current.st_dev, current.st_ino) != (mine.st_dev, mine.st_ino):
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
        current = os.stat("/dev/shm" + name)
    except FileNotFoundError:
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
            seg._tidy(exiting=True)
        except Exception:  # never raise at exit
            pass


def _leave_dropped(job: str, fd: int, opener: int) -> None:
    """A Segment garbage-collected without ``close()`` (``attach(job).start(...)`` as a
    one-liner, a function's local Job): leave as ``close()`` would. Its mapping is gone with
    it, so look through a fresh one on the same open file."""
    try:
        if os.getpid() == opener:
            Segment(job, os.dup(fd), created=False).close()
    except Exception:  # a finalizer must not raise
        pass
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


class Segment:
    """An open job segment. ``Segment.open(job)`` creates it or attaches to the live one."""

    def __init__(self, job: str, fd: int, created: bool) -> None:
        self.job = job
        self.name = segment_name(job)
        self.created = created
        self.removed = False  # set when this process removed the name on leaving
        self._fd = fd
        self._opener = os.getpid()  # a forked child shares our open file: it must not unlock it
        _presence(fd, fcntl.F_RDLCK, wait=True)  # waits out a last leaver removing the name
        self._map = mmap.mmap(fd, SEGMENT_BYTES)
        self._bytes = memoryview(self._map)
        self.words = self._bytes.cast("q")
        _OPEN.add(self)
        # dropped without close(): leave all the same (at exit, _leave_at_exit does)
        self._finalizer = weakref.finalize(self, _leave_dropped, job, fd, self._opener)
        self._finalizer.atexit = False

    # -- lifecycle ------------------------------------------------------------------------

    @classmethod
    def open(cls, job: str, *, create: bool = True, quiet: bool = False) -> Segment:
        """Attach to the job's segment, creating it when missing (and ``create``).

        A segment whose processes are all dead is reclaimed (one log line, at debug level when
        ``quiet``); one with a live process is never replaced. A segment owned by another user
        is refused. Without ``create``, a missing job raises :class:`NoSuchJob`.
        """
        name = segment_name(job)
        for _ in range(5):
            try:
                fd = _shm_open(name, create=False)
            except FileNotFoundError:
                if not create:
                    raise NoSuchJob(
                        f"no job named {job!r} on this machine: start the training side "
                        "(Monitor) first, or check the name with dynprof_nb.jobs()."
                    ) from None
                try:
                    fd = _shm_open(name, create=True)
                except FileExistsError:
                    continue  # somebody created it between our two calls: attach to theirs
                os.fchmod(fd, 0o600)
                os.ftruncate(fd, SEGMENT_BYTES)
                seg = cls(job, fd, created=True)
                seg._initialise()
                return seg
            seg = cls._attach_fd(job, name, fd, logging.DEBUG if quiet else logging.WARNING)
            if seg is not None:
                return seg
            if not create and not os.path.exists("/dev/shm" + name):
                raise NoSuchJob(
                    f"no job named {job!r} on this machine (its segment was stale "
                    "or finished and is gone): start the training side first."
                )
        raise SegmentError(f"could not create or attach the segment for job {job!r}; retry.")

    @classmethod
    def _attach_fd(
        cls, job: str, name: str, fd: int, level: int = logging.WARNING
    ) -> Segment | None:
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
                "refusing to attach. Remove it (dynprof_nb.segment.unlink) and restart."
            )
        if st.st_size < SEGMENT_BYTES:
            # A creator that died between create and truncate, or a foreign file.
            if st.st_size == 0 and time.time() - st.st_mtime < 2.0:
                os.close(fd)
                time.sleep(0.01)  # its creator is still initialising it
                return None
            if _reclaim(name, fd):
                log.log(
                    level, "dynprof_nb: reclaiming unusable segment %s (size %d)", name, st.st_size
                )
            os.close(fd)
            return None
        seg = cls(job, fd, created=False)
        if not _names_file(name, fd):  # the last process of a finished job just removed it
            seg.close(tidy=False)
            return None
        w = seg.words
        for _ in range(200):  # the creator writes MAGIC last; wait briefly for it
            if w[H_MAGIC] == MAGIC:
                break
            time.sleep(0.005)
        if w[H_MAGIC] != MAGIC or w[H_LAYOUT] != LAYOUT_VERSION:
            live = seg.live_pids()
            if live:
                seg.close(tidy=False)
                raise SegmentError(
                    f"segment {name} has another layout (version {w[H_LAYOUT]}) and is in use "
                    f"by pids {live}; use another job name or stop those processes."
                )
            if _reclaim(name, seg._fd):
                log.log(level, "dynprof_nb: reclaiming segment %s with an old layout", name)
            seg.close(tidy=False)
            return None
        if seg.is_stale():
            if _reclaim(name, seg._fd):
                log.log(
                    level,
                    "dynprof_nb: reclaiming stale segment for job %r (every process that used "
                    "it is gone); starting from the default config.",
                    job,
                )
            seg.close(tidy=False)
            return None
        return seg

    def _initialise(self) -> None:
        w = self.words
        w[H_LAYOUT] = LAYOUT_VERSION
        w[H_SLOTS] = SLOT_COUNT
        w[H_CREATED] = time.time_ns()
        w[H_CREATOR] = os.getpid()
        w[H_CREATOR_START] = pid_start_time(os.getpid())
        w[H_MAGIC] = MAGIC

    def is_stale(self) -> bool:
        """True when neither the creator, the last writer nor any rank is alive, and the
        segment is not a request waiting for its job (written, and no rank has come yet:
        ``dynprof start JOB 20 30`` before the training starts), and no controller has it open
        (see :meth:`watch`)."""
        if self.live_pids() or _watched_by_others(self._fd):
            return False
        return not (self.words[H_GEN] > 0 and not self.slots())

    def watch(self) -> None:
        """Mark this process as a controller of the job for as long as it has the segment open:
        ranks that restart after all of theirs died then join this segment (and its config)
        rather than take it for stale. Dropped by the kernel with the open file."""
        _watch_lock(self._fd)

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

    def pending(self) -> bool:
        """A request is pending: the config was written and no rank has applied it yet (a
        window asked for before the job starts, say). It keeps the segment for the ranks."""
        gen = self.words[H_GEN]
        slots = self.slots()
        if slots:
            return gen > 0 and max(s.applied for s in slots) < gen
        return gen > 0 and self._asks_something()

    def _asks_something(self) -> bool:
        """No rank has joined: is anything written for the ranks to come (a window, a standing
        key off its default)? A job prepared by mistake and then stopped asks nothing, and
        the last process to leave removes it."""
        from dynprof_nb.protocol import decode  # the segment holds bytes; this reads them once

        got = self.read_config()
        if got is None or not got[1]:
            return got is None  # mid-write: keep it
        try:
            cfg = decode(got[1]).config
        except Exception:  # bytes no controller wrote: keep them for a person to look at
            return True
        return cfg.has_window or cfg.to_dict() != type(cfg)().to_dict()

    def finished(self, exiting: bool = False) -> bool:
        """Nothing left to do: every rank has closed (or is gone) and no request is pending.
        ``exiting``: this process's own ranks are leaving too."""
        me = os.getpid()
        return not self.pending() and not any(
            s.live and not (exiting and s.pid == me) for s in self.slots()
        )

    def _tidy(self, exiting: bool = False, unjoined: bool = False) -> bool:
        """On leaving: remove the name if no other process is attached and the job is finished.

        We let go of our own presence first, then try for it exclusively, so that of several
        processes leaving at once none is held back by another that is itself leaving. Holding
        it exclusively shuts out newcomers (they wait for it, then see the name gone and create
        a fresh segment). Only called by ``close()`` and at exit: we stay detached. True if we
        removed the name."""
        if self._fd < 0 or self.removed or os.getpid() != self._opener:
            return False
        _presence(self._fd, fcntl.F_UNLCK)
        if not _presence(self._fd, fcntl.F_WRLCK):  # someone else is attached
            return False
        try:
            if (
                self.words[H_MAGIC] == MAGIC
                and (self.finished(exiting) or (unjoined and not self.slots()))
                and _names_file(self.name, self._fd)
            ):
                _shm_unlink(self.name)
                self.removed = True
                log.debug("dynprof_nb: job %r is finished; removed its segment", self.job)
        finally:
            _presence(self._fd, fcntl.F_UNLCK)
        return self.removed

    def close(self, tidy: bool = True, unjoined: bool = False) -> bool:
        """Detach. The segment stays for the other processes of the job; the last process to
        leave a finished job (see :meth:`finished`) removes it, and with ``unjoined`` also one
        that no rank ever joined, whatever it asks. True if this call removed it."""
        if self._fd < 0:
            return False
        removed = self._tidy(unjoined=unjoined) if tidy else False
        _OPEN.discard(self)
        if os.getpid() == self._opener:
            _presence(self._fd, fcntl.F_UNLCK)  # the mapping may outlive the fd (BufferError)
        self.words.release()
        self._bytes.release()
        try:
            self._map.close()
        except BufferError:  # a caller still holds a view; the map goes with the process
            pass
        self._finalizer.detach()
        os.close(self._fd)
        self._fd = -1
        return removed

    def unlink(self) -> None:
        """Remove the segment name; processes still attached keep their mapping."""
        _shm_unlink(self.name)

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- config (seqlock) -------------------------------------------------------------------

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Exclusive writer lock; the kernel releases it if the holder dies."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

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
        w = self.words
        with nullcontext() if locked else self.write_lock():
            seq = w[H_SEQ]
            if seq & 1:  # the previous writer died mid-write: its bytes are garbage anyway
                seq += 1
            w[H_SEQ] = seq + 1
            self._bytes[CONFIG_OFFSET : CONFIG_OFFSET + len(data)] = data
            w[H_LEN] = len(data)
            w[H_CRC] = zlib.crc32(data)
            w[H_WRITER] = os.getpid()
            w[H_WRITER_START] = pid_start_time(os.getpid())
            w[H_GEN] = gen = w[H_GEN] + 1
            w[H_SEQ] = seq + 2
        return gen

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
                    data = bytes(self._bytes[CONFIG_OFFSET : CONFIG_OFFSET + length])
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
        self._bytes[NOTE_OFFSET : NOTE_OFFSET + NOTE_BYTES] = raw + bytes(NOTE_BYTES - len(raw))
        w[H_NOTE_SEQ] += 1
        w[H_NOTE_BEAT_NS] = time.time_ns()

    def beat_note(self) -> None:
        self.words[H_NOTE_BEAT_NS] = time.time_ns()

    def read_note(self) -> tuple[str, int]:
        """(text, heartbeat ns) of the helper note; ``("", 0)`` when no helper wrote one."""
        w = self.words
        for _ in range(100):
            seq = w[H_NOTE_SEQ]
            raw = bytes(self._bytes[NOTE_OFFSET : NOTE_OFFSET + NOTE_BYTES]).split(b"\0", 1)[0]
            if not seq & 1 and w[H_NOTE_SEQ] == seq:
                return raw.decode("utf-8", "replace"), w[H_NOTE_BEAT_NS]
            time.sleep(0)
        return "", w[H_NOTE_BEAT_NS]

    # -- slots ------------------------------------------------------------------------------

    def slot_base(self, index: int) -> int:
        """Index of the slot's first word in ``words``."""
        return (SLOTS_OFFSET + index * SLOT_BYTES) // 8

    def claim_slot(self, rank: int) -> int:
        """Take a slot for this process: its rank's dead slot, else a free one, else any dead
        one."""
        me, my_start = os.getpid(), pid_start_time(os.getpid())
        w = self.words
        with self.write_lock():
            free = reuse = dead = None
            for i in range(SLOT_COUNT):
                b = self.slot_base(i)
                pid = w[b + S_PID]
                if pid == 0:
                    free = i if free is None else free
                    continue
                if process_alive(pid, w[b + S_PID_START]):
                    continue
                if w[b + S_RANK] == rank and reuse is None:
                    reuse = i
                elif dead is None:
                    dead = i
            index = next((i for i in (reuse, free, dead) if i is not None), None)
            if index is None:
                raise SegmentError(
                    f"all {SLOT_COUNT} rank slots of job {self.job!r} are in use by live processes."
                )
            b = self.slot_base(index)
            self._bytes[b * 8 : (b * 8) + SLOT_BYTES] = bytes(SLOT_BYTES)
            ring = self.ring_base(index) * 8
            self._bytes[ring : ring + RING_BYTES] = bytes(RING_BYTES)
            w[b + S_RANK] = rank
            w[b + S_STATE] = STATE["idle"]
            w[b + S_START] = w[b + S_STOP] = -1
            w[b + S_BEAT_NS] = time.time_ns()
            w[b + S_PID_START] = my_start
            w[b + S_PID] = me
        return index

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
            self._bytes[start : start + size] = raw + bytes(size - len(raw))
            start += size
        w[base] += 1

    def read_trigger_text(self) -> tuple[str, str]:
        """(definition, last reason) from a consistent snapshot; ``("", "")`` if none."""
        w, base = self.words, self.trigger_base
        start = TRIGGER_OFFSET + TRIGGER_WORDS * 8
        for _ in range(100):
            seq = w[base]
            raw = bytes(self._bytes[start : start + TRIGGER_DEF_BYTES + TRIGGER_REASON_BYTES])
            if not seq & 1 and w[base] == seq:
                parts = (raw[:TRIGGER_DEF_BYTES], raw[TRIGGER_DEF_BYTES:])
                return tuple(p.split(b"\0", 1)[0].decode("utf-8", "replace") for p in parts)
            time.sleep(0)
        return "", ""

    def release_slot(self, index: int) -> None:
        b = self.slot_base(index)
        self.words[b + S_STATE] = STATE["closed"]

    def write_text(self, index: int, field: str, text: str) -> None:
        """Write a slot's text field (error, root, window) under the slot's own seqlock."""
        offset, size = _TEXT_FIELDS[field]
        raw = text.encode("utf-8", "replace")[: size - 1]
        b = self.slot_base(index)
        start = b * 8 + offset
        w = self.words
        w[b + S_SEQ] += 1
        self._bytes[start : start + size] = raw + bytes(size - len(raw))
        w[b + S_SEQ] += 1

    def read_slot(self, index: int) -> SlotView:
        b = self.slot_base(index)
        w = self.words
        for _ in range(100):
            seq = w[b + S_SEQ]
            nums = [w[b + k] for k in range(SLOT_WORDS)]
            texts = {
                f: bytes(self._bytes[b * 8 + off : b * 8 + off + size]).split(b"\0", 1)[0]
                for f, (off, size) in _TEXT_FIELDS.items()
            }
            if not seq & 1 and w[b + S_SEQ] == seq:
                break
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
        )

    def slots(self) -> list[SlotView]:
        """Every claimed slot (live or dead), in slot order."""
        w = self.words
        return [self.read_slot(i) for i in range(SLOT_COUNT) if w[self.slot_base(i) + S_PID] != 0]


_TEXT_FIELDS = {
    "error": (ERROR_OFFSET, ERROR_BYTES),
    "root": (ROOT_OFFSET, ROOT_BYTES),
    "window": (WINDOW_OFFSET, WINDOW_BYTES),
}


def list_jobs() -> list[str]:
    """Names of this user's job segments on this machine."""
    prefix = f"{PREFIX}.{os.getuid()}."
    try:
        names = os.listdir("/dev/shm")
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EACCES):
            return []
        raise
    return sorted(n[len(prefix) :] for n in names if n.startswith(prefix))


def unlink(job: str) -> None:
    """Remove a job's segment by name (for a segment refused as unusable)."""
    _shm_unlink(segment_name(job))
