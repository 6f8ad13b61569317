"""The step every rank can still honour (``shared_layout.common_step``: Stop's end step and a
trigger's start) uses how fast each rank steps now, not a heartbeat rate a one-off stall
dragged down: a stop placed at that rate came a step too early for a rank, which then ended a
step after the others (two windows). One piece, on a fake segment's words."""

from __future__ import annotations

from dataclasses import dataclass

from dynprof_nb.contract.segment import SlotView
from dynprof_nb.contract.shared_layout import R_LOOKED_NS, R_RECENT_NS, common_step

NOW = 10**12
RING = 100


@dataclass
class FakeSegment:
    words: list[int]

    def ring_base(self, index: int) -> int:
        return RING + 10 * index


def _slot(index: int, step: int, rate_milli: int, age_ms: float) -> SlotView:
    return SlotView(index=index, pid=1, rank=index, step=step, state="recording", start=1,
                    stop=10**6, applied=1, heartbeat_ns=int(NOW - age_ms * 1e6), pid_start=0,
                    error="", error_generation=0, root="", window="", rate_milli=rate_milli)


def _segment(recent_ns: list[int], looked_ns: list[int]) -> FakeSegment:
    words = [0] * (RING + 10 * len(recent_ns))
    for i, (recent, looked) in enumerate(zip(recent_ns, looked_ns, strict=True)):
        words[RING + 10 * i + R_RECENT_NS] = recent
        words[RING + 10 * i + R_LOOKED_NS] = looked
    return FakeSegment(words)


def test_a_rate_dragged_down_by_a_stall_does_not_place_the_step_too_early() -> None:
    # 12 ms steps (83/s), but the heartbeat's rate still reads 20/s after a 0.5 s stall
    slot = _slot(0, 1000, 20_000, age_ms=40)
    seg = _segment([12_000_000], [NOW])
    at = common_step(seg, [slot], NOW, 1, 0.05)
    # 40 ms old at 83/s: 3 steps on; then the step it is in and 50 ms at 83/s (5 steps)
    assert at == 1000 + 3 + 1 + 5, at
    # with no recent median yet, the heartbeat's rate is all there is
    assert common_step(_segment([0], [NOW]), [slot], NOW, 1, 0.05) == 1000 + 0 + 1 + 1


def test_a_rank_that_stopped_stepping_is_not_extrapolated() -> None:
    # its heartbeat looked 2 s after its last step: where it stopped, plus the margin
    slot = _slot(0, 500, 83_000, age_ms=2000)
    seg = _segment([12_000_000], [NOW])
    assert common_step(seg, [slot], NOW, 1, 0.05) == 500 + 1 + 5


def test_the_latest_rank_decides() -> None:
    slow = _slot(0, 900, 41_000, age_ms=10)  # 24 ms steps
    fast = _slot(1, 950, 83_000, age_ms=10)
    seg = _segment([24_000_000, 12_000_000], [NOW, NOW])
    assert common_step(seg, [slow, fast], NOW, 2, 0.03) == 950 + 0 + 2 + 3
