"""The MindSpore backend: ``mindspore.profiler.profile`` around exactly the window's steps.

The profiler is the one MindSpore 2.7 recommends and its own ``DynamicProfilerMonitor``
builds: ``profile(..., on_trace_ready=tensorboard_trace_handler(dir_name=WINDOW),
experimental_config=_ExperimentalConfig(...))`` (``mindspore.Profiler`` logs that it will be
removed; it is used only where ``profile`` is missing, see :func:`make_profiler`). It is built
with ``start_profile=False`` and no schedule, started at the boundary before the window's first
step and stopped right after its last (in callback mode the Monitor starts it in
``step_begin`` of the first step), so MindSpore's ``*_ascend_ms/`` directory lands in the
window directory and holds those steps only. MindSpore's schedule is not used: the Monitor
decides each window's first and last step (and ends one early for a budget or a stop), and a
schedule would add step records of its own to the trace.

Config mapping (every key of ``profiler_config.json``; the manifest keeps the whole config):

=========================================  ============================================
``profiler_level``                         ``ProfilerLevel[name]``
``activities``                             ``[ProfilerActivity[name], ...]``
``aic_metrics``                            ``AicoreMetrics[name]``
``export_type``                            ``[ExportType("text" / "db"), ...]``
``host_sys``                               ``[HostSystem("cpu" ...), ...]``
``profile_memory``, ``mstx``,              passed as they are
``parallel_strategy``, ``with_stack``,
``data_simplification``, ``l2_cache``,
``record_shapes``, ``sys_io``,
``sys_interconnection``,
``mstx_domain_include/exclude``
``analyse``, ``analyse_mode``              analysis after the window, in ``save()`` on the
                                           saver thread, never on a training step:
                                           ``analyse_mode`` 1 runs MindSpore's own async
                                           analysis (a subprocess) and waits for it there,
                                           so a published window is complete.
``prof_path``, ``ranks``, steps            the Monitor's (where, who, when)
=========================================  ============================================

The keys in :data:`EXPERIMENTAL` go into ``_ExperimentalConfig``, the others are ``profile``'s
own arguments, as MindSpore's monitor splits them.

MindSpore on CPU writes no step markers, so ``save()`` also writes ``protocol.STEPS_FILE``
(``name, cat, start_ns, end_ns, tid``): one step-marker row per step (N = global step,
wall-clock ns like MindSpore's own timestamps) and one row per ``dynprof_nb.range``. With
``mstx`` on, ranges also go to ``mindspore.profiler.mstx`` (recorded by MindSpore on Ascend).

The memory budget (``context["memory_budget"]``) is MindSpore's buffers and ours together: the
process's RSS growth since the window began, checked every 16 steps (as for torch); reached,
the window ends and is saved with the reason (``full``).

MindSpore's profiler is a process-wide singleton: a window cannot start while the previous
one is still being analysed. Its start then waits for that analysis (at most
:data:`BUSY_WAIT_S`, and says so in the log and in the window's ``profiler_start_s``) rather
than lose the window: MindSpore's own documented example asks for 6..7 one step after 2..5
ended, and on short steps the analysis of 2..5 is not done by then. Training waits with it, as
it does in MindSpore's own monitor, whose analysis blocks the step that ends every window.
Only a start that waited that long in vain is refused (with a message; training goes on),
and, until that analysis ends, every later start at once: an analysis hung on a worker it
forked would otherwise hold training that long for each window asked. ``Monitor.close()``
waits for an analysis while it writes into its window, not for one that has gone silent
(``window_io.SAVE_STALL_S``).
"""

from __future__ import annotations

import csv
import logging
import threading
import time
import types
from pathlib import Path
from typing import Any

import mindspore.profiler as msprof
from mindspore.profiler import (
    AicoreMetrics,
    ExportType,
    ProfilerActivity,
    ProfilerLevel,
)
from mindspore.profiler.common.constant import HostSystem
from mindspore.profiler.profiler_interface import ProfilerInterface

