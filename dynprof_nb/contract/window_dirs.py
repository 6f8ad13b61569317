"""Window directories on disk: naming, the ``window.json`` manifest, publishing, discovery.

A window is recorded into a hidden temporary directory and renamed to MindSpore's
``rank{r}_start{s}_stop{e}`` only once its files and a ``complete`` manifest are written, so a
half-written window is never listed as complete. A window whose writer died stays under its
temporary name (or with an ``incomplete`` manifest) and is listed as ``incomplete``.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.segment import pid_alive

MANIFEST = "window.json"
# Names are matched whole (\Z, not $, which lets a trailing newline through) and in ASCII
# digits only: a directory name is written by whoever can write the folder.
_N = "[0-9]+"
_NAME = f"rank{_N}_start{_N}_stop{_N}"
WINDOW_RE = re.compile(
    rf"^rank(?P<rank>{_N})_start(?P<start>{_N})_stop(?P<stop>{_N})(?:_(?P<n>{_N}))?\Z"
)
TMP_RE = re.compile(rf"^\.(?P<name>{_NAME})\.tmp-(?P<pid>{_N})(?:-{_N})?\Z")
# a window that failed: renamed so it reads as failed even when the disk was too full to say so
FAILED_RE = re.compile(rf"^\.(?P<name>{_NAME})\.failed-(?P<pid>{_N})(?:-{_N})?\Z")


def window_name(rank: int, start: int, stop: int) -> str:
    """MindSpore's directory name for a window (all parts are integers: no path tricks)."""
    return f"rank{int(rank)}_start{int(start)}_stop{int(stop)}"


def output_root(prof_path: str, output_path: str | os.PathLike[str]) -> Path:
    """Where windows go: ``prof_path`` from the config wins unless it is the default ``./``."""
    chosen = output_path if prof_path in ("", "./", ".") else prof_path
    return Path(os.path.abspath(os.path.expanduser(os.fspath(chosen))))


def check_output_root(root: Path) -> None:
    """Refuse an output root reached through a symlink into another user's directory.

    Training jobs often run as root; a symlink at or above ``prof_path`` (planted, or just
    pointing the wrong way) would make one create windows in somebody else's directory. A link
    is followed only when the link and the directory it leads to belong to this process's user
    or to root (so ``/tmp -> /private/tmp`` style system links still work).
    """
    real = Path(os.path.realpath(root))
    if real == root:
        return
    me = os.geteuid()
    path = Path(root.anchor)
    for part in root.parts[1:]:
        path = path / part
        try:
            st = os.lstat(path)
        except OSError:
            break
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (me, 0):
            raise PermissionError(
                f"prof_path goes through a symlink of uid {st.st_uid} (this process is uid "
                f"{me}); refusing to follow another user's symlink {path}"
            )
    target = real  # the nearest directory of the link's target that can be looked at
    while True:
        try:
            owner = os.stat(target).st_uid
            break
        except OSError:
            if target == target.parent:
                return
            target = target.parent
    if owner not in (me, 0):
        raise PermissionError(
            f"prof_path is a symlink into uid {owner}'s directory (this process is uid {me}); "
            f"refusing to write there. Use a directory you own, not {root} -> {target}"
        )


