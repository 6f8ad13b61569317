"""``w.explain()`` of a recent-steps record: its slow steps against its own normal steps.

A record (:mod:`dynprof_nb.training.recent`) holds the steps around a slowdown, so it needs no
baseline window: per rank, a step is *slow* when it took more than :data:`SLOW_RATIO` x the
rank's median step and more than :data:`MAD_K` scaled MADs over it (the noise of its normal
steps is not a slowdown); the others are *normal*. The rank named is the one whose slow steps
add the most time over its median. Its parts per step (each user range by name, the GC pauses,
each data-loader wait) are compared, slow steps' mean against normal steps' mean; the part
that grew most is the cause, with its share of the step's growth. Time no part covers is said
as "outside any range".

:func:`parts_line` is the record's own word on what it saw and what it could not (a loader no
range marks, collectives with no hook, the ranges a window took): ``w.summary()`` and
``w.explain()`` of a record both say it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.contract.protocol import STEP_RE

SLOW_RATIO = 1.5  # the trigger's default slowdown
MAD_K = 5.0
MAD_SCALE = 1.4826
WAIT_CATEGORY = "dataloader"


def is_recent(w: Any) -> bool:
    """Whether ``w`` was loaded from recent-steps records (``recent`` in its window.json)."""
    from .explain import manifests

    return any(isinstance(m.get("recent"), dict) for _, m in manifests(w))


def _rank_text(ranks: set[int], every: set[int]) -> str:
    if ranks == every:
        return ""
    listed = ", ".join(str(r) for r in sorted(ranks))
    return f" (rank{'s' if len(ranks) > 1 else ''} {listed})"


def parts_line(w: Any) -> str:
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


def _parts(events: pd.DataFrame) -> pd.DataFrame:
    """Per step, the time of each part: ``step, part, dur_us``."""
    e = events[~events["name"].astype(str).str.match(STEP_RE)]
    cat, name = e["cat"].astype(str), e["name"].astype(str)
    part = np.where(
        cat == "gc", "GC", np.where(cat == WAIT_CATEGORY, "wait: " + name, "range: " + name)
    )
    e = e.assign(part=part, dur_us=e["dur_ns"] / 1000.0)
    return e.groupby(["step", "part"], as_index=False)["dur_us"].sum()


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


def explain_recent(w: Any) -> Any:
    """See the module docstring; returns an :class:`~dynprof_nb.analysis.explain.Explanation`."""
    from .explain import Explanation, with_rank

    steps = slow_steps(with_rank(w.steps, w)[["rank", "step", "duration_us"]].dropna())
    slow = steps[steps["slow"]]
    empty = pd.DataFrame()
    if slow.empty:
        med = float(steps["duration_us"].median()) if not steps.empty else 0.0
        text = (
            f"no slow step in this record: every step within {SLOW_RATIO:g}x its rank's "
            f"median ({med / 1000:.1f} ms) and its noise"
        )
        return Explanation(text, None, med, med, empty, empty, "its normal steps", [], 0.0, False)
    excess = (slow["duration_us"] - slow["median_us"]).groupby(slow["rank"]).sum()
    rank = int(excess.idxmax())
    mine = steps[steps["rank"] == rank]
    slow_ids, normal_ids = set(mine[mine["slow"]]["step"]), set(mine[~mine["slow"]]["step"])
    step_slow = float(mine[mine["slow"]]["duration_us"].mean())
    step_normal = float(mine[~mine["slow"]]["duration_us"].median())
    growth = step_slow - step_normal
    phases = _part_table(with_rank(w.events, w), rank, slow_ids, normal_ids, growth)
    covered = float(phases["delta_us"].clip(lower=0).sum()) if not phases.empty else 0.0
    lo, hi = min(slow_ids), max(slow_ids)
    span = f"step {lo}" if len(slow_ids) == 1 else f"{len(slow_ids)} slow steps in {lo}-{hi}"
    head = (
        f"rank {rank}: {span} took {step_slow / 1000:.1f} ms against "
        f"{step_normal / 1000:.1f} ms for its normal steps (+{growth / 1000:.1f} ms)"
    )
    cause = None
    if not phases.empty and phases["delta_us"].iloc[0] > 0:
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
    other = sorted(int(r) for r in excess.index if int(r) != rank)
    if other:
        notes.append(f"ranks {other} had slow steps too (less time over their median)")
    seen = parts_line(w)
    if seen:
        notes.append(seen)
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