from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.protocol import STEPS_FILE, step_marker
from dynprof_nb.contract.window_dirs import MANIFEST
from dynprof_nb.training import ranges
from dynprof_nb.training.gcpauses import GC_CATEGORY, GC_EVENT, GcPauses
from dynprof_nb.training.threadcpu import ThreadCpu

from .base import BackendError, growth_over_budget, process_rss

PASSED_AS_IS = (
    "profile_memory",
    "mstx",
    "parallel_strategy",
    "with_stack",
    "data_simplification",
    "l2_cache",
    "record_shapes",
    "sys_io",
    "sys_interconnection",
    "mstx_domain_include",
    "mstx_domain_exclude",
)

# the keys MindSpore 2.7's profile() takes in its _ExperimentalConfig, not as its own arguments
EXPERIMENTAL = (
    "profiler_level",
    "aic_metrics",
    "l2_cache",
    "mstx",
    "data_simplification",
    "export_type",
    "mstx_domain_include",
    "mstx_domain_exclude",
    "sys_io",
    "sys_interconnection",
    "host_sys",
)

# One MindSpore profiler per process: held from start() until the window's analysis is done.
_in_use = threading.Lock()
_busy = types.SimpleNamespace(stuck=False)  # a start waited BUSY_WAIT_S in vain
BUSY_WAIT_S = 120.0  # the most a window's start waits for the previous window's analysis
log = logging.getLogger("dynprof_nb")


def profiler_kwargs(config: ProfilerConfig, output_path: str | Path) -> dict[str, Any]:
    """A config's MindSpore arguments, each key converted to MindSpore's type (flat, as the
    older ``Profiler(...)`` takes them; :func:`make_profiler` splits them for ``profile``)."""
    kwargs: dict[str, Any] = {
        "output_path": str(output_path),
        "profiler_level": ProfilerLevel[config.profiler_level],
        "activities": [ProfilerActivity[a] for a in config.activities],
        "aic_metrics": AicoreMetrics[config.aic_metrics],
        "export_type": [ExportType(e) for e in config.export_type],
        "host_sys": [HostSystem(h) for h in config.host_sys],
    }
    kwargs.update({key: getattr(config, key) for key in PASSED_AS_IS})
    return kwargs


def make_profiler(config: ProfilerConfig, output_path: str | Path) -> Any:
    """A stopped MindSpore profiler for one window, writing under ``output_path``.

    ``mindspore.profiler.profile`` (2.7 deprecates ``Profiler`` for it), built as MindSpore
    2.7's ``DynamicProfilerMonitor`` builds it, without its schedule. Its
    ``tensorboard_trace_handler`` gives the output directory; the analysis it would run is off
    (``analyse_flag=False``): the window's analysis runs in ``save()``, on the saver thread."""
    kwargs = profiler_kwargs(config, output_path)
    output = kwargs.pop("output_path")
    profile = getattr(msprof, "profile", None)
    if profile is None:
        # an older MindSpore without profile() (2.7 has it): Profiler is all there is
        return msprof.Profiler(start_profile=False, output_path=output, **kwargs)
    from mindspore.profiler import _ExperimentalConfig  # public: in mindspore.profiler.__all__

    experimental = _ExperimentalConfig(**{k: kwargs.pop(k) for k in EXPERIMENTAL})
    return profile(
        start_profile=False,
        on_trace_ready=msprof.tensorboard_trace_handler(dir_name=output, analyse_flag=False),
        experimental_config=experimental,
        **kwargs,
    )


def is_profile(prof: Any) -> bool:
    """Whether ``prof`` is a ``mindspore.profiler.profile`` (not an older ``Profiler``)."""
    profile = getattr(msprof, "profile", None)
    return profile is not None and isinstance(prof, profile)


