"""Flight Recorder dumps, one rank per file, into plain records (no pandas here).

PyTorch's recorder (``TORCH_FR_BUFFER_SIZE``; NCCL, and gloo in recent torch) and torch_npu's
(``TORCH_HCCL_TRACE_BUFFER_SIZE``, HCCL) write one file per rank when a watchdog times out or
when asked (``torch._C._distributed_c10d._dump_fr_trace()``): a pickle (dump versions 2.x) or,
from ``_dump_fr_trace_json``, JSON, with the same keys: ``version``, ``pg_config`` (the
process groups this rank belongs to: name → desc, ranks), ``pg_status`` (per local group id:
the last enqueued, started and completed collective) and ``entries`` (the ring buffer).
Either may be gzipped. A file's rank comes from the digits that end its name (torch writes
``<prefix><rank>``), or else from its ``pg_config`` (the one rank every group it lists holds).

Limits: a file over ``DYNPROF_NB_FR_MAX_BYTES`` (default 1 GiB) is refused, and so is a gzip
that inflates past it or past ``DYNPROF_NB_GZIP_RATIO`` times its size (as for traces,
:mod:`dynprof_nb.traces.formats.common.budget`). What the dumps of one load build is counted
as it is built, against ``DYNPROF_NB_FR_MAX_BUILD`` (default 1 GiB, or the load memory
``DYNPROF_NB_LOAD_MEMORY`` when less): pickles by :mod:`.safe_pickle` (opcode by opcode, a
shared object each time it is used; nothing in a dump is ever imported or called), JSON by an
upper bound taken before parsing, and each entry's row in the frames (:data:`ROW_COST`).
Every field the frames use is checked by :mod:`.schema`.
"""

from __future__ import annotations

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

from dynprof_nb.flight_recorder import safe_pickle, schema
from dynprof_nb.traces.errors import TraceFormatError
from dynprof_nb.traces.formats.common import budget

DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MAX_BUILD = safe_pickle.DEFAULT_BUDGET
ROW_COST = 512  # an entry's row in the frames, charged with the dump (measured: 540 B at peak)
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


def max_build() -> int:
    """What the dumps of one load may build, in bytes (see the module's doc)."""
    raw = os.environ.get("DYNPROF_NB_FR_MAX_BUILD", "").strip()
    try:
        limit = budget.parse_size(raw) if raw else DEFAULT_MAX_BUILD
    except ValueError:
        limit = DEFAULT_MAX_BUILD
    return max(1, min(limit, budget.load_memory()))


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
    budget.check_memory(path, size, "reading this dump")
    with open(path, "rb") as fh:
        data = fh.read(size + 1)  # read(n) reserves n bytes: not the limit, the file
        if len(data) > size:  # it grew since: on, up to the limit
            data += fh.read(limit + 1 - len(data))
    if len(data) > limit:
        raise budget.too_big(path, "a dump growing while read", budget.human(limit))
    if data[:2] != b"\x1f\x8b":
        return data
    cap, words = budget.inflate_limit(path, len(data))
    if limit < cap:
        cap, words = limit, f"{budget.human(limit)} (set DYNPROF_NB_FR_MAX_BYTES to raise it)"
    budget.check_memory(path, cap, "inflating this dump")
    parts, total = [], 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
            while total <= cap:  # by the megabyte: read(n) reserves n bytes at once
                part = gz.read(min(1 << 20, cap + 1 - total))
                if not part:
                    break
                parts.append(part)
                total += len(part)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFormatError(path, f"a damaged gzip: {exc}") from None
    if total > cap:
        raise budget.too_big(path, "this gzip inflates", words)
    return b"".join(parts)


def _json_int(text: str) -> int:
    if len(text) > 40:  # int() of a long digit string is slow, then refused past 4,300
        raise ValueError(f"an integer of {len(text):,} digits")
    return int(text)


def _json_cost(data: bytes) -> int:
    """An upper bound on what ``json.loads(data)`` builds, in bytes, from a few counts:
    a container per bracket, an item per comma or colon, a string at most 4 bytes a byte."""
    brackets = data.count(b"[") + data.count(b"{")
    separators = data.count(b",") + data.count(b":")
    return 96 * brackets + 72 * separators + 4 * len(data) + 1024


def _json_tree(value: Any, path: Path) -> None:
    """The pickle reader's caps, on a JSON value: nesting, items, string lengths."""
    todo = [(value, 1)]
    while todo:
        item, level = todo.pop()
        if level > safe_pickle.MAX_DEPTH:
            raise TraceFormatError(path, f"JSON nested over {safe_pickle.MAX_DEPTH} deep")
        if len(item) > safe_pickle.MAX_ITEMS:
            raise TraceFormatError(path, f"a JSON value of over {safe_pickle.MAX_ITEMS:,} items")
        for x in item.values() if isinstance(item, dict) else item:
            if isinstance(x, (dict, list)):
                todo.append((x, level + 1))
            elif isinstance(x, str) and len(x) > safe_pickle.MAX_STRING:
                raise TraceFormatError(path, f"a JSON string of {len(x):,} characters")


