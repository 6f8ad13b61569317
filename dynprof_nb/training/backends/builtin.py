"""The built-in profiler: no dependency beyond the standard library.

What it records while a window is active:

* each step as a step-marker span (``protocol.step_marker``) (N = the global step), like Kineto;
* user ranges (``dynprof_nb.range``) as ``user_annotation`` spans;
* with ``with_stack``: every Python and C function call on the training thread
  (``sys.setprofile``), as ``python_function`` spans named ``file.py(line): name``;
* each garbage collection as a ``GC`` span in category ``gc`` (``gc.callbacks``: only a
  collection pays for it; :mod:`dynprof_nb.training.gcpauses`);
* with ``profile_memory``: the process's resident memory (RSS, from ``/proc/self/statm``) and
  its highest value so far in the window, at every step and range end. ``tracemalloc`` (traced
  Python allocations) hooked every allocation and made a step 6-12x slower, and it does not
  see tensors, which live outside Python's allocator; one ``pread`` costs ~2 µs. Where there is
  no ``/proc`` the traced Python memory is recorded instead, at tracemalloc's cost.

What it writes: ``trace.json`` (Chrome trace, opens in Perfetto; ``ts`` relative to
``baseTimeNanoseconds`` so nanoseconds survive the float), and under ``ASCEND_PROFILER_OUTPUT/``
``op_statistic.csv``, ``step_trace_time.csv`` and (with memory) ``memory_record.csv`` in the
Ascend column conventions.
"""

from __future__ import annotations

import bisect
import csv
import os
import sys
import threading
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path
from typing import Any

from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.protocol import step_marker
from dynprof_nb.training import ranges
from dynprof_nb.training.gcpauses import GC_CATEGORY, GC_EVENT, GcPauses
from dynprof_nb.training.threadcpu import ThreadCpu

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a dependency, but stay dependency-free
    orjson = None

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
STEP_CATEGORY = "user_annotation"
# What one recorded event costs in memory: the 5-tuple, its two timestamps and its list slot
# (names are shared). Measured by tests/training/test_saves.py against the process's RSS.
EVENT_BYTES = 160
DEFAULT_MEMORY_BUDGET = 512 * 2**20
COMM_CATEGORY = "communication"


