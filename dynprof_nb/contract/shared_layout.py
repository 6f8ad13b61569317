"""What a rank and its controllers both read, beside the command: the step-time ring and the
trigger words inside the segment, and the stack-dump files beside it.

The rank side (:mod:`dynprof_nb.training.steptimes`, :mod:`dynprof_nb.training.stackdump`)
writes these; the controller side (:mod:`dynprof_nb.control.trigger`,
:mod:`dynprof_nb.control.stacks`, the cluster agents) reads them. Both import this module and
never each other, so a change of layout is made in one place and no import cycle joins
``training/`` and ``control/``. The segment (:mod:`.segment`) only reserves the bytes
of the ring and trigger regions; their words are laid out here.

**The step-time ring.** One per slot, written only by that rank's heartbeat thread: a header of
summary words (``R_*``, relative to :meth:`Segment.ring_base`), then
:data:`~.segment.RING_ENTRIES` ``(step, end_ns)`` pairs (``time.monotonic_ns``; the
step word carries :data:`APPROX` when the end time is a heartbeat's, not the step's own). The
count is published last, so a reader never sees half an entry.

**The trigger.** Numeric words (``T_*``, relative to :attr:`Segment.trigger_base`; word 0 is the
text seqlock), then its definition as JSON (checked by :func:`check_definition`) and the last
reason.

**Stack dumps.** In a private per-user directory (``stacks`` in the user's private directory,
``/dev/shm/dynprof_nb.<uid>/stacks``, mode 0700, owner-checked, never followed through a
symlink): ``<pid>.<start>.stack`` (faulthandler's
dump on :data:`STACK_SIGNAL`) and ``<job>.<rank>.<pid>.json`` (the side file: thread names, the
step and its timing). Beside them, ``<job>.last_stacks.json``: the stacks a controller took
at a stall (:func:`dynprof_nb.locks.kept_stacks_name`), removed with the job's segment.
"""

from __future__ import annotations

import math
import os
import signal
import stat
import tempfile
from pathlib import Path
from typing import Any

from dynprof_nb.contract.segment import RING_ENTRIES, RING_HEADER_WORDS, Segment

# -- the step-time ring --------------------------------------------------------------------

# ring header words (relative to Segment.ring_base)
R_COUNT, R_RECENT_NS, R_MEDIAN_NS, R_LAST_NS = range(4)
R_LOOKED_NS = 4  # when the heartbeat last looked at the step counter (every beat)


APPROX = 1 << 62  # in an entry's step word: its end time is a heartbeat's, not the step's own


def write_entry(words: Any, ring: int, step: int, end_ns: int, exact: bool = False) -> None:
    """Append one observation (the single writer: this rank's heartbeat thread). ``exact``:
    ``end_ns`` is when the step itself ended (the training thread's clock read), not when a
    heartbeat saw it had."""
    i = words[ring + R_COUNT]
    e = ring + RING_HEADER_WORDS + 2 * (i % RING_ENTRIES)
    words[e] = step if exact else step | APPROX
    words[e + 1] = end_ns
    words[ring + R_COUNT] = i + 1  # published last: a reader never sees a half entry


def read_entries(words: Any, ring: int, last: int = RING_ENTRIES) -> list[tuple[int, int, bool]]:
    """Up to ``last`` + 1 newest ``(step, end_ns, exact)`` entries, oldest first, none torn:
    those the writer overwrote while we read are dropped."""
    count = words[ring + R_COUNT]
    n = min(count, RING_ENTRIES - 1, last + 1)
    out = []
    for i in range(count - n, count):
        e = ring + RING_HEADER_WORDS + 2 * (i % RING_ENTRIES)
        word = words[e]
        out.append((word & ~APPROX, words[e + 1], not word & APPROX))
    overwritten = words[ring + R_COUNT] - (RING_ENTRIES - 1) - (count - n)
    return out[max(0, overwritten) :]


def durations(entries: list[tuple[int, int, bool]]) -> list[tuple[int, int, float, str]]:
    """``(step, end_ns, duration_s per step, kind)`` from consecutive entries: ``kind`` "step"
    for one step between two exact ends (its own duration), else "interval" (the mean of the
    steps since the previous entry, or a step timed by a heartbeat)."""
    rows = []
    for (s0, t0, x0), (s1, t1, x1) in zip(entries, entries[1:], strict=False):
        if s1 > s0 and t1 >= t0:
            kind = "step" if s1 - s0 == 1 and x0 and x1 else "interval"
            rows.append((s1, t1, (t1 - t0) / 1e9 / (s1 - s0), kind))
    return rows


