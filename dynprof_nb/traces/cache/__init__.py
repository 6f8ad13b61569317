"""The columnar cache: a window's frames kept as Parquet so a second load, in any process, reads
them back in a fraction of the parse.

The first load of a frame writes it (with what the load said about it: its ``sources`` notes, its
``attrs``, the warnings it gave) to ``$DYNPROF_NB_CACHE`` (default ``$XDG_CACHE_HOME/dynprof_nb``
or ``~/.cache/dynprof_nb``; ``0``/``off`` turns the cache off), never beside the trace. An entry
is found by a hash of what could change the frame: every file the window's readers may read
(resolved path, size, mtime_ns, ctime_ns, inode), the path as given, the communication patterns,
the readers' ``DYNPROF_NB_*`` limits, this reader's version and the pandas/pyarrow versions. A
window still being written (no complete manifest) is never cached. The key is :mod:`.keys`'s
(with the out-of-core partitions' key), the directory checks :mod:`.dirs`'s.

Hostile by default: the directory is created 0700 and refused when it is a symlink or another
user's; an entry is opened without following symlinks and must be a regular file of ours; an
entry that does not decode (truncated, corrupted, planted) is removed and the trace is read as if
there were no cache. Writes go to a temporary file in the cache directory, renamed into place,
so two processes at once each see a whole entry or none. The cache is bounded
(``DYNPROF_NB_CACHE_SIZE``, default 2 GB): the least recently used entries (reading one
touches it) are removed after a write that could take it past its bound (down to 9/10 of it),
and at least once a minute.

Frames round-trip exactly (dtypes, categories with their dtype and order, nullable ints, object
columns, the index, attrs: :mod:`.codec`); a frame holding anything
else is not cached.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import collected_warnings, disk_full, warn
from ..formats.common.budget import parse_size
from ..owner import ended, owner_tag
from .codec import META_KEY, Unsupported, decode, encode, read_entry, same
from .dirs import private_dir
from .keys import ENV_DIR, ENV_LIMIT, READER_VERSION, entry_key, window_paths  # noqa: F401

DEFAULT_LIMIT_BYTES = 2 * 1024**3
_OFF = ("0", "off", "no", "false", "none")
_SUFFIX = ".parquet"
_TMP_PREFIX = ".tmp-"
_PARTS_PREFIX = _TMP_PREFIX + "parts-"  # then owner_tag(): a pass's scratch directory
_STALE_TMP_S = 3600.0  # a temporary file this old was left by a writer that died
_RESCAN_S = 60.0  # a directory is listed again at least this often, whatever was written
_TRIM_TO = 0.9  # a trim leaves room: a full cache is not listed again at its next write


# what this process's loads did, for tests and benchmarks: entries read, built and stored
counts = {"hits": 0, "misses": 0, "stored": 0, "discarded": 0}


class CacheWarning(UserWarning):
    """The frame cache could not be used (its directory is unsafe); frames are read from the
    trace files, as without a cache."""


# ---- where ----------------------------------------------------------------------------------
def cache_dir() -> Path | None:
    """The cache directory this process uses, or None when ``DYNPROF_NB_CACHE`` turns it off."""
    env = os.environ.get(ENV_DIR, "").strip()
    if env.lower() in _OFF:
        return None
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "dynprof_nb"


def limit_bytes() -> int:
    """The bound on the cache's size: ``DYNPROF_NB_CACHE_SIZE`` (bytes, or ``500M``, ``2G``,
    ``2GB``; ``0`` keeps nothing). A value that is not a size (``abc``, ``-5``, ``inf``) gives
    the default, with one CacheWarning: a typo must neither fail a load nor empty the cache."""
    text = os.environ.get(ENV_LIMIT, "").strip()
    if not text:
        return DEFAULT_LIMIT_BYTES
    try:
        return parse_size(text)
    except ValueError:
        if text not in _bad_limits:
            _bad_limits.add(text)
            warn(
                CacheWarning(
                    f"{ENV_LIMIT}={text!r} is not a size (bytes, or like 500M, 2G); the frame "
                    f"cache keeps to its default bound of {DEFAULT_LIMIT_BYTES >> 30} GB"
                ),
                stacklevel=4,
            )
        return DEFAULT_LIMIT_BYTES


_bad_limits: set[str] = set()

_refused: set[str] = set()


def _usable_dir(create: bool = True) -> Path | None:
    """The cache directory, created 0700, or None (with one CacheWarning per directory) when it
    is a symlink, not a directory or not ours (:func:`.dirs.private_dir`)."""
    d = cache_dir()
    if d is None or not _have_pyarrow():
        return None
    try:
        why = private_dir(d, create)
    except FileNotFoundError:
        return None
    return d if why is None else _refuse(d, why)


def _have_pyarrow() -> bool:
    """Whether this interpreter can read entries: pyarrow is installed and imports (a venv
    without it, or with a pyarrow built for numpy 2 under numpy 1.26, runs uncached, and is
    told so once: :mod:`dynprof_nb.optional`)."""
    from ...optional import available

    return available("frame cache", say=lambda w: warn(w, stacklevel=5))


_full: set[str] = set()  # cache directories whose disk was found full (said once each)


def _refuse(d: Path, why: str) -> None:
    if str(d) not in _refused:
        _refused.add(str(d))
        warn(  # collected in a reader thread, said by the thread that started it
            CacheWarning(
                f"not using the frame cache {d}: {why}; frames are read from the trace files. "
                f"Set {ENV_DIR} to a directory of yours, or {ENV_DIR}=off."
            ),
            stacklevel=4,
        )
    return None


# ---- the hook ---------------------------------------------------------------------------------
# warnings repeated from cache entries, per window: each is said once per window, as a parse
# says it once (the traces are parsed once per window)
_said: weakref.WeakKeyDictionary[Any, set[tuple[str, str]]] = weakref.WeakKeyDictionary()
_said_lock = threading.Lock()


def recall(window: Any, kind: str) -> tuple[pd.DataFrame, dict] | None:
    """Entry ``kind`` of ``window`` (frame and metadata) when there is a good one, its
    ``sources`` notes taken and its warnings said again; else None."""
    d = _usable_dir()
    key = entry_key(window, kind) if d is not None else None
    hit = _read(d, key) if key is not None else None
    if hit is None:
        return None
    counts["hits"] += 1
    window.sources.update(hit[1]["sources"])
    _repeat(window, hit[1]["warnings"])
    return hit


def through(window: Any, kind: str, build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """Frame ``kind`` of ``window``: from its cache entry when there is a good one, else
    ``build()`` (whose warnings are said as usual), then stored for the next load."""
    hit = recall(window, kind)
    if hit is not None:
        return hit[0]
    frame, meta = _recorded(window, build)
    if isinstance(frame, pd.DataFrame):  # never an out-of-core frame
        _store(window, kind, meta, lambda fh, m: fh.write(encode(frame, m)))
    return frame


def identify(window: Any, read: Callable[[], Any]) -> None:
    """``read()``, which sets ``window.rank`` and ``window.framework`` from its trace (parsing
    it), or those two from the cache entry of an earlier ``read()`` of the same files."""
    hit = recall(window, "identity")
    if hit is not None:
        window.rank, window.framework = hit[1]["identity"]
        return

    def build() -> pd.DataFrame:
        read()
        return pd.DataFrame()

    frame, meta = _recorded(window, build)
    meta["identity"] = [window.rank, window.framework]
    _store(window, "identity", meta, lambda fh, m: fh.write(encode(frame, m)))


def store(
    window: Any,
    kind: str,
    frame: pd.DataFrame | Callable[[Any, dict], None],
    sources: dict[str, Any],
    said: list[Warning],
    **extra: Any,
) -> bool:
    """Write entry ``kind`` of ``window`` from a pass that read it some other way than
    :func:`through` (:mod:`..formats.chrome.first_pass`): ``frame``, or a function that
    writes the entry's Parquet to a file itself (given the metadata, for a frame written in
    parts); ``sources``, the notes a hit restores; ``said``, the warnings the pass gave
    (marked said for this window, so a hit in this process does not say them twice);
    ``extra``, more metadata (``identity``, ...). Whether the entry was written."""
    warned = [[_category_name(type(w)), str(w)] for w in said]
    with _said_lock:
        _said.setdefault(window, set()).update((c, m) for c, m in warned)
    exact = all(same(json.loads(json.dumps(v, default=str)), v) for v in sources.values())
    meta = dict(extra, sources=sources, warnings=warned, exact=exact)
    if isinstance(frame, pd.DataFrame):
        df = frame
        return _store(window, kind, meta, lambda fh, m: fh.write(encode(df, m)))
    return _store(window, kind, meta, frame)


def _store(window: Any, kind: str, meta: dict, write: Callable[[Any, dict], None]) -> bool:
    d = _usable_dir()
    key = entry_key(window, kind) if d is not None else None
    if key is None:
        return False
    counts["misses"] += 1
    return _write(d, key, window, kind, write, meta)


def scratch_dir() -> Path | None:
    """A new private directory inside the cache directory for a pass's transient files (the
    first pass's raw parts), None with the cache off or one that cannot be written to
    (read-only, full: as every entry's write, the pass goes on without it); its owner removes
    it, and one a killed process left is removed by a later write once that process has
    ended, or, where that cannot be told, once it is an hour old (:func:`_trim`)."""
    d = _usable_dir()
    if d is None:
        return None
    try:
        return Path(tempfile.mkdtemp(prefix=f"{_PARTS_PREFIX}{owner_tag()}-", dir=d))
    except OSError:
        return None


def entry_file(window: Any, kind: str) -> tuple[Path, dict] | None:
    """The Parquet file of ``window``'s good entry ``kind`` and its metadata (how to decode each
    column ``c<i>``: :mod:`.codec`), for a reader that scans the entry in place (``w.sql``:
    DuckDB reads only the columns and row groups a query needs, and the frame is never built
    in Python); None with the cache off or no such entry. The file is checked as a read checks
    it (a regular file of ours, under its own key) and touched (used); as a read, its
    ``sources`` notes are taken and its warnings said again."""
    d = _usable_dir(create=False)
    key = entry_key(window, kind) if d is not None else None
    if key is None:
        return None
    path = d / (key + _SUFFIX)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # none, or a symlink planted there: a read discards it
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        import pyarrow.parquet as pq

        with os.fdopen(os.dup(fd), "rb") as fh:
            meta = json.loads(pq.read_schema(fh).metadata[META_KEY])
        if meta.get("key") != key:
            return None
        os.utime(fd)
    except Exception:  # noqa: BLE001  a damaged entry: the frame is read (and the entry fixed)
        return None
    finally:
        os.close(fd)
    counts["hits"] += 1
    window.sources.update(meta["sources"])
    _repeat(window, meta["warnings"])
    return path, meta


def enabled() -> bool:
    """Whether this process writes and reads the frame cache (on, usable, pyarrow there)."""
    return _usable_dir() is not None


def _recorded(window: Any, build: Callable[[], pd.DataFrame]) -> tuple[pd.DataFrame, dict]:
    """``build()``, with the warnings it gave (said on, as they were) and the ``sources`` notes
    it added or changed."""
    before = json.dumps(window.sources, sort_keys=True, default=str)
    before_notes = json.loads(before)
    try:
        with collected_warnings() as said:
            frame = build()
    finally:  # said on as they were, outside the collection (to an outer one, or to the user)
        for w in said:
            warn(w, stacklevel=5)
    after = json.loads(json.dumps(window.sources, default=str))
    changed = {k: v for k, v in after.items() if before_notes.get(k) != v}
    return frame, {
        "sources": changed,
        "warnings": [[_category_name(type(w)), str(w)] for w in said],
        # notes JSON would not give back as they are (paths, tuples): such a frame is not cached
        "exact": all(same(v, window.sources.get(k)) for k, v in changed.items()),
    }


def _repeat(window: Any, said: list[list[str]]) -> None:
    with _said_lock:
        done = _said.setdefault(window, set())
        todo = [(c, m) for c, m in said if (c, m) not in done]
        done.update(todo)
    for category, message in todo:
        warn(_category(category)(message), stacklevel=5)


def _category_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _category(name: str) -> type[Warning]:
    """The warning class an entry names: only dynprof_nb's own and the builtin ones (an entry
    makes this process import nothing but dynprof_nb's modules); else UserWarning."""
    import importlib
    import sys

    module, _, qual = name.partition(":")
    if module == "builtins" or module.startswith("dynprof_nb."):
        mod = sys.modules.get(module) or (
            importlib.import_module(module) if module.startswith("dynprof_nb.") else None
        )
        cls = getattr(mod, qual, None) if mod is not None else None
        if isinstance(cls, type) and issubclass(cls, Warning):
            return cls
    return UserWarning


