"""Errors and warnings raised by the trace readers."""

from __future__ import annotations

import errno
import re
import threading
import types
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


class LibraryError(RuntimeError):
    """A reader failed calling a library of this environment (a keyword or attribute that its
    version lacks, a module that does not import), not on the file's content: the message names
    the library and its version and what to do. The file may well be fine."""


# the libraries the readers call, by the names a signature error's message may start with
_READER_LIBS = ("pandas", "numpy", "pyarrow", "msgspec", "orjson", "sqlite3", "dask")
_SIGNATURE = re.compile(
    r"([\w.]+)\(\) (?:got an unexpected keyword argument|missing \d+ required|takes \d+ "
    r"positional argument|takes from|got multiple values for argument|takes no keyword)"
)
_CONTENT_TYPES = ("builtins", "pandas.core.frame", "pandas.core.series")


def library_fault(exc: BaseException) -> str | None:
    """The library (``name version``) a reader's exception came from when it is not about the
    file's content, else None: an ImportError; a TypeError of a call's signature (a keyword the
    installed version does not take); an AttributeError of a module or a library's object (a
    ``sqlite3.Connection`` without ``setlimit``). An AttributeError of a str, dict or None, or a
    frame's missing column, is the content's (a field of another type than the layout's)."""
    lib: str | None = None
    if isinstance(exc, ImportError):
        lib = (exc.name or str(exc).split("'")[1 if "'" in str(exc) else 0]).split(".")[0]
    elif isinstance(exc, AttributeError):
        obj = getattr(exc, "obj", None)
        if isinstance(obj, types.ModuleType):
            lib = obj.__name__.split(".")[0]
        elif obj is not None and type(obj).__module__ not in _CONTENT_TYPES:
            lib = type(obj).__module__.split(".")[0]
    elif isinstance(exc, TypeError):
        m = _SIGNATURE.search(str(exc))
        if m:
            lib = _owner(m.group(1), exc)
    if not lib:
        return None
    return f"{lib} {_version(lib)}"


def _owner(qualname: str, exc: BaseException) -> str:
    """The library whose callable ``qualname`` is (``Categorical.from_codes`` is pandas'):
    the first of the readers' libraries that has its first part, else the innermost frame's
    package in the traceback."""
    import sys

    head = qualname.split(".")[0]
    for lib in _READER_LIBS:
        mod = sys.modules.get(lib)
        if mod is not None and (head == lib or hasattr(mod, head)):
            return lib
    tb, name = exc.__traceback__, "dynprof_nb"
    while tb is not None:
        name = str(tb.tb_frame.f_globals.get("__name__", name))
        tb = tb.tb_next
    return name.split(".")[0]


def _version(lib: str) -> str:
    import sys
    from importlib import metadata

    if lib == "sqlite3":
        import sqlite3

        return f"(SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]})"
    try:
        return metadata.version(lib)
    except (metadata.PackageNotFoundError, ValueError):
        return getattr(sys.modules.get(lib), "__version__", "(version unknown)")


@contextmanager
def library_faults(path: str | Path, what: str) -> Iterator[None]:
    """Inside: an exception that :func:`library_fault` pins on a library becomes its
    :class:`LibraryError`; every other exception passes as it is."""
    try:
        yield
    except (TypeError, AttributeError, ImportError) as exc:
        lib = library_fault(exc)
        if lib is None:
            raise
        raise library_error(path, what, exc, lib) from exc


def library_error(path: str | Path, what: str, exc: BaseException, lib: str) -> LibraryError:
    """The error to raise for :func:`library_fault`'s ``lib``: whose fault, and what to do."""
    import sys

    # the package is imported before any of its modules: no import edge back to the facade
    __version__ = getattr(sys.modules.get("dynprof_nb"), "__version__", "(version unknown)")

    if lib.startswith("dynprof_nb"):
        whose = f"a call inside dynprof_nb {__version__} failed (its bug, or a library's version"
        whose += " it was not tested with)"
    else:
        whose = f"{lib} in this environment does not work with dynprof_nb {__version__}"
    return LibraryError(
        f"{path}: cannot read {what}: {type(exc).__name__}: {str(exc)[:200]}. This is not the "
        f"file: {whose}. Run `dynprof doctor` (in a notebook dynprof_nb.doctor()): it lists "
        "the tested versions and known fixes; install one of those, or report this with its "
        "output."
    )