def last_end(words: Any, ring: int) -> tuple[int, int] | None:
    """The newest entry's ``(step, end_ns)``: when this rank's last step ended (None before
    any entry)."""
    entries = read_entries(words, ring, 0)
    return (entries[-1][0], entries[-1][1]) if entries else None


def estimated_step(seg: Segment, slot: Any, now_ns: int, rate: float | None = None) -> int:
    """``slot.estimated_step`` (the published step extrapolated at the rank's rate, or at
    ``rate`` steps/s), except for a rank that is not stepping: when its heartbeat has looked
    since and seen no new step for 3 of its steps (and 0.1 s), it is where it stopped, never
    extrapolated. A heartbeat that has not looked lately (a busy machine) proves nothing: the
    rate is used then."""
    looked = seg.words[seg.ring_base(slot.index) + R_LOOKED_NS]
    beat_rate = slot.rate_milli / 1000
    idle_for = (looked - slot.heartbeat_ns) / 1e9
    if looked and beat_rate > 0 and idle_for > 0.1 + 3 / beat_rate:
        return slot.step
    if rate is None:
        return slot.estimated_step(now_ns)
    age = min(max(0, now_ns - slot.heartbeat_ns) / 1e9, 5.0)  # Slot.estimated_step's horizon
    return slot.step + int(rate * age)


def steps_per_s(seg: Segment, slot: Any) -> float:
    """How fast a rank steps now: the faster of its heartbeat's rate and its recent median
    step (the ring's last 9 steps). A one-off stall (the torch profiler's start holding the
    training thread for half a second) drags the heartbeat's rate down for a while, and a
    stop placed at that rate came a step too early for the rank, which then ended a step later
    than the others: two windows (tests/ui/test_live_browser.py, at load average 10)."""
    recent = seg.words[seg.ring_base(slot.index) + R_RECENT_NS]
    return max(slot.rate_milli / 1000, 1e9 / recent if recent > 0 else 0.0)


def common_step(seg: Segment, slots: list[Any], now_ns: int, ahead: int, margin_s: float) -> int:
    """The earliest step every rank of ``slots`` can still honour: its step now
    (:func:`estimated_step`, extrapolated at :func:`steps_per_s`) + ``ahead`` + ``margin_s`` at
    that rate, the latest of those (a rank reads a request at the end of the step it is in)."""

    def honours(s: Any) -> int:
        rate = steps_per_s(seg, s)
        return estimated_step(seg, s, now_ns, rate) + ahead + math.ceil(rate * margin_s)

    return max((honours(s) for s in slots), default=1)


def median_of(values: Any) -> float:
    """The median of ``values`` (0.0 when empty): the ring's summary words and the trigger's
    reference use this one definition."""
    v = sorted(values)
    n = len(v)
    if not n:
        return 0.0
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def job_median_ns(seg: Segment, word: int = R_RECENT_NS) -> float:
    """The median of the live ranks' recent step times (``word`` R_MEDIAN_NS: their rolling
    medians), 0 when none has one yet."""
    values = [seg.words[seg.ring_base(s.index) + word] for s in seg.slots() if s.live]
    return median_of([v for v in values if v > 0])


# -- the trigger ---------------------------------------------------------------------------

# trigger words (relative to Segment.trigger_base; word 0 is the text seqlock)
T_GEN, T_FIRED, T_LAST_FIRE_NS, T_BASELINE_NS, T_REQ, T_REQ_DONE, T_ARMED_NS = range(1, 8)
# windows the trigger asked for that a rank refused (its per-minute cap, its disk budget), and
# the config generation of the last one counted (each refused window is counted once)
T_REFUSED, T_REFUSED_GEN = 8, 9
# job.recent(n): a request count each rank's recent-steps keeper watches, and the n asked
# (dynprof_nb.training.recent)
T_RECENT_REQ, T_RECENT_STEPS = 10, 11
# what the request is for: RECENT_ASKED (job.recent(n)) or RECENT_HANG (the controller took
# a stalled job's stacks: every rank keeps all it holds, beside them); 0 in an older segment
T_RECENT_KIND = 12
RECENT_ASKED, RECENT_HANG = 0, 1
TRIGGER_DEFAULTS = {
    "slowdown": 1.5,
    "steps": 10,
    "cooldown_s": None,  # None: auto_cooldown_s, from the job's step time
    "max_windows": 3,
    "confirm": 5,
    "disk_budget_mb": None,
    "mode": "local",
    "window": {},
}


