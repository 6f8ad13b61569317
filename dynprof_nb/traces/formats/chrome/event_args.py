"""One event's ``args`` read back from its trace file, on demand.

The events frame keeps no ``args`` (a 352k-event window would hold hundreds of MB of dicts
nobody reads); a person clicking one event in the interactive timeline wants them, once. So
the rank's Chrome trace files are scanned for the event with that name and start, with the
reader's own fast path (pieces cut at event boundaries, typed msgspec decode), bounded in size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from dynprof_nb.traces.formats.chrome import pieces as fastjson
from dynprof_nb.traces.formats.chrome.reader import read_bytes
from dynprof_nb.traces.formats.common.timestamps import tokens_us_to_ns

MAX_FILE_BYTES = 1 << 30  # past this a click would stall the kernel for many seconds


class _Named(msgspec.Struct, gc=False):
    name: Any = None
    ts: msgspec.Raw = msgspec.Raw(b"null")
    args: msgspec.Raw = msgspec.Raw(b"null")


_DECODE = msgspec.json.Decoder(list[_Named])


def _rank_window(window: Any, rank: int) -> Any:
    for child in getattr(window, "children", None) or []:
        if child.rank == rank:
            return child
    return window


def trace_files(window: Any, rank: int) -> list[Path]:
    """The JSON trace files the events of ``rank`` were read from (none for a database)."""
    src = (_rank_window(window, rank).sources or {}).get("events") or {}
    files = [Path(f) for f in src.get("files") or []]
    return [f for f in files if f.name.endswith((".json", ".json.gz"))]


def event_args(window: Any, rank: int, name: str, ts_ns: int) -> dict[str, Any] | str:
    """The ``args`` of the event of ``rank`` named ``name`` that starts at ``ts_ns`` (the
    events frame's clock), or a sentence saying why they cannot be shown."""
    files = trace_files(window, rank)
    if not files:
        return "not recorded in this window's format (no JSON trace to read them from)"
    for path in files:
        try:
            size = path.stat().st_size
        except OSError as exc:
            return f"the trace file cannot be read: {exc}"
        if size > MAX_FILE_BYTES:
            return f"not searched: {path.name} is {size / 2**30:.1f} GiB"
        found = _scan(path, name, ts_ns)
        if found is not None:
            return found
    return "none recorded"


def _scan(path: Path, name: str, ts_ns: int) -> dict[str, Any] | None:
    try:
        data, _ = read_bytes(path)
        top, pieces = fastjson.event_pieces(data)
    except Exception:  # a trace the fast path cannot cut (repaired on load): no args to show
        return None
    base = top.baseTimeNanoseconds if isinstance(top.baseTimeNanoseconds, int) else 0
    for piece in pieces:
        try:
            events = _DECODE.decode(piece)
        except msgspec.DecodeError:
            return None
        hits = [e for e in events if e.name == name]
        if not hits:
            continue
        raw = [bytes(e.ts) for e in hits]
        ts = tokens_us_to_ns(b"".join(raw), np.fromiter(map(len, raw), np.int64, len(raw)))
        for e, t in zip(hits, (ts + base).tolist(), strict=True):
            if t == ts_ns:
                args = msgspec.json.decode(e.args) if bytes(e.args) != b"null" else {}
                return args if isinstance(args, dict) else {"args": args}
    return None
