"""Where out-of-core loads keep their Parquet partitions: one private directory per load,
``<cache root>/events-parts/<key>-<host>-<pid>-<nonce>``, named by the trace file's key
(:func:`.keys.partition_key`) and by the load, so two kernels never share one and a later load
can tell whether the process that made it still runs (:func:`prune`). The directories are
checked by :func:`.dirs.private_dir`, as the frame cache's is.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from ..errors import warn
from ..owner import HOST, ended, owner_tag  # noqa: F401  HOST: the names' host, for tests
from .dirs import private_dir
from .keys import partition_key

STALE_S = 7 * 24 * 3600.0  # a partition directory no host's live process can hold


def root() -> Path:
    """The frame cache's directory (:func:`.cache_dir`: ``~`` expanded, made absolute, so
    a later ``os.chdir`` loses no partition), or with the cache off (``DYNPROF_NB_CACHE=off``)
    ``<tmp>/dynprof_nb-<uid>``: never a folder named ``off`` in the working directory."""
    from . import cache_dir

    d = cache_dir()
    if d is None:
        d = Path(tempfile.gettempdir()) / f"dynprof_nb-{os.geteuid()}"
    return d.absolute()


def _part_dir(path: Path) -> Path:
    """A new directory for this load's partitions: named by the file
    (:func:`.keys.partition_key`) and by this load (host, pid), so two kernels loading one
    trace never share one and a later load can tell whether the process that made it still
    runs."""
    name = f"{partition_key(path)}-{owner_tag()}-{os.urandom(4).hex()}"
    return root() / "events-parts" / name


def _private_parent(parent: Path) -> Path:
    """``parent`` (``<root>/events-parts``), created 0700; where the root or it is a symlink,
    not a directory or another user's (someone squatting ``/tmp/dynprof_nb-<uid>``), a fresh
    private temporary directory instead, with a CacheWarning: partitions are read back later,
    so they must never be where someone else can swap them."""
    for d in (parent.parent, parent):
        why = private_dir(d)
        if why is not None:
            return _elsewhere(d, why)
    return parent


def _elsewhere(d: Path, why: str) -> Path:
    from . import CacheWarning

    fresh = Path(tempfile.mkdtemp(prefix="dynprof_nb-parts-"))
    warn(
        CacheWarning(
            f"not writing out-of-core partitions under {d}: {why}; using {fresh} for this "
            "load. Set DYNPROF_NB_CACHE to a directory of yours."
        ),
        stacklevel=4,
    )
    return fresh


def _dead(d: Path, now: float) -> bool:
    """Whether partition directory ``d`` can go: its process (on this host) has ended, or it
    is older than ``STALE_S`` (another host's, or a name from an older version)."""
    gone = ended(d.name.partition("-")[2])  # <key>-<host>-<pid>-<nonce>
    if gone is not None:
        return gone
    try:
        return now - d.stat().st_mtime > STALE_S
    except OSError:
        return False


def _prune(parent: Path, keep: Path | None = None) -> int:
    """Remove the partition directories of loads whose process has ended (how many): never a
    live frame's (another kernel's, or one this process still holds, which goes when its
    frame is collected: :func:`write_partitions`)."""
    now = time.time()
    try:
        names = list(parent.iterdir())
    except OSError:
        return 0
    removed = 0
    for d in names:
        if d != keep and d.is_dir() and not d.is_symlink() and _dead(d, now):
            shutil.rmtree(d, ignore_errors=True)
            removed += 1
    return removed


def prune() -> int:
    """Remove the partitions of loads that have ended (``dynprof cache --clear``): how many."""
    return _prune(root() / "events-parts")


def new_dir(path: Path) -> Path:
    """A new private directory for one load's partitions of trace ``path``, after removing
    those of loads whose process has ended."""
    out = _part_dir(path)
    out = _private_parent(out.parent) / out.name
    out.mkdir(mode=0o700)
    _prune(out.parent, out)
    return out
