"""The PyTorch backend: ``torch.profiler.profile`` around exactly the window's steps.

The profiler is started at the boundary before the window's first step and stopped right after
its last, with no schedule, so nothing outside the window is recorded. Steps are marked by this
backend with ``record_function(step_marker(N))`` where N is the *global* step, the same
annotation torch's own ``profile.step()`` writes (but torch counts from 0 per profiler).

Config mapping (keys without a PyTorch meaning, such as ``aic_metrics`` or ``l2_cache``, are
Ascend-only and ignored here; the manifest keeps the whole config):

=====================  =================================================================
``activities``         CPU -> ``ProfilerActivity.CPU``; NPU/GPU -> ``CUDA`` when CUDA is
                       available, or torch_npu's ``NPU`` activity (and its profiler) when
                       ``torch_npu`` is imported. An unavailable device is dropped (noted in
                       the trace's ``dynprof_nb`` metadata), so the default ``["CPU", "NPU"]``
                       works on a CPU-only machine.
``record_shapes``,     passed as they are.
``profile_memory``,
``with_stack``
``profiler_level``     Level1 adds ``with_flops``, Level2 also ``with_modules`` (when this
                       torch accepts them): PyTorch has no levels, these are its "more".
=====================  =================================================================

``save()`` (on the saver thread) writes ``{host}_{pid}.{time_ns}.pt.trace.json``, the name
``tensorboard_trace_handler`` uses, so TensorBoard, Perfetto and HTA open the window as is.
"""

from __future__ import annotations

import inspect
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.profiler

from dynprof_nb.contract.config import LEVELS, ProfilerConfig
from dynprof_nb.contract.protocol import STEP_PREFIX, step_marker
from dynprof_nb.training import ranges
from dynprof_nb.training.gcpauses import GC_EVENT, GcPauses
from dynprof_nb.training.threadcpu import ThreadCpu

from .base import BackendError, growth_over_budget, process_rss


def _profiler_module() -> Any:
    """torch_npu's profiler when the script uses torch_npu (it profiles NPUs), else torch's."""
    if "torch_npu" in sys.modules:
        try:
            import torch_npu

            return torch_npu.profiler
        except Exception:  # a broken torch_npu must not stop CPU profiling
            pass
    return torch.profiler


def map_activities(names: list[str], module: Any = None) -> tuple[list[Any], list[str]]:
    """Config activity names -> the profiler's activities, plus notes on what was dropped."""
    module = module or _profiler_module()
    activity = module.ProfilerActivity
    out: list[Any] = []
    notes: list[str] = []
    for name in names:
        if name == "CPU":
            chosen = activity.CPU
        elif hasattr(activity, "NPU"):
            chosen = activity.NPU
        elif torch.cuda.is_available():
            chosen = activity.CUDA
        else:
            notes.append(f"activity {name} dropped: no CUDA or NPU device in this process")
            continue
        if chosen not in out:
            out.append(chosen)
    if not out:
        raise BackendError(
            f"activities {names} leave nothing to profile here (no device); "
            "add 'CPU' to activities."
        )
    return out, notes


def profiler_kwargs(config: ProfilerConfig, module: Any = None) -> tuple[dict[str, Any], list[str]]:
    """Keyword arguments for ``profile(...)`` from a config, limited to what it accepts."""
    module = module or _profiler_module()
    activities, notes = map_activities(config.activities, module)
    level = LEVELS.index(config.profiler_level)  # LevelNone=0, Level0=1, Level1=2, Level2=3
    wanted = {
        "activities": activities,
        "record_shapes": config.record_shapes,
        "profile_memory": config.profile_memory,
        "with_stack": config.with_stack,
        "with_flops": level >= 2,
        "with_modules": level >= 3,
    }
    accepted = inspect.signature(module.profile.__init__).parameters
    kwargs = {k: v for k, v in wanted.items() if k in accepted}
    notes += [
        f"{k}={v} not supported by this torch" for k, v in wanted.items() if k not in accepted and v
    ]
    return kwargs, notes


