"""The overlap of two unions of intervals (step breakdown, temporal breakdown) in numpy equals
the two-pointer walk that defines it, to the ns, on random families: merged ones (numpy path),
raw overlapping ones and ones with negative lengths (the walk)."""

from __future__ import annotations

import numpy as np

from dynprof_nb.traces import intervals


def _walk(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> int:
    total, i, j = 0, 0, 0
    while i < len(a0) and j < len(b0):
        lo, hi = max(a0[i], b0[j]), min(a1[i], b1[j])
        if hi > lo:
            total += int(hi - lo)
        if a1[i] < b1[j]:
            i += 1
        else:
            j += 1
    return total


def test_intersection_equals_the_walk() -> None:
    rng = np.random.default_rng(25)
    merged = 0

    def family(t: int) -> tuple[np.ndarray, np.ndarray]:
        n = int(rng.integers(0, 9))
        s = rng.integers(0, 80, n) + 1_733_000_000_000_000_000 * (t % 3 == 0)
        e = s + rng.integers(-2 if t % 7 == 0 else 0, 15, n)
        if t % 5 == 0:
            return s, e  # raw: overlapping, unsorted
        _, gs, ge = intervals.union_us(s, e)
        return gs, ge

    for t in range(2000):
        a, b = family(t), family(t)
        assert intervals.intersection_ns(*a, *b) == _walk(*a, *b), (a, b)
        assert intervals.intersect_us(*a, *b) == _walk(*a, *b) / 1000.0
        merged += t % 5 != 0 and t % 7 != 0
    assert merged > 1000
