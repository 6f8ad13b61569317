"""One source per trace format: how it detects itself, which frames it provides at which
priority, where a window's rank and device come from, and (for a format read as one file) how
it reads its frames.

The registry is :data:`SOURCES`; adding a format is one module here and one line in it (see
``docs/architecture.md``, "Adding a format", and :mod:`.key_averages`, the worked example).
:class:`~dynprof_nb.traces.window.TraceWindow` asks :func:`providers` for a frame's providers,
best first, calls their readers until one gives the frame, and records in ``w.sources[kind]``
the ``provider`` that built it, the ``path`` its reader took and the ``source`` (format) of the
files that fed it (:func:`source_of`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ..discover import WindowFiles
from .base import FileReader, FrameReader, Provides, Read, ReadContext, Source  # noqa: F401
from .derived.source import NO_OPS


def _registry() -> list[Source]:
    from .ascend import db_source as ascend_db
    from .ascend import text_source as ascend_text
    from .chrome import source as kineto
    from .derived import source as derived
    from .key_averages import source as key_averages
    from .mindspore import source as mindspore

    return [
        ascend_db.SOURCE,
        ascend_text.SOURCE,
        mindspore.SOURCE,
        kineto.SOURCE,
        key_averages.SOURCE,
        derived.SOURCE,
    ]


SOURCES: list[Source] = _registry()


def detected(files: WindowFiles) -> list[Source]:
    """The sources a window's files hold, in registry order."""
    return [s for s in SOURCES if s.detect(files)]


def providers(files: WindowFiles, kind: str) -> list[Source]:
    """The window's sources that provide ``kind``, best first."""
    return sorted(
        (s for s in detected(files) if kind in s.frames), key=lambda s: s.frames[kind].priority
    )


#: what a window none of whose sources gives a frame says is missing (the derived provider
#: gives every other frame, empty with its own note when there is nothing to derive it from)
_MISSING = {
    "events": "no trace file (trace.json, *.pt.trace.json, trace_view.json, .db)",
    "ops": NO_OPS,
}


def missing(kind: str) -> str:
    """The 'missing' note of a frame no source of the window provides."""
    return _MISSING.get(kind, f"no source of this window provides {kind}")


#: source name -> how it finds its files in a window directory, for the formats the built-in
#: discovery does not know (``find_window_files(root, FINDERS)`` files them in ``found``)
FINDERS: dict[str, Callable[[Path], list[Path]]] = {
    s.name: s.find for s in SOURCES if s.find is not None
}


def source_of(path: str | Path) -> Source | None:
    """The registered source a file belongs to (None for a file no source claims)."""
    p = Path(path)
    return next((s for s in SOURCES if s.owns(p)), None)


def lone_file_reader(path: Path) -> Source | None:
    """The source that reads ``path`` alone with a reader of its own, if any."""
    return next((s for s in SOURCES if s.read_file is not None and s.owns(path)), None)


def read_table(w: ReadContext, kind: str) -> pd.DataFrame:
    """Side table ``kind`` of window ``w`` (``links``, ``bandwidth``, ``memory_copies``): the
    first registered source that declares it and has it (in registry order, whether or not the
    window's files were detected as that source, as a lone file's table is asked for too)."""
    for s in SOURCES:
        reader = s.tables.get(kind)
        if reader is not None:
            table = reader(w)
            if table is not None:
                return table
    raise KeyError(f"no registered source reads the side table {kind!r}")
