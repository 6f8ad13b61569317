"""Flight Recorder dumps, one rank per file, into plain records (no pandas here).

PyTorch's recorder (``TORCH_FR_BUFFER_SIZE``; NCCL, and gloo in recent torch) and torch_npu's
(``TORCH_HCCL_TRACE_BUFFER_SIZE``, HCCL) write one file per rank when a watchdog times out or
when asked (``torch._C._distributed_c10d._dump_fr_trace()``): a pickle (dump versions 2.x) or,
from ``_dump_fr_trace_json``, JSON, with the same keys: ``version``, ``pg_config`` (the
process groups this rank belongs to: name → desc, ranks), ``pg_status`` (per local group id:
the last enqueued, started and completed collective) and ``entries`` (the ring buffer).
Either may be gzipped. A file's rank comes from the digits that end its name (torch writes
``<prefix><rank>``), or else from its ``pg_config`` (the one rank every group it lists holds).

Limits, as for traces (:mod:`dynprof_nb.traces.formats.common.budget`): a file over
``DYNPROF_NB_FR_MAX_BYTES`` (default 1 GiB) is refused, a gzip inflates to at most
``DYNPROF_NB_GZIP_RATIO`` times its size, and what is held at once stays within
``DYNPROF_NB_LOAD_MEMORY``. Pickles go through :mod:`dynprof_nb.flight_recorder.safe_pickle`:
nothing in a dump is ever imported or called.
"""

from __future__ import annotations

import ast
import gzip
import io
import json
import os
import re
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynprof_nb.flight_recorder import safe_pickle
from dynprof_nb.traces.errors import TraceFormatError
from dynprof_nb.traces.formats.common import budget

DEFAULT_MAX_BYTES = 1 << 30
_TRAILING_RANK = re.compile(r"(\d+)$")
_SUFFIXES = (".gz", ".json", ".pkl", ".pickle", ".fr")


@dataclass
class Dump:
    """One rank's dump, as the recorder wrote it (entries are the recorder's own dicts)."""

    path: str
    rank: int
    version: str
    entries: list[dict[str, Any]]
    pg_config: dict[str, dict[str, Any]]
    pg_status: dict[str, dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)


def max_bytes() -> int:
    raw = os.environ.get("DYNPROF_NB_FR_MAX_BYTES", "").strip()
    try:
        return budget.parse_size(raw) if raw else DEFAULT_MAX_BYTES
    except ValueError:
        return DEFAULT_MAX_BYTES


def dump_files(sources: str | Path | list[str | Path]) -> list[Path]:
    """The dump files of ``sources``: a directory (its regular files, not below, except
    dot-files and ``.txt``/``.log``/``.md`` notes), files named one by one, or a path prefix
    as torch's ``TORCH_FR_DUMP_TEMP_FILE`` is (``/tmp/trace_`` for ``/tmp/trace_0`` ...)."""
    items = [sources] if isinstance(sources, (str, Path)) else list(sources)
    files: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            files += sorted(
                c
                for c in p.iterdir()
                if c.is_file()
                and not c.name.startswith(".")
                and c.suffix.lower() not in (".txt", ".log", ".md")
            )
        elif p.is_file():
            files.append(p)
        elif p.parent.is_dir() and any(c.name.startswith(p.name) for c in p.parent.iterdir()):
            files += sorted(c for c in p.parent.iterdir() if c.name.startswith(p.name))
        else:
            raise FileNotFoundError(f"no Flight Recorder dump at {p}")
    if not files:
        raise FileNotFoundError(f"no Flight Recorder dump files in {', '.join(map(str, items))}")
    return files