# ---- reading and writing entries ------------------------------------------------------------
def _read(d: Path, key: str) -> tuple[pd.DataFrame, dict] | None:
    """The entry ``key``, touched, or None; an entry that is not a good one of ours is removed."""
    path = d / (key + _SUFFIX)
    # O_NONBLOCK: a FIFO planted in its place would block the open until a writer came
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError:  # a symlink planted in its place (ELOOP), or unreadable
        counts["discarded"] += 1
        _discard(path)
        return None
    st = None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise Unsupported("not a regular file of ours")
        if st.st_size > limit_bytes():  # never written so: a file bigger than the cache
            raise Unsupported("larger than the cache holds")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = read_entry(fh, st.st_size)
        try:
            os.utime(fd)  # last used: what the size bound removes first is the oldest
        except OSError:
            pass
        frame, meta = decode(data)
        if meta.get("key") != key:
            raise Unsupported("an entry under another entry's name")
        return frame, meta
    except Exception:  # noqa: BLE001  any bad entry is a miss, never a failed load
        counts["discarded"] += 1
        _discard(path, st)
        return None
    finally:
        os.close(fd)


def _discard(path: Path, seen: os.stat_result | None = None) -> None:
    """Remove ``path``; with ``seen`` (the file found bad), only while it is still that file,
    not a good entry another process has just put in its place."""
    if seen is not None:
        try:
            now = os.lstat(path)
        except OSError:
            return
        if (now.st_ino, now.st_dev) != (seen.st_ino, seen.st_dev):
            return
    try:
        os.unlink(path)  # a symlink itself, never what it points at
    except OSError:
        pass


