"""The controller side of ``job.stacks()`` and of naming a hang, on one machine.

**Taking stacks.** For each live rank of the job (its slot's pid and start time), the dump
file the rank opened at Monitor start (:mod:`dynprof_nb.training.stackdump`) is truncated and
the rank is sent :data:`~dynprof_nb.contract.shared_layout.STACK_SIGNAL`. A signal is sent only to
a process that runs as this user, still has the slot's start time, and shows the signal caught
in ``/proc/PID/status`` (so a process without the handler is never killed by it). Each dump is
complete when its file has stopped growing for :data:`SETTLE_S`; a rank whose file is still
empty at the deadline (5 s by default) is named silent, with the likely reason. Frames are
numbered from the outermost (``depth`` 0 is the thread's first frame, e.g. ``<module>``;
faulthandler writes the innermost first). ``thread`` is the thread's name as the rank last
recorded it (once a second), else its ident in hex.

**What a dump lacks.** faulthandler writes at most :data:`MAX_THREADS` threads, newest first,
and at most :data:`MAX_FRAMES` frames of each, innermost first, and marks each cut with
``...``. A cut is never silent: a thread cut short gets an outermost row saying its older
frames are not shown, the rank gets a ``cut`` note (``.attrs["truncated"]`` and the tree list
them), and a main thread left out of the dump (the oldest thread: the first cut when a job
has more than 100) is named as missing, in a ``MainThread`` row, never simply absent.

**Naming a hang.** :func:`stall` reads each live rank's side file (its step, when that step
last changed, the median of its recent step times): when no live rank has stepped for
``hang_after`` x the median step time (at least ``hang_min_s``), the job has stalled.
:func:`note_stall` writes "stalled since step N (X s)" into the status rows and takes the stacks
once per stall, kept as ``job.last_stacks`` and in the private directory, so a notebook
attached later sees them too.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynprof_nb.contract.segment import SlotView, process_alive
from dynprof_nb.contract.shared_layout import (
    STACK_SIGNAL,
    StackDirError,
    catches,
    dump_name,
    side_name,
    stack_dir,
)
from dynprof_nb.locks import kept_stacks_name

if TYPE_CHECKING:
    from dynprof_nb.analysis.stacks import StackFrame

DUMP_TIMEOUT_S = 5.0
SETTLE_S = 0.1  # a dump is complete once its file has not grown for this long
POLL_S = 0.01
HANG_AFTER = 20.0  # x the median step time
HANG_MIN_S = 60.0
MAX_DUMP_BYTES = 4 << 20  # a dump larger than this is read only this far

MAX_THREADS = 100  # faulthandler's limits (Python/traceback.c): it writes "..." past them
MAX_FRAMES = 100
FRAMES_CUT = f"<older frames not shown: faulthandler writes a thread's innermost {MAX_FRAMES}>"
MAIN_MISSING = (
    f"<the main thread is not in the dump: faulthandler writes at most {MAX_THREADS} "
    "threads, newest first, and the main thread is the oldest>"
)
_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):")
_FRAME = re.compile(r'^  File "(.*)", line (\d+|\?\?\?) in (.*)$')


def parse_dump(text: str, names: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """faulthandler's all-threads text as rows ``thread, thread_id, depth, function, file,
    line``, outermost frame first (depth 0). A thread with no Python frame gets one row
    whose function says so."""
    names = names or {}
    rows: list[dict[str, Any]] = []
    threads: list[tuple[str, list[tuple[str, str, int | None]]]] = []
    for line in text.splitlines():
        head = _THREAD.match(line)
        if head:
            threads.append((str(int(head.group(2), 16)), []))
            continue
        frame = _FRAME.match(line)
        if frame and threads:
            lineno = int(frame.group(2)) if frame.group(2).isdigit() else None
            threads[-1][1].append((frame.group(3), frame.group(1), lineno))
        elif line == "  ..." and threads:  # this thread's older frames were cut
            threads[-1][1].append((FRAMES_CUT, "", None))
    for ident, frames in threads:
        thread = names.get(ident) or f"0x{int(ident):x}"
        if not frames:
            frames = [("<no Python frame>", "", None)]
        for depth, (function, file, lineno) in enumerate(reversed(frames)):
            rows.append(
                {
                    "thread": thread,
                    "thread_id": f"0x{int(ident):x}",
                    "depth": depth,
                    "function": function,
                    "file": file,
                    "line": lineno,
                }
            )
    return rows


def dump_cuts(
    text: str, main: str | None = None, threads: int | None = None
) -> tuple[list[str], bool]:
    """What faulthandler left out of ``text``: notes for a person, and whether the main
    thread (ident ``main``, from the side file) is missing. ``threads``: how many threads
    the rank last recorded (to say how many were not shown)."""
    notes: list[str] = []
    lines = text.splitlines()
    idents = [str(int(m.group(2), 16)) for m in map(_THREAD.match, lines) if m]
    if "..." in lines:
        more = f"{threads - len(idents)} more" if threads and threads > len(idents) else "more"
        notes.append(
            f"faulthandler stopped after {len(idents)} threads ({more} not shown; it writes "
            f"at most {MAX_THREADS}, newest first)"
        )
    cut = lines.count("  ...")
    if cut:
        notes.append(
            f"{cut} thread{'s' if cut > 1 else ''} cut at {MAX_FRAMES} frames (the older "
            "frames are not shown)"
        )
    missing = bool(main) and main not in idents and bool(idents)
    if missing:
        notes.append("the main thread is not in the dump")
    elif not main and "..." in lines:
        notes.append("the main thread may be among the threads not shown")
    return notes, missing


def read_side(job: str, slot: SlotView, directory: Path | None = None) -> dict[str, Any] | None:
    """The rank's side file (thread names, step timing), or None."""
    try:
        directory = directory or stack_dir(create=False)
        fd = os.open(directory / side_name(job, slot.rank, slot.pid), os.O_RDONLY | os.O_NOFOLLOW)
    except (OSError, StackDirError):
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            record = json.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


