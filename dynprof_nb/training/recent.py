"""The recent-steps record: always on, the last N steps of this rank, kept when it matters.

A window starts *after* something is noticed, so the slow steps that fired the trigger are
gone by the time it records. This record keeps them: at every moment the rank holds the last
``steps`` steps (``Monitor(recent_steps=N)``, ``DYNPROF_NB_RECENT_STEPS``; 0 turns it off) with

* each step's start and end: the training thread's own end times, which the timed ``step()``
  already writes for the step-time ring (:mod:`~dynprof_nb.training.steptimes`); nothing is
  added to ``step()``;
* the user's ranges (``dynprof_nb.range``), the data-loader wait among them (a range of
  category :data:`WAIT_CATEGORY`), while no window records (a window's backend takes them then,
  and the window itself has them);
* GC pauses (``gc.callbacks``: only a collection pays).

Each record says which parts it saw and which it could not, and why (``recent.parts`` in its
``window.json``, see :func:`parts`): the ranges of steps a window recorded (that window's
trace has them), a data-loader wait no range marks, collectives (read from torch's Flight
Recorder where a rank has one, else only ranges of category ``communication``), sampled
stacks.

Memory is bounded and allocated once: ``steps x RANGES_PER_STEP`` range slots and
:data:`GC_SLOTS` GC slots in preallocated lists (a range overwrites the oldest slot; an
integer per timestamp is the only allocation, as any clock read makes). About
:data:`SLOT_BYTES` bytes a slot: 300 steps are about 1 MB.

It is written (:class:`RecentKeeper`, its own thread, never the training thread) as a window
directory like any other, with ``"recent"`` in its ``window.json``: when the trigger fires
(every rank, as the window it fired starts: the steps before that window, the slow ones that
fired it included), on demand (``job.recent(100)``, which bumps
:data:`~dynprof_nb.contract.shared_layout.T_RECENT_REQ`), and when a controller takes a
stalled job's stacks (the same request, of kind ``RECENT_HANG``): then every step it holds,
the ranges still open in the hung step named in its reason ("kept at a stall: its last step
(61) ended 12.3 s before; in 'allreduce' for 12.2 s"). A rank whose hung thread holds the
GIL (stuck in C code that does not release it) writes nothing: its keeper cannot run; its
stacks still come.
A failed write (a full disk) is logged and lost; the job never sees it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dynprof_nb.contract import window_dirs
from dynprof_nb.contract.config import RECENT_STEPS_DEFAULT, RECENT_STEPS_MAX
from dynprof_nb.contract.protocol import step_marker
from dynprof_nb.contract.shared_layout import (
    RECENT_HANG,
    T_FIRED,
    T_RECENT_KIND,
    T_RECENT_REQ,
    T_RECENT_STEPS,
    T_REQ,
)
from dynprof_nb.training import ranges
from dynprof_nb.training.frdump import no_recorder
from dynprof_nb.training.gcpauses import GC_CATEGORY, GC_EVENT, GcPauses
from dynprof_nb.training.steptimes import ENDS_KEEP, ENDS_MASK

try:
    import orjson
except ImportError:  # pragma: no cover
    orjson = None

log = logging.getLogger("dynprof_nb")

DEFAULT_STEPS = RECENT_STEPS_DEFAULT
MAX_STEPS = ENDS_KEEP - 2  # the training thread's end times hold this many steps safely
assert MAX_STEPS == RECENT_STEPS_MAX, "the config key's bound is the end times' (config.py)"
ENV = "DYNPROF_NB_RECENT_STEPS"
RANGES_PER_STEP = 32  # range slots per step kept (a step with more pushes older ranges out)
GC_SLOTS = 256
SLOT_BYTES = 110  # five list entries and two integers a range slot (measured: sys.getsizeof)
WAIT_CATEGORY = "dataloader"  # ``dynprof_nb.range("next batch", category="dataloader")``
#: the category of the collectives a record holds (torch's Flight Recorder's entries)
COLLECTIVE_CATEGORY = "collective"
COMM_CATEGORY = "communication"  # ``dynprof_nb.range("allreduce", category="communication")``
MARK_COLLECTIVES = f"mark them with dynprof_nb.range(name, category={COMM_CATEGORY!r})"
HANDOFFS = 64  # when the ranges went to a window and came back, the newest kept
POLL_S = 0.2  # how often the keeper looks at the trigger and request words (few GIL wakes)
PENDING_POLL_S = 0.01  # how often while a trigger's record waits for its window's first step
TRIGGER_WAIT_S = 5.0  # a trigger's record waits at most this for the window it fired
STEP_CATEGORY = "user_annotation"

_clock = time.monotonic_ns  # the clock of the training thread's end times


class RecentSteps:
    """The rings (see the module docstring). ``open_range``/``close_range`` make it a range
    sink (:mod:`~dynprof_nb.training.ranges`); :meth:`snapshot` copies it, off the training
    thread."""

    def __init__(self, steps: int = DEFAULT_STEPS) -> None:
        self.steps = max(1, min(int(steps), MAX_STEPS))
        size = self.size = self.steps * RANGES_PER_STEP
        self.names: list[Any] = [None] * size
        self.cats: list[Any] = [None] * size
        self.tids = [0] * size
        self.t0 = [0] * size
        self.t1 = [0] * size
        self.opened = 0  # ranges opened so far (the next slot is opened % size)
        self.gc_t0 = [0] * GC_SLOTS
        self.gc_t1 = [0] * GC_SLOTS
        self.gc_n = 0
        self._gc = GcPauses(self._gc_pause, clock=_clock)
        # (step, True) when a window's backend took the ranges, (step, False) when they came
        # back (ranges.set_sink; step: the last one ended then, from ``step_now``, which the
        # keeper sets): the steps between are not in this record's ranges. By step number,
        # not by time: a backend's start under load ends well into its first step
        self.handoffs: deque[tuple[int, bool]] = deque(maxlen=HANDOFFS)
        self.step_now: Callable[[], int] = lambda: 0

    def lent(self, to_window: bool) -> None:
        """A window's backend took the range sink (True) or gave it back (False): at a step's
        end, on the training thread (a window begins after the step that armed it)."""
        self.handoffs.append((self.step_now(), to_window))

    def lent_steps(self, lo: int, hi: int) -> list[int]:
        """The steps of ``lo..hi`` whose ranges a window took."""
        out: set[int] = set()
        since = None
        for step, on in list(self.handoffs):
            if on and since is None:
                since = step
            elif not on and since is not None:
                out.update(range(max(lo, since + 1), min(hi, step) + 1))
                since = None
        if since is not None:
            out.update(range(max(lo, since + 1), hi + 1))
        return sorted(out)

    @property
    def bytes(self) -> int:
        """The stated memory bound of the rings."""
        return self.size * SLOT_BYTES + GC_SLOTS * 80

    def start(self) -> None:
        """Be the range sink between windows and listen to GC."""
        ranges.set_base_sink(self)
        self._gc.start()

    def stop(self) -> None:
        ranges.set_base_sink(None)
        self._gc.stop()

    # -- the training thread's (through dynprof_nb.range) ----------------------------------

    def open_range(self, name: str, category: str) -> int:
        k = self.opened
        self.opened = k + 1
        i = k % self.size
        self.names[i] = name
        self.cats[i] = category
        self.tids[i] = threading.get_native_id()
        self.t1[i] = 0
        self.t0[i] = _clock()
        return k

    def close_range(self, token: int) -> None:
        now = _clock()
        if self.opened - token <= self.size:  # not overwritten since it opened
            self.t1[token % self.size] = now

    def open_ranges(self, since: int) -> list[tuple[str, str, int]]:
        """``(name, category, t0)`` of the ranges opened at or after ``since`` and not closed
        yet, oldest first: where a hung step is."""
        names, cats, t0s, t1s = list(self.names), list(self.cats), list(self.t0), list(self.t1)
        found = [
            (str(names[i]), str(cats[i]), t0s[i])
            for i in range(self.size)
            if names[i] is not None and not t1s[i] and t0s[i] >= since
        ]
        return sorted(found, key=lambda r: r[2])

    def _gc_pause(self, _token: Any, t0: int, t1: int, _tid: int, _info: Any) -> None:
        i = self.gc_n % GC_SLOTS
        self.gc_t0[i], self.gc_t1[i] = t0, t1
        self.gc_n += 1

    # -- the keeper's --------------------------------------------------------------------

    def snapshot(self, ends: list[int], step: int, exact_from: int | None, last: int) -> dict:
        """The last ``last`` steps (at most :attr:`steps`) ended by step ``step``, their
        ranges and GC pauses: ``{"steps": [(n, t0, t1)], "ranges": [(name, cat, tid, t0,
        t1)], "gc": [(t0, t1)], "note": str}``. Steps are those whose start and end the
        training thread timed (a loop under 0.5 ms a step is not timed: then none)."""
        want = max(1, min(int(last), self.steps))
        lo = step - want + 1
        if exact_from is None:
            lo = step + 1
        else:
            lo = max(lo, exact_from + 1, step - ENDS_KEEP + 2)
        steps = [(s, ends[(s - 1) & ENDS_MASK], ends[s & ENDS_MASK]) for s in range(lo, step + 1)]
        steps = [s for s in steps if 0 < s[1] <= s[2]]
        note = ""
        if not steps:
            note = "no timed steps (a loop under 0.5 ms a step is not timed per step)"
            return {"steps": [], "ranges": [], "gc": [], "note": note, "parts": {}}
        begin, end = steps[0][1], steps[-1][2]
        names, cats, tids = list(self.names), list(self.cats), list(self.tids)
        t0s, t1s = list(self.t0), list(self.t1)
        kept = [
            (names[i], cats[i], tids[i], t0s[i], t1s[i])
            for i in range(self.size)
            if t1s[i] and begin <= t0s[i] and t1s[i] <= end and names[i] is not None
        ]
        kept.sort(key=lambda r: r[3])
        gc_t0, gc_t1 = list(self.gc_t0), list(self.gc_t1)
        pauses = [
            (a, b) for a, b in zip(gc_t0, gc_t1, strict=True) if b and begin <= a and b <= end
        ]
        if self.opened > self.size:
            oldest = min((t for t, e in zip(t0s, t1s, strict=True) if e), default=end)
            if oldest > begin:
                note = "ranges before the oldest kept one were pushed out (more than "
                note += f"{RANGES_PER_STEP} a step)"
        lent = self.lent_steps(steps[0][0], steps[-1][0])
        return {
            "steps": steps,
            "ranges": kept,
            "gc": sorted(pauses),
            "note": note,
            "parts": parts(kept, lent),
        }


def parts(kept: list[tuple], lent: list[int]) -> dict[str, Any]:
    """Which parts a record saw (``seen``: their names) and which it could not (``unseen``:
    ``{part: why}``), from its ranges ``kept`` and the steps whose ranges a window took
    (``lent``). Steps and GC pauses are always seen (the training thread's own end times,
    ``gc.callbacks``)."""
    cats = {r[1] for r in kept}
    seen = ["steps", "GC pauses"]
    unseen: dict[str, str] = {}
    if lent:
        lo, hi = min(lent), max(lent)
        unseen["ranges"] = (
            f"in steps {lo}-{hi} a window recorded them (its trace has them)"
            if hi - lo + 1 == len(lent)
            else f"in {len(lent)} steps ({lo}-{hi}) windows recorded them (their traces have them)"
        )
    if kept:
        seen.insert(1, "ranges")
    elif "ranges" not in unseen:
        unseen["ranges"] = "no dynprof_nb.range closed in these steps"
    if WAIT_CATEGORY in cats:
        seen.append("data-loader waits")
    else:
        unseen["data-loader waits"] = (
            f"no range of category {WAIT_CATEGORY!r}: the loader is not wrapped "
            f'(with dynprof_nb.range("next batch", category="{WAIT_CATEGORY}"): '
            "batch = next(it))"
        )
    if COMM_CATEGORY in cats:
        seen.append("collectives (marked ranges)")
    else:
        unseen["collectives"] = f"no Flight Recorder was read; {MARK_COLLECTIVES}"
    unseen["Python stacks"] = "not sampled by this record"
    return {"seen": seen, "unseen": unseen}


def write_record(
    root: Path, identity: dict[str, Any], snap: dict[str, Any], recent: dict[str, Any]
) -> Path | None:
    """Write ``snap`` as a window directory under ``root`` (a ``trace.json`` in the built-in
    backend's format, ``window.json`` with ``recent``); None when it has no steps."""
    steps = snap["steps"]
    if not steps:
        return None
    first, last = steps[0][0], steps[-1][0]
    tmp = window_dirs.create_window_dir(root, identity["rank"], first, last)
    try:
        base_mono = steps[0][1]
        base_ns = time.time_ns() - (_clock() - base_mono)
        _write_trace(tmp / "trace.json", identity, snap, base_mono, base_ns)
        manifest = window_dirs.new_manifest(
            job=identity["job"],
            rank=identity["rank"],
            start=first,
            stop=last,
            backend="builtin",
            config={},
            run=identity.get("run", 0),
            run_started_at=identity.get("run_started_at"),
        )
        manifest.update(status="complete", reason=recent.get("reason") or None)
        manifest["recent"] = dict(
            recent, steps=len(steps), note=snap["note"], parts=snap.get("parts") or {}
        )
        return window_dirs.publish(tmp, manifest)
    except BaseException:
        try:
            window_dirs.mark_failed(tmp, "the recent-steps record could not be written")
        except OSError:  # a full disk may refuse even that: the directory stays hidden
            pass
        raise


def _write_trace(
    path: Path, identity: dict[str, Any], snap: dict[str, Any], base: int, base_ns: int
) -> None:
    pid, rank, tid = os.getpid(), identity["rank"], identity["tid"]

    def us(t: int) -> float:
        return (t - base) / 1000.0

    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"rank {rank}"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": "training"}},
    ]
    for n, t0, t1 in snap["steps"]:
        events.append(
            {"ph": "X", "cat": STEP_CATEGORY, "name": step_marker(n), "pid": pid, "tid": tid,
             "ts": us(t0), "dur": (t1 - t0) / 1000.0}
        )  # fmt: skip
    for name, cat, rtid, t0, t1 in snap["ranges"]:
        events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": rtid, "ts": us(t0),
             "dur": (t1 - t0) / 1000.0}
        )  # fmt: skip
    for c in snap.get("collectives", []):  # wall times (torch's clock) onto the trace's
        timed = c.get("started_ns") and c.get("completed_ns")
        events.append(
            {"ph": "X", "cat": COLLECTIVE_CATEGORY, "name": c["name"], "pid": pid, "tid": tid,
             "ts": (c["created_ns"] - base_ns) / 1000.0,
             "dur": (c["completed_ns"] - c["started_ns"]) / 1000.0 if timed else 0.0,
             "args": {"pg": c.get("pg"), "seq": c.get("seq")}}
        )  # fmt: skip
    for t0, t1 in snap["gc"]:
        events.append(
            {"ph": "X", "cat": GC_CATEGORY, "name": GC_EVENT, "pid": pid, "tid": tid,
             "ts": us(t0), "dur": (t1 - t0) / 1000.0}
        )  # fmt: skip
    trace = {
        "schemaVersion": 1,
        "displayTimeUnit": "ns",
        "baseTimeNanoseconds": base_ns,
        "distributedInfo": {"rank": rank, "world_size": identity.get("world_size")},
        "otherData": {"dynprof_nb": {"backend": "builtin", "recent": True, "rank": rank}},
        "traceEvents": events,
    }
    if orjson is not None:
        path.write_bytes(orjson.dumps(trace))
    else:  # pragma: no cover
        import json

        path.write_text(json.dumps(trace), encoding="utf-8")


