"""Errors and warnings raised by the trace readers."""

from __future__ import annotations

import errno
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_MAX_MESSAGE = 2000


class TraceFormatError(ValueError):
    """A trace file that cannot be read at all.

    The message names the file, the position (byte offset, or line/column for text formats) and
    what the user can do, because a bare "invalid JSON" on a 2 GB file is not actionable.
    """

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        offset: int | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ):
        self.path = str(path)
        self._args = (
            path,
            message,
            {"offset": offset, "line": line, "column": column, "hint": hint},
        )
        self.offset = offset
        self.line = line
        self.column = column
        if len(message) > _MAX_MESSAGE:  # an error quoting a 16 MB value helps nobody
            cut = len(message) - _MAX_MESSAGE
            message = message[:_MAX_MESSAGE] + f"... ({cut} more characters)"
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


def disk_full(exc: BaseException) -> bool:
    """A full disk or quota (ENOSPC, EDQUOT), as the OS or pyarrow says it: pyarrow's
    ``OSError`` may carry the errno only in its text."""
    if not isinstance(exc, OSError):
        return False
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return any(t in text for t in ("No space left", "Disk quota", "[errno 28]", "[errno 122]"))


def _rebuild(path: str | Path, message: str, kw: dict) -> TraceFormatError:
    return TraceFormatError(path, message, **kw)


class TraceRepairWarning(UserWarning):
    """A trace was loaded, but only after repairing it or dropping part of it."""


class IncompleteWindowWarning(UserWarning):
    """A window directory was not completely written (manifest says incomplete, or a .tmp dir)."""


# Warnings from reader threads. ``warnings`` filters are process-wide in Python 3.11 and
# ``catch_warnings`` is not thread-safe, so a warning raised in a worker thread can meet another
# thread's filters (an "error" filter, say) and become an exception there. A reader thread
# collects its warnings instead, and the thread that started it re-emits them.
_thread_bucket = threading.local()


def warn(warning: Warning, stacklevel: int = 2) -> None:
    """``warnings.warn`` for the readers; collected instead inside :func:`collected_warnings`."""
    bucket = getattr(_thread_bucket, "warnings", None)
    if bucket is not None:
        bucket.append(warning)
    else:
        warnings.warn(warning, stacklevel=stacklevel + 1)


@contextmanager
def collected_warnings() -> Iterator[list[Warning]]:
    """In a reader thread: the warnings :func:`warn` was given meanwhile, not emitted."""
    outer = getattr(_thread_bucket, "warnings", None)  # nested: warn() reaches it again after
    _thread_bucket.warnings = bucket = []
    try:
        yield bucket
    finally:
        _thread_bucket.warnings = outer
