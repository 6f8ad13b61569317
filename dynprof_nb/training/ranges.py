"""User ranges: ``dynprof_nb.range("name")``, the mstx equivalent.

A range is recorded only while a window is active. When no window is active the sink is
``None`` and a range costs one global lookup and a comparison.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class RangeSink(Protocol):
    """What an active backend provides to record user ranges."""

    def open_range(self, name: str, category: str) -> Any: ...
    def close_range(self, token: Any) -> None: ...


_sink: RangeSink | None = None
_base: RangeSink | None = None  # the sink between windows (the recent-steps record)


def set_sink(sink: RangeSink | None) -> None:
    """Install the sink of the backend whose window is recording; None puts the sink between
    windows back (the recent-steps record's, or none)."""
    global _sink
    _sink = _base if sink is None else sink
    lent = getattr(_base, "lent", None)  # the record notes when its ranges go to a window
    if lent is not None:
        lent(sink is not None)


def set_base_sink(sink: RangeSink | None) -> None:
    """The sink between windows (:mod:`~dynprof_nb.training.recent`); installed now unless a
    window's sink is."""
    global _sink, _base
    if _sink is _base:
        _sink = sink
    _base = sink


class range:  # noqa: N801 - named like the builtin on purpose: ``with dynprof_nb.range(...)``
    """Mark a region of code so it shows as an operation in the window's trace.

    >>> with dynprof_nb.range("forward"):
    ...     y = model(x)

    Also a decorator: ``@dynprof_nb.range("data")``. ``category="communication"`` counts
    the region as communication in the step breakdown.
    """

    __slots__ = ("name", "category", "_token", "_sink")

    def __init__(self, name: str, category: str = "user_annotation") -> None:
        self.name = name
        self.category = category
        self._sink: RangeSink | None = None
        self._token: Any = None

    def __enter__(self) -> range:
        sink = _sink
        if sink is not None:
            self._sink = sink
            self._token = sink.open_range(self.name, self.category)
        return self

    def __exit__(self, *exc: object) -> None:
        sink = self._sink
        if sink is not None:
            self._sink = None
            sink.close_range(self._token)

    def __call__(self, fn: F) -> F:
        name, category = self.name, self.category

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            sink = _sink
            if sink is None:
                return fn(*args, **kwargs)
            token = sink.open_range(name, category)
            try:
                return fn(*args, **kwargs)
            finally:
                sink.close_range(token)

        return wrapper  # type: ignore[return-value]
