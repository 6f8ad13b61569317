"""The recent-steps record's culprit among ranks slow in the same steps (one piece, on frames
built here; the real DDP job is tests/training/test_recent_ddp.py)."""

from __future__ import annotations

import pandas as pd

from dynprof_nb.analysis.recent_explain import (
    _culprit,
    first_to_end,
    last_to_arrive,
    slow_steps,
)

MS = 1_000_000  # ns


def record(slow_part: dict[int, str], hiccup: range, culprit_ms: float, wait_after_ms: float,
           n: int = 30) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two ranks' steps and parts: ``forward`` (5 ms) then ``backward`` (5 ms) then a gap.
    In ``hiccup`` steps rank 1's ``slow_part[1]`` takes ``culprit_ms`` more; rank 0 waits in
    its backward until rank 1's delay has ended plus ``wait_after_ms``."""
    steps, events = [], []
    for r in (0, 1):
        for s in range(1, n + 1):
            extra = culprit_ms if s in hiccup else 0.0
            fwd = 5 + (extra if r == 1 and slow_part[1] == "forward" else 0)
            bwd = 5 + (extra + wait_after_ms if r == 0 and s in hiccup else 0)
            gc = extra if r == 1 and slow_part[1] == "GC" else 0.0
            t0 = s * 1000 * MS
            events.append((r, s, "forward", "user_annotation", t0, fwd * MS))
            b0 = t0 + int(fwd * MS)
            events.append((r, s, "backward", "user_annotation", b0, int(bwd * MS)))
            if gc:  # rank 1's GC inside its backward, before the collective
                events.append((r, s, "GC", "gc", b0 + 1 * MS, int(gc * MS)))
            dur = fwd + bwd + gc + 1
            steps.append((r, s, dur * 1000.0))
    st = pd.DataFrame(steps, columns=["rank", "step", "duration_us"])
    ev = pd.DataFrame(events, columns=["rank", "step", "name", "cat", "ts_ns", "dur_ns"])
    return st, ev


def test_the_rank_whose_part_ended_first_is_the_culprit():
    st, ev = record({1: "forward"}, range(10, 15), culprit_ms=80, wait_after_ms=0.5)
    judged = slow_steps(st)
    over = judged[judged["slow"]].assign(
        over_us=lambda f: f["duration_us"] - f["median_us"])
    rank, waiters, unordered = _culprit(judged, over, ev, rank=0)
    assert (rank, list(waiters), unordered) == (1, [0], [])
    assert "its range: backward grew too" in waiters[0], waiters


def test_a_gc_pause_inside_the_backward_pass_is_still_the_culprit():
    """The waiter's backward started before the culprit's GC pause did: the start order would
    name the waiter; the end order names the rank that held the collective."""
    st, ev = record({1: "GC"}, range(10, 15), culprit_ms=80, wait_after_ms=0.5)
    weights = pd.Series(80_000.0, index=range(10, 15))
    assert first_to_end(ev, {0: "range: backward", 1: "GC"}, weights) == 1


def test_growth_outside_every_part_names_no_rank():
    st, ev = record({1: "forward"}, range(10, 15), culprit_ms=80, wait_after_ms=0.5)
    ev = ev[~((ev["rank"] == 1) & (ev["name"] == "forward"))]  # the slow rank marked nothing
    judged = slow_steps(st)
    over = judged[judged["slow"]].assign(
        over_us=lambda f: f["duration_us"] - f["median_us"])
    assert _culprit(judged, over, ev, rank=0)[2] == [0, 1]


def with_collectives(ev: pd.DataFrame, late_ms: dict[int, float], hiccup: range) -> pd.DataFrame:
    """Each rank enters two all-reduces a step at its backward's start (+1 ms for the second);
    in ``hiccup`` steps rank r enters them ``late_ms[r]`` later."""
    rows = []
    for (r, s), b in ev[ev["name"] == "backward"].groupby(["rank", "step"]):
        t = int(b["ts_ns"].iloc[0]) + int((late_ms.get(r, 0.0) if s in hiccup else 0.0) * MS)
        for k in range(2):
            rows.append((r, s, "gloo:all_reduce", "collective", t + k * MS, 0))
    extra = pd.DataFrame(rows, columns=ev.columns)
    return pd.concat([ev, extra], ignore_index=True)


def test_the_last_rank_into_the_collectives_is_the_culprit_even_unmarked():
    """With the Flight Recorder's entries, no range is needed: rank 1 (its delay marked by
    nothing) enters both all-reduces of each slow step 80 ms after rank 0, which waited 80 ms
    a step for it (not 160: the second one it entered 80 ms early too, but waited once)."""
    st, ev = record({1: "forward"}, range(10, 15), culprit_ms=80, wait_after_ms=0.5)
    ev = ev[~((ev["rank"] == 1) & (ev["name"] == "forward"))]  # rank 1 marked nothing
    ev = with_collectives(ev, {}, range(10, 15))
    judged = slow_steps(st)
    over = judged[judged["slow"]].assign(
        over_us=lambda f: f["duration_us"] - f["median_us"])
    rank, waiters, unordered = _culprit(judged, over, ev, rank=0)
    assert (rank, list(waiters), unordered) == (1, [0], [])
    assert "entered their collectives 80.0 ms a step before rank 1" in waiters[0], waiters
    culprit, waited = last_to_arrive(ev, [0, 1], set(range(10, 15)))
    assert culprit == 1 and waited == {0: 80.0}


def test_no_shared_collective_leaves_the_order_to_the_parts():
    st, ev = record({1: "forward"}, range(10, 15), culprit_ms=80, wait_after_ms=0.5)
    assert last_to_arrive(ev, [0, 1], set(range(10, 15))) is None
    one_rank = with_collectives(ev, {}, range(10, 15))
    one_rank = one_rank[~((one_rank["cat"] == "collective") & (one_rank["rank"] == 1))]
    assert last_to_arrive(one_rank, [0, 1], set(range(10, 15))) is None