def _write(
    d: Path, key: str, window: Any, kind: str, write: Callable[[Any, dict], None], meta: dict
) -> bool:
    """Store entry ``key`` (``write(file, meta)`` writes its Parquet) atomically, then keep
    the cache within its bound. A frame the cache cannot hold exactly, or a full disk,
    leaves no entry and no error (False)."""
    meta = dict(
        meta,
        key=key,
        kind=kind,
        # (realpath: a symlink loop is named as it is, where Path.resolve raises)
        window=os.path.realpath(window.path),
        files=sorted({os.path.realpath(p) for p in window_paths(window.files)}),
        written=time.time(),
    )
    if not meta.pop("exact", True):
        return False
    tmp = None
    limit = limit_bytes()
    try:
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=_SUFFIX, dir=d)
        with os.fdopen(fd, "wb") as fh:
            write(fh, meta)
            size = fh.tell()
        if size > limit:  # it would be removed at once, with every other entry
            return False
        os.replace(tmp, d / (key + _SUFFIX))
        tmp = None
        counts["stored"] += 1
    except OSError as exc:
        if disk_full(exc) and str(d) not in _full:  # the frame is in memory all the same
            _full.add(str(d))
            warn(
                CacheWarning(
                    f"the frame cache {d} is full ({exc.strerror or exc}): frames are loaded "
                    f"but not cached. Free space there, or set {ENV_DIR} to a disk with room."
                ),
                stacklevel=4,
            )
        return False
    except (Unsupported, ValueError, TypeError, OverflowError):
        return False
    except Exception:  # noqa: BLE001  pyarrow's own errors: the frame is simply not cached
        return False
    finally:
        if tmp is not None:
            _discard(Path(tmp))
    _trim_when_due(d, limit, size)
    return True


