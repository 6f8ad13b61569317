"""Dumps into DataFrames: one row per recorded collective, one per process group, one per
group status line (what :func:`dynprof_nb.flight_recorder.load` returns).

The dumps come checked (:mod:`.schema`): ``process_group`` is a pair of short strings, sizes
and frames have their shapes. Nothing here expands a value: a field is taken as it is, or as
its string when short, and a rank list shared by many groups is made a tuple once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from dynprof_nb.flight_recorder.reader import Dump, read_dumps

ENTRY_COLUMNS = [
    "rank",
    "pg_id",
    "pg_desc",
    "collective_seq_id",
    "p2p_seq_id",
    "op",
    "input_sizes",
    "output_sizes",
    "dtypes",
    "state",
    "time_created_ns",
    "time_started_ns",
    "time_completed_ns",
    "timeout_ms",
    "thread",
    "frames",
    # beyond the list: what the analysis and a reader also need
    "backend",
    "profiling_name",
    "is_p2p",
    "output_dtypes",
    "record_id",
    "pg_uid",
]
PG_COLUMNS = ["pg_id", "pg_desc", "ranks", "size", "inferred"]
STATUS_COLUMNS = ["rank", "pg_uid", "pg_id", "last_enqueued", "last_started", "last_completed"]


class FRFrame(pd.DataFrame):
    """The entries of a set of dumps, with their process groups (``.pg_config``), the groups'
    status per rank (``.pg_status``), the ranks whose file was read (``.ranks``, an empty dump
    included) and the files (``.files``)."""

    _metadata = ["pg_config", "pg_status", "ranks", "files", "versions"]

    @property
    def _constructor(self) -> type[FRFrame]:
        return FRFrame


def _op(profiling_name: str) -> tuple[str, str]:
    """``(backend, op)`` of ``nccl:all_reduce`` / ``gloo:send 0->1``; torch_npu's HCCL
    recorder leaves the name empty (no profiling there): the op is then ``collective``."""
    backend, _, name = profiling_name.partition(":")
    if not name:
        return "", backend or "collective"
    return backend, name.split(" ")[0]


def _pg(entry: dict[str, Any]) -> tuple[str, str]:
    """(name, desc) of an entry's ``process_group`` (a checked pair; absent: empty)."""
    pair = entry.get("process_group") or ()
    name = pair[0] if len(pair) > 0 else ""
    desc = pair[1] if len(pair) > 1 else ""
    return str(name), str(desc)


def _ns(value: Any) -> Any:
    return value if isinstance(value, int) and value > 0 else None


def _columns(dumps: list[Dump]) -> dict[str, list[Any]]:
    """The entries of every dump, column by column (one pass per column: a dict per row cost
    twice as much for 2,000-entry dumps)."""
    rows = [(d.rank, e) for d in dumps for e in d.entries]
    es = [e for _, e in rows]
    pgs = [_pg(e) for e in es]
    names = [str(e.get("profiling_name", "")) for e in es]
    ops = [_op(n) for n in names]
    return {
        "rank": [r for r, _ in rows],
        "pg_id": [str(p[0]) for p in pgs],
        "pg_desc": [str(p[1]) for p in pgs],
        "collective_seq_id": [e.get("collective_seq_id") for e in es],
        "p2p_seq_id": [e.get("p2p_seq_id") for e in es],
        "op": [o[1] for o in ops],
        "input_sizes": [e.get("input_sizes") for e in es],
        "output_sizes": [e.get("output_sizes") for e in es],
        "dtypes": [e.get("input_dtypes") for e in es],
        "state": [e.get("state") for e in es],
        "time_created_ns": [_ns(e.get("time_created_ns")) for e in es],
        "time_started_ns": [_ns(e.get("time_discovered_started_ns")) for e in es],
        "time_completed_ns": [_ns(e.get("time_discovered_completed_ns")) for e in es],
        "timeout_ms": [e.get("timeout_ms") for e in es],
        "thread": [str(e.get("thread_name") or e.get("thread_id") or "") for e in es],
        "frames": [e.get("frames") or [] for e in es],
        "backend": [o[0] for o in ops],
        "profiling_name": names,
        "is_p2p": [
            bool(e.get("is_p2p", o[1] in ("send", "recv"))) for e, o in zip(es, ops, strict=True)
        ],
        "output_dtypes": [e.get("output_dtypes") for e in es],
        "record_id": [e.get("record_id") for e in es],
        "pg_uid": [str(e.get("pg_id", "")) for e in es],
    }


