"""The one owner of cache keys: what names a frame's cache entry (:func:`entry_key`) and an
out-of-core load's partition directory (:func:`partition_key`), and the versions that
invalidate them. Changing what a key covers is an edit here only.

Both keys stamp each file the same way (:func:`file_stamp`: resolved path, size, mtime_ns,
ctime_ns, inode, device), so a file rewritten at the same size within one mtime tick is another
file to both.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import fields
from hashlib import sha256
from pathlib import Path
from typing import Any

import pandas as pd

# Bump when a reader's output changes in a way the package version would not show (a fix
# between releases): every entry written before is then a miss.
# 2: the first pass's entries (identity, summaries); 3: Kineto's wait_on_stream/wait_on_corr;
# 4: the collectives' communication group (pg_name, pg_ranks, pg_desc)
READER_VERSION = 4
# Bump when the out-of-core partitions' layout changes: a directory of an older layout is
# never read as this one's (old ones go with the stale ones, :mod:`.partitions`).
PARTITIONS_VERSION = 3  # 2: the CUDA event syncs' wait_stream / wait_corr; 3: pg_* columns
ENV_DIR = "DYNPROF_NB_CACHE"
ENV_LIMIT = "DYNPROF_NB_CACHE_SIZE"


def file_stamp(p: Path) -> list[Any]:
    """What says a file is the same file with the same content: resolved path, size,
    mtime_ns, ctime_ns, inode, device (``OSError`` when it is gone)."""
    st = os.stat(p)
    return [
        str(Path(p).resolve()),
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
        st.st_dev,
    ]


def digest(material: Any, length: int) -> str:
    """A hex name of ``length`` characters for JSON-able ``material``."""
    return sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:length]


def window_paths(files: Any) -> Iterator[Path]:
    """Every file a window's readers may read: the paths in its ``WindowFiles`` (whatever
    fields it has), its window.json and the analysis.db a reader looks for beside a db."""
    for f in fields(files):
        if f.name in ("root", "outside"):  # the folder itself; symlinks that are never read
            continue
        value = getattr(files, f.name)
        if isinstance(value, dict):
            value = list(value.values())
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, Path):
                yield v
    root = Path(files.root)
    for extra in [root / "window.json"] + (
        [Path(files.db).parent / "analysis.db"] if getattr(files, "db", None) else []
    ):
        if extra.is_file():
            yield extra


def entry_key(window: Any, kind: str) -> str | None:
    """The cache entry name for ``kind`` of ``window``, or None when it must not be cached."""
    files = getattr(window, "files", None)
    if files is None or getattr(files, "incomplete", None):
        return None
    try:
        seen = []
        for p in sorted({str(p) for p in window_paths(files)}):
            seen.append(file_stamp(Path(p)))
    except (OSError, RuntimeError):  # a file went away: the reader says so, uncached
        return None
    # the package is imported before its modules: no import edge back to the facade
    __version__ = getattr(sys.modules.get("dynprof_nb"), "__version__", "")

    material = {
        "reader": READER_VERSION,
        "package": __version__,
        "pandas": pd.__version__,
        "pyarrow": _pyarrow_version(),
        "class": type(window).__qualname__,
        "path": str(window.path),
        "kind": kind,
        "patterns": list(getattr(window, "comm_patterns", ())),
        "identity": [
            files.rank,
            files.device,
            files.framework_name,
            files.start_step,
            files.stop_step,
        ],
        "files": seen,
        # the readers' limits (DYNPROF_NB_GZIP_RATIO, ...): a load under other limits is another
        # load (a frame read under a large one must not answer a load that a small one refuses)
        "limits": sorted(
            (k, v)
            for k, v in os.environ.items()
            if k.startswith("DYNPROF_NB_") and k not in (ENV_DIR, ENV_LIMIT)
        ),
    }
    return digest(material, 40)


def _pyarrow_version() -> str:
    import pyarrow

    return pyarrow.__version__


def partition_key(path: Path) -> str:
    """The name an out-of-core load of ``path`` gives its partitions (before the load's own
    host, pid and nonce): the file's stamp and ``PARTITIONS_VERSION``."""
    return digest({"file": file_stamp(path), "version": PARTITIONS_VERSION}, 24)
