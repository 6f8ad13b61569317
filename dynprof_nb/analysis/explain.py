"""``w.explain(baseline)``: why this window was slower than a normal one -- which rank, which
part of the step and which operators account for the difference, in time and in share.

The baseline is a window the user names (a window, a folder, a list of rank folders) or, by
default, the job's last complete window recorded before this one without a trigger reason
(found beside this window's rank folders through their ``window.json``). Both are compared
per step (each window's totals over its own number of steps), so windows of different lengths
compare.

Per rank the step splits into phases that add up to it, none negative: on a device window the
step trace's computing, communication not overlapped and free; on a host-only window the
training thread's wall time (:mod:`.host_phases`: compute, communication, data loading, GC,
sync, other), never operator time summed over threads. A difference within the noise bound
(:func:`.straggler.noise_bound` of the steps' times, at least 5% of the baseline step) is "no
meaningful change" and names no rank. Otherwise the rank named is the straggler of
:func:`.straggler.find_straggler` (the rule ``w.advise()`` uses too): the one whose own work
(its step outside waiting in collectives) grew beyond the noise; the others' waiting is told as
evidence. Its phase, user range and operators that grew most are the cause.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.contract.protocol import STEP_FOLDED, STEP_RE
from dynprof_nb.contract.window_dirs import find_windows
from dynprof_nb.safetext import escape, frame_html
from dynprof_nb.traces.interface import Window

from .host_phases import COMM, PHASES, step_phases
from .ranked import with_rank
from .same_work import SLOWER, machine_text, refine, same_work, same_work_text
from .straggler import (
    CONTENTION,
    baseline_busier,
    contention_text,
    find_straggler,
    finite,
    from_operators,
    load_changed,
    noise_bound,
    per_rank_mean,
    phases_per_step,
    runqueue_change,
    thread_cpu_of,
    threads_word,
)

SAME_WINDOW_SLACK_S = 600.0  # ranks of one window start within this (control.base's value)
# a change under this share of the baseline step is not meaningful, whatever the noise
NOISE_FLOOR = 0.05
# a rank's own work must have grown by this share of the step's growth to be named
OWN_SHARE_OF_DELTA = 0.25


@dataclass
class Explanation:
    """What :func:`explain` found. ``text``: the one-sentence answer; ``phases``: per rank and
    phase, µs per step in the window and the baseline, the difference, each window's share of
    its step and the share of the rank's growth (all in [0, 1]); ``operators``: the slow rank's
    operators whose time grew, with the same operator on the other ranks of this window;
    ``rank`` and ``cause`` (a phase) the straggler, None when there is none or the change is
    within ``noise_us`` (then ``changed`` is False); ``verdict`` the straggler rule's numbers."""

    text: str
    rank: int | None
    step_us: float
    baseline_step_us: float
    phases: pd.DataFrame
    operators: pd.DataFrame
    baseline: str = ""
    notes: list[str] = field(default_factory=list)
    noise_us: float = 0.0
    changed: bool = True
    cause: str | None = None
    verdict: Any = None

    @property
    def delta_us(self) -> float:
        return self.step_us - self.baseline_step_us

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__

    def _repr_html_(self) -> str:
        ops = frame_html(self.operators.head(5), index=False, float_format=lambda v: f"{v:,.1f}")
        ph = frame_html(self.phases, index=False, float_format=lambda v: f"{v:,.1f}")
        return (
            f"<div><b>{escape(self.text)}</b><h4>Operators of the slow rank</h4>{ops}"
            f"<h4>Per rank and phase (µs per step)</h4>{ph}</div>"
        )


def _rank_windows(w: Window) -> list[Any]:
    ranks = list(getattr(w, "ranks", None) or [])
    if len(ranks) > 1 and callable(getattr(w, "rank_window", None)):
        return [w.rank_window(r) for r in ranks]
    return [w]


def manifests(w: Window) -> list[tuple[Path, dict[str, Any]]]:
    """Each rank's window directory and its ``window.json``, for a window of one or many ranks."""
    out = []
    for rw in _rank_windows(w):
        path = getattr(rw, "path", None)
        man = getattr(rw, "manifest", None) or {}
        if path is not None:
            out.append((Path(path), man))
    return out


