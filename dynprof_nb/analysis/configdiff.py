"""Which config a window was recorded with, and whether two windows can be compared.

The stack tracer, memory and shape recording, and a higher profiler level all slow the steps
they record; comparing a window recorded with them against one recorded without measures the
profiler, not the code (``forward`` 20x slower was ``with_stack``'s overhead). ``compare``
warns with :func:`warn_if_configs_differ`; a summary header shows :func:`config_line`.
Windows of different lengths compare per step per rank; ``compare`` says so with a
``WindowLengthWarning`` (and falls back to totals, warning, for windows without steps).
"""

from __future__ import annotations

import warnings
from typing import Any

from dynprof_nb.contract.window_dirs import config_delta, describe_config
from dynprof_nb.traces.interface import Window

# keys that change what a profiled step costs (and so the timings of the window)
TIMING_KEYS = (
    "with_stack",
    "profile_memory",
    "record_shapes",
    "profiler_level",
    "activities",
    "aic_metrics",
    "l2_cache",
    "mstx",
    "sys_io",
    "sys_interconnection",
    "host_sys",
)


class ConfigMismatchWarning(UserWarning):
    """Two windows being compared were recorded with configs whose overheads differ."""


class WindowLengthWarning(UserWarning):
    """Two windows being compared cover different numbers of steps or ranks (``compare`` then
    compares per step per rank), or one has no steps (``compare`` falls back to totals)."""


def window_config(window: Window) -> dict[str, Any] | None:
    """A window's recorded config: a ``TraceWindow``'s ``config``, or a dict as it is."""
    if window is None or isinstance(window, dict):
        return window
    config = getattr(window, "config", None)
    return config if isinstance(config, dict) else None


def timing_differences(a: Any, b: Any) -> dict[str, tuple[Any, Any]]:
    """``{key: (value in a, value in b)}`` for the timing keys where the two configs differ;
    empty when they agree or either window has no recorded config."""
    ca, cb = window_config(a), window_config(b)
    if ca is None or cb is None:
        return {}
    return {k: (ca.get(k), cb.get(k)) for k in TIMING_KEYS if ca.get(k) != cb.get(k)}


def config_warning(a: Any, b: Any) -> str | None:
    """One sentence naming the timing keys two windows differ in, or None."""
    diff = timing_differences(a, b)
    if not diff:
        return None
    keys = ", ".join(f"{k} ({va} vs {vb})" for k, (va, vb) in diff.items())
    return (
        f"the two windows were recorded with different profiler settings: {keys}. "
        "Their timings include different profiler overheads; record both with the same "
        "options to compare the code."
    )


def warn_if_configs_differ(a: Any, b: Any) -> str | None:
    """Warn (``ConfigMismatchWarning``) when ``a`` and ``b`` differ in a timing key; returns
    the message. Call it at the top of any comparison of two windows."""
    message = config_warning(a, b)
    if message:
        warnings.warn(ConfigMismatchWarning(message), stacklevel=3)
    return message


def config_line(window: Window) -> str:
    """``recorded with with_stack=True, profile_memory=True`` (``""`` when unknown): the
    line a summary header shows."""
    text = describe_config(window_config(window))
    return f"recorded with {text}" if text else ""


__all__ = [
    "ConfigMismatchWarning",
    "TIMING_KEYS",
    "WindowLengthWarning",
    "config_delta",
    "config_line",
    "config_warning",
    "timing_differences",
    "warn_if_configs_differ",
    "window_config",
]
