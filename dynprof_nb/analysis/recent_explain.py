"""``w.explain()`` of a recent-steps record: its slow steps against its own normal steps.

A record (:mod:`dynprof_nb.training.recent`) holds the steps around a slowdown, so it needs no
baseline window: per rank, a step is *slow* when it took more than :data:`SLOW_RATIO` x the
rank's median step and more than :data:`MAD_K` scaled MADs over it (the noise of its normal
steps is not a slowdown); the others are *normal*. The rank named is the one whose slow steps
add the most time over its median, unless other ranks were slow in the same steps by as much:
in synchronous training a rank that waits in a collective for a slow one is slow too (DDP's
all-reduce in its backward pass). Then the culprit is the last to enter those steps'
collectives, where the record holds them (torch's Flight Recorder: :func:`last_to_arrive`),
else the rank whose grown part *ended first*: a waiter is released only once the slow rank
has finished its delay and reached the collective, so its wait ends after that delay
(:func:`first_to_end`). Where neither order is known (no collective, and a rank's growth
outside any part the record sees), no rank is named. Its parts per step (each user range by
name, the GC pauses, each data-loader wait) are compared, slow steps' mean against normal
steps' mean; the part that grew most is the cause, with its share of the step's growth. Time
no part covers is said as "outside any range".

:func:`parts_line` is the record's own word on what it saw and what it could not (a loader no
range marks, collectives with no hook, the ranges a window took): ``w.summary()`` and
``w.explain()`` of a record both say it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.contract.protocol import STEP_RE
from dynprof_nb.traces.interface import Window

SLOW_RATIO = 1.5  # the trigger's default slowdown
#: a part is named the cause only if it holds at least this share of the step's growth: a
#: range that grew 0.1 ms in an 80 ms slowdown is not why (the slowdown is outside it)
CAUSE_SHARE = 0.25
MAD_K = 5.0
MAD_SCALE = 1.4826
WAIT_CATEGORY = "dataloader"
#: the category of the collectives a record holds (torch's Flight Recorder entries: each
#: collective's enter, and its time where the backend measures it)
COLLECTIVE_CATEGORY = "collective"


def is_recent(w: Window) -> bool:
    """Whether ``w`` was loaded from recent-steps records (``recent`` in its window.json)."""
    from .explain import manifests

    return any(isinstance(m.get("recent"), dict) for _, m in manifests(w))


def _rank_text(ranks: set[int], every: set[int]) -> str:
    if ranks == every:
        return ""
    listed = ", ".join(str(r) for r in sorted(ranks))
    return f" (rank{'s' if len(ranks) > 1 else ''} {listed})"


def parts_line(w: Window) -> str:
    """ "record saw: steps, ranges, GC pauses; could not see: data-loader waits (why); ..."
    over the record's ranks (a part seen or missed on some ranks only names them); "" for a
    window, or a record written before records said so."""
    from .explain import manifests

    seen: dict[str, set[int]] = {}
    unseen: dict[tuple[str, str], set[int]] = {}
    every: set[int] = set()
    for _, m in manifests(w):
        recent = m.get("recent")
        got = recent.get("parts") if isinstance(recent, dict) else None
        if not isinstance(got, dict) or not got:
            continue
        rank = int(m.get("rank", -1))
        every.add(rank)
        for part in got.get("seen") or []:
            seen.setdefault(str(part), set()).add(rank)
        for part, why in (got.get("unseen") or {}).items():
            unseen.setdefault((str(part), str(why)), set()).add(rank)
    if not every:
        return ""
    line = "record saw: " + ", ".join(p + _rank_text(r, every) for p, r in seen.items())
    order = ["ranges", "data-loader waits", "collectives"]  # then the rest (stacks) as written
    missed = sorted(
        unseen.items(), key=lambda kv: order.index(kv[0][0]) if kv[0][0] in order else 9
    )
    if missed:
        line += "; could not see: " + "; ".join(
            f"{part}{_rank_text(r, every)}: {why}" for (part, why), r in missed
        )
    return line


def slow_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` (``rank, step, duration_us``) with ``median_us`` and ``slow`` per rank."""
    out = []
    for _, g in steps.groupby("rank"):
        d = g["duration_us"].astype(float)
        med = float(d.median())
        mad = float((d - med).abs().median())
        g = g.assign(
            median_us=med, slow=(d > SLOW_RATIO * med) & (d > med + MAD_K * MAD_SCALE * mad)
        )
        out.append(g)
    return pd.concat(out, ignore_index=True) if out else steps.assign(median_us=[], slow=[])