class _Pending:
    def __init__(self, slot: SlotView, fd: int, side: dict[str, Any] | None) -> None:
        self.slot, self.fd, self.side = slot, fd, side or {}
        self.size, self.since = 0, time.monotonic()


def _refusal(slot: SlotView, path: Path, side: dict[str, Any] | None = None) -> str | None:
    """Why this rank must not be signalled, or None. ``side``: the rank's side file, which
    says when the job replaced the signal's handler, and which descriptor the dump is
    written to (signalled only while ``/proc/PID/fd/N`` is the dump file: a job that closed
    it may have opened a file of its own on that number)."""
    try:
        owner = os.stat(f"/proc/{slot.pid}").st_uid
    except OSError:
        return "its process is gone"
    if owner != os.getuid():
        return f"its process runs as uid {owner}, not as you (uid {os.getuid()})"
    if not catches(slot.pid, STACK_SIGNAL):
        return (
            f"it has no handler for signal {STACK_SIGNAL} (an older dynprof_nb, or "
            "something else owns that signal): not signalled, a default action would "
            "kill it"
        )
    try:
        info = os.lstat(path)
    except OSError:
        return f"it has no dump file {path.name} (an older dynprof_nb?)"
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        return f"its dump file {path} is not a regular file of yours"
    side = side or {}
    if side.get("handler") not in (None, "ok"):
        return str(side["handler"])
    fd = side.get("dump_fd")
    if isinstance(fd, int) and fd >= 0:
        try:
            target = os.stat(f"/proc/{slot.pid}/fd/{fd}")
        except OSError:
            target = None
        if target is None or (target.st_dev, target.st_ino) != (info.st_dev, info.st_ino):
            return (
                f"its stack-dump descriptor {fd} no longer names its dump file (the job closed "
                "it, os.closerange?); not signalled, so nothing is written into a file of the "
                "job's. The rank reopens it within a second: try again."
            )
    return None


