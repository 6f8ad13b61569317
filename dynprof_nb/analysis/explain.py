"""``w.explain(baseline)``: why this window was slower than a normal one -- which rank, which
part of the step and which operators account for the difference, in time and in share.

The baseline is a window the user names (a window, a folder, a list of rank folders) or, by
default, the job's last complete window recorded before this one without a trigger reason
(found beside this window's rank folders through their ``window.json``). Both are compared
per step (each window's totals over its own number of steps), so windows of different lengths
compare.

Per rank the step splits into phases: on a device window the step trace's computing,
communication not overlapped and free; on a host-only window the operators' self time,
communication ops (all-reduce, broadcast, send/recv, barrier ...) apart from the rest, and
"other" (the step outside any operator). The rank that explains the slowdown is the one
whose own work (computing; host compute on a CPU window) grew most: in a synchronous job
the other ranks' step grows too, as waiting in communication. Its operators whose time grew
most are named, with how they compare with the same operator on the other ranks.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dynprof_nb.protocol import STEP_FOLDED
from dynprof_nb.safetext import escape, frame_html
from dynprof_nb.window_dirs import find_windows

COMM = re.compile(
    r"all_?reduce|all_?gather|reduce_?scatter|broadcast|all_?to_?all|barrier|nccl|hccl|gloo|"
    r"c10d|send|recv|hcom_",
    re.I,
)
SAME_WINDOW_SLACK_S = 600.0
# a rank's own work must account for this share of the step's growth to be named the cause
OWN_WORK_SHARE = 0.1  # ranks of one window start within this (control.base's value)


@dataclass
class Explanation:
    """What :func:`explain` found. ``text``: the one-sentence answer; ``phases``: per rank and
    phase, µs per step in the window and the baseline, the difference and its share of the
    step's difference; ``operators``: the slow rank's operators whose time grew, with the
    same operator on the other ranks of this window."""

    text: str
    rank: int | None
    step_us: float
    baseline_step_us: float
    phases: pd.DataFrame
    operators: pd.DataFrame
    baseline: str = ""
    notes: list[str] = field(default_factory=list)

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


def _rank_windows(w: Any) -> list[Any]:
    ranks = list(getattr(w, "ranks", None) or [])
    if len(ranks) > 1 and callable(getattr(w, "rank_window", None)):
        return [w.rank_window(r) for r in ranks]
    return [w]


def _manifests(w: Any) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for rw in _rank_windows(w):
        path = getattr(rw, "path", None)
        man = getattr(rw, "manifest", None) or {}
        if path is not None:
            out.append((Path(path), man))
    return out


def triggered_reason(w: Any) -> str:
    """The trigger's reason in any of the window's ranks' ``window.json`` ("" if none)."""
    return next((str(m["reason"]) for _, m in _manifests(w) if m.get("reason")), "")


def last_normal_window(w: Any) -> list[str]:
    """The rank folders of the job's last complete, untriggered window before ``w`` (beside
    ``w``'s own folders), or [] when there is none."""
    mans = _manifests(w)
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


def _load(baseline: Any) -> tuple[Any, str]:
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


def _with_rank(frame: pd.DataFrame, w: Any) -> pd.DataFrame:
    if "rank" in frame.columns:
        return frame
    r = getattr(w, "rank", None)
    return frame.assign(rank=0 if r is None else int(r))


def _steps_per_rank(w: Any) -> pd.Series:
    st = _with_rank(w.steps, w)
    st = st[st["duration_us"].notna()]
    if st.empty:
        raise ValueError("the window has no steps with durations: nothing to compare per step")
    return st.groupby("rank")["duration_us"].agg(["mean", "size"])


def _op_table(w: Any, nsteps: pd.Series) -> pd.DataFrame:
    """Per rank and operator: self µs per step (the step marker's self time is 'other')."""
    ops = _with_rank(w.ops, w)
    if ops.empty:
        return pd.DataFrame(columns=["rank", "name", "us", "comm"])
    ops = ops[ops["name"].astype(str) != STEP_FOLDED]
    t = ops.groupby(["rank", ops["name"].astype(str)])["self_us"].sum().reset_index()
    t.columns = ["rank", "name", "us"]
    t["us"] = t["us"] / t["rank"].map(nsteps).astype(float)
    t["comm"] = t["name"].str.contains(COMM)
    return t


def _kernel_table(w: Any, nsteps: pd.Series) -> pd.DataFrame:
    """Per rank and kernel (or Ascend op type): device µs per step."""
    k = _with_rank(w.kernels, w)
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