def triggered_reason(w: Window) -> str:
    """The trigger's reason in any of the window's ranks' ``window.json`` ("" if none)."""
    return next((str(m["reason"]) for _, m in manifests(w) if m.get("reason")), "")


def last_normal_window(w: Window) -> list[str]:
    """The rank folders of the job's last complete, untriggered window before ``w`` (beside
    ``w``'s own folders), or [] when there is none."""
    mans = manifests(w)
    if not mans:
        return []
    mine = {str(p.resolve()) for p, _ in mans}
    job = next((m.get("job") for _, m in mans if m.get("job")), None)
    started = min((m.get("started_at") or 0.0) for _, m in mans)
    rows = find_windows(sorted({p.parent for p, _ in mans}), job)
    rows = [
        r
        for r in rows
        if r["status"] == "complete"
        and not r["reason"]
        and not r.get("recent")
        and str(Path(r["path"]).resolve()) not in mine
        and (r["started_at"] or 0.0) < started
    ]
    if not rows:
        return []
    last = rows[-1]
    group = [
        r
        for r in rows
        if (r["start"], r["stop"]) == (last["start"], last["stop"])
        and (r["started_at"] or 0.0) >= (last["started_at"] or 0.0) - SAME_WINDOW_SLACK_S
    ]
    by_rank = {r["rank"]: r["path"] for r in group}
    return [by_rank[k] for k in sorted(by_rank)]


def _load(baseline: Window | str | PathLike[str] | Sequence[str]) -> tuple[Any, str]:
    if hasattr(baseline, "steps") and hasattr(baseline, "ops"):
        return baseline, str(getattr(baseline, "path", "the baseline window"))
    from dynprof_nb.traces import load_window

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(baseline, (list, tuple)):
            return load_window([str(p) for p in baseline]), os.path.commonpath(
                [str(p) for p in baseline]
            )
        return load_window(str(baseline)), str(baseline)


def _steps_per_rank(w: Window) -> pd.Series:
    st = with_rank(w.steps, w)
    st = st[st["duration_us"].notna()]
    if st.empty:
        raise ValueError("the window has no steps with durations: nothing to compare per step")
    return st.groupby("rank")["duration_us"].agg(["mean", "size"])


def _op_table(w: Window, nsteps: pd.Series) -> pd.DataFrame:
    """Per rank and operator: self µs per step (the step marker's self time is 'other')."""
    ops = with_rank(w.ops, w)
    if ops.empty:
        return pd.DataFrame(columns=["rank", "name", "us", "comm"])
    ops = ops[ops["name"].astype(str) != STEP_FOLDED]
    t = ops.groupby(["rank", ops["name"].astype(str)])["self_us"].sum().reset_index()
    t.columns = ["rank", "name", "us"]
    t["us"] = t["us"] / t["rank"].map(nsteps).astype(float)
    t["comm"] = t["name"].str.contains(COMM)
    return t


def _kernel_table(w: Window, nsteps: pd.Series) -> pd.DataFrame:
    """Per rank and kernel (or Ascend op type): device µs per step."""
    k = with_rank(w.kernels, w)
    if k.empty:
        return pd.DataFrame(columns=["rank", "name", "us", "comm"])
    # an Ascend task's op type (MatMulV2) groups its many named instances; a GPU kernel's
    # name is its identity (its "type" is Kineto's category)
    ascend = "core" in k and k["core"].astype(str).str.match(r"AI_|MIX_|HCCL").any()
    key = k["type"].astype(str) if ascend else k["name"]
    t = k.groupby(["rank", key.astype(str)])["duration_us"].sum().reset_index()
    t.columns = ["rank", "name", "us"]
    t["us"] = t["us"] / t["rank"].map(nsteps).astype(float)
    core = k.groupby(["rank", key.astype(str)])["core"].first() if "core" in k else None
    comm = t["name"].str.contains(COMM)
    if core is not None:
        comm |= pd.Series(core.astype(str).eq("HCCL").to_numpy(), index=t.index)
    t["comm"] = comm
    return t