def _labelled(events: pd.DataFrame) -> pd.DataFrame:
    """``events`` without the step markers, each with its ``part`` (``range: NAME``, ``GC``,
    ``wait: NAME``)."""
    e = events[~events["name"].astype(str).str.match(STEP_RE)]
    cat, name = e["cat"].astype(str), e["name"].astype(str)
    part = np.select(
        [cat == "gc", cat == WAIT_CATEGORY, cat == COLLECTIVE_CATEGORY],
        ["GC", "wait: " + name, "collective: " + name],
        "range: " + name,
    )
    return e.assign(part=part)


def _parts(events: pd.DataFrame) -> pd.DataFrame:
    """Per step, the time of each part: ``step, part, dur_us``."""
    e = _labelled(events)
    e = e.assign(dur_us=e["dur_ns"] / 1000.0)
    return e.groupby(["step", "part"], as_index=False)["dur_us"].sum()


def first_to_end(events: pd.DataFrame, grown: dict[int, str], weights: pd.Series) -> int:
    """Of the ranks in ``grown`` (rank -> the part that grew most in its slow steps), the one
    whose part ended first in the slow steps they share (``weights``: per step, how much the
    step was slow; a step's vote counts that much, so the few long slow steps outweigh the
    machine's short noise). Ends are the ranks' own clocks (wall time: one host's, or hosts
    kept within a millisecond by NTP, against slow steps of tens of ms)."""
    e = _labelled(events[events["step"].isin(weights.index)])
    votes: dict[int, float] = dict.fromkeys(grown, 0.0)
    ends = {}
    for r, part in grown.items():
        mine = e[(e["rank"] == r) & (e["part"] == part)]
        ends[r] = (mine["ts_ns"] + mine["dur_ns"]).groupby(mine["step"]).max()
    table = pd.DataFrame(ends).dropna()
    for step, row in table.iterrows():
        votes[int(row.idxmin())] += float(weights.get(step, 0.0))
    return max(votes, key=lambda r: votes[r])


def last_to_arrive(
    events: pd.DataFrame, group: list[int], steps: set[int]
) -> tuple[int, dict[int, float]] | None:
    """Of ``group``, the rank the others waited for in the collectives of ``steps``: each
    collective every rank of the group entered (matched by step, name and order within the
    step) votes for the rank that entered it last, by how long the first one waited for it.
    Returns the culprit and, per other rank, how far ahead of it it entered a step's
    collectives (the most in the step, the median over the steps it held, ms); None where
    the record holds no collective shared by the group (no Flight Recorder, or no collective
    in those steps)."""
    c = events[
        (events["cat"].astype(str) == COLLECTIVE_CATEGORY)
        & events["step"].isin(steps)
        & events["rank"].isin(group)
    ]
    if c.empty:
        return None
    c = c.sort_values("ts_ns")
    c = c.assign(k=c.groupby(["rank", "step", "name"]).cumcount(), t=c["ts_ns"] - c["ts_ns"].min())
    table = c.pivot_table(index=["step", "name", "k"], columns="rank", values="t", aggfunc="first")
    table = table.reindex(columns=group).dropna()
    if table.empty:
        return None
    last = table.idxmax(axis=1)
    waited = table.max(axis=1) - table.min(axis=1)
    votes = waited.groupby(last).sum()
    culprit = int(votes.idxmax())
    held = table[last == culprit]  # the collectives it entered last
    behind = held.rsub(held[culprit], axis=0)  # how long each rank entered before it
    # a rank that entered every collective of a step early waited once, for the latest; the
    # median step, so that a step of the machine's noise among the slow ones does not count
    per_step = behind.groupby(level="step").max().median() / 1e6
    return culprit, {int(r): float(per_step[r]) for r in group if r != culprit}