# cache directory -> [when last listed (monotonic), its bytes then plus this process's writes]
_listed: dict[str, list[float]] = {}


def _trim_when_due(d: Path, limit: int, size: int) -> None:
    """:func:`_trim`, only when this write could take the cache past ``limit`` or the last
    listing is older than :data:`_RESCAN_S`: listing the directory (an ``lstat`` per entry)
    after every write cost a many-rank load entries squared (issue 47). Other processes' writes
    are seen at the next listing; each trims its own."""
    now = time.monotonic()
    seen = _listed.get(str(d))
    if seen is not None and now - seen[0] < _RESCAN_S and seen[1] + size <= limit:
        seen[1] += size
        return
    _listed[str(d)] = [now, float(_trim(d, limit))]


def _trim(d: Path, limit: int) -> int:
    """Remove the least recently used entries until the cache holds at most ``limit`` bytes
    (9/10 of it once over: room for the next writes), and temporary files that writers which
    died left behind; the bytes kept."""
    entries = []
    now = time.time()
    try:
        names = os.listdir(d)
    except OSError:
        return 0
    for name in names:
        p = d / name
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if name.startswith(_TMP_PREFIX):
            gone = name.startswith(_PARTS_PREFIX) and ended(name[len(_PARTS_PREFIX) :])
            if gone or now - st.st_mtime > _STALE_TMP_S:
                if stat.S_ISDIR(st.st_mode):  # a pass's scratch directory: never a symlink
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    _discard(p)
        elif name.endswith(_SUFFIX):
            entries.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in entries)
    keep = limit if total <= limit else int(limit * _TRIM_TO)
    for _, size, p in sorted(entries):
        if total <= keep:
            break
        _discard(p)
        total -= size
    return total