def stop_collecting(prof: Any) -> None:
    """Stop MindSpore's collection (the training thread), leaving the data for ``save()``.

    A ``profile``'s own ``stop()`` would also finalise, run ``on_trace_ready`` and clear, here
    and at once (see :func:`end_profiler`); ``ProfilerInterface.stop()`` is what it and the
    older ``Profiler.stop()`` run first. ``Profiler.stop()`` (older MindSpore) stops only."""
    if is_profile(prof):
        ProfilerInterface.stop()
    else:
        prof.stop()


def end_profiler(prof: Any) -> None:
    """Let a ``profile`` whose data was finalised, analysed and cleared through
    ``ProfilerInterface`` (as MindSpore's own monitor does at the end of training) know its
    collection is over, so that neither its ``stop()`` here nor its ``__del__`` later stops
    MindSpore's profiler again (perhaps during a later window) or warns.

    ``profile`` (2.7) has no call that stops collecting on the training thread and leaves the
    finalising and analysis for later: its ``stop()`` does all of it at once and, without a
    schedule, warns "Incorrect schedule". Its state (``current_action``, a public attribute,
    MindSpore's ``ProfilerAction``) is set to ``NONE``, the state after a schedule's last step,
    whose ``stop()`` does nothing but mark it stopped. A ``Profiler`` (older MindSpore) needs
    nothing: its ``stop()`` ran already."""
    if not is_profile(prof):
        return
    from mindspore.profiler.schedule import ProfilerAction

    prof.current_action = ProfilerAction.NONE
    prof.stop()


def analysis_mode(config: ProfilerConfig) -> str | None:
    """None (no analysis), "sync" or "async", as the original reads analyse/analyse_mode."""
    if not config.analyse:
        return None
    return "async" if config.analyse_mode == 1 else "sync"