def _phase_table(pw: pd.DataFrame, pb: pd.DataFrame, phases: list[str]) -> pd.DataFrame:
    """Per rank and phase: µs per step in both windows, the difference, each window's share of
    its step (in [0, 1]) and ``share_of_growth``: the phase's growth over the sum of the rank's
    phases that grew (0 for a phase that shrank; in [0, 1])."""
    mw, mb = per_rank_mean(pw, phases), per_rank_mean(pb, phases)
    rows = []
    for r in mw.index:
        gw = mw.loc[r]
        gb = mb.loc[r] if r in mb.index else pd.Series(np.nan, index=mw.columns)
        grew = sum(max(finite(gw[p] - gb[p]), 0.0) for p in phases)
        for p in phases:
            d = gw[p] - gb[p]
            rows.append(
                {
                    "rank": int(r),
                    "phase": p,
                    "window_us": float(gw[p]),
                    "baseline_us": float(gb[p]),
                    "delta_us": float(d),
                    "window_share": finite(gw[p] / gw["duration_us"]) if gw["duration_us"] else 0.0,
                    "baseline_share": (
                        finite(gb[p] / gb["duration_us"]) if gb["duration_us"] else 0.0
                    ),
                    "share_of_growth": finite(max(d, 0.0) / grew) if grew > 0 else 0.0,
                }
            )
    t = pd.DataFrame(rows)
    return t.dropna(subset=["baseline_us"]).reset_index(drop=True)


