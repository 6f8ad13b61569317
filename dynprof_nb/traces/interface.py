"""The public ``Window`` protocol: what a notebook (and the analysis side) may rely on from any
window, one rank's (:class:`~dynprof_nb.traces.window.TraceWindow`), several ranks'
(:class:`~dynprof_nb.traces.multirank.MultiRankWindow`) or a cluster's
(``dynprof_nb.cluster.cluster_window.ClusterWindow``), so none reaches into another's private
fields."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Window(Protocol):
    """A recorded window: its frames by kind, its ranks, where each frame came from."""

    framework: str
    start_step: int | None
    stop_step: int | None

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