def looks_like_a_dump(path: Path) -> bool:
    """Whether a file in a dump directory is one (a pickle, JSON object or gzip by its first
    byte); a job's logs beside the dumps are not."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64).lstrip()[:2]
    except OSError:
        return False
    return head[:1] in (b"\x80", b"{") or head == b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    size = path.stat().st_size
    limit = max_bytes()
    if size > limit:
        raise budget.too_big(
            path,
            f"a {budget.human(size)} dump",
            f"{budget.human(limit)} (set DYNPROF_NB_FR_MAX_BYTES to raise it)",
        )
    budget.check_memory(path, 4 * size, "reading this dump")
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if data[:2] != b"\x1f\x8b":
        return data
    cap, words = budget.inflate_limit(path, len(data))
    budget.check_memory(path, 4 * cap, "inflating this dump")
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
            out = gz.read(cap + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFormatError(path, f"a damaged gzip: {exc}") from None
    if len(out) > cap:
        raise budget.too_big(path, "this gzip inflates", words)
    return out


def _decode(data: bytes, path: Path) -> dict[str, Any]:
    head = data.lstrip()[:1]
    if head == b"{":
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise TraceFormatError(path, f"not a readable JSON dump: {exc}") from None
    elif data[:1] == b"\x80":  # pickle protocol 2 and later, what torch writes
        value = safe_pickle.loads(data, path)
    else:  # protocols 0 and 1 have no header: refused the same way if they name a callable
        try:
            value = safe_pickle.loads(data, path)
        except TraceFormatError as exc:
            if "refused" in str(exc):
                raise
            raise TraceFormatError(
                path,
                "not a Flight Recorder dump (neither a pickle nor JSON)",
                hint="dumps are the files torch writes on a watchdog timeout or on request",
            ) from None
    if not isinstance(value, dict) or not isinstance(value.get("entries", []), list):
        raise TraceFormatError(path, "not a Flight Recorder dump: no 'entries' list at its top")
    return value


def ranks_of(spec: Any) -> list[int]:
    """``ranks`` of a pg_config entry: the recorder writes the list's repr, ``'[0, 1]'``."""
    if isinstance(spec, str):
        try:
            spec = ast.literal_eval(spec.strip() or "[]")
        except (ValueError, SyntaxError):
            return []
    if isinstance(spec, (list, tuple, set)):
        return sorted(int(r) for r in spec if isinstance(r, int) or str(r).isdigit())
    return []


def _rank_of(path: Path, value: dict[str, Any], pg_config: dict[str, dict[str, Any]]) -> int:
    if isinstance(value.get("rank"), int):
        return int(value["rank"])
    name = path.name
    for _ in range(3):
        lower = name.lower()
        for suffix in _SUFFIXES:
            if lower.endswith(suffix):
                name = name[: -len(suffix)]
                break
    m = _TRAILING_RANK.search(name)
    if m:
        return int(m.group(1))
    common: set[int] | None = None
    for cfg in pg_config.values():
        ranks = set(cfg.get("ranks") or [])
        if ranks:
            common = ranks if common is None else common & ranks
    if common is not None and len(common) == 1:
        return next(iter(common))
    raise TraceFormatError(
        path,
        "cannot tell this dump's rank: its name does not end in the rank and its process "
        "groups do not single one out",
        hint="name the files <prefix><rank>, as torch does (e.g. _dump_3)",
    )


def read_dump(path: str | Path) -> Dump:
    """One dump file, checked: its entries, process groups and status, and its rank."""
    p = Path(path)
    value = _decode(_read_bytes(p), p)
    pg_config: dict[str, dict[str, Any]] = {}
    for key, cfg in (value.get("pg_config") or {}).items():
        if not isinstance(cfg, dict):
            continue
        name = str(cfg.get("name", key))
        if name == "" and not ranks_of(cfg.get("ranks")):
            continue  # gloo's placeholder: no group recorded
        pg_config[name] = {"desc": str(cfg.get("desc", "")), "ranks": ranks_of(cfg.get("ranks"))}
    status = {str(k): v for k, v in (value.get("pg_status") or {}).items() if isinstance(v, dict)}
    entries = [e for e in value.get("entries") or [] if isinstance(e, dict)]
    extra = {
        k: v
        for k, v in value.items()
        if k not in ("entries", "pg_config", "pg_status") and isinstance(v, (str, int, float))
    }
    return Dump(
        path=str(p),
        rank=_rank_of(p, value, pg_config),
        version=str(value.get("version", "")),
        entries=entries,
        pg_config=pg_config,
        pg_status=status,
        extra=extra,
    )


def read_dumps(sources: str | Path | list[str | Path]) -> list[Dump]:
    """Every dump of ``sources``, by rank; two files for one rank is an error naming both.
    Files found in a directory or by a prefix that are no pickle, JSON or gzip at all (the
    job's logs) are left out with a warning; a file named on its own is always read."""
    dumps: dict[int, Dump] = {}
    files = dump_files(sources)
    named = {Path(x) for x in ([sources] if isinstance(sources, (str, Path)) else sources)}
    skipped = [f for f in files if f not in named and not looks_like_a_dump(f)]
    if skipped:
        warnings.warn(
            f"not Flight Recorder dumps, left out: {', '.join(f.name for f in skipped[:5])}"
            + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""),
            stacklevel=3,
        )
    for f in files:
        if f in skipped:
            continue
        d = read_dump(f)
        if d.rank in dumps:
            raise TraceFormatError(
                f, f"a second dump for rank {d.rank} (the first is {dumps[d.rank].path})"
            )
        dumps[d.rank] = d
    return [dumps[r] for r in sorted(dumps)]
