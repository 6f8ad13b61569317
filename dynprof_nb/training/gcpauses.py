"""Garbage-collection pauses while a window records, from ``gc.callbacks``.

A collection stops the Python thread that triggered it (and, holding the GIL, every other
one); a long one makes a step slow with nothing else to show for it. ``gc.callbacks`` is told
at the start and the end of each collection, so this costs nothing on the step path: only a
collection, which would happen anyway, runs the two calls (a clock read and a list append).
Each pause becomes an event named :data:`GC_EVENT` in category ``gc`` (torch_npu's and
msprof-analyze's name for GC records; ``w.advise()``'s GC rule reads them).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

GC_EVENT = "GC"
GC_CATEGORY = "gc"

# on_start() -> token; on_stop(token, t0_ns, t1_ns, tid, info)
OnStart = Callable[[], Any]
OnStop = Callable[[Any, int, int, int, dict[str, Any]], None]


class GcPauses:
    """Calls ``on_stop`` once per collection between :meth:`start` and :meth:`stop`, with
    the clock's readings (``clock``: ``time.perf_counter_ns`` for the built-in backend,
    ``time.time_ns`` for MindSpore's marks) and gc's info (generation, collected,
    uncollectable). ``on_start`` (optional) runs as the collection begins: the torch
    backend opens a ``record_function`` there, so the pause sits on Kineto's own clock."""

    def __init__(
        self,
        on_stop: OnStop,
        on_start: OnStart | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.on_stop, self.on_start, self.clock = on_stop, on_start, clock
        self._open: dict[int, tuple[int, Any]] = {}  # tid -> (t0, token)
        self.active = False

    def start(self) -> None:
        if not self.active:
            gc.callbacks.append(self._callback)
            self.active = True

    def stop(self) -> None:
        if self.active:
            self.active = False
            try:
                gc.callbacks.remove(self._callback)
            except ValueError:  # someone cleared gc.callbacks
                pass
            self._open.clear()

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        tid = threading.get_native_id()
        try:
            if phase == "start":
                token = self.on_start() if self.on_start is not None else None
                self._open[tid] = (self.clock(), token)
            elif phase == "stop":
                opened = self._open.pop(tid, None)
                if opened is not None:
                    self.on_stop(opened[1], opened[0], self.clock(), tid, info)
        except Exception:  # a profiler hook must never break the collection
            pass


__all__ = ["GC_CATEGORY", "GC_EVENT", "GcPauses"]