class TriggerError(ValueError):
    """A trigger definition that cannot be used (the message says which value)."""


def check_definition(raw: dict[str, Any]) -> dict[str, Any]:
    """A trigger definition with defaults filled in, every value checked."""
    unknown = sorted(set(raw) - set(TRIGGER_DEFAULTS) - {"armed_at"})
    if unknown:
        raise TriggerError(
            f"trigger: unknown option {unknown[0]!r}; the options are "
            f"{sorted(TRIGGER_DEFAULTS)} and the window's config keys."
        )
    d = dict(TRIGGER_DEFAULTS, **raw)

    def number(key: str, low: float, integer: bool = False) -> None:
        v = d[key]
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not math.isfinite(v)
            or v < low
            or (integer and int(v) != v)
        ):
            kind = "a whole number" if integer else "a number"
            raise TriggerError(f"trigger: {key}={v!r}; expected {kind} >= {low}.")
        d[key] = int(v) if integer else float(v)

    number("slowdown", 1.01)
    number("steps", 1, integer=True)
    if d["cooldown_s"] is not None:
        number("cooldown_s", 0)
    number("max_windows", 1, integer=True)
    number("confirm", 1, integer=True)
    if d["disk_budget_mb"] is not None:
        number("disk_budget_mb", 0)
    if d["mode"] not in ("local", "cluster"):
        raise TriggerError(f"trigger: mode={d['mode']!r}; expected 'local' or 'cluster'.")
    if not isinstance(d["window"], dict):
        raise TriggerError("trigger: window options must be a dict of config keys.")
    return d


COOLDOWN_WINDOWS = 20  # the auto cooldown: this many windows' worth of steps...
COOLDOWN_MIN_S = 10.0  # ...and at least this long


def cooldown_s(d: dict[str, Any], baseline_ns: float) -> float:
    """The trigger's cooldown: ``cooldown_s`` as given, else (auto) :data:`COOLDOWN_WINDOWS`
    x the window's length at the job's median step when armed, at least
    :data:`COOLDOWN_MIN_S`: 10-step windows of 10 ms steps are 10 s apart, of 2 s steps 400 s."""
    if d.get("cooldown_s") is not None:
        return float(d["cooldown_s"])
    return max(COOLDOWN_MIN_S, COOLDOWN_WINDOWS * d.get("steps", 1) * baseline_ns / 1e9)


# -- stack dumps ---------------------------------------------------------------------------

STACK_SIGNAL = signal.SIGRTMIN + 7  # why this one: see dynprof_nb.training.stackdump


class StackDirError(RuntimeError):
    """The private directory is not safe to use (another owner, too open, a symlink)."""


def stack_dir(create: bool = True) -> Path:
    """This user's private directory for stack dumps, created 0700 and checked every time:
    owned by us, a real directory (not a symlink), no access for group or others. It is
    ``stacks`` in the user's private directory (:func:`dynprof_nb.locks.private_dir`), not a
    name in ``/dev/shm`` itself that another user could create first."""
    from dynprof_nb.locks import STACKS, LockError, private_dir

    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    try:
        # not "dynprof_nb.<uid>.<name>": that is a job segment's name, listed by list_jobs()
        path = Path(private_dir(base)) / STACKS
    except LockError as exc:
        raise StackDirError(str(exc)) from None
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise StackDirError(
            f"{path} is not a private directory of uid {os.getuid()} (owner {info.st_uid}, "
            f"mode {stat.filemode(info.st_mode)}): refusing to use it for stack dumps. "
            "Remove it; dynprof_nb recreates it."
        )
    return path


def dump_name(pid: int, pid_start: int) -> str:
    """The dump file of process ``pid`` started at ``pid_start`` (clock ticks since boot)."""
    return f"{pid}.{pid_start}.stack"


def side_name(job: str, rank: int, pid: int) -> str:
    """The side file of one Monitor: job ``job``'s rank ``rank`` in process ``pid``."""
    return f"{job}.{rank}.{pid}.json"


def caught_signals(pid: int | str = "self") -> int:
    """The ``SigCgt`` mask of a process: bit ``n-1`` set when signal ``n`` has a handler."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"SigCgt:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def catches(pid: int | str, signum: int = STACK_SIGNAL) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (a controller signals only then)."""
    return bool(caught_signals(pid) >> (signum - 1) & 1)
