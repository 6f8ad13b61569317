"""``LazyFrame``: the one definition of a window's frame attributes (``w.events``, ``w.kernels``
...), shared by :class:`~dynprof_nb.traces.window.TraceWindow` and the cluster's
``ClusterWindow``, which differ only in how their ``frame(kind)`` (the public
:class:`~dynprof_nb.traces.interface.Window` protocol) reads a frame."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class LazyFrame(Generic[T]):
    """A read-only attribute that is ``window.frame(<its name>)``; the window reads the frame on
    first access and keeps it. The docstring given is the attribute's (``help(w)`` shows it)."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, window: None, owner: type | None = None) -> LazyFrame[T]: ...

    @overload
    def __get__(self, window: Any, owner: type | None = None) -> T: ...

    def __get__(self, window: Any, owner: type | None = None) -> Any:
        if window is None:
            return self
        return window.frame(self.name)

    def __set__(self, window: Any, value: Any) -> None:
        raise AttributeError(
            f"property {self.name!r} of {type(window).__name__!r} object has no setter"
        )