def steps_asked(argument: int | None) -> int | None:
    """How many steps this process asked for: ``Monitor(recent_steps=)``, else
    ``DYNPROF_NB_RECENT_STEPS``, else None (then the job's config says, at start)."""
    if argument is not None:
        return int(argument)
    text = os.environ.get(ENV, "").strip()
    try:  # inf and 1e400 overflow int(): a bad value is ignored, never the job's end
        return int(float(text)) if text else None
    except (ValueError, OverflowError):
        log.warning("dynprof_nb: %s=%r is not a number of steps; ignored", ENV, text)
        return None


def config_steps(seg: Any) -> int:
    """The job's config key ``recent_steps`` as the segment holds it now (its default when
    the segment has no config yet or it cannot be read)."""
    from dynprof_nb.contract.protocol import decode

    try:
        got = seg.read_config(attempts=50)
        if got is None or got[0] <= 0:
            return DEFAULT_STEPS
        return int(decode(got[1]).config.recent_steps)
    except Exception:  # a config this rank cannot read: its own errors say so elsewhere
        return DEFAULT_STEPS


class RecentKeeper:
    """The thread that writes the record when the trigger fires or a controller asks.

    Built with what it needs: the record (or the steps asked: None means the job's config
    says, read by :meth:`begin` when the rank joins), the rank's slot (its segment's trigger words),
    ``source()`` -> ``(ends, step, exact_from)`` from the Monitor, ``root()`` -> where
    windows go, ``state()`` -> the rank's window state, the identity (job, rank, run, tid)
    for the manifest, and ``collectives(rank, since_ns)`` -> ``(entries, why none)``, the
    rank's collectives since a wall time (torch's Flight Recorder:
    :func:`dynprof_nb.training.frdump.collectives_since`), read only for a record whose kind
    ``collectives_for(kind)`` says: reading 2,000 entries takes 170-190 ms of the GIL the
    training thread shares (torch's own dump holds it ~20 ms at once on a quiet 2-core machine,
    130-150 ms at load 50), so a running job pays it only
    where asked (``Monitor(flight_recorder=True)`` or the config key); a hung rank's record
    always reads it.
    It looks every :data:`POLL_S`; a write never raises out of it."""

    def __init__(
        self,
        record: RecentSteps | int | None,
        slot: Any,
        source: Callable[[], tuple[list[int], int, int | None]],
        root: Callable[[], Path],
        state: Callable[[], str],
        identity: dict[str, Any],
        collectives: Callable[[int, int], tuple[list[dict[str, Any]], str]] | None = None,
        collectives_for: Callable[[str], bool] = lambda kind: kind == "hang",
    ) -> None:
        self.asked = record.steps if isinstance(record, RecentSteps) else record
        if not isinstance(record, RecentSteps):  # sized now when asked, else by begin()
            record = RecentSteps(record if record and record > 0 else 1)
        self.record = record
        self.slot, self.source, self.root = slot, source, root
        self.state = state
        self.identity = identity
        self.collectives, self.collectives_for = collectives, collectives_for
        self.closed = threading.Event()
        self.seen: tuple[int, int, int] | None = None
        # a trigger's record not written yet: (when it is due anyway, its manifest part, the
        # first step of the window it fired, when known)
        self.pending: tuple[float, dict[str, Any], int | None] | None = None
        self.written: list[Path] = []
        self.last_error = ""
        self.thread = threading.Thread(target=self._run, name="dynprof_nb-recent", daemon=True)

    def begin(self, seg: Any) -> bool:
        """Size the record (the steps asked, else the job's config on ``seg``), start it and
        this thread; False (nothing started) when that is 0 steps: the record is off."""
        steps = self.asked if self.asked is not None else config_steps(seg)
        if steps <= 0:
            return False
        if self.asked is None:
            self.record = RecentSteps(steps)
        self.record.step_now = lambda: self.source()[1]
        self.record.start()
        self.thread.start()
        return True

    def close(self) -> None:
        self.closed.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(1.0)
        if self.thread.ident is not None:  # begun: the record listens to ranges and GC
            self.record.stop()

    def _words(self) -> tuple[int, int, int] | None:
        seg = self.slot.seg
        if seg is None:
            return None
        w, tb = seg.words, seg.trigger_base
        return w[tb + T_FIRED], w[tb + T_REQ], w[tb + T_RECENT_REQ]

    def _run(self) -> None:
        # a trigger's record is due once the step before its window ends: looked for every
        # PENDING_POLL_S meanwhile, so it is written close to the window's start
        while not self.closed.wait(POLL_S if self.pending is None else PENDING_POLL_S):
            try:
                self.look()
            except Exception as exc:  # a full disk, a lost segment: the record is lost
                self.last_error = f"the recent-steps record was not written: {exc!r}"
                log.warning("dynprof_nb rank %s: %s", self.identity["rank"], self.last_error)

    def look(self) -> Path | None:
        """One look: note a trigger that fired or a request that came since the last look,
        and write what is due. A trigger's record waits until this rank has ended the step
        before the window it fired (it holds the steps up to that one, the slow ones
        included), or :data:`TRIGGER_WAIT_S` (a rank that refused the window)."""
        words = self._words()
        if words is None:
            return None
        seen, self.seen = self.seen, words
        seg = self.slot.seg
        if seen is not None and words[2] > seen[2]:
            last = seg.words[seg.trigger_base + T_RECENT_STEPS] or self.record.steps
            if seg.words[seg.trigger_base + T_RECENT_KIND] == RECENT_HANG:
                return self.write({"kind": "hang", "request": words[2]}, self.record.steps)
            return self.write({"kind": "asked", "request": words[2], "asked_steps": last}, last)
        fired = seen is not None and (words[0] > seen[0] or words[1] > seen[1])
        if fired and self.pending is None:  # (re-arming the trigger resets its counts)
            reason = seg.read_trigger_text()[1]
            recent = {"kind": "trigger", "fired": words[0], "reason": reason}
            self.pending = (time.monotonic() + TRIGGER_WAIT_S, recent, _window_start(seg))
        if self.pending is None:
            return None
        due, recent, first = self.pending
        step = self.source()[1]
        if first is not None and step >= first - 1:  # every step before the window ended
            self.pending = None
            return self.write(recent, self.record.steps, first - 1)
        if (first is None and self.state() in ("recording", "saving")) or time.monotonic() >= due:
            self.pending = None
            return self.write(recent, self.record.steps, step if first is None else first - 1)
        return None

    def write(self, recent: dict[str, Any], last: int, upto: int | None = None) -> Path | None:
        """Write the last ``last`` steps ended by step ``upto`` (default: the latest)."""
        ends, step, exact_from = self.source()
        if upto is not None:
            step = min(step, upto)
        snap = self.record.snapshot(ends, step, exact_from, last)
        if recent.get("kind") == "hang" and snap["steps"]:
            recent = dict(recent, **hang_facts(self.record, snap["steps"][-1]))
        if self.collectives is not None and snap["steps"]:
            read = self.collectives if self.collectives_for(str(recent.get("kind"))) else None
            snap = with_collectives(snap, read, int(self.identity["rank"]))
        path = write_record(self.root(), self.identity, snap, recent)
        if path is not None:
            self.written.append(path)
        return path


