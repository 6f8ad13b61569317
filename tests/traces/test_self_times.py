"""Self time in numpy (ops.nested_parents) gives the stack walk's answer, to the last ns.

The walk (ops.walk_children) is the definition: a row's parent is the op on top of its
thread's stack once the ops that ended by its start are popped. The numpy path must give the
same children's time on properly nested threads, including ties (equal starts, zero durations,
a child ending exactly with its parent) and epoch-ns timestamps, and hand every thread it cannot
decide (overlapping ops, negative durations) back to the walk; the streamed summary's window by
window version (stream._SelfWalk, ops kept open across windows) must sum to the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from dynprof_nb.traces.formats.chrome import summaries as stream
from dynprof_nb.traces.formats.derived import op_table as ops


def _nested(rng: np.random.Generator, n_threads: int, n: int, span: int) -> tuple:
    """Random properly nested op trees per thread (gaps, ties, zero durations)."""
    th: list[int] = []
    st: list[int] = []
    du: list[int] = []

    def fill(t: int, a: int, b: int, depth: int, limit: int) -> None:
        x = a
        while x < b and len(st) < limit:
            if rng.random() < 0.2:
                x += int(rng.integers(0, 4))
                continue
            d = min(int(rng.integers(0, b - x + 1)), b - x)
            for _ in range(2 if rng.random() < 0.1 else 1):  # sometimes twice the same span
                th.append(t), st.append(x), du.append(d)
            if depth < 7 and d > 1 and rng.random() < 0.7:
                fill(t, x + int(rng.integers(0, 2)), x + d, depth + 1, limit)
            x += d

    for t in range(n_threads):
        fill(t, 0, span, 0, n * (t + 1) // n_threads)
    return np.array(th, np.int64), np.array(st, np.int64), np.array(du, np.int64)


def _sorted(th: np.ndarray, st: np.ndarray, du: np.ndarray) -> tuple:
    o = np.lexsort((-du, st, th))
    return th[o], st[o], du[o]


def _children(th: np.ndarray, st: np.ndarray, du: np.ndarray) -> tuple[np.ndarray, int]:
    """Children's time per row as ops.self_times computes it, and how many rows were walked."""
    parent, walk, _ = ops.nested_parents(th, st, du)
    child = ops.child_sums(parent, np.where(walk, 0, du), len(th))
    at = np.flatnonzero(walk)
    child[at] = ops.walk_children(th[at], st[at], du[at])
    return child, len(at)


def _cases(seed: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(60):
        th, st, du = _nested(rng, int(rng.integers(1, 5)), int(rng.integers(1, 400)), 3000)
        if i % 4 == 1 and len(st):  # a few ops made to overlap their siblings or parents
            k = rng.integers(0, len(st), 3)
            du[k] += rng.integers(-3, 40, 3)
        if i % 3 == 2:  # epoch-ns timestamps
            st = st + 1_733_000_000_000_000_000
        cases.append(_sorted(th, st, du))
    return cases


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numpy_children_equal_the_walk(seed: int) -> None:
    walked = decided = 0
    for th, st, du in _cases(seed):
        child, n_walked = _children(th, st, du)
        np.testing.assert_array_equal(child, ops.walk_children(th, st, du))
        walked += n_walked
        decided += len(th) - n_walked
    assert decided > walked > 0, "both paths must be exercised"


def test_overlapping_threads_are_walked_and_the_rest_not() -> None:
    # thread 0 nested; thread 1: an op outlives its parent, and the next op starts after the
    # parent's end but inside it: the walk makes it the outliving op's child
    th = np.array([0, 0, 0, 1, 1, 1])
    st = np.array([0, 1, 5, 0, 5, 12])
    du = np.array([10, 3, 5, 10, 15, 1])
    parent, walk, still = ops.nested_parents(th, st, du)
    assert walk.tolist() == [False] * 3 + [True] * 3
    assert parent[:3].tolist() == [-1, 0, 0]
    assert still[:3].tolist() == [True, False, True]  # 0 and its last child stay on the stack
    child, _ = _children(th, st, du)
    assert child.tolist() == ops.walk_children(th, st, du).tolist() == [8, 0, 0, 15, 1, 0]


@pytest.mark.parametrize("rows", [7, 50, 10**6])
def test_windowed_walk_sums_equal_the_walk(rows: int) -> None:
    """stream._SelfWalk over windows of ts, ops carried open between them, threads handed to
    the Python walk when they stop nesting: per name, the whole-frame self times."""
    rng = np.random.default_rng(rows)
    for th, st, du in _cases(rows)[::3]:
        if not len(th):
            continue
        names = rng.integers(0, 9, len(th))
        ref = np.zeros(9, np.int64)
        np.add.at(ref, names, du - ops.walk_children(th, st, du))
        out = np.zeros(9, np.int64)
        walk = stream._SelfWalk(out)
        by_ts = np.argsort(st, kind="stable")
        cuts = np.unique(np.quantile(st, np.linspace(0, 1, max(2, len(st) // rows + 1))))
        pos = np.searchsorted(st[by_ts], cuts[1:-1].astype(np.int64), "left")
        for part in np.split(by_ts, pos):
            part = np.sort(part)  # file order within the window, as the pieces give it
            if len(part):
                walk.add(st[part], th[part], names[part], du[part])
        walk.finish()
        np.testing.assert_array_equal(out, ref)
