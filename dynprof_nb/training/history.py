"""The last K steps' ranges and step markers, kept while no window records (``history=K``).

A trigger starts its window after the step that tripped it; with a history the built-in
backend's window begins with the K steps before its first, so the slow step itself is in the
trace. Bounded: K steps of at most :data:`MAX_RANGES_PER_STEP` ranges each (a step's extra
ranges are counted, not kept). It is the range sink between windows, so each range costs what
it costs inside a window (a tuple and a clock read), and each step one more append.
The torch and MindSpore profilers cannot do this: their recording begins at ``start()``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from dynprof_nb.training import ranges

MAX_RANGES_PER_STEP = 1000


class History:
    """A ring of the last ``steps`` steps: ``(step, t0, t1, [(name, cat, tid, t0, dur)])``."""

    def __init__(self, steps: int) -> None:
        self.steps: deque[tuple[int, int, int, list[tuple[str, str, int, int, int]]]] = deque(
            maxlen=int(steps)
        )
        self.current: list[tuple[str, str, int, int, int]] = []
        self.t0 = time.perf_counter_ns()
        self.dropped = 0  # ranges over MAX_RANGES_PER_STEP, not kept

    def attach(self) -> None:
        """Become the range sink (between windows), starting a fresh step."""
        self.current, self.t0 = [], time.perf_counter_ns()
        ranges.set_sink(self)

    def step(self, n: int) -> None:
        """Step ``n`` ended (the training thread)."""
        now = time.perf_counter_ns()
        self.steps.append((n, self.t0, now, self.current))
        self.current, self.t0 = [], now

    def open_range(self, name: str, category: str) -> tuple[str, str, int, int]:
        return (name, category, threading.get_native_id(), time.perf_counter_ns())

    def close_range(self, token: tuple[str, str, int, int]) -> None:
        now = time.perf_counter_ns()
        if len(self.current) >= MAX_RANGES_PER_STEP:
            self.dropped += 1
            return
        name, category, tid, t0 = token
        self.current.append((name, category, tid, t0, now - t0))

    def take(self) -> list[tuple[int, int, int, list[tuple[str, str, int, int, int]]]]:
        """The kept steps, oldest first, emptying the ring (a window adopts them)."""
        kept = list(self.steps)
        self.steps.clear()
        return kept


def adopt(backend: Any, kept: list[Any]) -> tuple[int, int] | None:
    """Give a built-in backend's just-started window the history's steps; returns their
    ``(first, last)`` step, or None when the backend cannot take them (torch, MindSpore)."""
    if not kept or not hasattr(backend, "adopt_history"):
        return None
    backend.adopt_history(kept)
    return kept[0][0], kept[-1][0]