class BuiltinBackend:
    """Records one window in memory and writes it on ``save()``."""

    name = "builtin"
    save_in_child = True  # save() is plain Python over plain data: safe in a forked child

    def __init__(self) -> None:
        self.directory: Path | None = None
        self.context: dict[str, Any] = {}
        self.events: list[tuple[str, str, int, int, int]] = []  # name, cat, tid, t0, dur
        self.memory: list[tuple[int, int, int]] = []  # t, current, peak (bytes)
        self.steps: list[tuple[int, int, int]] = []  # step, t0, t1
        self._stacks: dict[int, list[tuple[str, int]]] = defaultdict(list)
        self._memory = False
        self._own_tracemalloc = False
        self._statm = -1  # an open /proc/self/statm while recording memory from RSS
        self._rss_peak = 0
        self._page = 4096
        self.memory_source = "PROCESS"  # memory_record.csv's component: RSS (PYTHON: traced)
        self._with_stack = False
        self._names: dict[Any, str] = {}  # code object, (module, qualname) -> event name
        self._max_events = DEFAULT_MEMORY_BUDGET // EVENT_BYTES
        self.full: str | None = None  # why recording stopped before the window's end
        self._gc = GcPauses(self._gc_pause)
        self._cpu = ThreadCpu()  # the training thread's CPU and run-queue time

    # -- protocol -----------------------------------------------------------------------

    def start(
        self,
        directory: Path,
        config: ProfilerConfig,
        first_step: int,
        context: dict[str, Any] | None = None,
    ) -> None:
        self.directory = directory
        self.context = dict(context or {})
        self.config = config
        budget = int(self.context.get("memory_budget", DEFAULT_MEMORY_BUDGET))
        self._max_events = max(1, budget // EVENT_BYTES)
        self.base_ns = time.time_ns()
        self.base_perf = time.perf_counter_ns()
        self.main_tid = threading.get_native_id()
        self.next_step = first_step
        self.step_t0 = self.base_perf
        self._memory = config.profile_memory
        if self._memory:
            self._open_memory()
        if config.with_stack:
            self._with_stack = True
            threading.setprofile(self._profile)
            sys.setprofile(self._profile)
        ranges.set_sink(self)
        self._gc.start()
        self._cpu.start(first_step)

    def adopt_history(self, kept: list[Any]) -> None:
        """Begin the window with steps kept before it (dynprof_nb.training.history): their
        markers and ranges, the clock's origin moved back to the first of them."""
        first = kept[0][1]
        if first < self.base_perf:
            self.base_ns -= self.base_perf - first
            self.base_perf = first
        self.steps[:0] = [(n, t0, t1) for n, t0, t1, _ in kept]
        self.events[:0] = [e for *_, events in kept for e in events]

    def step(self, step: int) -> None:
        now = time.perf_counter_ns()
        self.steps.append((step, self.step_t0, now))
        if self._memory:
            self._sample_memory(now)
        self.step_t0 = now
        self.next_step = step + 1
        if self.full is None and self._size() >= self._max_events:
            self._over_budget()

    def stop(self) -> None:
        self._cpu.stop(self.next_step - 1)
        self._detach()
        if self._statm >= 0:
            os.close(self._statm)
            self._statm = -1
        if self._own_tracemalloc:
            tracemalloc.stop()
            self._own_tracemalloc = False
        self.end_perf = time.perf_counter_ns()

    def release(self) -> None:
        """Free the recording a little at a time (after a save in a child process): one
        ``del`` of millions of tuples would hold the GIL, and training, for a long moment."""
        for records in (self.events, self.memory, self.steps):
            while records:
                del records[-50_000:]
                time.sleep(0.002)

    def save(self) -> list[str]:
        assert self.directory is not None, "save() before start()"
        out = self.directory / OUTPUT_DIR
        out.mkdir(exist_ok=True)
        files = [self._write_trace(self.directory / "trace.json")]
        files.append(self._write_op_statistic(out / "op_statistic.csv"))
        files.append(self._write_step_trace(out / "step_trace_time.csv"))
        if self.memory:
            files.append(self._write_memory(out / "memory_record.csv"))
        files.append(self.directory / self._cpu.write(self.directory))
        return [str(Path(f).relative_to(self.directory)) for f in files]

    # -- recording (hot while a window is active) -----------------------------------------

    def open_range(self, name: str, category: str) -> tuple[str, str, int, int]:
        return (name, category, threading.get_native_id(), time.perf_counter_ns())

    def close_range(self, token: tuple[str, str, int, int]) -> None:
        now = time.perf_counter_ns()
        name, category, tid, t0 = token
        self.events.append((name, category, tid, t0, now - t0))
        if self._memory:
            self._sample_memory(now)
        if len(self.events) >= self._max_events and self.full is None:
            self._over_budget()

    # -- the memory budget ----------------------------------------------------------------

    def _size(self) -> int:
        return len(self.events) + len(self.memory) + len(self.steps)

    def _over_budget(self) -> None:
        """Stop recording (the Monitor ends and saves the window at the next step)."""
        budget_mb = self._max_events * EVENT_BYTES / 2**20
        self.full = (
            f"memory budget reached ({budget_mb:.0f} MB, {self._size():,} events) at "
            f"step {self.next_step}"
        )
        self._detach()

    def _gc_pause(self, _token: Any, t0: int, t1: int, tid: int, _info: dict[str, Any]) -> None:
        self.events.append((GC_EVENT, GC_CATEGORY, tid, t0, t1 - t0))

    def _detach(self) -> None:
        self._gc.stop()
        ranges.set_sink(None)
        if self._with_stack:
            self._with_stack = False
            sys.setprofile(None)
            threading.setprofile(None)

    def _open_memory(self) -> None:
        try:
            self._statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
            self._page = os.sysconf("SC_PAGE_SIZE")
        except OSError:  # no /proc: traced Python memory, at tracemalloc's cost
            self.memory_source = "PYTHON"
            if not tracemalloc.is_tracing():
                tracemalloc.start()
                self._own_tracemalloc = True

    def _sample_memory(self, now: int) -> None:
        if self._statm >= 0:
            rss = int(os.pread(self._statm, 128, 0).split()[1]) * self._page
            if rss > self._rss_peak:
                self._rss_peak = rss
            self.memory.append((now, rss, self._rss_peak))
        elif self._own_tracemalloc or tracemalloc.is_tracing():
            current, peak = tracemalloc.get_traced_memory()
            self.memory.append((now, current, peak))

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        """Called by Python on every call and return: keep it short. Names are built once
        per function (formatting one per call made with_stack windows much slower)."""
        now = time.perf_counter_ns()
        tid = threading.get_native_id()
        stack = self._stacks[tid]
        if event == "call":
            code = frame.f_code
            name = self._names.get(code)
            if name is None:
                name = self._names[code] = (
                    f"{os.path.basename(code.co_filename)}({code.co_firstlineno}): "
                    f"{getattr(code, 'co_qualname', code.co_name)}"
                )
            stack.append((name, now))
        elif event == "c_call":
            # keyed by module and qualname: a bound builtin (``lst.append``) is a new object
            # at every access, so keying by the object would grow without end
            key = (getattr(arg, "__module__", None), getattr(arg, "__qualname__", None))
            name = self._names.get(key)
            if name is None:
                name = self._names[key] = f"<built-in> {key[0] or 'builtins'}.{key[1] or repr(arg)}"
            stack.append((name, now))
        elif stack:  # return, c_return, c_exception; calls begun before the window are skipped
            name, t0 = stack.pop()
            events = self.events
            events.append((name, "python_function", tid, t0, now - t0))
            if len(events) >= self._max_events and self.full is None:
                self._over_budget()

    # -- writing --------------------------------------------------------------------------

    def _us(self, perf_ns: int) -> float:
        """Microseconds since the window's base time; small, so a float keeps the nanoseconds."""
        return (perf_ns - self.base_perf) / 1000.0

    def _write_trace(self, path: Path) -> Path:
        pid = os.getpid()
        rank = self.context.get("rank", 0)
        events: list[dict[str, Any]] = [
            {
                "ph": "M",
                "name": "process_name",
                "pid": pid,
                "tid": 0,
                "args": {"name": f"rank {rank} (pid {pid})"},
            },
            {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
        ]
        tids = {self.main_tid} | {e[2] for e in self.events}
        for tid in sorted(tids):
            label = "training thread" if tid == self.main_tid else f"thread {tid}"
            events.append(
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": label}}
            )
        for step, t0, t1 in self.steps:
            events.append(
                {
                    "ph": "X",
                    "cat": STEP_CATEGORY,
                    "name": step_marker(step),
                    "pid": pid,
                    "tid": self.main_tid,
                    "ts": self._us(t0),
                    "dur": (t1 - t0) / 1000.0,
                }
            )
        for name, cat, tid, t0, dur in self.events:
            events.append(
                {
                    "ph": "X",
                    "cat": cat,
                    "name": name,
                    "pid": pid,
                    "tid": tid,
                    "ts": self._us(t0),
                    "dur": dur / 1000.0,
                }
            )
        for t, current, peak in self.memory:
            events.append(
                {
                    "ph": "C",
                    "name": "Memory",
                    "pid": pid,
                    "tid": self.main_tid,
                    "ts": self._us(t),
                    "args": {"Allocated (MB)": current / 2**20, "Peak (MB)": peak / 2**20},
                }
            )
            events.append(
                {
                    "ph": "i",
                    "s": "t",
                    "cat": "cpu_instant_event",
                    "name": "[memory]",
                    "pid": pid,
                    "tid": self.main_tid,
                    "ts": self._us(t),
                    "args": {
                        "Total Allocated": current,
                        "Total Reserved": peak,
                        "Device Type": 0,
                        "Device Id": -1,
                    },
                }
            )
        trace = {
            "schemaVersion": 1,
            "displayTimeUnit": "ns",
            "baseTimeNanoseconds": self.base_ns,
            "distributedInfo": {"rank": rank, "world_size": self.context.get("world_size")},
            "otherData": {
                "dynprof_nb": {
                    **self.context,
                    "backend": self.name,
                    "config": self.config.to_dict(),
                }
            },
            "traceEvents": events,
        }
        if orjson is not None:
            path.write_bytes(orjson.dumps(trace))
        else:  # pragma: no cover
            import json

            path.write_text(json.dumps(trace), encoding="utf-8")
        return path

    def _write_op_statistic(self, path: Path) -> Path:
        stats: dict[tuple[str, str], list[int]] = {}
        for name, cat, _tid, _t0, dur in self.events:
            if cat == "python_function":
                continue
            s = stats.setdefault((name, cat), [0, 0, sys.maxsize, 0])
            s[0] += 1
            s[1] += dur
            s[2] = min(s[2], dur)
            s[3] = max(s[3], dur)
        total = sum(s[1] for s in stats.values()) or 1
        rows = sorted(stats.items(), key=lambda kv: -kv[1][1])
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(
                [
                    "OP Type",
                    "Core Type",
                    "Count",
                    "Total Time(us)",
                    "Min Time(us)",
                    "Avg Time(us)",
                    "Max Time(us)",
                    "Ratio(%)",
                ]
            )
            for (name, cat), (count, tot, lo, hi) in rows:
                core = "COMMUNICATION" if cat == COMM_CATEGORY else "CPU"
                w.writerow(
                    [
                        name,
                        core,
                        count,
                        f"{tot / 1000:.3f}",
                        f"{lo / 1000:.3f}",
                        f"{tot / count / 1000:.3f}",
                        f"{hi / 1000:.3f}",
                        f"{100 * tot / total:.2f}",
                    ]
                )
        return path

    def _write_step_trace(self, path: Path) -> Path:
        """Per step: time covered by compute ranges, by communication ranges, their overlap."""
        top = [
            (t0, t0 + dur, cat == COMM_CATEGORY)
            for _n, cat, tid, t0, dur in self.events
            if tid == self.main_tid and cat != "python_function"
        ]
        rank = self.context.get("rank", 0)
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(
                [
                    "Device_id",
                    "Step",
                    "Computing",
                    "Communication(Not Overlapped)",
                    "Overlapped",
                    "Communication",
                    "Free",
                    "Stage",
                    "Bubble",
                    "Communication(Not Overlapped and Exclude Receive)",
                    "Preparing",
                ]
            )
            comp_cover = Coverage([(a, b) for a, b, c in top if not c])
            comm_cover = Coverage([(a, b) for a, b, c in top if c])
            both_cover = Coverage([(a, b) for a, b, _ in top])
            for step, s0, s1 in self.steps:
                comp = comp_cover.within(s0, s1)
                comm = comm_cover.within(s0, s1)
                both = both_cover.within(s0, s1)
                overlapped = comp + comm - both
                free = (s1 - s0) - both
                us = [
                    v / 1000
                    for v in (
                        comp,
                        comm - overlapped,
                        overlapped,
                        comm,
                        free,
                        s1 - s0,
                        0,
                        comm - overlapped,
                        0,
                    )
                ]
                w.writerow([rank, step, *(f"{v:.3f}" for v in us)])
        return path

    def _write_memory(self, path: Path) -> Path:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(
                [
                    "Component",
                    "Timestamp(us)",
                    "Total Allocated(MB)",
                    "Total Reserved(MB)",
                    "Total Active(MB)",
                    "Stream Ptr",
                    "Device Type",
                ]
            )
            for t, current, peak in self.memory:
                ts_ns = self.base_ns + (t - self.base_perf)
                w.writerow(
                    [
                        self.memory_source,
                        f"{ts_ns // 1000}.{ts_ns % 1000:03d}",
                        f"{current / 2**20:.6f}",
                        f"{peak / 2**20:.6f}",
                        f"{current / 2**20:.6f}",
                        "",
                        "CPU",
                    ]
                )
        return path


class Coverage:
    """The union of a set of intervals, asked "how much of [a, b] do you cover?" per step.

    Merged and sorted once (n log n), then each question is two binary searches, so writing the
    step trace is linear in the window's size: it used to clip every event against every step,
    which made a 20k-step window take minutes to save.
    """

    def __init__(self, intervals: list[tuple[int, int]]) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.before: list[int] = []  # total length of the merged intervals before each one
        total = 0
        for a, b in sorted(i for i in intervals if i[1] > i[0]):
            if self.ends and a <= self.ends[-1]:
                if b > self.ends[-1]:
                    total += b - self.ends[-1]
                    self.ends[-1] = b
                continue
            self.before.append(total)
            self.starts.append(a)
            self.ends.append(b)
            total += b - a

    def _upto(self, t: int) -> int:
        """Length covered in (-inf, t]."""
        i = bisect.bisect_right(self.starts, t) - 1
        if i < 0:
            return 0
        return self.before[i] + min(t, self.ends[i]) - self.starts[i]

    def within(self, a: int, b: int) -> int:
        return self._upto(b) - self._upto(a) if b > a else 0
