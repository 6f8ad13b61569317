"""One source per trace format: how it detects itself, which frames it provides at which
priority, where a window's rank and device come from, and (for a format read as one file) how
it reads its frames.

The registry is :data:`SOURCES`; adding a format is one module here and one line in it.
:class:`~dynprof_nb.traces.window.TraceWindow` asks :func:`source_of` which source a frame's
file belongs to, and records it (and whether the frame was read or derived) in ``w.sources``.
"""

from __future__ import annotations

from pathlib import Path

from ..discover import WindowFiles
from .base import FileReader, Source  # noqa: F401  (the registry's API)


def _registry() -> list[Source]:
    from . import ascend_db, ascend_text, key_averages, kineto, mindspore

    return [
        ascend_db.SOURCE,
        ascend_text.SOURCE,
        mindspore.SOURCE,
        kineto.SOURCE,
        key_averages.SOURCE,
    ]


SOURCES: list[Source] = _registry()


def detected(files: WindowFiles) -> list[Source]:
    """The sources a window's files hold, in registry order."""
    return [s for s in SOURCES if s.detect(files)]


def providers(files: WindowFiles, kind: str) -> list[Source]:
    """The window's sources that provide ``kind``, best first."""
    return sorted((s for s in detected(files) if kind in s.frames), key=lambda s: s.frames[kind])


def source_of(path: str | Path) -> Source | None:
    """The registered source a file belongs to (None for a file no source claims)."""
    p = Path(path)
    return next((s for s in SOURCES if s.owns(p)), None)


def lone_file_reader(path: Path) -> Source | None:
    """The source that reads ``path`` alone with a reader of its own, if any."""
    return next((s for s in SOURCES if s.read_file is not None and s.owns(path)), None)
