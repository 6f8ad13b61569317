"""Rules both peers have, for any format with steps (docs/definitions.md, "Advice"):

- communication not overlapped: Communication(Not Overlapped) over step time, >= 5% (the
  summary's note; msprof-analyze's cluster_time_summary / HTA's comm-comp overlap);
- step outliers: a step taking >= 1.5x the median step (the summary's note; HTA's
  get_potential_stragglers and msprof-analyze's slow rank look at the same step table);
- slowest vs fastest rank: median step time more than 5% apart, and what differs on the
  slowest -- per operator type (device time) and per communication op (wait);
- host-bound steps: the device is free for >= 50% of the step (Free / step time: nothing runs
  on it, the host did not feed it), the summary's device-idle note per step.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .findings import Finding, NotApplicable
from .frames import with_rank

PEER = "msprof-analyze / HTA"
NOT_OVERLAPPED_SHARE = 0.05
OUTLIER_FACTOR = 1.5
RANK_GAP = 0.05
HOST_BOUND_FREE = 0.5


def _steps(w: Any) -> pd.DataFrame:
    st = with_rank(w.steps, w)
    if st.empty or st["duration_us"].isna().all():
        raise NotApplicable("no steps with durations")
    return st[st["duration_us"].notna()]


def _step_window(st: pd.DataFrame) -> tuple[int | None, int | None]:
    s = pd.to_numeric(st["start_ns"], errors="coerce")
    if s.isna().all():
        return None, None
    return int(s.min()), int((s + st["duration_us"] * 1000).max())


def communication_not_overlapped(w: Any) -> list[Finding]:
    br = w.step_breakdown()
    if br.empty or br["communication_not_overlapped_us"].isna().all():
        raise NotApplicable("no communication / overlap per step")
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
                    f"communication not overlapped with computation: {not_ov / 1000:.3f} ms = "
                    f"{100 * share:.1f}% of rank {int(r)}'s step time (threshold "
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


def step_outliers(w: Any) -> list[Finding]:
    st = _steps(w)
    out = []
    for r, part in st.groupby("rank"):
        if len(part) < 3:
            continue
        med = float(part["duration_us"].median())
        for row in part[part["duration_us"] >= OUTLIER_FACTOR * med].itertuples(index=False):
            d = float(row.duration_us)
            start = int(row.start_ns) if pd.notna(row.start_ns) else None
            out.append(
                Finding(
                    rule="step outliers",
                    severity="medium",
                    evidence=(
                        f"step {int(row.step)} took {d / med:.2f}x the median on rank {int(r)} "
                        f"({d / 1000:.3f} ms vs {med / 1000:.3f} ms; threshold {OUTLIER_FACTOR}x)"
                    ),
                    suggestion="open the step (finding.show) and compare it with a normal one "
                    "(w.explain)",
                    peer=PEER,
                    ranks=[int(r)],
                    steps=[int(row.step)],
                    start_ns=start,
                    end_ns=start + round(d * 1000) if start is not None else None,
                    lanes=[f"rank {int(r)}"],
                    numbers={
                        "duration_us": d,
                        "median_us": med,
                        "factor": d / med,
                        "threshold": OUTLIER_FACTOR,
                    },
                )
            )
    if not out and (st.groupby("rank").size() < 3).all():
        raise NotApplicable("fewer than 3 steps per rank: no median to stand out from")
    return out


def slowest_rank(w: Any) -> list[Finding]:
    st = _steps(w)
    if st["rank"].nunique() < 2:
        raise NotApplicable("one rank")
    med = st.groupby("rank")["duration_us"].median()
    slow, fast = int(med.idxmax()), int(med.idxmin())
    gap = float(med[slow] / med[fast] - 1.0) if med[fast] > 0 else 0.0
    if gap <= RANK_GAP:
        return []
    diffs = _op_differences(w, slow, fast)
    lo, hi = _step_window(st[st["rank"] == slow])
    return [
        Finding(
            rule="slowest rank",
            severity="high" if gap > 0.2 else "medium",
            evidence=(
                f"rank {slow}'s median step is {med[slow] / 1000:.3f} ms, {100 * gap:.1f}% more "
                f"than rank {fast}'s {med[fast] / 1000:.3f} ms (threshold {100 * RANK_GAP:.0f}%)"
                + (f"; most different: {diffs[0][0]}" if diffs else "")
            ),
            suggestion=(
                f"compare rank {slow} with rank {fast}: " + "; ".join(d for d, _ in diffs[:3])
                if diffs
                else f"compare rank {slow}'s timeline with rank {fast}'s"
            ),
            peer=PEER,
            ranks=[slow, fast],
            start_ns=lo,
            end_ns=hi,
            lanes=[f"rank {slow}", f"rank {fast}"],
            numbers={
                "slow_median_us": float(med[slow]),
                "fast_median_us": float(med[fast]),
                "gap": gap,
                "threshold": RANK_GAP,
                "differences": [n for _, n in diffs],
            },
        )
    ]


def _op_differences(w: Any, slow: int, fast: int) -> list[tuple[str, dict]]:
    """What takes more time on ``slow`` than on ``fast``: device time per operator type, and
    per communication op its wait, the largest differences first."""
    out: list[tuple[str, dict]] = []
    k = with_rank(w.kernels, w)
    if not k.empty and "type" in k:
        t = k.groupby(["rank", k["type"].astype(str)], observed=True)["duration_us"].sum()
        t = t.unstack("rank").fillna(0.0)
        if slow in t and fast in t:
            d = (t[slow] - t[fast]).sort_values(ascending=False)
            for name, v in d.head(3).items():
                if v <= 0:
                    break
                ratio = t.loc[name, slow] / t.loc[name, fast] if t.loc[name, fast] else float("inf")
                out.append(
                    (
                        f"{name} {v / 1000:.3f} ms more device time ({ratio:.2f}x)",
                        {
                            "kind": "operator",
                            "name": name,
                            "slow_us": float(t.loc[name, slow]),
                            "fast_us": float(t.loc[name, fast]),
                            "diff_us": float(v),
                        },
                    )
                )
    c = with_rank(w.communication, w)
    if not c.empty and "wait_us" in c and c["wait_us"].notna().any():
        t = c.groupby(["rank", "name"])["wait_us"].sum().unstack("rank").fillna(0.0)
        if slow in t and fast in t:
            d = (t[fast] - t[slow]).sort_values(ascending=False)
            for name, v in d.head(1).items():
                if v > 0:
                    out.append(
                        (
                            f"rank {fast} waits {v / 1000:.3f} ms longer in {name}",
                            {
                                "kind": "communication wait",
                                "name": name,
                                "slow_us": float(t.loc[name, slow]),
                                "fast_us": float(t.loc[name, fast]),
                                "diff_us": float(v),
                            },
                        )
                    )
    out.sort(key=lambda x: -x[1]["diff_us"])
    return out


def host_bound_steps(w: Any) -> list[Finding]:
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
    "slowest rank": slowest_rank,
    "host-bound steps": host_bound_steps,
}

__all__ = ["RULES"]