NOT_READ = (
    "torch's Flight Recorder is read for a running job's record only with "
    "Monitor(flight_recorder=True) or the config key flight_recorder: its dump holds the GIL "
    "the training thread needs (for 170-190 ms measured)"
)


def with_collectives(
    snap: dict[str, Any],
    read: Callable[[int, int], tuple[list[dict[str, Any]], str]] | None,
    rank: int,
) -> dict[str, Any]:
    """``snap`` with the rank's collectives entered since its first step began (``read``:
    :func:`dynprof_nb.training.frdump.collectives_since`; None: not read for this record),
    and its ``parts`` saying so, or saying why there are none. A failed read loses the
    collectives, never the record."""
    since_ns = time.time_ns() - (_clock() - snap["steps"][0][1])
    try:
        got, why = read(rank, since_ns) if read is not None else ([], no_recorder() or NOT_READ)
    except Exception as exc:  # a torch that changed its dump: the record without them
        got, why = [], f"the Flight Recorder's dump could not be read: {exc!r}"[:300]
    parts = snap.get("parts") or {"seen": [], "unseen": {}}
    seen, unseen = list(parts.get("seen", [])), dict(parts.get("unseen", {}))
    if got:
        seen.append("collectives (Flight Recorder)")
        unseen.pop("collectives", None)
    elif "collectives" in unseen and why:
        unseen["collectives"] = f"{why}; {MARK_COLLECTIVES}"
    return dict(snap, collectives=got, parts={"seen": seen, "unseen": unseen})


