"""SQL over a window's frames: ``w.sql("select ...")``, in-process with DuckDB.

Each frame is a table of the same name and columns (``events``, ``ops``, ``steps``,
``kernels``, ``memory``, ``communication``: docs/definitions.md), and so are the side tables
``communication_links``, ``communication_bandwidth`` and ``memory_copies``. Only the tables a
query names are read: DuckDB's own parser and binder say which (its ``get_table_names``, and a
table it cannot find is made and the query bound again), so ``select * from ops`` never builds
the events.

Where a frame comes from, best first:

- the frame already in memory (it was read before): DuckDB scans the DataFrame in place;
- the frame cache's Parquet entry (:func:`dynprof_nb.traces.cache.entry_file`): a view over
  ``read_parquet`` that decodes the entry's columns in SQL (categorical codes looked up in
  their categories, tagged object cells untagged: :mod:`dynprof_nb.traces.cache.codec`), so
  DuckDB reads only the columns and row groups the query needs and the frame is never built
  in Python. A Kineto trace's events are written there by the load's first pass without ever
  being a frame: ``select`` over them costs the columns it reads, not the events frame;
- else the frame is read as ``w.<frame>`` reads it (and so cached for next time).

A multi-rank window's tables are its ranks' pieces (each from the best of those three) under
``UNION ALL BY NAME``, with the ``rank`` (and ``device``) columns its frames have. A frame held
out of core (a Dask frame) is written to Parquet one partition at a time in the query's private
spill folder and read from there. DuckDB keeps to the readers' memory budget and spills to that
folder, removed after the query.

Categorical columns are plain text (or the categories' own type) in SQL, whichever the source,
so an answer does not depend on whether the cache was on.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from typing import Any

import pandas as pd

from dynprof_nb.traces import cache
from dynprof_nb.traces.cache import codec
from dynprof_nb.traces.interface import Window
from dynprof_nb.traces.multirank import MultiRankWindow
from dynprof_nb.traces.partitioned import is_out_of_core
from dynprof_nb.traces.window import FRAMES

#: the side tables beyond the frames: table name -> the window method that gives it
SIDE_TABLES = {
    "communication_links": "communication_links",
    "communication_bandwidth": "communication_bandwidth",
    "memory_copies": "memory_copies",
}
TABLES = (*FRAMES, *SIDE_TABLES)

INSTALL = "pip install 'dynprof_nb[sql]'  (or: pip install 'duckdb>=1.2')"

_MISSING_TABLE = re.compile(r"Table with name \"?([^\s\"!]+)\"? does not exist", re.IGNORECASE)


def duckdb_module() -> Any:
    """The ``duckdb`` module, or an ImportError that says how to install it."""
    from dynprof_nb.optional import state

    s = state("SQL")
    if not s.on:
        raise ImportError(f"w.sql needs DuckDB, and {s.why}. To turn it on: {INSTALL}")
    import duckdb

    version = tuple(int(p) for p in re.findall(r"\d+", duckdb.__version__)[:2])
    if version < (1, 2):  # its answers give a nullable int column as float64: ns timestamps lost
        raise ImportError(f"w.sql needs DuckDB 1.2 or newer, not {duckdb.__version__}: {INSTALL}")
    return duckdb


def sql(window: Window, query: str) -> pd.DataFrame:
    """The answer to ``query`` over ``window``'s tables (see the module docstring), as a
    pandas DataFrame. The connection is the query's own, in memory, closed after it. A cache
    entry removed while the query ran (another process keeping the cache to its bound) is a
    query asked again without the cache's files, never a failed one."""
    duckdb = duckdb_module()
    try:
        return _answer(duckdb, window, query, entries=True)
    except duckdb.IOException as exc:
        from dynprof_nb.traces.cache import cache_dir

        where = cache_dir()
        if where is None or str(where) not in str(exc):
            raise
        return _answer(duckdb, window, query, entries=False)


def _answer(duckdb: Any, window: Window, query: str, entries: bool) -> pd.DataFrame:
    """``query`` on a new connection; ``entries``: whether tables may be cache entries."""
    con, spill = _connect(duckdb)
    try:
        tables = _Tables(window, con, spill, entries)
        for name in _named(duckdb, query):
            tables.make(name)
        while True:
            try:
                return con.execute(query).df()
            except duckdb.CatalogException as exc:
                found = _MISSING_TABLE.search(str(exc))
                if found is None or not tables.make(found.group(1)):
                    if found is not None and found.group(1).lower() not in TABLES:
                        raise duckdb.CatalogException(
                            f"{exc}\nThis window's tables: {', '.join(TABLES)}"
                        ) from None
                    raise
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def _connect(duckdb: Any) -> tuple[Any, str]:
    """A new in-memory connection held to the readers' memory budget
    (``DYNPROF_NB_LOAD_MEMORY``, default the memory available), spilling what does not fit to
    a private temporary directory (never DuckDB's default ``./.tmp`` beside the notebook),
    which the caller removes."""
    from dynprof_nb.traces.formats.common import budget

    spill = tempfile.mkdtemp(prefix="dynprof_nb-sql-")
    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{max(budget.load_memory(), 64 << 20)}B'")
    con.execute(f"SET temp_directory = {_literal(spill)}")
    return con, spill


