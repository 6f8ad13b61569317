"""The training thread's on-CPU time and run-queue delay over a window, from the kernel's
per-thread scheduler statistics (``/proc/thread-self/schedstat``: time on a CPU, time runnable
but waiting in a run queue for one, timeslices; nanoseconds since the thread began).

A rank whose step is slower because it waited for a core (another process or thread on its
CPUs) looks, on the wall clock, exactly like a rank with more work: only the scheduler knows
the difference. Every backend reads these counters twice per window, at its start and its
stop, on the training thread (never per step: one read is a few µs and a step pays nothing),
and writes the difference into the window folder (``protocol.THREAD_CPU_FILE``), where
:mod:`dynprof_nb.traces.formats.common.threadcpu` reads it and the straggler rule
(:mod:`dynprof_nb.analysis.straggler`) tells "CPU contention" apart from "compute".

MindSpore runs its operators on threads of its own (PyNative's pipeline and its actor thread
pool), not on the training thread, which mostly waits for them: there a core held by another
process delays the operators, and the training thread's own counters do not see it. The
MindSpore backend therefore reads every thread of the process (``whole_process``: the sum over
``/proc/self/task/*/schedstat``, per thread the difference between stop and start, a thread
begun in the window counted from 0, one ended in it lost), and the file says so
(``threads: "process"``; ``"training"`` otherwise).

Linux only: where the file is missing (another OS, a kernel without ``CONFIG_SCHED_INFO``, the
thread gone by the stop), the window's file says so (``missing``) and the rule cannot name
CPU contention.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from dynprof_nb.contract.protocol import THREAD_CPU_FILE

SCHEDSTAT = "/proc/thread-self/schedstat"


def read_schedstat(tid: int) -> tuple[int, int, int] | None:
    """(on-CPU ns, run-queue wait ns, timeslices) of thread ``tid`` of this process, or None
    where the kernel does not say. ``/proc/self/task/<tid>`` is ``/proc/thread-self`` for the
    thread itself, and still the training thread's when another thread asks."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat", "rb") as fh:
            fields = fh.read(256).split()
        on_cpu, waited, slices = (int(f) for f in fields[:3])
    except (OSError, ValueError):
        return None
    return on_cpu, waited, slices


def read_process() -> dict[int, tuple[int, int, int]]:
    """:func:`read_schedstat` of every thread of this process, by thread id ({} where the
    kernel does not say)."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task") if t.isdigit()]
    except OSError:
        return {}
    out = {}
    for tid in tids:
        got = read_schedstat(tid)
        if got is not None:
            out[tid] = got
    return out


def process_delta(
    first: dict[int, tuple[int, int, int]], last: dict[int, tuple[int, int, int]]
) -> tuple[int, int, int] | None:
    """The sums over the threads of ``last`` of their counters' growth since ``first`` (a
    thread begun since counts from 0); None without readings."""
    if not first or not last:
        return None
    zero = (0, 0, 0)
    return tuple(
        sum(max(v[i] - first.get(t, zero)[i], 0) for t, v in last.items()) for i in range(3)
    )  # type: ignore[return-value]


class ThreadCpu:
    """One window's reading: :meth:`start` at the window's start and :meth:`stop` at its end
    (each on the training thread, one small read), :meth:`write` in ``save()``."""

    def __init__(self, whole_process: bool = False) -> None:
        self.whole_process = whole_process  # every thread of the process (MindSpore)
        self._p: tuple[dict, dict] = ({}, {})
        self.tid = 0
        self.first_step = 0
        self.last_step = -1
        self._t = (0, 0)
        self._s: tuple[Any, Any] = (None, None)
        self._stopped = False

    def start(self, first_step: int) -> None:
        """The window's first step is ``first_step``; read the training thread's counters."""
        self.tid = threading.get_native_id()
        self.first_step = first_step
        self._s = (read_schedstat(self.tid), None)
        if self.whole_process:
            self._p = (read_process(), {})
        self._t = (time.monotonic_ns(), 0)
        self._stopped = False

    def stop(self, last_step: int) -> None:
        """The window's last recorded step was ``last_step``; read the counters again (once:
        a second stop keeps the first reading)."""
        if self._stopped:
            return
        self._stopped = True
        self.last_step = last_step
        self._s = (self._s[0], read_schedstat(self.tid))
        if self.whole_process:
            self._p = (self._p[0], read_process())
        self._t = (self._t[0], time.monotonic_ns())

    def record(self) -> dict[str, Any]:
        """What :meth:`write` writes: the window's steps, its wall time and the thread's on-CPU
        time, run-queue delay and timeslices over it, or ``missing``: why there are none."""
        steps = self.last_step - self.first_step + 1
        out: dict[str, Any] = {
            "source": SCHEDSTAT,
            "tid": self.tid,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "steps": max(steps, 0),
            "threads": "process" if self.whole_process else "training",
            "missing": None,
        }
        s0, s1 = self._s
        if not self._stopped:
            out["missing"] = "the window was not stopped: no second reading"
        elif s0 is None or s1 is None:
            out["missing"] = (
                f"no {SCHEDSTAT} for the training thread here (Linux only, with the kernel's "
                "scheduler statistics)"
            )
        elif steps <= 0:
            out["missing"] = "the window recorded no step"
        else:
            d = (s1[0] - s0[0], s1[1] - s0[1], s1[2] - s0[2])
            if self.whole_process:
                d = process_delta(*self._p) or d
            out.update(
                wall_ns=self._t[1] - self._t[0],
                on_cpu_ns=d[0],
                runqueue_ns=d[1],
                timeslices=d[2],
            )
        return out

    def write(self, directory: Path) -> str:
        """Write the record into the window folder; its name relative to the folder."""
        (directory / THREAD_CPU_FILE).write_text(json.dumps(self.record()), encoding="utf-8")
        return THREAD_CPU_FILE


__all__ = ["SCHEDSTAT", "ThreadCpu", "process_delta", "read_process", "read_schedstat"]
