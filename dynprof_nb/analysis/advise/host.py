"""dynprof_nb's rules for a host (CPU or GPU) PyTorch-style window, on the training thread's
phases of each step (:mod:`dynprof_nb.analysis.host_phases`; docs/definitions.md, "Advice"):

- straggler: :func:`dynprof_nb.analysis.straggler.find_straggler` on one window: the rank whose
  own work (its step outside waiting in collectives) exceeds the other ranks' by more than 5% of
  the mean step and the noise bound (the rule ``w.explain()`` uses against a baseline), its
  cause the phase that grew, or CPU contention where its training thread's extra time was
  mostly waiting for a core (``w.thread_cpu()``), or "same work, slower" where its compute grew
  by the same operator calls, each slower (:mod:`dynprof_nb.analysis.same_work`). It runs on
  every window kind (device windows: the step trace's phases);
- host-bound loop: the training thread is outside any operator (Python between operators,
  phase ``other``) for >= 30% of the step: many short operators, the loop's own overhead;
- sync points: >= 10 host sync calls per step (``.item()``, ``float(tensor)``, a stream or
  device synchronize): each waits for the device on a GPU, and splits the host's work;
- data-loader waits: the training thread is in the data loader for >= 10% of the step.
"""

from __future__ import annotations

import pandas as pd

from dynprof_nb.analysis.host_phases import step_phases
from dynprof_nb.analysis.same_work import SLOWER, refine, same_work_text
from dynprof_nb.analysis.straggler import (
    CONTENTION,
    contention_text,
    find_straggler,
    phases_per_step,
    thread_cpu_of,
)
from dynprof_nb.traces.interface import Window

from .findings import Finding, NotApplicable
from .scope import Scope

PEER = "dynprof_nb"
STRAGGLER_SHARE = 0.05
HOST_GAP_SHARE = 0.30
SYNC_POINTS = 10
DATA_SHARE = 0.10
WORDS = {
    "compute": "compute",
    "computing": "device compute",
    "free": "device free time",
    "data loading": "data loading",
    "GC": "GC pauses",
    "sync": "host sync points",
    "other": "host time outside any operator",
    CONTENTION: "waiting for a CPU (CPU contention)",
    SLOWER: "the same work, slower",
}


def _phases(w: Window) -> pd.DataFrame:
    try:
        p = step_phases(w)
    except (LookupError, KeyError, ValueError) as e:
        raise NotApplicable(f"no host events on the steps' clock ({e})") from None
    if p.empty:
        raise NotApplicable("no steps with host events")
    return p


def straggler(w: Window) -> list[Finding]:
    ph, phases, kind = phases_per_step(w)
    if ph.empty:
        raise NotApplicable("no steps with durations")
    if ph["rank"].nunique() < 2:
        raise NotApplicable("one rank: nothing to compare it with")
    mean_step = float(ph["duration_us"].mean())
    v = find_straggler(ph, phases, None, floor_us=STRAGGLER_SHARE * mean_step, cpu=thread_cpu_of(w))
    v = refine(v, w)  # the same calls, each slower: its processor, not more work
    if v.rank is None:
        return []
    row = v.table.set_index("rank").loc[v.rank]
    wait = ph[ph["rank"] != v.rank].groupby("rank")["communication"].mean()
    waits = ", ".join(f"rank {int(r)} {us / 1000:.3f} ms" for r, us in wait.items())
    own = "own work (its step outside waiting in collectives)"
    after = f"; the others wait for it in communication ({waits} per step)"
    if v.blind:
        own = "recorded work (no collective is recorded here, so waiting is not seen)"
        after = ""
    if v.cause == CONTENTION:
        most = f"most of it waiting for a CPU: {contention_text(v)}"
        look = (
            f"find what else runs on rank {v.rank}'s cores (top -H; another job, DataLoader "
            "workers or OMP/MKL threads beyond the cores); give each rank cores of its own "
            "(taskset, numactl, torch.set_num_threads)"
        )
    elif v.cause == SLOWER:
        most = f"most in compute: {same_work_text(v)}"
        where = (
            "device (nvidia-smi -q -d PERFORMANCE,CLOCK)"
            if v.same_work["device"]
            else ("processor (lscpu, the MHz in /proc/cpuinfo, top's steal 'st')")
        )
        look = (
            f"compare rank {v.rank}'s {where} with another rank's, and what else runs on its "
            "host; check that every rank gets inputs of one shape (record_shapes=True); move "
            "the rank or drain the node"
        )
    else:
        most = f"most in {WORDS.get(v.cause, v.cause)} ({v.phase_excess[v.cause] / 1000:+.3f} ms)"
        look = (
            f"look at rank {v.rank}'s {WORDS.get(v.cause, v.cause)}: its timeline beside "
            "another rank's (finding.show), its top operators (w.rank_window(r).ops)"
        )
        if v.cpu_missing:
            most += f" (CPU contention cannot be told apart: {v.cpu_missing})"
    return [
        Finding(
            rule="straggler",
            severity="high" if v.excess_us > 0.2 * mean_step else "medium",
            evidence=(
                f"rank {v.rank}'s {own} is (median) "
                f"{row['own_us'] / 1000:.3f} ms per step, {v.excess_us / 1000:.3f} ms more than "
                f"the other ranks' {row['reference_us'] / 1000:.3f} ms (threshold: "
                f"{v.bound_us / 1000:.3f} ms, the larger of {100 * STRAGGLER_SHARE:.0f}% of the "
                f"mean step and the noise bound), {most}{after}"
            ),
            suggestion=look,
            peer=PEER,
            ranks=[v.rank],
            lanes=[f"rank {v.rank}"],
            numbers={
                "own_us": float(row["own_us"]),
                "others_own_us": float(row["reference_us"]),
                "excess_us": v.excess_us,
                "threshold_us": v.bound_us,
                "cause": v.cause,
                "phases": kind,
                "phase_excess_us": dict(v.phase_excess),
                # the training thread's µs per step (runqueue_us, on_cpu_us, their excess)
                "thread_cpu": dict(v.cpu),
                # cause "same work, slower": its calls per step and per-call ratio
                "same_work": dict(v.same_work),
            },
        )
    ]