def _decode(data: bytes, path: Path, allowed: int) -> tuple[dict[str, Any], int]:
    """The dump's value and what building it was charged (at most ``allowed``)."""
    head = data.lstrip()[:1]
    if head == b"{":
        spent = _json_cost(data)
        if spent > allowed:
            raise TraceFormatError(
                path,
                f"this JSON dump may build up to {budget.human(spent)} of objects, over the "
                f"limit of {budget.human(allowed)}",
                hint="the dumps of one load share DYNPROF_NB_FR_MAX_BUILD (default 1 GiB): "
                "set it higher to read this",
            )
        try:
            value = json.loads(data, parse_int=_json_int)
        except (ValueError, RecursionError) as exc:
            raise TraceFormatError(path, f"not a readable JSON dump: {exc}") from None
        if isinstance(value, dict):
            _json_tree(value, path)
    elif data[:4] == b"PK\x03\x04":
        raise TraceFormatError(
            path, "a zip archive, not a Flight Recorder dump", hint="unzip it and load the files"
        )
    elif data[:1] == b"\x80":  # pickle protocol 2 and later, what torch writes
        value, spent = safe_pickle.loads_counted(data, path, allowed)
    else:  # protocols 0 and 1 have no header: refused the same way if they name a callable
        try:
            value, spent = safe_pickle.loads_counted(data, path, allowed)
        except TraceFormatError as exc:
            if "not a readable pickle" not in str(exc):
                raise
            raise TraceFormatError(
                path,
                "not a Flight Recorder dump (neither a pickle nor JSON)",
                hint="dumps are the files torch writes on a watchdog timeout or on request",
            ) from None
    if not isinstance(value, dict) or not isinstance(value.get("entries", []), list):
        raise TraceFormatError(path, "not a Flight Recorder dump: no 'entries' list at its top")
    return value, spent


def ranks_of(spec: Any) -> list[int]:
    """``ranks`` of a pg_config entry (the recorder writes the list's repr, ``'[0, 1]'``), or
    [] when it is none (the reader itself refuses such a dump, naming the field)."""
    try:
        return schema.Checker("ranks").ranks(spec, "ranks")
    except TraceFormatError:
        return []


def _rank_of(
    path: Path, value: dict[str, Any], pg_config: dict[str, dict[str, Any]], check: schema.Checker
) -> int:
    if value.get("rank") is not None:
        return check.rank(value["rank"], "rank")
    name = path.name
    for _ in range(3):
        lower = name.lower()
        for suffix in _SUFFIXES:
            if lower.endswith(suffix):
                name = name[: -len(suffix)]
                break
    m = _TRAILING_RANK.search(name)
    if m and len(m.group(1)) <= 10 and int(m.group(1)) <= schema.MAX_RANK:
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


def _key(key: Any) -> str:
    """A dict key as an error names it: its repr, cut short."""
    text = repr(key[:41] if isinstance(key, str) else key) if isinstance(key, (str, int)) else "?"
    return text if len(text) <= 42 else text[:40] + "...'"


def _mapping(value: Any, field: str, check: schema.Checker) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise check.error(field, "a dict", value)
    return value


def read_dump(
    path: str | Path, allowed: int | None = None, cache: dict[str, list[int]] | None = None
) -> Dump:
    """One dump file, checked: its entries, process groups and status, and its rank. It may
    build ``allowed`` bytes (:func:`max_build` by default); ``cache`` shares parsed rank
    lists between the dumps of one load."""
    return _read(Path(path), max_build() if allowed is None else allowed, cache)[0]


def _read(p: Path, allowed: int, cache: dict[str, list[int]] | None) -> tuple[Dump, int]:
    value, spent = _decode(_read_bytes(p), p, allowed)
    check = schema.Checker(p, cache)
    pg_config: dict[str, dict[str, Any]] = {}
    for key, cfg in _mapping(value.get("pg_config"), "pg_config", check).items():
        group = check.group(key, cfg, f"pg_config[{_key(key)}]")
        if group is not None:  # None: gloo's placeholder, no group recorded
            pg_config[group[0]] = {"desc": group[1], "ranks": group[2]}
    status = {}
    for key, st in _mapping(value.get("pg_status"), "pg_status", check).items():
        check.status(key, st, f"pg_status[{_key(key)}]")
        status[str(key)] = st
    entries = value.get("entries") or []
    spent += ROW_COST * len(entries)
    if spent > allowed:
        raise TraceFormatError(
            p,
            f"its {len(entries):,} entries, with their rows in the frames, take over "
            f"{budget.human(allowed)}",
            hint="the dumps of one load share DYNPROF_NB_FR_MAX_BUILD (default 1 GiB): set it "
            "higher to read this",
        )
    for i, e in enumerate(entries):
        check.entry(e, f"entries[{i}]")
    version = value.get("version", "")
    if not isinstance(version, (int, float)):
        check.name(version, "version")
    extra = {
        k: v
        for k, v in value.items()
        if isinstance(k, str)
        and k not in ("entries", "pg_config", "pg_status")
        and isinstance(v, (str, int, float))
    }
    dump = Dump(
        path=str(p),
        rank=_rank_of(p, value, pg_config, check),
        version=str(version if version is not None else ""),
        entries=entries,
        pg_config=pg_config,
        pg_status=status,
        extra=extra,
    )
    return dump, spent


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
    left, cache = max_build(), {}
    for f in files:
        if f in skipped:
            continue
        d, spent = _read(f, left, cache)
        left = max(1, left - spent)  # the dumps of one load share one budget
        if d.rank in dumps:
            raise TraceFormatError(
                f, f"a second dump for rank {d.rank} (the first is {dumps[d.rank].path})"
            )
        dumps[d.rank] = d
    return [dumps[r] for r in sorted(dumps)]