def explain(
    w: Window, baseline: Window | str | PathLike[str] | Sequence[str] | None = None
) -> Explanation:
    """Why ``w`` is slower (or faster) than ``baseline`` (see the module docstring). For a
    recent-steps record with no baseline, ``w.explain()`` compares its slow steps with its
    normal ones instead (:mod:`.recent_explain`)."""
    if baseline is None:
        paths = last_normal_window(w)
        if not paths:
            raise ValueError(
                "no baseline: this window's job has no complete untriggered window before it "
                "beside it; name one (w.explain(other_window) or a window folder)"
            )
        baseline = paths
    b, bname = _load(baseline)
    sw, sb = _steps_per_rank(w), _steps_per_rank(b)
    use_kernels = not w.kernels.empty and not b.kernels.empty
    table = _kernel_table if use_kernels else _op_table
    ow, ob = table(w, sw["size"]), table(b, sb["size"])
    pw, phases, kind = phases_per_step(w)
    pb, phases_b, kind_b = phases_per_step(b)
    if phases_b != phases:  # one window has device phases, the other not: compare host ones
        pw, phases, kind = _host_or_ops(w)
        pb, _, _ = _host_or_ops(b)
    step_w, step_b = float(sw["mean"].max()), float(sb["mean"].max())
    delta = step_w - step_b
    ph = _phase_table(pw, pb, phases)
    # noise: the job's step (slowest rank per step), median against median, robust to a spike
    job_w = pw.groupby("step")["duration_us"].max()
    job_b = pb.groupby("step")["duration_us"].max()
    typical = finite(float(job_w.median() - job_b.median()))
    bound = max(noise_bound(job_w, job_b), NOISE_FLOOR * finite(float(job_b.median())))
    # a rank is named for a growth beyond the noise that is a real part of the step's
    cpu_w, cpu_b = thread_cpu_of(w), thread_cpu_of(b)
    verdict = find_straggler(
        pw,
        phases,
        pb,
        floor_us=max(NOISE_FLOOR * step_b, OWN_SHARE_OF_DELTA * typical),
        cpu=cpu_w,
        cpu_ref=cpu_b,
    )
    verdict = refine(verdict, w, b)  # the same calls, each slower: its processor, not more work
    changed = abs(typical) > bound
    rank = verdict.rank if changed and delta > 0 else None
    # every rank ran its same work slower: the machine's speed changed, no culprit
    slower = _every_rank_slower(w, b, verdict) if rank is not None else {}
    if slower:
        rank = None
    # no rank's own work: the step moved with every rank's wait for a CPU (the machine's load)
    waits = runqueue_change(cpu_w, cpu_b)
    machine = changed and rank is None and load_changed(waits, typical)
    # faster than the baseline: a rank that waited for a CPU then is the reason, not the job
    busier = None if machine or not changed else baseline_busier(waits, typical)
    ops = _operators(ow, ob, rank)
    ranges = _range_growth(w, b, rank, sw["size"], sb["size"]) if rank is not None else None
    syncs = _sync_growth(pw, pb, rank) if rank is not None and kind == "host" else 0.0
    text = _sentence(
        delta,
        step_b,
        bound,
        changed,
        verdict if rank is not None else None,
        ph,
        ops,
        ranges,
        syncs,
        use_kernels,
    )
    if slower:
        text = f"{_head(delta, step_b, bound)}: {machine_text(slower)}"
    elif machine:
        text = _load_sentence(delta, step_b, bound, waits)
    elif busier is not None:
        text = _busier_sentence(typical, step_b, bound, busier, cpu_w, cpu_b)
    notes = [] if delta > 0 else ["this window is not slower than the baseline"]
    if not changed:
        notes = [f"no meaningful change: within the noise bound ±{bound / 1000:.3f} ms per step"]
    if verdict.blind:
        notes.append(
            "no collective recorded (the built-in backend sees neither operators nor "
            "communication threads): a rank's wait is not told apart, own work is its recorded "
            "ranges only"
        )
    if kind == "operators":
        notes.append("no host events: phases from operator totals (threads not told apart)")
    if rank is not None:
        credit = float(verdict.table.set_index("rank").loc[rank, "reference_cpu_wait_us"])
        if credit > 0:
            notes.append(
                f"rank {rank}'s training thread waited {credit / 1000:.3f} ms per step more for "
                "a CPU in the baseline (its share in own work): its growth is judged with that "
                "wait taken out of the baseline (the busier baseline hid part of it)"
            )
    if rank is not None and verdict.cpu_missing:
        notes.append(f"CPU contention cannot be told apart: {verdict.cpu_missing}")
    loaded = machine or busier is not None
    cause = verdict.cause if rank is not None else (CONTENTION if loaded else None)
    if slower:
        cause = SLOWER
    return Explanation(
        text, rank, step_w, step_b, ph, ops, bname, notes, bound, changed, cause, verdict
    )


def _every_rank_slower(w: Window, b: Any, verdict: Any) -> dict[int, float]:
    """Per rank, how much longer its same operator calls took than in the baseline, where
    every rank ran its same work slower, each by at least half the named rank's slowdown
    (then the machine ran slower, not one rank); {} otherwise."""
    if verdict.cause != SLOWER:
        return {}
    ratios = {verdict.rank: float(verdict.same_work["per_call_ratio"])}
    for r in sorted(set(verdict.table["rank"]) - {verdict.rank}):
        found = same_work(w, int(r), b)
        if not found:
            return {}
        ratios[int(r)] = float(found["per_call_ratio"])
    least = 1.0 + (ratios[verdict.rank] - 1.0) / 2
    return ratios if len(ratios) > 1 and min(ratios.values()) >= least else {}


def _host_or_ops(w: Window) -> tuple[pd.DataFrame, list[str], str]:
    try:
        return step_phases(w), PHASES, "host"
    except (LookupError, KeyError, ValueError):
        st = with_rank(w.steps, w)
        return from_operators(w, st), ["compute", "communication", "other"], "operators"


