"""More work, or the same work slower? The straggler rule (:mod:`.straggler`) names a rank whose
own work exceeds its reference (the other ranks, or itself in a baseline) and the phase that
grew, compute for one. Compute can grow two ways that call for different people: the rank ran
*more* operations (a code path, a larger batch; look at the code), or it ran the *same*
operations, each slower (its processor: a busy hyperthread sibling or another VM on the host, a
lower clock, thermal or power throttling, hypervisor steal; look at the machine). The second is
the classic straggler of a large job, and a loaded CI machine shows it too: one rank's core runs
the same matrix products 1.5x slower while no run queue holds it (so it is not CPU contention).

The rule: take the operators (device windows: the kernels) whose time per step grew, largest
first, until they hold :data:`COVER` of the growth. If each of them ran as many calls per step as
in the reference (within :data:`SAME_CALLS`, or one call), none is new, and their growth holds at
least :data:`EXPLAINS` of the phase's excess (operators that account for a sliver of it say
nothing of the rest), the rank did the same work, and the cause is :data:`SLOWER`, with the calls
and how much longer each took on average (``per_call_ratio``). A window without operators (the
built-in backend) cannot tell, and the cause stays compute. Calls and names are not shapes: the
same calls on larger inputs read as the same work slower, and the verdict says so.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from dynprof_nb.contract.protocol import STEP_FOLDED, STEP_RE
from dynprof_nb.traces.interface import Window

from .host_phases import COMM
from .ranked import with_rank

SLOWER = "same work, slower"
COVER = 0.8  # the growing operators that hold this share of the growth are compared
SAME_CALLS = 0.02  # calls per step within 2% (or one call) of the reference: the same work
MAX_OPERATORS = 20
EXPLAINS = 0.5  # the compared operators' growth must be at least this share of the excess
COMPUTE = ("compute", "computing")


def calls_per_step(w: Window) -> pd.DataFrame:
    """Per rank and operator (device windows: kernel), ``calls`` and ``us`` per step: host
    operators' self time, communication and the step marker left out."""
    st = with_rank(w.steps, w)
    n = st[st["duration_us"].notna()].groupby("rank").size()
    k = w.kernels
    if not k.empty:
        k = with_rank(k, w)
        t = k.groupby(["rank", k["name"].astype(str)])["duration_us"].agg(["size", "sum"])
    else:
        o = w.ops
        if o.empty or "count" not in o:
            return pd.DataFrame(columns=["rank", "name", "calls", "us"])
        o = with_rank(o, w)
        t = o.groupby(["rank", o["name"].astype(str)])[["count", "self_us"]].sum()
    t = t.reset_index()
    t.columns = ["rank", "name", "calls", "us"]
    names = t["name"]
    t = t[~(names.str.contains(COMM) | names.str.match(STEP_RE) | (names == STEP_FOLDED))]
    per = t["rank"].map(n).astype(float)
    t = t.assign(calls=t["calls"] / per, us=t["us"] / per)
    return t[per > 0].reset_index(drop=True)


def same_work(
    w: Window, rank: int, ref: Window | None = None, excess_us: float = 0.0
) -> dict[str, Any]:
    """The evidence that ``rank`` of ``w`` ran the same operator calls per step as its
    reference (itself in ``ref``, or the other ranks' median in ``w``), each slower, by at least
    :data:`EXPLAINS` of ``excess_us`` (the compute phase's excess per step); ``{}`` where it ran
    more (or other) work, where they do not account for the excess, or where the window cannot
    tell (module docstring)."""
    t = calls_per_step(w)
    mine = t[t["rank"] == rank].set_index("name")
    if ref is None:
        other = t[t["rank"] != rank]
        base = other.groupby("name")[["calls", "us"]].median()
    else:
        b = calls_per_step(ref)
        base = b[b["rank"] == rank].set_index("name")[["calls", "us"]]
    if mine.empty or base.empty:
        return {}
    grew = (mine["us"] - base["us"].reindex(mine.index).fillna(0.0)).sort_values(ascending=False)
    grew = grew[grew > 0]
    if grew.empty:
        return {}
    held = grew.cumsum().shift(fill_value=0.0) < COVER * float(grew.sum())
    names = list(grew[held].index[:MAX_OPERATORS])
    c, c_ref = mine.loc[names, "calls"], base["calls"].reindex(names)
    if c_ref.isna().any() or (c_ref <= 0).any():  # a new operator: other work
        return {}
    if ((c - c_ref).abs() > (SAME_CALLS * c_ref).clip(lower=1.0)).any():
        return {}  # more (or fewer) calls: other work
    us, us_ref = float(mine.loc[names, "us"].sum()), float(base["us"].reindex(names).sum())
    if us_ref <= 0 or us <= us_ref or us - us_ref < EXPLAINS * excess_us:
        return {}
    ratio = (us / float(c.sum())) / (us_ref / float(c_ref.sum()))
    return {
        "operators": names,
        "calls_per_step": float(c.sum()),
        "reference_calls_per_step": float(c_ref.sum()),
        "us_per_step": us,
        "reference_us_per_step": us_ref,
        "per_call_ratio": ratio,
        "device": 1.0 if not w.kernels.empty else 0.0,
    }


def refine(v: Any, w: Window, ref: Window | None = None) -> Any:
    """``v`` (a :class:`.straggler.Verdict`) with the cause :data:`SLOWER` and its evidence
    (``v.same_work``) where the named rank's compute grew by the same calls, each slower."""
    if v.rank is None or v.cause not in COMPUTE:
        return v
    found = same_work(w, v.rank, ref, v.phase_excess.get(v.cause, 0.0))
    return replace(v, cause=SLOWER, same_work=found) if found else v


def same_work_text(v: Any) -> str:
    """E.g. ``rank 0 ran the same work slower: 203.0 calls per step of aten::mm, as the other
    ranks (203.0), each 1.48x as long ...``: a :data:`SLOWER` verdict's numbers."""
    s = v.same_work
    names = s["operators"]
    which = names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"
    ref = "its baseline" if v.against.startswith("the baseline") else "the other ranks"
    text = (
        f"rank {v.rank} ran the same work slower: {s['calls_per_step']:.1f} calls per step of "
        f"{which}, as {ref} ({s['reference_calls_per_step']:.1f}), each "
        f"{s['per_call_ratio']:.2f}x as long"
    )
    c = v.cpu
    if c:
        text += (
            f" (its time on a CPU {c['on_cpu_excess_us'] / 1000:+.3f} ms per step, its wait "
            f"for one {(c['runqueue_us'] - c['reference_runqueue_us']) / 1000:+.3f} ms)"
        )
    where = "device" if s["device"] else "processor"
    more = "throttling" if s["device"] else "throttling, hypervisor steal"
    return text + (
        f": its {where} ran slower (a busy neighbour on the same core or host, a lower clock, "
        f"{more}) or each call had more to do (larger inputs): not more calls"
    )


def machine_text(ratios: dict[int, float]) -> str:
    """Every rank ran the same work slower than in the baseline: the machine, no culprit."""
    each = ", ".join(f"rank {r} {x:.2f}x" for r, x in sorted(ratios.items()))
    return (
        f"every rank ran the same operator calls slower than in the baseline (per call: {each}):"
        " the machine ran slower (its clock, another VM's load, throttling), not the job's own "
        "work; no culprit"
    )


__all__ = ["SLOWER", "calls_per_step", "machine_text", "refine", "same_work", "same_work_text"]