def _step_times(mine: pd.DataFrame) -> tuple[float, float]:
    """One rank's judged steps (:func:`slow_steps`): its slow steps' mean and its normal
    steps' median (µs)."""
    slow = mine["slow"]
    return float(mine[slow]["duration_us"].mean()), float(mine[~slow]["duration_us"].median())


def _growth(
    steps: pd.DataFrame, events: pd.DataFrame, rank: int
) -> tuple[set, float, float, pd.DataFrame]:
    """``rank``'s slow steps, their mean, its normal steps' median and its parts' growth
    (:func:`_part_table`): what explain and the culprit rule both ask of a rank."""
    mine = steps[steps["rank"] == rank]
    slow_ids, normal_ids = set(mine[mine["slow"]]["step"]), set(mine[~mine["slow"]]["step"])
    step_slow, step_normal = _step_times(mine)
    phases = _part_table(events, rank, slow_ids, normal_ids, step_slow - step_normal)
    return slow_ids, step_slow, step_normal, phases


def _part_table(
    events: pd.DataFrame, rank: int, slow_ids: set, normal_ids: set, growth: float
) -> pd.DataFrame:
    """Per part of ``rank``'s steps: mean µs per slow step, per normal step, the difference
    and its share of the step's ``growth``, the part that grew most first."""
    parts = _parts(events[events["rank"] == rank])
    table = parts.pivot_table(index="step", columns="part", values="dur_us", aggfunc="sum")
    table = table.reindex(sorted(slow_ids | normal_ids)).fillna(0.0)
    slow_mean = table.loc[sorted(slow_ids)].mean()
    normal_mean = table.loc[sorted(normal_ids)].mean() if normal_ids else slow_mean * 0
    phases = pd.DataFrame(
        {"slow_us": slow_mean, "normal_us": normal_mean, "delta_us": slow_mean - normal_mean}
    ).sort_values("delta_us", ascending=False)
    phases.index.name = "part"
    phases = phases.reset_index()
    phases["share_of_growth"] = (phases["delta_us"] / growth).clip(0, 1) if growth > 0 else 0.0
    return phases


def explain_recent(w: Window) -> Any:
    """See the module docstring; returns an :class:`~dynprof_nb.analysis.explain.Explanation`."""
    from .explain import Explanation
    from .ranked import with_rank

    steps = slow_steps(with_rank(w.steps, w)[["rank", "step", "duration_us"]].dropna())
    slow = steps[steps["slow"]]
    empty = pd.DataFrame()
    if slow.empty:
        med = float(steps["duration_us"].median()) if not steps.empty else 0.0
        text = (
            f"no slow step in this record: every step within {SLOW_RATIO:g}x its rank's "
            f"median ({med / 1000:.1f} ms) and its noise"
        )
        return Explanation(
            text, None, med, med, empty, empty, "its normal steps", _seen(w), 0.0, False
        )
    over = slow.assign(over_us=slow["duration_us"] - slow["median_us"])
    excess = over.groupby("rank")["over_us"].sum()
    rank = int(excess.idxmax())
    events = with_rank(w.events, w)
    rank, waiters, unordered = _culprit(steps, over, events, rank)
    if unordered:
        return _cannot_tell(steps, over, rank, unordered, _seen(w))
    slow_ids, step_slow, step_normal, phases = _growth(steps, events, rank)
    growth = step_slow - step_normal
    covered = float(phases["delta_us"].clip(lower=0).sum()) if not phases.empty else 0.0
    lo, hi = min(slow_ids), max(slow_ids)
    span = f"step {lo}" if len(slow_ids) == 1 else f"{len(slow_ids)} slow steps in {lo}-{hi}"
    head = (
        f"rank {rank}: {span} took {step_slow / 1000:.1f} ms against "
        f"{step_normal / 1000:.1f} ms for its normal steps (+{growth / 1000:.1f} ms)"
    )
    cause = None
    if not phases.empty and phases["share_of_growth"].iloc[0] >= CAUSE_SHARE:
        top = phases.iloc[0]
        cause = str(top["part"])
        text = (
            f"{head}: {cause} grew by {top['delta_us'] / 1000:.1f} ms a step "
            f"({top['share_of_growth']:.0%} of the growth)"
        )
    else:
        text = f"{head}: outside any range, GC pause or wait this record sees"
    notes = []
    if growth > 0 and covered < 0.5 * growth:
        outside = (growth - covered) / 1000
        notes.append(f"{outside:.1f} ms a step of the growth is outside any range")
    notes += list(waiters.values())
    other = sorted(int(r) for r in excess.index if int(r) != rank and int(r) not in waiters)
    if other:
        notes.append(f"ranks {other} had slow steps too (less time over their median)")
    notes += _seen(w)
    return Explanation(
        text,
        rank,
        step_slow,
        step_normal,
        phases,
        empty,
        "its normal steps",
        notes,
        0.0,
        True,
        cause,
    )