def _range_growth(
    w: Window, b: Any, rank: int, nw: pd.Series, nb: pd.Series
) -> tuple[str, float] | None:
    """The user range (``record_function`` / ``dynprof_nb.range``) of ``rank`` whose total time
    per step grew most: (name, µs per step), or None."""

    def per_step(win: Any, n: pd.Series) -> pd.Series:
        try:
            e = with_rank(win.events, win)
        except (LookupError, ValueError, AttributeError):
            return pd.Series(dtype=float)
        if e.empty or "cat" not in e or rank not in n.index:
            return pd.Series(dtype=float)
        e = e[(e["rank"] == rank) & (e["cat"].astype(str) == "user_annotation")]
        names = e["name"].astype(str)
        e = e[
            ~(names.str.match(STEP_RE) | names.str.match(r"^GC$|^Record Window|DataLoader|^gloo:"))
        ]
        return e.groupby(e["name"].astype(str))["dur_ns"].sum() / 1000.0 / float(n[rank])

    gw, gb = per_step(w, nw), per_step(b, nb)
    if gw.empty:
        return None
    d = (gw - gb.reindex(gw.index).fillna(0.0)).sort_values(ascending=False)
    return (str(d.index[0]), float(d.iloc[0])) if d.iloc[0] > 0 else None


def _sync_growth(pw: pd.DataFrame, pb: pd.DataFrame, rank: int) -> float:
    """Host sync points per step more on ``rank`` than in the baseline."""
    a = pw.loc[pw["rank"] == rank, "sync_points"].mean()
    c = pb.loc[pb["rank"] == rank, "sync_points"].mean()
    return finite(a - (c if c == c else 0.0))


def _operators(ow: pd.DataFrame, ob: pd.DataFrame, rank: int | None) -> pd.DataFrame:
    cols = ["name", "window_us", "baseline_us", "delta_us", "others_us", "vs_others"]
    if rank is None:
        return pd.DataFrame(columns=cols)
    mine = ow[(ow["rank"] == rank) & ~ow["comm"]].set_index("name")["us"]
    base = ob[ob["rank"] == rank].set_index("name")["us"]
    others = ow[ow["rank"] != rank].groupby("name")["us"].median()
    t = pd.DataFrame({"window_us": mine})
    t["baseline_us"] = base.reindex(t.index).fillna(0.0)
    if base.empty:  # the baseline lacks this rank: compare with the other ranks of the window
        t["baseline_us"] = others.reindex(t.index).fillna(0.0)
    t["delta_us"] = t["window_us"] - t["baseline_us"]
    # no NaN in an answer: 0.0 where the other ranks do not run the operator
    t["others_us"] = others.reindex(t.index).fillna(0.0)
    t["vs_others"] = (t["window_us"] / t["others_us"].where(t["others_us"] > 0)).fillna(0.0)
    t = t.reset_index().rename(columns={"index": "name"})
    return t.sort_values("delta_us", ascending=False, ignore_index=True)[cols]


CAUSE_WORDS = {
    "compute": "compute",
    "computing": "device compute",
    "free": "device free time (the host did not feed it)",
    "data loading": "data loading",
    "GC": "garbage-collection pauses",
    "sync": "host sync points",
    "other": "host time outside any operator",
    CONTENTION: "waiting for a CPU (CPU contention)",
    SLOWER: "the same work, slower",
}
SYNC_POINTS_GREW = 10.0  # sync points per step: more than this is named


def _load_sentence(delta: float, step_b: float, bound: float, waits: dict[int, float]) -> str:
    """The step changed with every rank's wait for a CPU: the machine's load, no culprit."""
    each = ", ".join(f"rank {r} {us / 1000:+.3f} ms" for r, us in sorted(waits.items()))
    return (
        f"{_head(delta, step_b, bound)}: every rank's training thread waited "
        f"{'more' if sum(waits.values()) > 0 else 'less'} for a CPU "
        f"(run-queue delay per step: {each}): the machine's load changed (CPU contention), "
        "not the job's own work; no culprit"
    )


def _busier_sentence(
    delta: float, step_b: float, bound: float, rank: int, cpu_w: Any, cpu_b: Any
) -> str:
    """The window is faster because the baseline waited for a CPU: no real change of the job."""

    def wait(cpu: Any) -> float:
        return float(cpu.set_index("rank").loc[rank, "runqueue_us_per_step"]) / 1000

    return (
        f"{_head(delta, step_b, bound)}: the baseline ran busier (CPU wait "
        f"{wait(cpu_b):.3f} ms/step vs {wait(cpu_w):.3f} in "
        f"this window, rank {rank}'s {threads_word(cpu_w, rank)} runnable but waiting for a "
        "core): the "
        "machine's load changed (CPU contention), not the job's own work; no culprit"
    )