def collect(
    job: str, slots: list[SlotView], timeout: float = DUMP_TIMEOUT_S, node: str | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Signal the job's live ranks among ``slots`` and gather their dumps: ``(rows, silent)``.
    Returns within ``timeout`` (plus file reads)."""
    from dynprof_nb.control.status import THIS_NODE

    node = node or THIS_NODE
    deadline = time.monotonic() + timeout
    directory = stack_dir()
    pending: list[_Pending] = []
    silent: list[dict[str, Any]] = []
    seen: set[int] = set()
    for slot in slots:
        if not slot.live or slot.pid in seen:
            continue
        seen.add(slot.pid)
        path = directory / dump_name(slot.pid, slot.pid_start)
        side = read_side(job, slot, directory)  # before the signal: a rank may exit after it
        why = _refusal(slot, path, side)
        fd = -1
        if why is None:
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
                _lock(fd, deadline)  # one controller at a time per rank
                os.ftruncate(fd, 0)
                if not process_alive(slot.pid, slot.pid_start):
                    raise ProcessLookupError("it exited")
                os.kill(slot.pid, STACK_SIGNAL)
            except (OSError, TimeoutError) as exc:
                why = f"could not be signalled: {exc}"
                if fd >= 0:
                    os.close(fd)
        if why is not None:
            silent.append({"rank": slot.rank, "node": node, "pid": slot.pid, "why": why})
            continue
        pending.append(_Pending(slot, fd, side))
    rows: list[dict[str, Any]] = []
    try:
        while pending:
            now = time.monotonic()
            for p in list(pending):
                size = os.fstat(p.fd).st_size
                if size != p.size:
                    p.size, p.since = size, now
                elif size and now - p.since >= SETTLE_S:
                    rows += _rows_of(p, node)
                    pending.remove(p)
                    os.close(p.fd)
            if now >= deadline:
                break
            time.sleep(POLL_S)
        for p in pending:  # past the deadline: what was written, and the rank named
            if p.size:
                rows += _rows_of(p, node)
            silent.append(
                {
                    "rank": p.slot.rank,
                    "node": node,
                    "pid": p.slot.pid,
                    "why": (
                        f"dump incomplete after {timeout:g} s"
                        if p.size
                        else f"no dump within {timeout:g} s (stopped with SIGSTOP, "
                        "in uninterruptible I/O, or blocking the signal?)"
                    ),
                }
            )
    finally:
        for p in pending:
            os.close(p.fd)
    return rows, silent


def _lock(fd: int, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                raise TimeoutError("another controller is taking its stacks") from None
            time.sleep(POLL_S)


def _rows_of(p: _Pending, node: str) -> list[dict[str, Any]]:
    os.lseek(p.fd, 0, os.SEEK_SET)
    text = os.read(p.fd, MAX_DUMP_BYTES).decode("utf-8", "replace")
    names = p.side.get("threads") if isinstance(p.side.get("threads"), dict) else {}
    main = p.side.get("main") if isinstance(p.side.get("main"), str) else None
    rows = parse_dump(text, names)
    notes, missing = dump_cuts(text, main, len(names) or None)
    if missing:
        rows += _main_rows(p.side, f"0x{int(main):x}" if main and main.isdigit() else "", notes)
    out = [{"rank": p.slot.rank, "node": node, "pid": p.slot.pid, **row} for row in rows]
    if notes and out:
        out[0]["cut"] = notes  # StackFrame.from_rows puts these in .attrs["truncated"]
    return out


def _main_rows(side: dict[str, Any], main_id: str, notes: list[str]) -> list[dict[str, Any]]:
    """The main thread a dump left out: its stack as the rank last recorded it (a rank with
    more threads than faulthandler writes records it every second), said how old; else one
    row naming it missing."""
    stack, at = side.get("main_stack"), side.get("main_stack_mono")
    row = {"thread": "MainThread", "thread_id": main_id, "file": "", "line": None}
    if not isinstance(stack, list) or not stack or not isinstance(at, (int, float)):
        return [row | {"depth": 0, "function": MAIN_MISSING}]
    age = max(0.0, time.monotonic() - float(at))
    notes[notes.index("the main thread is not in the dump")] = (
        f"the main thread is not in the dump; its stack is the one the rank recorded "
        f"{age:.1f} s before"
    )
    return [
        row | {"depth": depth, "function": str(f[0]), "file": str(f[1]), "line": f[2]}
        for depth, f in enumerate(stack)
        if isinstance(f, list) and len(f) == 3
    ]


def take_stacks(job: str, slots: list[SlotView], timeout: float = DUMP_TIMEOUT_S) -> StackFrame:
    """``job.stacks()`` of a job on this machine."""
    from dynprof_nb.analysis.stacks import StackFrame

    rows, silent = collect(job, slots, timeout)
    return StackFrame.from_rows(rows, silent, job=job)


# -- naming a hang ---------------------------------------------------------------------------


def stall(
    records: list[dict[str, Any] | None],
    now: float,
    hang_after: float = HANG_AFTER,
    hang_min_s: float = HANG_MIN_S,
    clock: str = "last_step_mono",
) -> tuple[int, float] | None:
    """``(step, seconds)`` when no rank of ``records`` (one per live rank) has stepped for
    ``hang_after`` x the median step time (at least ``hang_min_s``), else None. A rank without
    a record, or a job that has not finished a step, is never called stalled."""
    if not records or any(r is None or r.get(clock) is None for r in records):
        return None
    step = max(int(r.get("step") or 0) for r in records)
    if step < 1:
        return None
    times = [float(r["step_s"]) for r in records if r.get("step_s")]
    threshold = max(hang_min_s, hang_after * statistics.median(times) if times else 0.0)
    age = now - max(float(r[clock]) for r in records)
    return (step, age) if age >= threshold else None


def stall_text(step: int, seconds: float) -> str:
    return f"stalled since step {step} ({seconds:.0f} s): job.stacks() shows where each rank is"


def mark_stalled(rows: list[dict[str, Any]], text: str) -> None:
    """Put the stall into every live row's error (first, so it is seen)."""
    for row in rows:
        if row.get("alive") is True:
            row["error"] = f"{text}; {row['error']}" if row.get("error") else text


def last_stacks_path(key: str) -> Path:
    return stack_dir() / kept_stacks_name(key)


def save_last(key: str, frame: StackFrame) -> None:
    """Keep the stacks taken at a stall where a later notebook finds them (written whole)."""
    path = last_stacks_path(key)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(frame.to_json_text())
    os.replace(tmp, path)


def load_last(key: str) -> StackFrame | None:
    from dynprof_nb.analysis.stacks import StackFrame

    try:
        fd = os.open(last_stacks_path(key), os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as fh:
            return StackFrame.from_json_text(fh.read())
    except (OSError, ValueError, KeyError, StackDirError):
        return None


class HangWatch:
    """One controller's memory of the stall it has already captured (one capture per stall)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.captured: tuple[int, int] | None = None
        self.last: StackFrame | None = None

    def note(
        self, found: tuple[int, float] | None, rows: list[dict[str, Any]], since: float, take: Any
    ) -> None:
        """Mark ``rows`` for a stall ``found`` (``since``: when the last step was, on the
        clock of ``found``); take and keep the stacks once per stall."""
        if found is None:
            return
        step, seconds = found
        text = stall_text(step, seconds)
        mark_stalled(rows, text)
        episode = (step, round(since))
        if self.captured == episode:
            return
        self.captured = episode
        try:
            frame = take()
        except Exception as exc:  # status() must still answer
            import logging

            logging.getLogger("dynprof_nb").warning("dynprof_nb: stacks at the stall: %s", exc)
            return
        frame.attrs["reason"] = text
        self.last = frame
        try:
            save_last(self.key, frame)
        except OSError:
            pass

    def last_stacks(self) -> StackFrame | None:
        if self.last is None:
            self.last = load_last(self.key)
        return self.last


def progress_fields(job: str, slot: SlotView) -> dict[str, Any]:
    """What a node agent adds to a rank's status row so a cluster controller can name a stall:
    the median step time and when (wall clock) the rank last stepped; unchanged while stalled,
    so they cost no extra status push."""
    record = read_side(job, slot) if slot.state != "closed" else None
    if not record:
        return {}
    return {"step_s": record.get("step_s"), "last_step_wall": record.get("last_step_wall")}


def local_stall(
    job: str, slots: list[SlotView], hang_after: float, hang_min_s: float
) -> tuple[tuple[int, float] | None, float]:
    """The stall of a local job's live ranks (by their side files), and when the last step
    was (monotonic clock)."""
    live = [s for s in slots if s.live]
    records = [read_side(job, s) for s in live]
    found = stall(records, time.monotonic(), hang_after, hang_min_s)
    since = max((float(r["last_step_mono"]) for r in records if r), default=0.0)
    return found, since
