"""Rules both peers have, for any format with steps (docs/definitions.md, "Advice"):

- communication not overlapped: Communication(Not Overlapped) over step time, >= 5% (the
  summary's note; msprof-analyze's cluster_time_summary / HTA's comm-comp overlap);
- step outliers: a step taking >= 1.5x its rank's median step (the summary's note, on
  :mod:`dynprof_nb.analysis.step_time`'s one definition of step time; HTA's
  get_potential_stragglers and msprof-analyze's slow rank look at the same step table);
- (the straggler -- the rank holding the others back -- is :mod:`.host`'s rule: the rank
  whose own work is larger, never the one whose median step or wait is longer);
- host-bound steps: the device is free for >= 50% of the step (Free / step time: nothing runs
  on it, the host did not feed it), the summary's device-idle note per step.
"""

from __future__ import annotations

import pandas as pd

from dynprof_nb.analysis.host_phases import step_phases
from dynprof_nb.analysis.step_time import MIN_STEPS, OUTLIER_FACTOR
from dynprof_nb.analysis.step_time import step_outliers as outliers_by_rank
from dynprof_nb.traces.interface import Window

from .findings import Finding, NotApplicable
from .frames import with_rank
from .scope import Scope

PEER = "msprof-analyze / HTA"
NOT_OVERLAPPED_SHARE = 0.05
HOST_BOUND_FREE = 0.5


def _steps(w: Window) -> pd.DataFrame:
    st = with_rank(w.steps, w)
    if st.empty or st["duration_us"].isna().all():
        raise NotApplicable("no steps with durations")
    return st[st["duration_us"].notna()]


def communication_not_overlapped(w: Window) -> list[Finding]:
    br = w.step_breakdown()
    if br.empty or br["communication_not_overlapped_us"].isna().all():
        br = _host_communication(w)
    out = []
    for r, part in br.groupby("rank"):
        not_ov, tot = (
            float(part["communication_not_overlapped_us"].sum()),
            float(part["duration_us"].sum()),
        )
        share = not_ov / tot if tot > 0 else 0.0
        if share < NOT_OVERLAPPED_SHARE:
            continue
        comm = float(part["communication_us"].sum())
        out.append(
            Finding(
                rule="communication not overlapped",
                severity="high" if share >= 0.3 else "medium",
                evidence=(
                    f"{not_ov / 1000:.3f} ms of rank {int(r)}'s communication ran while it "
                    f"computed nothing = {100 * share:.1f}% of its step time (threshold "
                    f"{100 * NOT_OVERLAPPED_SHARE:.0f}%); {comm / 1000:.3f} ms of communication, "
                    f"{100 * (1 - not_ov / comm) if comm else 0:.1f}% of it overlapped"
                ),
                suggestion=(
                    "overlap gradients' communication with the backward pass (bucketed "
                    "all-reduce, DDP's bucket_cap_mb / comm overlap options); if most of it is "
                    "wait, a slower rank holds the others (see slow rank)"
                ),
                peer=PEER,
                ranks=[int(r)],
                steps=sorted(int(s) for s in part["step"].unique()),
                numbers={
                    "not_overlapped_us": not_ov,
                    "step_us": tot,
                    "share": share,
                    "threshold": NOT_OVERLAPPED_SHARE,
                },
            )
        )
    return out


def _host_communication(w: Window) -> pd.DataFrame:
    """The step breakdown's columns from the training thread's phases (host windows): its
    communication phase is not overlapped by construction (the thread does no work then)."""
    try:
        p = step_phases(w)
    except (LookupError, KeyError, ValueError):
        raise NotApplicable("no communication / overlap per step") from None
    if p.empty or not (p["communication"] > 0).any():
        raise NotApplicable("no communication in the steps")
    return p.assign(
        communication_not_overlapped_us=p["communication"], communication_us=p["communication"]
    )


def step_outliers(w: Window) -> list[Finding]:
    st = _steps(w)
    out = []
    # the rank's own median step: the summary's notes and Ranks table use the same one
    for row in outliers_by_rank(st).itertuples(index=False):
        r, d, med = int(row.rank), float(row.duration_us), float(row.median_us)
        start = int(row.start_ns) if pd.notna(row.start_ns) else None
        out.append(
            Finding(
                rule="step outliers",
                severity="medium",
                evidence=(
                    f"step {int(row.step)} took {d / med:.2f}x the median step on rank {r} "
                    f"({d / 1000:.3f} ms vs {med / 1000:.3f} ms; threshold {OUTLIER_FACTOR}x)"
                ),
                suggestion="open the step (finding.show) and compare it with a normal one "
                "(w.explain)",
                peer=PEER,
                ranks=[r],
                steps=[int(row.step)],
                start_ns=start,
                end_ns=start + round(d * 1000) if start is not None else None,
                lanes=[f"rank {r}"],
                numbers={
                    "duration_us": d,
                    "median_us": med,
                    "factor": d / med,
                    "threshold": OUTLIER_FACTOR,
                },
            )
        )
    if not out and (st.groupby("rank").size() < MIN_STEPS).all():
        raise NotApplicable("fewer than 3 steps per rank: no median to stand out from")
    return out


def host_bound_steps(w: Window) -> list[Finding]:
    br = w.step_breakdown()
    if br.empty or br["free_us"].isna().all():
        raise NotApplicable("no per-step free (device idle) time")
    br = br[br["duration_us"] > 0]
    share = br["free_us"] / br["duration_us"]
    hit = br[share >= HOST_BOUND_FREE]
    out = []
    for r, part in hit.groupby("rank"):
        sh = part["free_us"].sum() / part["duration_us"].sum()
        out.append(
            Finding(
                rule="host-bound steps",
                severity="high",
                evidence=(
                    f"{len(part)} of rank {int(r)}'s {int((br['rank'] == r).sum())} steps leave "
                    f"the device free for >= {100 * HOST_BOUND_FREE:.0f}% of the step "
                    f"({100 * sh:.1f}% of their time)"
                ),
                suggestion=(
                    "the host does not feed the device: look at the host's top operators, the "
                    "dataloader, synchronizations (.item(), prints) and op compiles"
                ),
                peer=PEER,
                ranks=[int(r)],
                steps=sorted(int(s) for s in part["step"]),
                numbers={"steps": len(part), "free_share": float(sh), "threshold": HOST_BOUND_FREE},
            )
        )
    return out


RULES = {
    "communication not overlapped": communication_not_overlapped,
    "step outliers": step_outliers,
    "host-bound steps": host_bound_steps,
}

SCOPES = {
    "communication not overlapped": Scope(
        needs="communication per step: the step trace's, or host events (a collective on the "
        "training thread or waited for)"
    ),
    "step outliers": Scope(needs="three steps or more per rank"),
    "host-bound steps": Scope(("gpu", "npu"), needs="device free time per step (a step trace)"),
}

__all__ = ["RULES", "SCOPES"]