def _where_it_grew(
    cause: str, ranges: tuple[str, float] | None, ops: pd.DataFrame, bound: float
) -> str:
    """``, in range R (+x ms)`` or ``, most in OP (+x ms, 1.0x the other ranks')``, or ""."""
    if ranges is not None and ranges[1] > bound / 2:
        return f", in range {ranges[0]} ({ranges[1] / 1000:+.3f} ms)"
    if ops.empty or ops["delta_us"].iloc[0] <= 0 or cause not in ("compute", "computing"):
        return ""
    o = ops.iloc[0]
    name = o["name"] if len(o["name"]) <= 60 else o["name"][:57] + "..."
    text = f", most in {name} ({o['delta_us'] / 1000:+.3f} ms"
    if o["vs_others"] > 0:
        text += f", {o['vs_others']:.1f}x the other ranks'"
    return text + ")"


def _head(delta: float, step_b: float, bound: float) -> str:
    """E.g. ``step +24% (+11.459 ms per step, noise bound ±8.691 ms)``."""
    pct = finite(delta / step_b) if step_b else 0.0
    return f"step {pct:+.0%} ({delta / 1000:+.3f} ms per step, noise bound ±{bound / 1000:.3f} ms)"


def _sentence(
    delta: float,
    step_b: float,
    bound: float,
    changed: bool,
    verdict: Any,
    ph: pd.DataFrame,
    ops: pd.DataFrame,
    ranges: tuple[str, float] | None,
    syncs: float,
    device: bool,
) -> str:
    text = _head(delta, step_b, bound)
    if not changed:
        return text + ": no meaningful change (within the noise of the steps' times); no culprit"
    if delta <= 0:
        return text + ": not slower than the baseline"
    comm = ph[ph["phase"].str.startswith("communication")]
    if verdict is None:
        grew = comm[comm["delta_us"] > 0]
        if not comm.empty and len(grew) == len(comm) and grew["delta_us"].min() > bound / 2:
            each = ", ".join(
                f"rank {int(r.rank)} {r.delta_us / 1000:+.3f} ms" for r in grew.itertuples()
            )
            return text + (
                f": communication grew on every rank ({each}); no rank's own work grew "
                "beyond the noise: the collectives themselves are slower (more or larger "
                "all-reduces, a slower link)"
            )
        return text + (
            ": no rank's own work (its step outside waiting in collectives) grew beyond the "
            "noise bound; the difference is not one rank's"
        )
    r = verdict.rank
    cause = verdict.cause
    if cause == CONTENTION:
        return text + (
            f": rank {r}'s own work grew {verdict.excess_us / 1000:+.3f} ms per step, most of "
            f"it waiting for a CPU (CPU contention): {contention_text(verdict)}"
        )
    text += f": rank {r}'s own work grew {verdict.excess_us / 1000:+.3f} ms per step, most in "
    if cause == SLOWER:  # its operators are in its own sentence
        text += f"compute: {same_work_text(verdict)}"
    else:
        text += f"{CAUSE_WORDS.get(cause, cause)} ({verdict.phase_excess[cause] / 1000:+.3f} ms)"
        text += _where_it_grew(cause, ranges, ops, bound)
    if syncs > SYNC_POINTS_GREW:
        text += f"; {syncs:.0f} more host sync points per step (.item(), synchronize)"
    wait = comm[comm["rank"] != r]
    if not wait.empty and wait["delta_us"].max() > 0:
        wr = wait.loc[wait["delta_us"].idxmax()]
        text += (
            f"; rank {int(wr['rank'])} waits for it in communication "
            f"({wr['delta_us'] / 1000:+.3f} ms)"
        )
    return text


__all__ = ["Explanation", "explain", "last_normal_window", "triggered_reason"]
