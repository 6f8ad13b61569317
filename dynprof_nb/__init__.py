"""dynprof_nb: profile a running training job from a notebook.

The package is laid out by the process each part runs in:

* ``training/``: inside a training rank (``Monitor``, ``range``, the backends, the MindSpore
  drop-in, ``profile_block``); imports no pandas, numpy or IPython;
* ``control/``: a notebook, the CLI or a relay (``attach``, ``jobs``, ``Job``, ``FileJob``);
* ``traces/`` and ``analysis/``: an analysis session (``load_window``, ``TraceWindow``,
  ``compare``), pandas and matplotlib;
* ``ui/``: the ``%dynprof`` magics, the panel, the ``dynprof`` CLI and the demo;
* ``cluster/``: one job on many machines, through Dask (``attach(job, cluster=...)``);
* ``contract/``: what a rank and its controllers share: ``config``, ``protocol``, ``segment``,
  ``shared_layout`` (the step-time ring, the trigger words, the stack dumps), ``window_dirs``,
  and, at the top, ``locks`` (the private directory every side uses);
* ``samples``: real windows shipped with the package (``dynprof_nb.samples.list()``).

Names are imported on first use so ``import dynprof_nb`` in a training script stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Monitor": "training.monitor",
    "DynamicProfilerMonitor": "training.dropin",
    "range": "training.ranges",
    "profile_block": "training.block",
    "ProfilerConfig": "contract.config",
    "ConfigError": "contract.config",
    "Controller": "control.base",
    "Job": "control.job",
    "JobError": "control.base",
    "FileJob": "control.filemode",
    "Relay": "control.relay",
    "attach": "control.registry",
    "jobs": "control.registry",
    "load_trace": "traces",
    "load_window": "traces",
    "TraceWindow": "traces",
    "TraceFormatError": "traces",
    "compare": "analysis",
    "panel": "ui.panel",
    "doctor": "ui.doctor",
}

__all__ = [
    "ConfigError",
    "Controller",
    "DynamicProfilerMonitor",
    "FileJob",
    "Job",
    "JobError",
    "Monitor",
    "ProfilerConfig",
    "Relay",
    "TraceFormatError",
    "TraceWindow",
    "attach",
    "compare",
    "doctor",
    "jobs",
    "load_trace",
    "load_window",
    "panel",
    "profile_block",
    "range",
]

if TYPE_CHECKING:  # what editors and type checkers see behind the lazy names
    from dynprof_nb.analysis import compare
    from dynprof_nb.contract.config import ConfigError, ProfilerConfig
    from dynprof_nb.control.base import Controller, JobError
    from dynprof_nb.control.filemode import FileJob
    from dynprof_nb.control.job import Job
    from dynprof_nb.control.registry import attach, jobs
    from dynprof_nb.control.relay import Relay
    from dynprof_nb.traces import TraceFormatError, TraceWindow, load_trace, load_window
    from dynprof_nb.training.block import profile_block
    from dynprof_nb.training.dropin import DynamicProfilerMonitor
    from dynprof_nb.training.monitor import Monitor
    from dynprof_nb.training.ranges import range
    from dynprof_nb.ui.doctor import doctor
    from dynprof_nb.ui.panel import panel


# ``%load_ext dynprof_nb`` looks this up; resolved like the public names, so the facade imports
# nothing itself (IPython's code is loaded only in a kernel that asks for the magics)
_HOOKS = {"load_ipython_extension": "ui.magics"}
# subpackages reachable as attributes without an import of their own (dynprof_nb.samples.path)
_SUBPACKAGES = ("samples",)


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    module = _EXPORTS.get(name) or _HOOKS.get(name)
    if module is None:
        raise AttributeError(f"module 'dynprof_nb' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
