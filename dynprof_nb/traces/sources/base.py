"""What a trace format declares (:class:`Source`); the formats' modules import it from here,
and the registry in ``__init__`` imports the formats' modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..discover import WindowFiles

#: ``read(path) -> ({kind: frame}, path_taken)``: a lone-file format's whole reader
FileReader = Callable[[Path], tuple[dict[str, pd.DataFrame], str]]


@dataclass(frozen=True)
class Source:
    """A trace format, declared."""

    name: str
    #: whether a window's files hold this format
    detect: Callable[[WindowFiles], bool]
    #: whether one file is this format's
    owns: Callable[[Path], bool]
    #: frame kind -> priority (lower wins when several of a window's sources provide it)
    frames: dict[str, int]
    #: where a window of this format gets its rank and device, in words
    identity: str
    #: for a format the built-in readers do not know: reads a lone file's frames
    read_file: FileReader | None = None
    doc: str = field(default="", compare=False)
