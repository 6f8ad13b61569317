"""The culprit, not the victim: which rank holds the others back, by one rule that ``w.explain()``
and ``w.advise()`` share (docs/definitions.md, "Straggler").

In a synchronous job every rank's step ends together: the rank with more work of its own makes
the others wait for it in their collectives, so their steps grow as *communication*. A rank's
**own work** is its step minus the time it waits in collectives (host windows:
:mod:`.host_phases`'s ``communication``; device windows: the step trace's Communication (Not
Overlapped)): compute, data loading, GC, sync points and host time outside any operator. Where
the window records no collective at all (the built-in backend sees neither operators nor gloo's
threads), a rank's wait is indistinguishable from host time outside any range: then own work is
the recorded phases only (compute, data loading, GC, sync), and the verdict says so. The
straggler is the rank whose own work is larger (than the other ranks', in one window) or grew
(against itself in a baseline window), by more than the noise bound and the floor. Time the
others spend waiting is evidence for it, never the reason to name a rank. Where the reference's
training thread waited longer for a CPU than the rank's (a busier baseline; training-thread
records only), that extra wait, at the reference's share of own work in its step, is taken out
of the reference before the growth is judged (``reference_cpu_wait_us``): a busy baseline's
inflated compute otherwise hides a real growth (a 60 ms loader stall judged as +24 ms, under
that baseline's noise). A rank whose own work did not grow is never named for it.

The cause is the own phase whose excess is largest -- unless the rank's excess is waiting
for a core: **CPU contention**. Each backend records the training thread's on-CPU time and
run-queue delay (runnable, waiting for a CPU) over the window (``w.thread_cpu()``, from Linux's
per-thread scheduler statistics). A thread that runs longer also waits longer on a busy machine,
so the named rank's waiting is compared at the reference's *rate* (the reference: itself in the
baseline, or the median of the other ranks; ``rate = reference run-queue / reference on-CPU``):
its **contention excess** is its run-queue delay per step minus ``rate x`` its on-CPU time, its
**work excess** ``(on-CPU - reference on-CPU) x (1 + rate)``, the work it did more with that
work's usual wait. The cause is CPU contention when the contention excess is at least
:data:`CONTENTION_SHARE` (a third) of the own-work excess and more than the work excess: another
process or thread held its cores, it did not do more work.
Where a rank has no such record (not Linux, a window of another profiler), contention cannot be
told apart, and the verdict says so (``cpu_missing``). Between two windows, a change of the step
that the training threads' run-queue delay follows on every rank (:func:`load_changed`) is the
machine's load, not the job's work. A window faster than its baseline beyond the noise, where
one rank's training thread waited for a CPU in the baseline longer than in the window by at
least :data:`LOAD_SHARE` of the step's drop (:func:`baseline_busier`), is "the baseline ran
busier": in a synchronous job one rank held up by a busy machine holds up every rank's step, so
one rank's wait is enough.

Windows are compared by the *median* of their per-step values (a step slowed by a load spike
moves a mean, not a median). The **noise bound** of a difference of two medians of per-step
values ``a`` and ``b``: ``3 * 1.2533 * 1.4826 * sqrt(MAD(a)^2/len(a) + MAD(b)^2/len(b))`` --
three standard errors (1.2533: a median's standard error over a mean's), each window's spread
estimated robustly from the median absolute deviation of its steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.traces.interface import Window

from .host_phases import PHASES, step_phases

NOISE_K = 3.0
MAD_TO_SIGMA = 1.4826
MEDIAN_SE = 1.2533  # a median's standard error over a mean's (normal steps)
WAIT = "communication"
DEVICE_PHASES = ["computing", "communication", "free"]
BLIND_PHASE = "other"
CONTENTION = "CPU contention"
# the contention excess must be at least this share of the own-work excess (and more than the
# work excess) for the cause to be CPU contention: the run-queue totals span the whole step, the
# reference's wake-ups from its waits in collectives included, so they understate the part of
# the excess inside own work
CONTENTION_SHARE = 1 / 3
# a step's change between windows is the machine's load when every rank's run-queue delay moved
# the same way, on average by at least this share of it (most of it)
LOAD_SHARE = 0.5


def noise_bound(a: pd.Series, b: pd.Series) -> float:
    """The noise bound of ``median(a) - median(b)`` (module docstring); 0 with no steps."""
    a, b = pd.Series(a, dtype=float).dropna(), pd.Series(b, dtype=float).dropna()
    if a.empty or b.empty:
        return 0.0
    mad_a = float((a - a.median()).abs().median())
    mad_b = float((b - b.median()).abs().median())
    se = math.sqrt(mad_a**2 / len(a) + mad_b**2 / len(b))
    return NOISE_K * MEDIAN_SE * MAD_TO_SIGMA * se


def phases_per_step(w: Window) -> tuple[pd.DataFrame, list[str], str]:
    """(rank, step, duration_us, one column per phase), the phase names, and their source:
    ``"device"`` (the step trace: computing, communication not overlapped, free), ``"host"``
    (:func:`.host_phases.step_phases`) or ``"operators"`` (no events: the operators' self time
    per step, communication apart, each clipped to what is left of the step)."""
    st = w.steps
    if "rank" not in st:
        st = st.assign(rank=int(getattr(w, "rank", None) or 0))
    k = w.kernels
    if not k.empty and "computing_us" in st and st["computing_us"].notna().any():
        br = w.step_breakdown()
        br = br[br["duration_us"].notna()]
        out = pd.DataFrame(
            {
                "rank": br["rank"].astype(int),
                "step": br["step"],
                "computing": br["computing_us"].clip(lower=0).fillna(0.0),
                "communication": br["communication_not_overlapped_us"].clip(lower=0).fillna(0.0),
                "free": br["free_us"].clip(lower=0).fillna(0.0),
            }
        )
        out["duration_us"] = out[DEVICE_PHASES].sum(axis=1)
        return out.reset_index(drop=True), DEVICE_PHASES, "device"
    try:
        return step_phases(w), PHASES, "host"
    except (LookupError, KeyError, ValueError):
        return from_operators(w, st), ["compute", "communication", "other"], "operators"


def from_operators(w: Window, st: pd.DataFrame) -> pd.DataFrame:
    from .host_phases import COMM

    st = st[st["duration_us"].notna()]
    ops = w.ops
    if "rank" not in ops:
        ops = ops.assign(rank=int(st["rank"].iloc[0]) if len(st) else 0)
    rows = []
    for r, part in st.groupby("rank"):
        o = ops[ops["rank"] == r]
        comm_mask = o["name"].astype(str).str.contains(COMM)
        n = len(part)
        comp = float(o.loc[~comm_mask, "self_us"].sum()) / n
        comm = float(o.loc[comm_mask, "self_us"].sum()) / n
        for s, d in zip(part["step"], part["duration_us"].astype(float), strict=True):
            c = min(comp, d)
            m = min(comm, d - c)
            rows.append((int(r), s, d, c, m, d - c - m))
    cols = ["rank", "step", "duration_us", "compute", "communication", "other"]
    return pd.DataFrame(rows, columns=cols)


@dataclass
class Verdict:
    """What :func:`find_straggler` decided. ``rank`` is None when no rank's own work stands out
    by more than ``bound_us``. ``table``: per rank, its own work (µs per step), the reference
    (itself in the baseline, or the other ranks), the excess, the noise bound and, per own
    phase, its excess; ``cause`` the phase of the named rank whose excess is largest."""

    rank: int | None
    cause: str | None
    excess_us: float
    bound_us: float
    table: pd.DataFrame
    against: str
    phase_excess: dict[str, float] = field(default_factory=dict)
    blind: bool = False  # no collective recorded: own work is the recorded phases only
    # the named rank's training thread, µs per step (:func:`_thread_cpu`): runqueue_us,
    # on_cpu_us, their reference_*, wait_rate, on_cpu_/runqueue_/work_excess_us; empty where
    # not recorded (cpu_missing: why)
    cpu: dict[str, float] = field(default_factory=dict)
    cpu_missing: str = ""
    # cause "same work, slower" (:mod:`.same_work`): the named rank's calls and per-call ratio
    same_work: dict[str, Any] = field(default_factory=dict)


def _own(frame: pd.DataFrame, blind: bool) -> pd.Series:
    own = frame["duration_us"] - frame[WAIT]
    if blind:  # no wait is seen: only recorded work counts (the wait hides in "other")
        own = own - frame[BLIND_PHASE]
    return own.clip(lower=0)


def thread_cpu_of(w: Window) -> pd.DataFrame | None:
    """``w.thread_cpu()`` (per rank: the training thread's on-CPU and run-queue time), or None
    for a window that has no such reader."""
    reader = getattr(w, "thread_cpu", None)
    if not callable(reader):
        return None
    try:
        return reader()
    except (OSError, LookupError, ValueError):
        return None


def _thread_cpu(
    rank: int, cpu: pd.DataFrame | None, cpu_ref: pd.DataFrame | None, against_self: bool
) -> tuple[dict[str, float], str]:
    """The rank's run-queue and on-CPU µs per step against its reference (itself in the
    baseline, or the other ranks' median), or ({}, why not)."""
    if cpu is None or cpu.empty:
        return {}, "no thread CPU record for this window"
    mine, ref = _record_and_reference(rank, cpu, cpu_ref, against_self)
    if mine.empty:
        why = cpu.loc[cpu["rank"] == rank, "missing"]
        return {}, f"rank {rank}: " + (str(why.iloc[0]) if len(why) else "no thread CPU record")
    if ref.empty:
        return {}, "the reference has no thread CPU record"
    q, c = float(mine["runqueue_us_per_step"].iloc[0]), float(mine["on_cpu_us_per_step"].iloc[0])
    q_ref, c_ref = (float(ref[f"{k}_us_per_step"].median()) for k in ("runqueue", "on_cpu"))
    if c_ref <= 0:
        return {}, "the reference's training thread has no time on a CPU"
    rate = q_ref / c_ref  # the reference's wait for a core per µs on one
    every = "threads" in mine and str(mine["threads"].iloc[0]) == "process"
    return {
        # 1.0: the record is every thread of the process (MindSpore's operators run on their
        # own threads), 0.0: the training thread's
        "all_threads": 1.0 if every else 0.0,
        "runqueue_us": q,
        "on_cpu_us": c,
        "reference_runqueue_us": q_ref,
        "reference_on_cpu_us": c_ref,
        "wait_rate": q / c if c > 0 else 0.0,
        "reference_wait_rate": rate,
        "on_cpu_excess_us": c - c_ref,
        # waiting beyond what its time on a CPU waits at the reference's rate: contention
        "runqueue_excess_us": q - c * rate,
        # the work it did more, with the waiting that work has at the reference's rate
        "work_excess_us": (c - c_ref) * (1.0 + rate),
    }, ""


def _reference_waited_more(
    rank: int, cpu: pd.DataFrame | None, cpu_ref: pd.DataFrame | None, against_self: bool
) -> float:
    """How much longer per step (µs, run-queue delay) the reference's training thread waited
    for a CPU than ``rank``'s did (itself in the baseline, or the other ranks' median); 0.0 when
    it waited less or either has no record. A reference held up by a busy machine has an own
    work as long as the rank's without a change in the rank's work: a loader stall of 60 ms
    a step on a rank whose baseline waited 32 ms a step for a CPU grew its own work only
    24 ms, under that baseline's noise (a fault-suite run beside a CI run)."""
    if cpu is None or cpu.empty:
        return 0.0
    mine, ref = _record_and_reference(rank, cpu, cpu_ref, against_self)
    if mine.empty or ref.empty:
        return 0.0
    if "threads" in mine and (
        set(mine["threads"].astype(str)) | set(ref["threads"].astype(str))
    ) != {"training"}:  # every thread of a process (MindSpore's) waits for more than its step
        return 0.0
    mine_q = float(mine["runqueue_us_per_step"].iloc[0])
    return max(float(ref["runqueue_us_per_step"].median()) - mine_q, 0.0)


def _record_and_reference(
    rank: int, cpu: pd.DataFrame, cpu_ref: pd.DataFrame | None, against_self: bool
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rank's own thread-CPU row and its reference's rows (its own row in the baseline, or
    the other ranks' of this window), each only where the record is not missing: one choice of
    reference for every question asked of the record."""

    def known(frame: pd.DataFrame | None) -> pd.DataFrame:
        if frame is None or frame.empty or "missing" not in frame:
            return cpu.iloc[:0]
        return frame[frame["missing"].isna()]

    here = known(cpu)
    mine = here[here["rank"] == rank]
    if against_self:
        there = known(cpu_ref)
        return mine, there[there["rank"] == rank]
    return mine, here[here["rank"] != rank]


def is_contention(cpu: dict[str, float], excess_us: float) -> bool:
    """Whether an own-work excess of ``excess_us`` is waiting for a core rather than work: the
    contention excess at least :data:`CONTENTION_SHARE` of it and more than the work excess
    (module docstring)."""
    if not cpu:
        return False
    q = cpu["runqueue_excess_us"]
    return q >= CONTENTION_SHARE * excess_us and q > cpu["work_excess_us"]


def contention_text(v: Verdict) -> str:
    """E.g. ``rank 0 waited 15.032 ms per step for a CPU, 0.50 ms per ms it ran against the
    other ranks' 0.34 (+4.6 ms beyond that rate) ...``: a CPU-contention verdict's numbers."""
    c = v.cpu
    ref = "its baseline's" if v.against.startswith("the baseline") else "the other ranks'"
    return (
        f"rank {v.rank} waited {c['runqueue_us'] / 1000:.3f} ms per step for a CPU"
        f"{' (all its threads)' if c.get('all_threads') else ''}, "
        f"{c['wait_rate']:.2f} ms per ms it ran against {ref} {c['reference_wait_rate']:.2f} "
        f"({c['runqueue_excess_us'] / 1000:+.3f} ms per step beyond that rate), while its time "
        f"on a CPU changed {c['on_cpu_excess_us'] / 1000:+.3f} ms: another process or thread "
        "held its cores"
    )


def threads_word(cpu: pd.DataFrame | None, rank: int) -> str:
    """Whose waits ``cpu`` holds for ``rank``: "training thread" or "threads" (every thread of
    the process, where the backend's operators run on their own: MindSpore)."""
    if cpu is None or "threads" not in cpu:
        return "training thread"
    mine = cpu.loc[cpu["rank"] == rank, "threads"]
    return "threads" if len(mine) and str(mine.iloc[0]) == "process" else "training thread"


def runqueue_change(cpu: pd.DataFrame | None, cpu_ref: pd.DataFrame | None) -> dict[int, float]:
    """Per rank, its training thread's run-queue delay per step (µs) in ``cpu`` minus in
    ``cpu_ref``; {} unless every rank of either has a record in both."""
    if cpu is None or cpu_ref is None or cpu.empty:
        return {}
    if cpu["missing"].notna().any() or cpu_ref["missing"].notna().any():
        return {}
    a = cpu.set_index("rank")["runqueue_us_per_step"]
    b = cpu_ref.set_index("rank")["runqueue_us_per_step"]
    if set(a.index) != set(b.index):
        return {}
    return {int(r): float(a[r] - b[r]) for r in a.index}


def load_changed(changes: dict[int, float], delta_us: float) -> bool:
    """Whether a step change of ``delta_us`` is the machine's load: every rank's run-queue
    change (:func:`runqueue_change`) has its sign, their mean at least :data:`LOAD_SHARE` of
    it."""
    if not changes or not delta_us:
        return False
    same = all(v * delta_us > 0 for v in changes.values())
    return same and abs(float(np.mean(list(changes.values())))) >= LOAD_SHARE * abs(delta_us)


def baseline_busier(changes: dict[int, float], delta_us: float) -> int | None:
    """The rank whose training thread waited for a CPU in the baseline longer than in the
    window (``changes``: :func:`runqueue_change`, negative where it waited less now) by at
    least :data:`LOAD_SHARE` of the step's drop ``-delta_us`` (the window faster), the one
    with the largest drop; None where the window is not faster or no rank's wait explains it.
    One rank is enough: in a synchronous job every rank's step waits for the slowest."""
    if not changes or delta_us >= 0:
        return None
    rank = min(changes, key=lambda r: changes[r])
    return rank if -changes[rank] >= LOAD_SHARE * -delta_us else None


def find_straggler(
    now: pd.DataFrame,
    phases: list[str],
    ref: pd.DataFrame | None = None,
    floor_us: float = 0.0,
    cpu: pd.DataFrame | None = None,
    cpu_ref: pd.DataFrame | None = None,
) -> Verdict:
    """The rank whose own work is larger than the other ranks' (``ref`` None) or grew against
    itself in ``ref`` (a baseline's :func:`phases_per_step`), by more than
    ``max(noise bound, floor_us)``. ``cpu`` / ``cpu_ref``: the windows' ``thread_cpu()``
    frames, which tell CPU contention apart (module docstring)."""
    own_phases = [p for p in phases if p != WAIT]
    # a backend that records no collective (the built-in one) shows a rank's wait as "other":
    # then only recorded work names a rank
    frames = [now] if ref is None else [now, ref]
    blind = BLIND_PHASE in phases and all((f[WAIT] <= 0).all() for f in frames)
    if blind:
        own_phases = [p for p in own_phases if p != BLIND_PHASE]
    rows = []
    for r, mine in now.groupby("rank"):
        base = ref[ref["rank"] == r] if ref is not None else None
        if base is None or base.empty:
            base = now[now["rank"] != r]
        if base.empty:
            continue
        own_m, own_b = _own(mine, blind), _own(base, blind)
        excess = float(own_m.median() - own_b.median())
        bound = max(noise_bound(own_m, own_b), floor_us)
        row = {"rank": int(r), "own_us": float(own_m.median())}
        row["reference_us"] = float(own_b.median())
        row.update(excess_us=excess, bound_us=bound)
        row.update({f"{p}_excess_us": float(mine[p].mean() - base[p].mean()) for p in own_phases})
        # the reference's own work is inflated by its extra wait for a CPU (a busier baseline)
        share = float(own_b.median() / base["duration_us"].median()) if len(base) else 0.0
        wait = _reference_waited_more(int(r), cpu, cpu_ref, ref is not None)
        row["reference_cpu_wait_us"] = wait * min(max(share, 0.0), 1.0)
        rows.append(row)
    table = pd.DataFrame(rows)
    against = "the baseline" if ref is not None else "the other ranks"
    if blind:
        against += " (no collective recorded: recorded work only, waiting is not seen)"
    if table.empty:
        return Verdict(None, None, 0.0, floor_us, table, against, {}, blind)
    judged = table["excess_us"] + table["reference_cpu_wait_us"]
    best = table.loc[judged.idxmax()]
    excess = {p: float(best[f"{p}_excess_us"]) for p in own_phases}
    # NaN: not named; a rank whose own work did not grow is never named for the credit alone
    named = bool(judged.max() > best["bound_us"] and best["excess_us"] > 0)
    rank = int(best["rank"]) if named else None
    cause = max(excess, key=lambda p: excess[p]) if named else None
    threads, why = ({}, "")
    if rank is not None:
        threads, why = _thread_cpu(rank, cpu, cpu_ref, ref is not None)
        if is_contention(threads, float(best["excess_us"])):
            cause = CONTENTION
    return Verdict(
        rank,
        cause,
        float(best["excess_us"]),
        float(best["bound_us"]),
        table,
        against,
        excess,
        blind,
        threads,
        why,
    )


def per_rank_mean(frame: pd.DataFrame, phases: list[str]) -> pd.DataFrame:
    """Per rank: µs per step of each phase and the step (``duration_us``)."""
    return frame.groupby("rank")[["duration_us", *phases]].mean()


def finite(x: float) -> float:
    """``x``, or 0.0 where it is NaN or infinite (no NaN in an answer)."""
    return float(x) if np.isfinite(x) else 0.0


__all__ = [
    "CONTENTION",
    "CONTENTION_SHARE",
    "Verdict",
    "baseline_busier",
    "contention_text",
    "is_contention",
    "load_changed",
    "runqueue_change",
    "thread_cpu_of",
    "threads_word",
    "find_straggler",
    "from_operators",
    "noise_bound",
    "per_rank_mean",
    "phases_per_step",
]