def groups_of(dumps: list[Dump]) -> pd.DataFrame:
    """One row per process group: its members from the dumps' ``pg_config``; a group no dump
    describes (gloo records none) gets the ranks seen using it (every rank read for
    ``default_pg``), marked ``inferred``."""
    rows: dict[tuple[str, tuple[int, ...]], dict[str, Any]] = {}
    tuples: dict[int, tuple[int, ...]] = {}  # the reader shares equal rank lists: one tuple each
    for d in dumps:
        for name, cfg in d.pg_config.items():
            ranks = tuples.get(id(cfg["ranks"]))
            if ranks is None:
                ranks = tuples[id(cfg["ranks"])] = tuple(cfg["ranks"])
            rows.setdefault(
                (name, ranks),
                {"pg_id": name, "pg_desc": cfg["desc"], "ranks": list(ranks), "size": len(ranks),
                 "inferred": False},
            )  # fmt: skip
    known = {name for name, _ in rows}
    seen: dict[str, tuple[str, set[int]]] = {}
    for d in dumps:
        for e in d.entries:
            name, desc = _pg(e)
            if name not in known:
                seen.setdefault(name, (desc, set()))[1].add(d.rank)
    everyone = {d.rank for d in dumps}
    for name, (desc, ranks) in seen.items():
        members = sorted(everyone if desc == "default_pg" else ranks)
        rows[(name, tuple(members))] = {
            "pg_id": name, "pg_desc": desc, "ranks": members, "size": len(members),
            "inferred": True,
        }  # fmt: skip
    frame = pd.DataFrame(list(rows.values()), columns=PG_COLUMNS)
    return frame.sort_values("pg_id", key=_numeric_first, kind="stable").reset_index(drop=True)


def _numeric_first(col: pd.Series) -> pd.Series:
    def key(s: Any) -> tuple[int, int, str]:
        text = str(s)
        if text.isascii() and text.isdigit() and len(text) <= 18:  # int() of more is slow
            return 0, int(text), ""
        return 1, 0, text

    return col.map(key)


def status_of(dumps: list[Dump]) -> pd.DataFrame:
    rows = []
    for d in dumps:
        names = {str(e.get("pg_id", "")): _pg(e)[0] for e in d.entries}
        for uid, st in d.pg_status.items():
            rows.append(
                {
                    "rank": d.rank,
                    "pg_uid": uid,
                    "pg_id": names.get(uid),
                    "last_enqueued": st.get("last_enqueued_collective"),
                    "last_started": st.get("last_started_collective"),
                    "last_completed": st.get("last_completed_collective"),
                }
            )
    return pd.DataFrame(rows, columns=STATUS_COLUMNS)


def frame_of(dumps: list[Dump]) -> FRFrame:
    frame = FRFrame(pd.DataFrame(_columns(dumps), columns=ENTRY_COLUMNS))
    for col in ("collective_seq_id", "p2p_seq_id", "record_id", "timeout_ms"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("Int64")
    for col in ("time_created_ns", "time_started_ns", "time_completed_ns"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("Int64")
    frame.pg_config = groups_of(dumps)
    frame.pg_status = status_of(dumps)
    frame.ranks = [d.rank for d in dumps]
    frame.files = {d.rank: d.path for d in dumps}
    frame.versions = {d.rank: d.version for d in dumps}
    return frame


def load(sources: str | Path | list[str | Path]) -> FRFrame:
    """Flight Recorder dumps (a directory, or files; pickle or JSON, gzipped or not; NCCL,
    gloo or HCCL) as one DataFrame of entries with ``.pg_config`` (the process groups and
    their members) and ``.pg_status``. Pickles are read without running anything."""
    return frame_of(read_dumps(sources))
