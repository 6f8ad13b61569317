"""The public ``Window`` protocol: what a notebook (and the analysis side) may rely on from any
window, one rank's (:class:`~dynprof_nb.traces.window.TraceWindow`), several ranks'
(:class:`~dynprof_nb.traces.multirank.MultiRankWindow`) or a cluster's
(``dynprof_nb.cluster.cluster_window.ClusterWindow``), so none reaches into another's private
fields. Every analysis rule takes a ``Window`` (``tests/test_layout.py`` holds them to it)."""

from __future__ import annotations

import inspect
from typing import Any, Protocol, runtime_checkable

#: the frames every window has as attributes (``w.steps`` is ``w.frame("steps")``)
FRAME_ATTRIBUTES = ("events", "ops", "steps", "kernels", "memory", "communication")


class Window(Protocol):
    """A recorded window: its frames by kind, its ranks, where each frame came from.

    Not ``runtime_checkable``: ``isinstance`` against a protocol with attributes calls
    ``hasattr`` on each (Python 3.10 and 3.11), and ``hasattr(w, "events")`` would read the
    window's events. :func:`is_window` checks without reading anything."""

    framework: str
    start_step: int | None
    stop_step: int | None

    #: every complete and instant event (a cluster window's: a ``dask.dataframe``)
    events: Any
    #: per operator: calls, total and self time
    ops: Any
    #: one row per step (and rank)
    steps: Any
    #: device kernels / tasks
    kernels: Any
    #: memory records over time
    memory: Any
    #: collective and point-to-point operations
    communication: Any

    def frame(self, kind: str) -> Any:
        """Frame ``kind`` (``events``, ``ops``, ``steps``, ``kernels``, ``memory``,
        ``communication``), read on first use."""
        ...

    @property
    def ranks(self) -> list[int]: ...

    @property
    def sources(self) -> dict[str, Any]:
        """Per frame kind: which files fed it, what is missing, and who built it (``provider``,
        the registered source; ``path``, which of its reader's paths ran; ``source``, the
        format of the files)."""
        ...


def is_window(obj: Any) -> bool:
    """Whether ``obj`` has every member of :class:`Window`, looked up without running any (no
    frame is read, no property computed)."""
    members = ("framework", "start_step", "stop_step", "frame", "ranks", "sources")
    missing = object()
    return all(
        inspect.getattr_static(obj, name, missing) is not missing
        for name in members + FRAME_ATTRIBUTES
    )


@runtime_checkable
class LoadsInParallel(Protocol):
    """What the parallel loader (:func:`dynprof_nb.traces.parallel.load_events`) needs of a
    rank's window to parse its events in a forked process and hand them back: implemented by
    :class:`~dynprof_nb.traces.window.TraceWindow`, used by the multi-rank window, so neither
    reads the other's private fields."""

    def loaded(self, kind: str) -> bool:
        """Whether frame ``kind`` has been read already."""
        ...

    def parsed_events(self) -> tuple[Any, dict[str, Any], list[Any]]:
        """Read the events here: the frame, the sources, the parsed traces."""
        ...

    def adopt_events(self, events: Any, sources: dict[str, Any], traces: list[Any]) -> None:
        """Take what :meth:`parsed_events` returned in another process."""
        ...

    def events_input_bytes(self) -> int:
        """Bytes the events parse reads, to share ranks out evenly among processes."""
        ...

    def forget(self, kind: str) -> None:
        """Drop frame ``kind`` once handed over."""
        ...
