"""Optional parts and whether this environment can run them.

A user's environment is the framework's (MindSpore 2.7 pins numpy<2, torch_npu images keep
numpy 1.26, clusters keep old pandas), not ours: a library may be missing, or installed and
unable to import (pyarrow 26 refuses numpy 1.x with an ImportError). What needs such a library
is an optional part: the loads work without it, and the user is told once, in one line, which
part is off, why, and how to turn it on. ``dynprof doctor`` lists every part.
"""

from __future__ import annotations

import functools
import importlib
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass


class OptionalPartWarning(UserWarning):
    """An optional part is off in this environment (a library it needs is missing or does not
    import); what works without it still works."""


@dataclass(frozen=True)
class Part:
    """An optional part: the modules it needs, what it gives, how to turn it on."""

    name: str
    modules: tuple[str, ...]
    gives: str
    enable: str


PARTS: dict[str, Part] = {
    p.name: p
    for p in (
        Part(
            "frame cache",
            ("pyarrow", "pyarrow.parquet"),
            "a second load of a window reads its frames back as Parquet",
            "pip install 'pyarrow>=14' (with numpy 1.x: 'pyarrow>=14,<26', "
            "as pyarrow 26 needs numpy 2)",
        ),
        Part(
            "out-of-core frames",
            ("pyarrow", "pyarrow.parquet", "dask.dataframe"),
            "a trace too big for memory loads as a Dask frame over Parquet partitions",
            "pip install 'dynprof_nb[cluster]' 'pyarrow>=14' (with numpy 1.x: 'pyarrow<26')",
        ),
        Part(
            "cluster",
            ("distributed", "dask.dataframe", "cryptography"),
            "dynprof_nb.cluster: one notebook driving ranks on many machines through Dask",
            "pip install 'dynprof_nb[cluster]'",
        ),
        Part(
            "SQL",
            ("duckdb",),
            "w.sql('select ...'): SQL over a window's frames, in place on the frame cache",
            "pip install 'dynprof_nb[sql]' (or: pip install 'duckdb>=1.2')",
        ),
        Part(
            "notebook widgets",
            ("ipywidgets", "anywidget"),
            "the panel, the interactive timeline and progress bars in a notebook",
            "pip install 'dynprof_nb[notebook]'",
        ),
    )
}


@dataclass(frozen=True)
class State:
    """Whether a part is on here; ``why`` says what is missing or failed to import."""

    part: Part
    on: bool
    why: str = ""

    def line(self) -> str:
        """The one line said when the part is off."""
        return (
            f"dynprof_nb: the {self.part.name} is off ({self.part.gives}): {self.why}. "
            f"To turn it on: {self.part.enable}"
        )


@functools.cache
def _import_error(module: str) -> str:
    """Why ``module`` does not import here ('' when it does): missing, or the library's own
    ImportError (a pyarrow built for numpy 2 under numpy 1.26), or any error its import raised."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.split(".")[0] == exc.name.split(".")[0]:
            return f"{module} is not installed"
        return f"{module} does not import: {exc}"
    except Exception as exc:  # noqa: BLE001 - any failure of a library's import means "off"
        return f"{module} {_version(module)} does not import: {type(exc).__name__}: {exc}"
    return ""


def _version(module: str) -> str:
    from importlib import metadata

    dist = {"dask.dataframe": "dask", "pyarrow.parquet": "pyarrow"}.get(module, module)
    try:
        return metadata.version(dist.split(".")[0])
    except metadata.PackageNotFoundError:
        return "(version unknown)"


def state(name: str) -> State:
    """Part ``name`` here: on, or off with the first module that does not import, and why."""
    part = PARTS[name]
    for module in part.modules:
        why = _import_error(module)
        if why:
            return State(part, False, " ".join(why.split()))
    return State(part, True)


_said: set[str] = set()
_said_lock = threading.Lock()


def off_warning(name: str) -> OptionalPartWarning | None:
    """None when part ``name`` can run here; else, the first time this process asks, the
    :class:`OptionalPartWarning` to say (later asks: an empty one, for the caller not to say,
    see :func:`available`). The caller says it, so a reader thread's warning goes through
    :func:`dynprof_nb.traces.errors.warn`."""
    s = state(name)
    if s.on:
        return None
    with _said_lock:
        first = name not in _said
        _said.add(name)
    return OptionalPartWarning(s.line() if first else "")


def available(name: str, say: Callable[[Warning], None] | None = None) -> bool:
    """Whether part ``name`` can run here; when it cannot, ``say`` (``warnings.warn`` by
    default) is given its one-line :class:`OptionalPartWarning`, the first time only."""
    w = off_warning(name)
    if w is None:
        return True
    if str(w):
        (say or (lambda x: warnings.warn(x, stacklevel=3)))(w)
    return False


def states() -> list[State]:
    """Every optional part's state, for ``dynprof doctor``."""
    return [state(n) for n in PARTS]


def _forget() -> None:
    """For tests: probe the imports again and say again."""
    _import_error.cache_clear()
    with _said_lock:
        _said.clear()


__all__ = [
    "PARTS",
    "OptionalPartWarning",
    "Part",
    "State",
    "available",
    "off_warning",
    "state",
    "states",
]
