"""More work, or the same work slower (dynprof_nb.analysis.same_work): the piece alone, on
small frames shaped as a window's (the fault suite runs it on real DDP jobs, where the compute
fault adds calls and must stay "compute")."""

from __future__ import annotations

import math

import pandas as pd

from dynprof_nb.analysis.same_work import SLOWER, refine, same_work, same_work_text
from dynprof_nb.analysis.straggler import Verdict


class Frames:
    """What same_work reads of a window: steps, ops (host) and kernels (device)."""

    def __init__(self, ops: list[tuple], kernels: list[tuple] | None = None, steps: int = 4):
        self.steps = pd.DataFrame(
            [(r, s, 30_000.0) for r in (0, 1) for s in range(steps)],
            columns=["rank", "step", "duration_us"],
        )
        self.ops = pd.DataFrame(ops, columns=["rank", "name", "count", "self_us"])
        self.kernels = pd.DataFrame(kernels or [], columns=["rank", "name", "duration_us"])


def _ops(mm0: tuple[int, float], mm1: tuple[int, float]) -> list[tuple]:
    """Both ranks: 4 steps of aten::mm (calls, µs in all), an all-reduce and the step marker."""
    return [
        (0, "aten::mm", *mm0),
        (1, "aten::mm", *mm1),
        (0, "aten::relu", 4, 40.0),
        (1, "aten::relu", 4, 40.0),
        (0, "gloo:all_reduce", 4, 9000.0),
        (1, "gloo:all_reduce", 4, 1000.0),
        (0, "ProfilerStep*", 4, 500.0),
        (1, "ProfilerStep*", 4, 500.0),
    ]


def _verdict(
    rank: int, cause: str, against: str = "the other ranks", excess_us: float = 10_000.0
) -> Verdict:
    """A straggler verdict naming ``rank`` for ``cause``, ``excess_us`` per step."""
    table = pd.DataFrame({"rank": [0, 1]})
    return Verdict(rank, cause, excess_us, 1_000.0, table, against, {cause: excess_us})


def test_the_same_calls_each_slower_are_the_same_work_slower() -> None:
    w = Frames(_ops((800, 120_000.0), (800, 80_000.0)))  # rank 0: 200 mm a step, 1.5x as long
    found = same_work(w, 0)
    assert found["operators"] == ["aten::mm"] and found["calls_per_step"] == 200.0
    assert found["reference_calls_per_step"] == 200.0 and found["device"] == 0.0
    assert math.isclose(found["per_call_ratio"], 1.5)
    v = refine(_verdict(0, "compute"), w)
    assert v.cause == SLOWER and v.same_work == found
    text = same_work_text(v)
    assert "rank 0 ran the same work slower: 200.0 calls per step of aten::mm" in text, text
    assert "as the other ranks (200.0), each 1.50x as long" in text and "processor" in text


def test_more_calls_or_a_new_operator_are_more_work() -> None:
    more = Frames(_ops((1600, 160_000.0), (800, 80_000.0)))  # twice the calls, each as long
    assert same_work(more, 0) == {}
    assert refine(_verdict(0, "compute"), more).cause == "compute"
    new = Frames(_ops((800, 80_000.0), (800, 80_000.0)) + [(0, "extra_op", 4, 60_000.0)])
    assert same_work(new, 0) == {}


def test_against_a_baseline_the_rank_itself_is_the_reference() -> None:
    w = Frames(_ops((800, 120_000.0), (800, 120_000.0)))
    b = Frames(_ops((800, 60_000.0), (800, 120_000.0)))
    assert math.isclose(same_work(w, 0, b)["per_call_ratio"], 2.0)
    assert same_work(w, 1, b) == {}  # rank 1 did not grow
    v = refine(_verdict(0, "compute", "the baseline"), w, b)
    assert "as its baseline (200.0), each 2.00x as long" in same_work_text(v)


def test_a_device_window_compares_kernels() -> None:
    kernels = [(0, "gemm", 100.0)] * 8 + [(1, "gemm", 50.0)] * 8 + [(0, "ncclKernel", 9.0)]
    w = Frames([], kernels)
    found = same_work(w, 0)
    assert found["operators"] == ["gemm"] and found["device"] == 1.0
    assert math.isclose(found["per_call_ratio"], 2.0) and found["calls_per_step"] == 2.0
    assert "its device ran slower" in same_work_text(
        refine(_verdict(0, "computing", excess_us=100.0), w)
    )


def test_operators_that_hold_a_sliver_of_the_excess_say_nothing_of_it() -> None:
    """A step trace's computing 1.5x on one rank whose kernels ran 4% longer: the kernels do not
    account for the excess, so it is not called the same work slower."""
    w = Frames(_ops((800, 104_000.0), (800, 100_000.0)))  # +1 ms a step in the operators
    assert same_work(w, 0, excess_us=1_000.0)["per_call_ratio"] > 1
    assert same_work(w, 0, excess_us=10_000.0) == {}
    assert refine(_verdict(0, "compute"), w).cause == "compute"  # its excess: 10 ms a step


def test_other_causes_and_windows_without_operators_are_left_alone() -> None:
    w = Frames(_ops((800, 120_000.0), (800, 80_000.0)))
    for cause in ("CPU contention", "GC", "data loading", "sync"):
        assert refine(_verdict(0, cause), w).cause == cause
    assert refine(_verdict(0, "compute"), Frames([])).cause == "compute"  # the built-in backend