def sql_over(tables: dict[str, pd.DataFrame], query: str) -> pd.DataFrame:
    """The answer to ``query`` over the DataFrames ``tables`` (name -> frame), e.g. the
    per-rank answers a cluster window brings back, combined here."""
    con, spill = _connect(duckdb_module())
    try:
        for name, frame in tables.items():
            con.execute(f"CREATE VIEW {_ident(name)} AS {_frame_select(con, frame, name)}")
        return con.execute(query).df()
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def _named(duckdb: Any, query: str) -> set[str]:
    """The tables ``query`` names, by DuckDB's own parser (empty where it cannot tell: the
    query's binding then names the rest, one at a time)."""
    try:
        return {n.lower() for n in duckdb.get_table_names(query)}
    except Exception:  # noqa: BLE001  (binding needs tables made: the retry loop makes them)
        return set()


class _Tables:
    """The window's tables, each made in ``con`` once, when a query first names it."""

    def __init__(self, window: Window, con: Any, spill: str, entries: bool) -> None:
        self.window = window
        self.entries = entries  # whether a table may be read from the frame cache's files
        self.con = con
        self.spill = spill  # the query's private folder: out-of-core frames are written there
        self.made: set[str] = set()

    def make(self, name: str) -> bool:
        """Make table ``name`` (any case); False if the window has no such table or it is
        made already (the query's error is then its own)."""
        name = name.lower()
        if name not in TABLES or name in self.made:
            return False
        self.made.add(name)
        if name in SIDE_TABLES:
            frame = getattr(self.window, SIDE_TABLES[name])()
            self.con.execute(f"CREATE VIEW {name} AS {_frame_select(self.con, frame, name)}")
            return True
        pieces = _pieces(self.window, name, self.entries)
        selects = [
            _piece_select(self.con, piece, f"{name}_{i}", extra, self.spill)
            for i, (piece, extra) in enumerate(pieces)
        ]
        body = " UNION ALL BY NAME ".join(f"({s})" for s in selects)
        self.con.execute(f"CREATE VIEW {name} AS {body}")
        return True


Piece = Any  # a pandas frame, a Dask frame, or (entry path, entry metadata)


def _pieces(window: Window, kind: str, entries: bool) -> list[tuple[Piece, dict[str, Any]]]:
    """Frame ``kind`` of ``window`` as pieces, each with the constant columns to add (a
    multi-rank window's ``rank`` and ``device``)."""
    if not isinstance(window, MultiRankWindow) or window.loaded(kind):
        piece = _rank_piece(window, kind, entries)
        return [(window.frame(kind) if piece is None else piece, {})]
    ranks = list(zip(window.ranks, window.children, strict=True))
    got = [_rank_piece(c, kind, entries) for _, c in ranks]
    if None in got and kind == "events" and entries and cache.enabled():
        window.frame("steps")  # the ranks' first passes write their events to the cache
        got = [
            g if g is not None else _rank_piece(c, kind, entries)
            for g, (_, c) in zip(got, ranks, strict=True)
        ]
    if None in got:  # read as the window reads it (in parallel), the ranks' columns added
        return [(window.frame(kind), {})]
    out = []
    for piece, (rank, child) in zip(got, ranks, strict=True):
        extra: dict[str, Any] = {"rank": rank}
        if "device" not in _columns(piece):
            extra["device"] = child.device
        out.append((piece, extra))
    return out


def _rank_piece(w: Window, kind: str, entries: bool) -> Piece | None:
    """One rank's frame ``kind``: in memory if read, else its cache entry (with
    ``entries``), else None."""
    if w.loaded(kind):
        return w.frame(kind)
    return cache.entry_file(w, kind) if entries else None


def _columns(piece: Piece) -> list[str]:
    if isinstance(piece, tuple):
        return [c["name"] for c in piece[1]["columns"]]
    return list(piece.columns)


def _piece_select(con: Any, piece: Piece, name: str, extra: dict[str, Any], spill: str) -> str:
    """A SELECT of ``piece`` (registered in ``con`` under names starting ``name``), with the
    ``extra`` constant columns."""
    if isinstance(piece, tuple):
        select = _entry_select(con, piece[0], piece[1], name)
    elif is_out_of_core(piece):
        files = _export(piece, os.path.join(spill, name))
        select = f"SELECT * FROM read_parquet([{', '.join(_literal(f) for f in files)}])"
    else:
        select = _frame_select(con, piece, name)
    adds = [f"CAST({_literal(v)} AS BIGINT) AS {_ident(k)}" for k, v in extra.items()]
    return select if not adds else f"SELECT *, {', '.join(adds)} FROM ({select})"