class TorchBackend:
    """One window of ``torch.profiler``: started, stepped and stopped by the Monitor."""

    name = "torch"
    # export_chrome_trace holds the GIL for seconds on a big window; a forked child writes it
    # (Kineto's results are plain C++ data by then: no thread of torch is needed)
    save_in_child = True

    def __init__(self) -> None:
        self.directory: Path | None = None
        self.context: dict[str, Any] = {}
        self.notes: list[str] = []
        self._prof: Any = None
        self._step_fn: Any = None  # the open step-marker record_function
        self._open_step = 0
        self._last_step = 0  # last step that ended inside the window
        self._stop_step = 0
        self.full: str | None = None  # why the window must end early (its memory budget)
        self._budget = 0
        self._rss0 = 0
        # a collection is a record_function named GC (on Kineto's clock, beside the ops)
        self._gc = GcPauses(self._gc_end, on_start=self._gc_begin)
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
        self._stop_step = config.stop_step
        self._budget = int(self.context.get("memory_budget", 0))
        self._rss0 = process_rss()
        self._last_step = first_step - 1
        module = _profiler_module()
        kwargs, self.notes = profiler_kwargs(config, module)
        self._prof = module.profile(**kwargs)
        self._prof.start()
        self._add_metadata()
        self._open(first_step)
        ranges.set_sink(self)
        self._gc.start()
        self._cpu.start(first_step)

    def step(self, step: int) -> None:
        self._close()
        self._last_step = step
        if self.full is None:  # Kineto's buffers: the process's growth stands for them
            self.full = growth_over_budget(self._rss0, self._budget, step)
        if step < self._stop_step:
            self._open(step + 1)

    def stop(self) -> None:
        self._cpu.stop(self._last_step)
        ranges.set_sink(None)
        self._gc.stop()
        self._close()
        if self._prof is not None:
            self._prof.stop()

    def save(self) -> list[str]:
        if self._prof is None or self.directory is None:
            raise BackendError("save() before start(): nothing was recorded.")
        worker = f"{socket.gethostname()}_{os.getpid()}"
        path = self.directory / f"{worker}.{time.time_ns()}.pt.trace.json"
        self._prof.export_chrome_trace(str(path))
        if self._open_step > self._last_step:
            _drop_steps_after(path, self._last_step)
        self._prof = None  # free the recorded events
        return [path.name, self._cpu.write(self.directory)]

    # -- user ranges (dynprof_nb.range) ---------------------------------------------------

    def open_range(self, name: str, category: str) -> Any:
        fn = torch.profiler.record_function(name)
        fn.__enter__()
        return fn

    def close_range(self, token: Any) -> None:
        token.__exit__(None, None, None)

    def _gc_begin(self) -> Any:
        fn = torch.profiler.record_function(GC_EVENT)
        fn.__enter__()
        return fn

    def _gc_end(self, fn: Any, _t0: int, _t1: int, _tid: int, _info: dict[str, Any]) -> None:
        fn.__exit__(None, None, None)

    # -- helpers --------------------------------------------------------------------------

    def _open(self, step: int) -> None:
        self._step_fn = torch.profiler.record_function(step_marker(step))
        self._step_fn.__enter__()
        self._open_step = step

    def _close(self) -> None:
        fn, self._step_fn = self._step_fn, None
        if fn is not None:
            fn.__exit__(None, None, None)

    def _add_metadata(self) -> None:
        """Label the trace with job and rank (Kineto only knows them under torch.distributed)."""
        info = {
            **self.context,
            "backend": self.name,
            "notes": self.notes,
            "config": self.config.to_dict(),
        }
        try:
            self._prof.add_metadata_json("dynprof_nb", json.dumps(info, default=str))
            dist = torch.distributed
            if not (dist.is_available() and dist.is_initialized()):
                self._prof.add_metadata_json(
                    "distributedInfo",
                    json.dumps(
                        {
                            "rank": self.context.get("rank", 0),
                            "world_size": self.context.get("world_size"),
                        }
                    ),
                )
        except Exception:  # metadata is a nicety; never lose the window over it
            pass


def _drop_steps_after(path: Path, last: int) -> None:
    """Remove the step marker (N > last) opened before an early stop: that step never
    ended, so the window must not claim it. Its operations stay, outside any step."""
    import orjson

    trace = orjson.loads(path.read_bytes())
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []

    def phantom(event: dict[str, Any]) -> bool:
        name = event.get("name")
        if not isinstance(name, str) or not name.startswith(STEP_PREFIX):
            return False
        number = name[len(STEP_PREFIX) :]
        return number.isdigit() and int(number) > last

    trace["traceEvents"] = [e for e in events if not phantom(e)]
    path.write_bytes(orjson.dumps(trace))
