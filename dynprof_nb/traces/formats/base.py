"""What a trace format declares (:class:`Source`); the formats' modules import it from here,
and the registry in ``__init__`` imports the formats' modules.

A source's frame readers take the window being read (a
:class:`~dynprof_nb.traces.window.TraceWindow`) and use only its reading API: ``files``
(the :class:`~dynprof_nb.traces.discover.WindowFiles`), ``frame(kind)`` (another frame, e.g. the
events a frame is derived from), ``database()``, ``chrome_traces()``, ``note(...)`` (what goes
into ``sources[kind]``), ``have()`` and ``comm_patterns``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pandas as pd

from ..discover import WindowFiles

if TYPE_CHECKING:
    from ..window import TraceWindow

#: ``(frame, path_taken)``: the frame and the name of the reader's path that built it
Read = tuple[pd.DataFrame, str]
#: ``read(window) -> (frame, path_taken)``, or None when the window holds nothing of this source
#: for the frame (the next provider is asked). The reader notes its files with ``window.note``.
FrameReader = Callable[["TraceWindow"], Read | None]
#: ``read(path) -> ({kind: frame}, path_taken)``: a lone-file format's whole reader
FileReader = Callable[[Path], tuple[dict[str, pd.DataFrame], str]]
#: ``open(window) -> handled``: what a window of one file of this format reads at once (so a
#: damaged file raises at load); False when the file is not this source's
FileOpener = Callable[["TraceWindow"], bool]
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
    doc: str = field(default="", compare=False)