def _frame_select(con: Any, frame: pd.DataFrame, name: str) -> str:
    """``frame`` registered in ``con`` (scanned in place), its categorical columns of text as
    text: DuckDB makes them ENUMs, and the cache's path gives text."""
    try:
        con.register(f"{name}_frame", frame)
    except Exception:  # noqa: BLE001  pandas 3's str dtype, which DuckDB < 1.3 does not scan
        con.register(f"{name}_frame", _without_str_dtype(frame))
    text = [
        c
        for c in frame.columns
        if isinstance(frame[c].dtype, pd.CategoricalDtype)
        and not pd.api.types.is_numeric_dtype(frame[c].dtype.categories.dtype)
    ]
    if not text:
        return f"SELECT * FROM {name}_frame"
    casts = ", ".join(f"CAST({_ident(c)} AS VARCHAR) AS {_ident(c)}" for c in text)
    return f"SELECT * REPLACE ({casts}) FROM {name}_frame"


def _without_str_dtype(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its pandas-3 ``str`` columns, and categoricals of text or of mixed
    values, as object columns of text (those columns only are copied): what an older DuckDB
    scans, with the values a newer one gives."""
    out = {}
    for c in frame.columns:
        s = frame[c]
        text = isinstance(s.dtype, pd.StringDtype) or (
            isinstance(s.dtype, pd.CategoricalDtype)
            and not pd.api.types.is_numeric_dtype(s.dtype.categories.dtype)
        )
        if text:
            cells = [None if pd.isna(v) else str(v) for v in s.astype(object)]
            out[c] = pd.Series(cells, index=frame.index, dtype=object)  # (never str again)
    return frame.assign(**out) if out else frame


def _entry_select(con: Any, path: Any, meta: dict, name: str) -> str:
    """A SELECT over a cache entry's Parquet file that gives the frame's columns under their
    names: a categorical's codes looked up in its categories (a one-row list table, registered
    in ``con``), an object column's tagged cells untagged (missing ones NULL)."""
    import pyarrow as pa

    at = 0 if "range" in meta["index"] else 1  # (an index that is no range is column c0)
    exprs = []
    for i, spec in enumerate(meta["columns"]):
        col = f"c{i + at}"
        if spec["kind"] == "category":
            cats = codec.categories(spec)
            numeric = pd.api.types.is_numeric_dtype(cats.dtype)
            values = cats.tolist() if numeric else [str(c) for c in cats]
            kind = None if numeric and len(values) else pa.string()
            table = f"{name}_cats{i}"
            con.register(table, pa.table({"v": pa.array([values], type=_list_of(kind))}))
            expr = f"CASE WHEN {col} >= 0 THEN (SELECT v FROM {table})[{col} + 1] END"
        elif spec["kind"] == "object":
            missing = ", ".join(_literal(m) for m in codec.MISSING_CELLS)
            expr = f"CASE WHEN {col} IN ({missing}) THEN NULL ELSE {col}[2:] END"
        else:
            expr = col
        exprs.append(f"{expr} AS {_ident(spec['name'])}")
    return f"SELECT {', '.join(exprs)} FROM read_parquet({_literal(str(path))})"


def _list_of(kind: Any) -> Any:
    import pyarrow as pa

    return None if kind is None else pa.list_(kind)


def _export(frame: Any, folder: str) -> list[str]:
    """An out-of-core (Dask) frame written to Parquet in ``folder`` (inside the query's private
    spill folder, removed after it), one file per partition, each computed in this process
    and freed before the next: the whole frame is never in memory, and DuckDB reads the files
    as often as the query names the table. Text categoricals as text, so the partitions'
    categories need not agree; the first file's schema is every file's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.mkdir(folder, 0o700)
    files, schema = [], None
    for i, d in enumerate(frame.to_delayed()):
        part = _without_str_dtype(d.compute(scheduler="sync"))
        cats = [c for c in part.columns if isinstance(part[c].dtype, pd.CategoricalDtype)]
        part = part.astype({c: _values_dtype(part[c]) for c in cats})
        if schema is None:  # a column all missing in the first partition: text, as the others
            first = pa.Schema.from_pandas(part, preserve_index=False)
            schema = pa.schema(
                [f.with_type(pa.string()) if pa.types.is_null(f.type) else f for f in first]
            )
        path = os.path.join(folder, f"{i}.parquet")
        pq.write_table(pa.Table.from_pandas(part, schema=schema, preserve_index=False), path)
        files.append(path)
    return files


def _values_dtype(column: pd.Series) -> Any:
    """The dtype a categorical column's values keep out of it (object where one is missing)."""
    return object if column.isna().any() else column.dtype.categories.dtype


def _ident(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (int, float)):
        return repr(int(value)) if isinstance(value, int) else repr(value)
    return "'" + str(value).replace("'", "''") + "'"