#: a rank slow in the same steps by at least this share of the slowest rank's excess there is
#: slow with it (waiting for it, or the culprit it waited for)
SHARED = 0.5


def _culprit(
    steps: pd.DataFrame, over: pd.DataFrame, events: pd.DataFrame, rank: int
) -> tuple[int, dict[int, str], list[int]]:
    """``(culprit, {waiter: the note that says how it waited}, [])`` among the ranks slow in
    ``rank``'s slow steps by as much (:data:`SHARED`), or ``(rank, {}, [the ranks slow
    together])`` when neither their collectives nor their parts order them. One rank slow
    alone: ``(rank, {}, [])``."""
    shared_steps = set(over.loc[over["rank"] == rank, "step"])
    there = over[over["step"].isin(shared_steps)]
    by_rank = there.groupby("rank")["over_us"].sum()
    group = [int(r) for r in by_rank.index if by_rank[r] >= SHARED * by_rank[rank]]
    if len(group) < 2:
        return rank, {}, []
    arrival = last_to_arrive(events, group, shared_steps)
    if arrival is not None:
        culprit, waited = arrival
        return culprit, {
            r: (f"rank {r} was slow in the same steps, waiting for it: it entered their "
                f"collectives {ms:.1f} ms a step before rank {culprit} did")
            for r, ms in waited.items()
        }, []  # fmt: skip
    grown, unknown = {}, []
    for r in group:
        _, step_slow, step_normal, phases = _growth(steps, events, r)
        growth = step_slow - step_normal
        covered = float(phases["delta_us"].clip(lower=0).sum()) if not phases.empty else 0.0
        if phases.empty or phases["delta_us"].iloc[0] <= 0 or covered < 0.5 * growth:
            unknown.append(r)
        else:
            grown[r] = str(phases["part"].iloc[0])
    if unknown:
        return rank, {}, sorted(group)
    weights = there.groupby("step")["over_us"].max()
    culprit = first_to_end(events, grown, weights)
    return culprit, {
        r: (f"rank {r} was slow in the same steps, waiting for it: its {part} grew too, and "
            f"ended after rank {culprit}'s {grown[culprit]} in those steps (weighted by how "
            "slow each was): a wait in a collective ends only once the slow rank arrives")
        for r, part in grown.items() if r != culprit
    }, []  # fmt: skip


def _seen(w: Window) -> list[str]:
    """The record's word on what it saw (:func:`parts_line`), as notes: every answer says it."""
    seen = parts_line(w)
    return [seen] if seen else []


def _cannot_tell(
    steps: pd.DataFrame, over: pd.DataFrame, rank: int, group: list[int], notes: list[str]
) -> Any:
    """Several ranks slow in the same steps, and the record cannot order them: none named."""
    from .explain import Explanation

    mine = steps[steps["rank"] == rank]
    step_slow, step_normal = _step_times(mine)
    ids = sorted(set(over.loc[over["rank"] == rank, "step"]))
    text = (
        f"ranks {', '.join(map(str, group))} were slow in the same steps ({ids[0]}-{ids[-1]}, "
        f"{step_slow / 1000:.1f} ms against {step_normal / 1000:.1f} ms): in synchronous "
        "training one waits for the other, and this record cannot tell which, because part of "
        "a rank's growth is outside any range, GC pause or wait it sees. Mark the step's "
        "phases with dynprof_nb.range (forward, backward, the data loader) to tell them apart"
    )
    empty = pd.DataFrame()
    return Explanation(
        text, None, step_slow, step_normal, empty, empty, "its normal steps", notes, 0.0, True
    )