def hang_facts(record: RecentSteps, last_step: tuple[int, int, int]) -> dict[str, Any]:
    """What a hang record says of the hang: how long since ``last_step`` ``(n, t0, t1)``
    ended, and the ranges still open since then (``open``: name, category, seconds open),
    as its ``reason``."""
    step, _, end = last_step
    now = _clock()
    opened = [
        {"name": name, "category": cat, "open_s": round((now - t0) / 1e9, 3)}
        for name, cat, t0 in record.open_ranges(end)
    ]
    reason = f"kept at a stall: its last step ({step}) ended {(now - end) / 1e9:.1f} s before"
    if opened:
        reason += "; in " + ", ".join(f"{o['name']!r} for {o['open_s']:.1f} s" for o in opened)
    return {"reason": reason, "open": opened}


def _window_start(seg: Any) -> int | None:
    """The first step of the window the trigger just asked for (local mode writes it with the
    request), or None (cluster mode: the node agent places it later)."""
    from dynprof_nb.contract.protocol import decode

    got = seg.read_config(attempts=50)
    if got is None or got[0] <= 0:
        return None
    config = decode(got[1]).config
    return int(config.start_step) if config.has_window else None


__all__ = ["DEFAULT_STEPS", "RecentKeeper", "RecentSteps", "WAIT_CATEGORY", "write_record"]
