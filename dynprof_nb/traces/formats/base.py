"""What a trace format declares (:class:`Source`), and what its readers may use of the window
they read (:class:`ReadContext`); the formats' modules import both from here, and the registry in
``__init__`` imports the formats' modules.

A source's frame readers take the window being read, typed as a :class:`ReadContext`: its
``files`` (the :class:`~dynprof_nb.traces.discover.WindowFiles`), ``frame(kind)`` (another
frame, e.g. the events a frame is derived from), ``database()``, ``chrome_traces()``,
``note(...)`` (what goes into ``sources[kind]``), ``have()`` and ``comm_patterns``. A lone
file's opener may also take frames as read and fill the window's identity
(:class:`OpenContext`). :class:`~dynprof_nb.traces.window.TraceWindow` implements both; a
format never imports the window, so the formats and the window make no cycle.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import pandas as pd

from ..discover import WindowFiles

if TYPE_CHECKING:
    from .ascend.db import AscendDb
    from .chrome.reader import ChromeTrace


class LazyModule:
    """A module imported at the first use of one of its names, so that registering a format
    (importing its source module) does not import its readers: a load from the frame cache
    then imports none of them (issue 32 item 4: a cached load in a new process costs little
    more than reading its Parquet entry)."""

    def __init__(self, name: str) -> None:
        self._lazy_name = name
        self._lazy_module: Any = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_lazy_"):
            raise AttributeError(attr)
        if self._lazy_module is None:
            self._lazy_module = importlib.import_module(self._lazy_name)
        return getattr(self._lazy_module, attr)


def lazy(name: str, package: str) -> Any:
    """Module ``name`` (relative to ``package``, as ``from . import name`` would take it) as a
    :class:`LazyModule`."""
    return LazyModule(importlib.util.resolve_name(name, package))


@runtime_checkable
class ReadContext(Protocol):
    """What a frame reader may use of the window it reads (``TraceWindow`` implements it)."""

    files: WindowFiles
    sources: dict[str, dict[str, Any]]
    comm_patterns: tuple[str, ...]
    rank: int | None
    device: int | None
    framework: str

    def frame(self, kind: str) -> pd.DataFrame:
        """Another frame of the window, read on first use."""

    def loaded(self, kind: str) -> bool:
        """Whether frame ``kind`` has been read already."""

    def note(
        self,
        kind: str,
        files: list | None = None,
        missing: str | None = None,
        notes: list[str] | None = None,
    ) -> None:
        """Say in ``sources[kind]`` which files fed the frame, what is missing, what was done."""

    def have(self) -> str:
        """What the window does have, in words (for 'missing' notes)."""

    def database(self) -> AscendDb | None:
        """The window's profiler database, opened once (None without a .db)."""

    def chrome_traces(self) -> list[ChromeTrace]:
        """The window's Chrome traces, parsed once."""


@runtime_checkable
class OpenContext(ReadContext, Protocol):
    """What a lone file's opener (``Source.open_file``) may do besides: take frames as read,
    keep a table, and fill the window's identity."""

    def adopt_frame(
        self, kind: str, frame: pd.DataFrame, provider: Source | None = None, path: str = ""
    ) -> None:
        """Take frame ``kind`` as read, its note said already."""

    def keep_table(self, path: Path, table: pd.DataFrame, why: str = "holds no {kind}") -> None:
        """Keep a file with no frame of its own in ``tables``; every frame empty, saying why."""

    def read_metadata(self, p: Path) -> None:
        """A metadata file: no frames, but the rank."""

    def identify_db(self) -> None:
        """Rank and device from the database."""

    def identify_trace(self) -> None:
        """Rank and framework from what a Chrome trace says about itself."""

    def communication_links(self) -> pd.DataFrame:
        """The per-link table (an opener of communication_matrix.json reads it at load)."""


#: ``(frame, path_taken)``: the frame and the name of the reader's path that built it
Read = tuple[pd.DataFrame, str]
#: ``read(window) -> (frame, path_taken)``, or None when the window holds nothing of this source
#: for the frame (the next provider is asked). The reader notes its files with ``window.note``.
FrameReader = Callable[[ReadContext], Read | None]
#: ``read(path) -> ({kind: frame}, path_taken)``: a lone-file format's whole reader
FileReader = Callable[[Path], tuple[dict[str, pd.DataFrame], str]]
#: ``open(window) -> handled``: what a window of one file of this format reads at once (so a
#: damaged file raises at load); False when the file is not this source's
FileOpener = Callable[["OpenContext"], bool]
#: ``read(window) -> table``, or None when the window holds nothing of this source for the
#: side table (the next source that declares it is asked)
TableReader = Callable[[ReadContext], pd.DataFrame | None]
#: ``find(root) -> files``: this format's files in a window directory, for a format the
#: built-in discovery does not know (they go to ``WindowFiles.found[name]``)
FileFinder = Callable[[Path], list[Path]]


class Provides(NamedTuple):
    """One frame a source provides: its priority (lower wins when several of a window's
    sources provide the frame) and the reader."""

    priority: int
    read: FrameReader


@dataclass(frozen=True)
class Source:
    """A trace format, declared."""

    name: str
    #: whether a window's files hold this format
    detect: Callable[[WindowFiles], bool]
    #: whether one file is this format's
    owns: Callable[[Path], bool]
    #: frame kind -> (priority, reader)
    frames: dict[str, Provides]
    #: where a window of this format gets its rank and device, in words
    identity: str
    #: for a format the built-in readers do not know: reads a lone file's frames
    read_file: FileReader | None = None
    #: what a window of one file of this format reads at once
    open_file: FileOpener | None = None
    #: for a format the built-in discovery does not know: its files in a window directory
    find: FileFinder | None = None
    #: side table name (``links``, ``bandwidth``, ``memory_copies``) -> its reader
    tables: dict[str, TableReader] = field(default_factory=dict)
    doc: str = field(default="", compare=False)