class MindSporeBackend:
    """One window of MindSpore's profiler, started, stepped and stopped by the Monitor."""

    name = "mindspore"
    needs_directory_at_start = True  # MindSpore writes in its output directory from start()
    save_in_child = False  # its analysis forks workers of its own: it runs on the I/O thread

    def __init__(self) -> None:
        self.directory: Path | None = None
        self.context: dict[str, Any] = {}
        self.marks: list[tuple[str, str, int, int, int]] = []  # name, cat, t0, t1, tid
        self._prof: Any = None
        self._holding = False
        self._recorded = 0
        self._step_t0 = 0
        self.full: str | None = None  # why the window must end early (its memory budget)
        self._budget = 0
        self._rss0 = 0
        self._gc = GcPauses(self._gc_pause, clock=time.time_ns)
        # every thread's CPU and run-queue time: MindSpore's operators run on its own threads
        self._cpu = ThreadCpu(whole_process=True)

    # -- protocol -----------------------------------------------------------------------

    def start(
        self,
        directory: Path,
        config: ProfilerConfig,
        first_step: int,
        context: dict[str, Any] | None = None,
    ) -> None:
        if not _in_use.acquire(blocking=False):
            t0 = time.monotonic()
            # once a start has waited in vain the analysis is taken as hung: later starts
            # are refused at once rather than hold training BUSY_WAIT_S each time
            if _busy.stuck or not _in_use.acquire(timeout=BUSY_WAIT_S):
                _busy.stuck = True
                raise BackendError(
                    "MindSpore's profiler is still busy with the previous window (its "
                    f"analysis has not finished after {BUSY_WAIT_S:.0f} s); ask for a later "
                    "window."
                )
            log.warning(
                "dynprof_nb: the window from step %d waited %.2f s for MindSpore to finish "
                "analysing the previous window (one profiler per process); training waited "
                "with it.",
                first_step,
                time.monotonic() - t0,
            )
        self._holding = True
        try:
            self.directory = directory
            self.context = dict(context or {})
            self.config = config
            self._budget = int(self.context.get("memory_budget", 0))
            self._rss0 = process_rss()
            self._prof = make_profiler(config, directory)
            self._prof.start()
        except Exception:
            self._release()
            raise
        self._mstx = config.mstx
        self._step_t0 = time.time_ns()
        ranges.set_sink(self)
        self._gc.start()
        self._cpu.start(first_step)

    def step(self, step: int) -> None:
        now = time.time_ns()
        self.marks.append(
            (step_marker(step), "user_annotation", self._step_t0, now, threading.get_native_id())
        )
        self._step_t0 = now
        self._recorded += 1
        if self.full is None:
            self.full = growth_over_budget(self._rss0, self._budget, step)

    def stop(self) -> None:
        self._cpu.stop(self._cpu.first_step + self._recorded - 1)
        ranges.set_sink(None)
        self._gc.stop()
        try:
            # collection stops here, on the training thread; what follows (flush, analysis,
            # clear) is MindSpore's ProfilerInterface in save(), on the saver thread
            stop_collecting(self._prof)
        finally:
            if not self._recorded:  # the Monitor will not save an empty window
                self._finish_mindspore(None)

    def save(self) -> list[str]:
        if self.directory is None or self._prof is None:
            raise BackendError("save() before start(): nothing was recorded.")
        self._finish_mindspore(analysis_mode(self.config))
        self._write_marks(self.directory / STEPS_FILE)
        self._cpu.write(self.directory)
        return sorted(
            str(p.relative_to(self.directory))
            for p in self.directory.rglob("*")
            if p.is_file() and p.name != MANIFEST
        )

    # -- user ranges ----------------------------------------------------------------------

    def open_range(self, name: str, category: str) -> tuple[str, str, int, int]:
        mstx_id = msprof.mstx.range_start(name) if self._mstx else 0
        return (name, category, time.time_ns(), mstx_id)

    def close_range(self, token: tuple[str, str, int, int]) -> None:
        name, category, t0, mstx_id = token
        if mstx_id:
            msprof.mstx.range_end(mstx_id)
        self.marks.append((name, category, t0, time.time_ns(), threading.get_native_id()))

    def _gc_pause(self, _token: Any, t0: int, t1: int, tid: int, _info: dict[str, Any]) -> None:
        self.marks.append((GC_EVENT, GC_CATEGORY, t0, t1, tid))

    # -- helpers --------------------------------------------------------------------------

    def _finish_mindspore(self, mode: str | None) -> None:
        """Flush MindSpore's data, analyse it if asked (waiting for async analysis), then
        free the process-wide profiler for the next window -- also when the flush or the
        analysis failed: MindSpore's singleton otherwise keeps this window's state, and every
        later window's start fails ("framework_path has not been set"; a fresh-clone run saw
        one analysis's multiprocessing connection reset under load take the next window with
        it). The failure itself is this window's, raised as it was."""
        failed = True
        try:
            ProfilerInterface.finalize()
            if mode is not None:
                ProfilerInterface.analyse(async_mode=mode == "async")
                if mode == "async":
                    _wait_async_analysis()
            failed = False
        finally:
            try:
                ProfilerInterface.clear()
                end_profiler(self._prof)
            except Exception as exc:
                if not failed:
                    raise
                log.warning(
                    "dynprof_nb: MindSpore's profiler could not be reset after this window's "
                    "analysis failed (%s: %s); the next window may fail to start.",
                    type(exc).__name__,
                    exc,
                )
            finally:
                self._release()

    def _release(self) -> None:
        if self._holding:
            self._holding = False
            _busy.stuck = False
            _in_use.release()

    def _write_marks(self, path: Path) -> None:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(["name", "cat", "start_ns", "end_ns", "tid"])
            for name, cat, t0, t1, tid in sorted(self.marks, key=lambda m: m[2]):
                writer.writerow([name, cat, t0, t1, tid])


def _wait_async_analysis() -> None:
    """MindSpore's async analysis runs in processes kept by its MultiProcessPool; join them."""
    from mindspore.profiler.common.process_pool import MultiProcessPool

    MultiProcessPool().wait_all_job_finished()
