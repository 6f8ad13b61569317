"""Profiler backends. Each records a window when the Monitor tells it to; none decides when.

The protocol (see ``base.Backend``): ``start(directory, config, first_step)`` on the training
thread at the boundary before the window's first step, ``step(n)`` at the end of each recorded
step, ``stop()`` right after the last one (quick, on the training thread), then ``save()`` which
writes files into the directory and may run on a background thread.
"""

from __future__ import annotations

import functools
import importlib
import sys

from .base import Backend, BackendError

__all__ = ["Backend", "BackendError", "make_backend", "resolve_backend", "BACKENDS"]

BACKENDS = {
    "builtin": "dynprof_nb.training.backends.builtin:BuiltinBackend",
    "torch": "dynprof_nb.training.backends.torch:TorchBackend",
    "mindspore": "dynprof_nb.training.backends.mindspore:MindSporeBackend",
}


def resolve_backend(name: str) -> str:
    """'auto' picks the framework the training script has imported, else the built-in one."""
    if name == "auto":
        for framework in ("torch", "mindspore"):
            if framework in sys.modules and _importable(framework):
                return framework
        return "builtin"
    if name not in BACKENDS:
        raise BackendError(
            f"unknown backend {name!r}; choose one of {', '.join(['auto', *BACKENDS])}."
        )
    return name


def _importable(name: str) -> bool:
    module, _, _ = BACKENDS[name].partition(":")
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def make_backend(name: str) -> Backend:
    """A fresh backend instance (one per window) for a resolved name."""
    try:
        return _backend_class(resolve_backend(name))()
    except ImportError as exc:
        raise BackendError(
            f"backend {name!r} is not available here: {exc}. Install it "
            "(pip install 'dynprof_nb[torch]' or '[mindspore]') or use "
            "backend='builtin'."
        ) from exc


@functools.cache
def _backend_class(name: str) -> type:
    """The class for a resolved name, imported once: a window's start runs on the training
    thread, and importlib's lookup alone cost it ~10 µs each time."""
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)