def _per_rank(p: pd.DataFrame) -> pd.DataFrame:
    return p.groupby("rank")[["duration_us", "other", "sync", "data loading", "sync_points"]].mean()


def host_bound_loop(w: Window) -> list[Finding]:
    p = _phases(w)
    out = []
    for r, row in _per_rank(p).iterrows():
        share = float(row["other"] / row["duration_us"]) if row["duration_us"] > 0 else 0.0
        if share < HOST_GAP_SHARE:
            continue
        n_ops = _ops_per_step(w, int(r), len(p[p["rank"] == r]))
        out.append(
            Finding(
                rule="host-bound loop",
                severity="high" if share >= 0.6 else "medium",
                evidence=(
                    f"rank {int(r)}'s training thread is outside any operator for "
                    f"{row['other'] / 1000:.3f} ms per step, {100 * share:.1f}% of its step "
                    f"(threshold {100 * HOST_GAP_SHARE:.0f}%)"
                    + (f"; {n_ops:.0f} operators per step" if n_ops else "")
                ),
                suggestion=(
                    "the Python loop between operators holds the step: fewer, larger operators "
                    "(batch the work, fuse small ops, torch.compile), less per-step Python "
                    "(logging, metrics); record_function ranges show where"
                ),
                peer=PEER,
                ranks=[int(r)],
                numbers={
                    "other_us": float(row["other"]),
                    "share": share,
                    "threshold": HOST_GAP_SHARE,
                    "ops_per_step": n_ops,
                },
            )
        )
    return out


def _ops_per_step(w: Window, rank: int, steps: int) -> float:
    ops = w.ops
    if ops.empty or "count" not in ops or not steps:
        return 0.0
    if "rank" in ops:
        ops = ops[ops["rank"] == rank]
    return float(ops["count"].sum()) / steps


def sync_points(w: Window) -> list[Finding]:
    p = _phases(w)
    out = []
    for r, row in _per_rank(p).iterrows():
        n = float(row["sync_points"])
        if n < SYNC_POINTS:
            continue
        share = float(row["sync"] / row["duration_us"]) if row["duration_us"] > 0 else 0.0
        out.append(
            Finding(
                rule="sync points",
                severity="medium" if share >= 0.05 else "low",
                evidence=(
                    f"{n:.0f} host sync points per step on rank {int(r)} (.item(), float(t), "
                    f"synchronize; threshold {SYNC_POINTS}), {row['sync'] / 1000:.3f} ms per "
                    f"step in them ({100 * share:.1f}% of the step)"
                ),
                suggestion=(
                    "keep values on the device: accumulate metrics as tensors and read them "
                    "once per N steps; each .item() waits for the device on a GPU"
                ),
                peer=PEER,
                ranks=[int(r)],
                numbers={
                    "per_step": n,
                    "sync_us": float(row["sync"]),
                    "share": share,
                    "threshold": SYNC_POINTS,
                },
            )
        )
    return out


def data_loader_waits(w: Window) -> list[Finding]:
    p = _phases(w)
    out = []
    for r, row in _per_rank(p).iterrows():
        share = float(row["data loading"] / row["duration_us"]) if row["duration_us"] > 0 else 0.0
        if share < DATA_SHARE:
            continue
        out.append(
            Finding(
                rule="data-loader waits",
                severity="high" if share >= 0.3 else "medium",
                evidence=(
                    f"rank {int(r)}'s training thread waits for the data loader "
                    f"{row['data loading'] / 1000:.3f} ms per step, {100 * share:.1f}% of its "
                    f"step (threshold {100 * DATA_SHARE:.0f}%)"
                ),
                suggestion=(
                    "more DataLoader workers (num_workers), pin_memory=True, prefetch_factor; "
                    "check the dataset's reads (disk, decoding) on that rank"
                ),
                peer=PEER,
                ranks=[int(r)],
                numbers={
                    "data_us": float(row["data loading"]),
                    "share": share,
                    "threshold": DATA_SHARE,
                },
            )
        )
    return out


_HOST = ("cpu", "gpu")
_TORCH = ("pytorch", "chrome")  # a Kineto trace: the operators, the DataLoader's calls
SCOPES = {
    "straggler": Scope(needs="two ranks or more with steps (and host events or a step trace)"),
    "host-bound loop": Scope(_HOST, _TORCH, needs="a PyTorch trace's operators on the steps"),
    "sync points": Scope(_HOST, _TORCH, needs="a PyTorch trace's operators on the steps"),
    "data-loader waits": Scope(_HOST, _TORCH, needs="a PyTorch trace's DataLoader calls"),
}

RULES = {
    "straggler": straggler,
    "host-bound loop": host_bound_loop,
    "sync points": sync_points,
    "data-loader waits": data_loader_waits,
}

__all__ = ["PEER", "RULES", "SCOPES"]