def create_window_dir(root: Path, rank: int, start: int, stop: int) -> Path:
    """Make the hidden temporary directory a window records into."""
    check_output_root(root)
    root.mkdir(parents=True, exist_ok=True)
    if not os.access(root, os.W_OK | os.X_OK):
        raise PermissionError(f"output directory {root} is not writable by this process")
    base = f".{window_name(rank, start, stop)}.tmp-{os.getpid()}"
    for n in range(1000):
        path = root / (base if n == 0 else f"{base}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"too many temporary windows named {base} in {root}")


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    """Write ``window.json`` atomically (temp file + rename)."""
    fd, tmp = tempfile.mkstemp(prefix=".window.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=2, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / MANIFEST)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def new_manifest(
    *,
    job: str,
    rank: int,
    start: int,
    stop: int,
    backend: str,
    config: dict[str, Any],
    window_options: dict[str, Any] | None = None,
    run: int = 0,
    run_started_at: float | None = None,
) -> dict[str, Any]:
    """``config`` is what the window records with; ``window_options`` the keys of it that
    ``start`` gave for this window only (the rest was the job's standing config). ``run``:
    the job's run the rank is in (a job restarted under its name is a new run, see
    :attr:`dynprof_nb.contract.segment.Segment.run`), so steps of two runs are never taken for one;
    ``run_started_at``: when that run began (wall clock, s). ``start_step``/``stop_step``
    are the steps recorded, ``requested_*`` the steps asked (they differ for a window file
    mode moved, :func:`shifted_fields`)."""
    return {
        "job": job,
        "run": run,
        "run_started_at": run_started_at,
        "rank": rank,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "start_step": start,
        "stop_step": stop,
        "requested_start_step": start,
        "requested_stop_step": stop,
        "started_at": time.time(),
        "ended_at": None,
        "backend": backend,
        "config": config,
        "window_options": dict(window_options or {}),
        "status": "recording",
        "files": [],
        "error": None,
    }


def shifted_fields(asked: tuple[int, int], recorded: tuple[int, int], note: str) -> dict[str, Any]:
    """Manifest keys of a window file mode moved (``commands.shifted_window``). Its
    ``start_step``/``stop_step`` are the steps recorded, as in every manifest; these say which
    window was asked for and why it moved, and keep its directory named after the window asked
    for (``rank0_start6_stop7``, the name MindSpore gives it and its own tests look for)."""
    return {
        "requested_start_step": asked[0],
        "requested_stop_step": asked[1],
        "shifted_by": recorded[0] - asked[0],
        "note": note,
    }


def name_steps(manifest: dict[str, Any]) -> tuple[int, int]:
    """The steps a window's directory is named after: the window asked for when file mode
    moved it, else the steps recorded."""
    if manifest.get("shifted_by"):
        return manifest["requested_start_step"], manifest["requested_stop_step"]
    return manifest["start_step"], manifest["stop_step"]


# keys that say where or which window, not how it was recorded
_NOT_RECORDING_KEYS = ("start_step", "stop_step", "prof_path")


def config_delta(config: dict[str, Any] | None) -> dict[str, Any]:
    """The keys of a window's config that differ from the defaults (steps and path left out):
    what it was recorded with, at a glance."""
    if not isinstance(config, dict):
        return {}
    traits = ProfilerConfig.class_traits()
    return {
        k: v
        for k, v in config.items()
        if k in traits and k not in _NOT_RECORDING_KEYS and v != traits[k].default()
    }


def describe_config(config: dict[str, Any] | None) -> str:
    """``config_delta`` as ``key=value, ...`` (``defaults`` when nothing differs, ``""`` when
    the window has no manifest config)."""
    if not isinstance(config, dict) or not config:
        return ""
    delta = config_delta(config)
    if not delta:
        return "defaults"
    return ", ".join(
        f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in delta.items()
    )


def list_files(directory: Path) -> list[str]:
    return sorted(
        str(p.relative_to(directory))
        for p in directory.rglob("*")
        if p.is_file() and p.name != MANIFEST and not p.name.startswith(".window.")
    )


def publish(tmp: Path, manifest: dict[str, Any]) -> Path:
    """Finish a window: manifest last, then rename to its public name. Returns the final path."""
    manifest = dict(
        manifest, ended_at=manifest.get("ended_at") or time.time(), files=list_files(tmp)
    )
    write_manifest(tmp, manifest)
    name = window_name(manifest["rank"], *name_steps(manifest))
    for n in range(1, 1000):
        final = tmp.parent / (name if n == 1 else f"{name}_{n}")
        if final.exists():
            continue  # the same window asked for again: keep the old one too
        try:
            os.rename(tmp, final)
            return final
        except OSError:
            if final.exists():
                continue
            raise
    raise FileExistsError(f"too many windows named {name} in {tmp.parent}")


def mark_failed(directory: Path, reason: str, manifest: dict[str, Any] | None = None) -> Path:
    """Leave a failed window listed as ``incomplete``; returns where it now is.

    The manifest says so if the disk lets us write it; the directory is also renamed from
    ``.tmp-<pid>`` to ``.failed-<pid>``, which needs no free space, so that a window whose disk
    filled up is not listed as ``recording`` for as long as its (live) writer runs.
    """
    try:
        data = read_manifest(directory) or {}
        data.update(manifest or {})
        data.update(status="incomplete", error=reason, ended_at=time.time())
        write_manifest(directory, data)
    except Exception:
        pass
    m = TMP_RE.match(directory.name)
    if m is None:
        return directory
    base = f".{m['name']}.failed-{m['pid']}"
    for n in range(1000):
        target = directory.with_name(base if n == 0 else f"{base}-{n}")
        if target.exists():
            continue
        try:
            os.rename(directory, target)
        except OSError:
            return directory
        return target
    return directory


def output_bytes(root: str | os.PathLike[str]) -> int:
    """Bytes taken by the windows under ``root`` (complete, recording or failed), for the
    Monitor's disk budget. Only window directories count; nothing else in ``root`` does."""
    total = 0
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    for entry in entries:
        name = entry.name
        if not (WINDOW_RE.match(name) or TMP_RE.match(name) or FAILED_RE.match(name)):
            continue
        total += sum(st.st_size for st in file_stats(entry.path))
    return total


def file_stats(directory: str | os.PathLike[str]) -> Iterator[os.stat_result]:
    """The ``lstat`` of every plain file under ``directory``, symlinks never followed; what
    cannot be read (gone meanwhile, no permission) is skipped."""
    stack = [os.fspath(directory)]
    while stack:
        try:
            with os.scandir(stack.pop()) as inner:
                for item in inner:
                    if item.is_dir(follow_symlinks=False):
                        stack.append(item.path)
                    elif item.is_file(follow_symlinks=False):
                        yield item.stat(follow_symlinks=False)
        except OSError:
            continue


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    try:
        with open(Path(directory) / MANIFEST, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _whole(value: Any) -> int | None:
    """A manifest's run or step number (None when absent or not a number: an older window)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _seconds(value: Any) -> float | None:
    """A wall-clock time in seconds from a manifest, or None (absent, or not a finite number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _recent_kind(manifest: dict[str, Any]) -> str:
    """ "trigger" or "asked" for a recent-steps record (training/recent.py), "" for a window."""
    recent = manifest.get("recent")
    return str(recent.get("kind") or "record") if isinstance(recent, dict) else ""


def find_windows(roots: list[Path], job: str | None = None) -> list[dict[str, Any]]:
    """Every window under ``roots`` (of ``job`` when given), complete or not, oldest first."""

    rows: list[dict[str, Any]] = []
    seen: set[Path] = set()
    for root in roots:
        try:
            entries = list(Path(root).iterdir())
        except OSError:
            continue
        for path in entries:
            if path in seen or not path.is_dir():
                continue
            seen.add(path)
            public = WINDOW_RE.match(path.name)
            tmp = TMP_RE.match(path.name) or FAILED_RE.match(path.name)
            if not public and not tmp:
                continue
            manifest = read_manifest(path) or {}
            if job is not None and manifest.get("job", job) != job:
                continue
            if public:
                status = manifest.get("status") or "incomplete"
                if status != "complete":
                    status = "incomplete"
                rank, start, stop = (int(public[k]) for k in ("rank", "start", "stop"))
            else:
                writer = int(tmp["pid"])
                recording = (
                    tmp.re is TMP_RE
                    and pid_alive(writer)
                    and manifest.get("status", "recording") == "recording"
                )
                status = "recording" if recording else "incomplete"
                m = WINDOW_RE.match(tmp["name"])
                rank, start, stop = (int(m[k]) for k in ("rank", "start", "stop"))
            rows.append(
                {
                    "rank": manifest.get("rank", rank),
                    "start": manifest.get("start_step", start),
                    "stop": manifest.get("stop_step", stop),
                    "status": status,
                    "path": str(path),
                    "backend": manifest.get("backend"),
                    "started_at": manifest.get("started_at"),
                    "ended_at": manifest.get("ended_at"),
                    "error": manifest.get("error"),
                    "config": describe_config(manifest.get("config")),
                    "reason": manifest.get("reason") or "",
                    "run": _whole(manifest.get("run")),
                    "run_started_at": _seconds(manifest.get("run_started_at")),
                    "recent": _recent_kind(manifest),
                }
            )
    rows.sort(key=lambda r: (r["started_at"] or 0, r["rank"]))
    return rows
