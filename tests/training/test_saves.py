"""Saving a window: linear in its length, off the training process, bounded at close()."""

from __future__ import annotations

import random

from dynprof_nb.training.backends.builtin import Coverage


def brute_union(intervals: list[tuple[int, int]]) -> int:
    """Length of a union of intervals, the obvious way (the reference for Coverage)."""
    covered: set[int] = set()
    for a, b in intervals:
        covered.update(range(a, b))
    return len(covered)


def test_coverage_answers_like_the_obvious_union_for_every_step():
    rng = random.Random(19)
    for _ in range(200):
        intervals = [(a, a + rng.randint(-3, 30)) for a in
                     (rng.randint(0, 200) for _ in range(rng.randint(0, 25)))]
        cover = Coverage(intervals)
        for _ in range(10):
            s0 = rng.randint(-10, 220)
            s1 = s0 + rng.randint(0, 80)
            clipped = [(max(a, s0), min(b, s1)) for a, b in intervals]
            assert cover.within(s0, s1) == brute_union([c for c in clipped if c[1] > c[0]])
