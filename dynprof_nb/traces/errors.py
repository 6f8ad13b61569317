"""Errors and warnings raised by the trace readers."""

from __future__ import annotations

from pathlib import Path


class TraceFormatError(ValueError):
    """A trace file that cannot be read at all.

    The message names the file, the position (byte offset, or line/column for text formats) and
    what the user can do, because a bare "invalid JSON" on a 2 GB file is not actionable.
    """

    def __init__(self, path: str | Path, message: str, *, offset: int | None = None,
                 line: int | None = None, column: int | None = None, hint: str | None = None):
        self.path = str(path)
        self._args = (path, message, {"offset": offset, "line": line, "column": column,
                                      "hint": hint})
        self.offset = offset
        self.line = line
        self.column = column
        where = ""
        if line is not None:
            where = f" at line {line}" + (f", column {column}" if column is not None else "")
        elif offset is not None:
            where = f" at byte {offset}"
        text = f"{self.path}{where}: {message}"
        if hint:
            text += f" ({hint})"
        super().__init__(text)

    def __reduce__(self) -> tuple:
        """Picklable with its keywords, so an error in a loader process reaches the caller as
        itself (not as a broken process pool)."""
        path, message, kw = self._args
        return _rebuild, (path, message, kw)


def _rebuild(path: str | Path, message: str, kw: dict) -> TraceFormatError:
    return TraceFormatError(path, message, **kw)


class TraceRepairWarning(UserWarning):
    """A trace was loaded, but only after repairing it or dropping part of it."""


class IncompleteWindowWarning(UserWarning):
    """A window directory was not completely written (manifest says incomplete, or a .tmp dir)."""