def _phases(w: Any, steps: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """Per rank: µs per step in each phase."""
    br = _with_rank(w.steps, w)
    device = not w.kernels.empty and "computing_us" in br and br["computing_us"].notna().any()
    rows = []
    for r, row in steps.iterrows():
        if device:
            part = br[br["rank"] == r]
            comm = part.get("communication_not_overlapped_us")
            if comm is None or comm.isna().all():
                comm = part["communication_us"] - part["overlapped_us"]
            vals = {
                "computing": part["computing_us"].mean(),
                "communication (not overlapped)": comm.mean(),
                "free": part["free_us"].mean(),
            }
        else:
            o = ops[ops["rank"] == r]
            compute, comm = (
                float(o.loc[~o["comm"], "us"].sum()),
                float(o.loc[o["comm"], "us"].sum()),
            )
            vals = {
                "compute": compute,
                "communication": comm,
                "other": float(row["mean"]) - compute - comm,
            }
        for phase, v in vals.items():
            rows.append((int(r), phase, float(v)))
    return pd.DataFrame(rows, columns=["rank", "phase", "us"])


def explain(w: Any, baseline: Any = None) -> Explanation:
    """Why ``w`` is slower (or faster) than ``baseline`` (see the module docstring)."""
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
    pw = _phases(w, sw, _op_table(w, sw["size"]))
    pb = _phases(b, sb, _op_table(b, sb["size"]))
    step_w, step_b = float(sw["mean"].max()), float(sb["mean"].max())
    delta = step_w - step_b

    ph = pw.merge(pb, on=["rank", "phase"], how="left", suffixes=("_window", "_baseline"))
    ph = ph.rename(columns={"us_window": "window_us", "us_baseline": "baseline_us"})
    ph["delta_us"] = ph["window_us"] - ph["baseline_us"]
    ph["share_of_delta"] = ph["delta_us"] / delta if delta else float("nan")

    # the rank whose own work grew most (vs itself in the baseline; without it, vs the others)
    work = ow[~ow["comm"]].groupby("rank")["us"].sum()
    base_work = ob[~ob["comm"]].groupby("rank")["us"].sum()
    grew = work - base_work.reindex(work.index)
    if grew.isna().all():
        grew = work - work.median()
    rank = int(grew.idxmax()) if len(grew) else None

    ops = _operators(ow, ob, rank)
    text = _sentence(delta, step_b, rank, grew, ph, ops, use_kernels)
    notes = [] if delta > 0 else ["this window is not slower than the baseline"]
    return Explanation(text, rank, step_w, step_b, ph, ops, bname, notes)


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
    t["others_us"] = others.reindex(t.index)
    t["vs_others"] = t["window_us"] / t["others_us"].where(t["others_us"] > 0)
    t = t.reset_index().rename(columns={"index": "name"})
    return t.sort_values("delta_us", ascending=False, ignore_index=True)[cols]


def _sentence(
    delta: float,
    step_b: float,
    rank: int | None,
    grew: pd.Series,
    ph: pd.DataFrame,
    ops: pd.DataFrame,
    device: bool,
) -> str:
    pct = delta / step_b if step_b else float("nan")
    text = f"step {pct:+.0%} ({delta / 1000:+.3f} ms per step)"
    if delta <= 0 or rank is None:
        return text + ": not slower than the baseline"
    top = ph.sort_values("delta_us", ascending=False).iloc[0]
    text += (
        f": {top['share_of_delta']:.0%} of it is {top['phase']} on rank {int(top['rank'])}"
        f" ({top['delta_us'] / 1000:+.3f} ms)"
    )
    work = "device time" if device else "compute"
    if grew[rank] < OWN_WORK_SHARE * delta:
        return text + (
            f"; no rank's own {work} grew by much (at most {grew[rank] / 1000:+.3f} ms, rank "
            f"{rank}): the difference is not one rank's operators"
        )
    text += f"; rank {rank}'s {work} grew {grew[rank] / 1000:+.3f} ms"
    if not ops.empty and ops["delta_us"].iloc[0] > 0:
        o = ops.iloc[0]
        name = o["name"] if len(o["name"]) <= 60 else o["name"][:57] + "..."
        text += f", most in {name} ({o['delta_us'] / 1000:+.3f} ms"
        if pd.notna(o["vs_others"]):
            text += f", {o['vs_others']:.1f}x the other ranks'"
        text += ")"
    wait = ph[(ph["rank"] != rank) & ph["phase"].str.startswith("communication")]
    if not wait.empty and wait["delta_us"].max() > 0:
        wr = wait.loc[wait["delta_us"].idxmax()]
        text += (
            f"; rank {int(wr['rank'])} waits for it in communication "
            f"({wr['delta_us'] / 1000:+.3f} ms)"
        )
    return text


__all__ = ["Explanation", "explain", "last_normal_window", "triggered_reason"]
