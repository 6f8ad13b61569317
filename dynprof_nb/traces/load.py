"""The entry points: ``load_trace`` (one file) and ``load_window`` (a window directory, a folder
of ranks' windows, or a list of them), each returning a :class:`TraceWindow`."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from . import comm
from .discover import find_file, find_window_files, rank_windows
from .errors import IncompleteWindowWarning, TraceFormatError
from .formats import FINDERS
from .window import TraceWindow


def load_trace(path: str | Path, *, comm_patterns: comm.PatternSpec = None) -> TraceWindow:
    """One file: Chrome trace JSON (.json/.gz, object or array), an Ascend CSV,
    communication.json, a MindSpore FRAMEWORK file or an Ascend .db.

    ``comm_patterns``: which kernel/range names are communication (default: the session's
    :data:`dynprof_nb.traces.comm.patterns`); a dict, a list of regular expressions or one."""
    return TraceWindow.from_file(path, comm_patterns=comm_patterns)


def load_window(
    path: str | Path | Sequence[str | Path], *, comm_patterns: comm.PatternSpec = None
) -> TraceWindow:
    """A window directory ``rank{r}_start{s}_stop{e}/`` (built-in, MindSpore, torch_npu, PyTorch),
    a folder of several ranks' windows, or a list of window directories (one per rank); with
    several ranks the frames get a ``rank`` column.

    ``comm_patterns``: which kernel/range names are communication (default: the session's
    :data:`dynprof_nb.traces.comm.patterns`); a dict, a list of regular expressions or one."""
    kw = {"comm_patterns": comm.resolve(comm_patterns)}
    if isinstance(path, (list, tuple)):
        subs = [Path(p) for p in path]
        if not subs:
            raise ValueError("load_window() got an empty list of windows")
        if len(subs) == 1:
            return load_window(subs[0], **kw)
        missing = [str(p) for p in subs if not p.exists()]
        if missing:
            raise FileNotFoundError(f"no such window: {', '.join(missing)}")
        return _combine_windows(Path(os.path.commonpath(subs)), subs, **kw)
    root = Path(path)
    if root.is_file():
        return load_trace(root, **kw)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such directory")
    subs = rank_windows(root)
    if not subs:
        return TraceWindow.from_directory(root, explicit=True, **kw)
    return _combine_windows(root, subs, **kw)


def _combine_windows(
    root: Path, subs: list[Path], comm_patterns: comm.PatternSpec = None
) -> TraceWindow:
    """Several ranks' windows (directories or single trace files) as one MultiRankWindow."""
    children, skipped = [], []
    for s in subs:
        if s.is_file():
            children.append(TraceWindow(s, find_file(s), comm_patterns=comm_patterns))
            continue
        files = find_window_files(s, FINDERS)
        if files.incomplete:
            skipped.append(f"{s.name}: {files.incomplete}")
            continue
        children.append(TraceWindow(s, files, comm_patterns=comm_patterns))
        if files.db is not None:
            children[-1].identify_db()
    if skipped:
        warnings.warn(
            IncompleteWindowWarning(f"{root}: skipped incomplete windows: " + "; ".join(skipped)),
            stacklevel=2,
        )
    if not children:
        raise TraceFormatError(
            root, "no complete window in this folder", hint="; ".join(skipped) or None
        )
    if len(children) == 1:
        return children[0]
    taken = {c.rank for c in children if c.rank is not None}
    free = (i for i in range(len(children) + len(taken)) if i not in taken)
    for c in children:
        if c.rank is None:
            c.rank = next(free)
    ranks = [c.rank for c in children]
    if len(set(ranks)) != len(ranks):
        raise TraceFormatError(
            root,
            f"two windows claim the same rank ({sorted(ranks)})",
            hint="load each rank's window directory once",
        )
    from .multirank import MultiRankWindow  # (a lone window's load never imports it)

    return MultiRankWindow(root, children, skipped)