# ---- listing and clearing ------------------------------------------------------------------------
@dataclass
class Entry:
    """One cached frame: which window and files it was read from, its size, when last used."""

    path: Path
    window: str
    kind: str
    files: list[str]
    size: int
    used: float


def entries() -> list[Entry]:
    """Every entry of the cache, least recently used first (unreadable ones skipped)."""
    d = _usable_dir(create=False)
    if d is None:  # off, or no pyarrow that imports: no entries to list
        return []
    import pyarrow.parquet as pq

    out = []
    for name in sorted(os.listdir(d)):
        p = d / name
        if not name.endswith(_SUFFIX) or name.startswith(_TMP_PREFIX):
            continue
        try:
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                continue
            meta = json.loads(pq.read_schema(p).metadata[META_KEY])
            out.append(
                Entry(p, meta["window"], meta["kind"], list(meta["files"]), st.st_size, st.st_mtime)
            )
        except Exception:  # noqa: BLE001  a damaged entry is removed by its next read
            continue
    return sorted(out, key=lambda e: e.used)


def summary() -> pd.DataFrame:
    """One row per cached window of this user's entries: path, frames (each kind once),
    size (bytes), last used (a Timestamp)."""
    rows: dict[str, dict[str, Any]] = {}
    uid = os.getuid()
    for e in entries():
        try:
            if os.lstat(e.path).st_uid != uid:  # a shared cache folder: not this user's
                continue
        except OSError:
            continue
        r = rows.setdefault(e.window, {"path": e.window, "frames": [], "bytes": 0, "used": 0.0})
        if e.kind != "identity":
            r["frames"].append(e.kind)
        r["bytes"] += e.size
        r["used"] = max(r["used"], e.used)
    frame = pd.DataFrame(list(rows.values()), columns=["path", "frames", "bytes", "used"])
    frame["frames"] = [", ".join(sorted(set(f))) for f in frame["frames"]]
    frame["used"] = pd.to_datetime(frame["used"], unit="s").dt.floor("s")
    return frame.sort_values("used", ascending=False, ignore_index=True)


def clear(path: str | os.PathLike[str] | None = None) -> int:
    """Remove every entry, or those read from ``path`` (a trace file or window directory, or
    a file or folder inside one); returns how many were removed."""
    d = _usable_dir(create=False)
    if d is None:
        return 0
    if path is None:
        removed = 0
        for name in os.listdir(d):
            if name.endswith(_SUFFIX):
                _discard(d / name)
                removed += 1
        return removed
    target = str(Path(path).expanduser().resolve())
    removed = 0
    for e in entries():
        if any(_within(f, target) for f in [e.window, *e.files]):
            _discard(e.path)
            removed += 1
    return removed


def _within(path: str, target: str) -> bool:
    return path == target or path.startswith(target.rstrip(os.sep) + os.sep)
