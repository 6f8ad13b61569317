"""SQL access to the Ascend profiler databases, kept apart from what the frames mean.

What real files do that a naive reader trips on, handled once here: WAL mode (opened with
``immutable=1``, so sqlite never writes ``-wal``/``-shm`` beside the file and a read-only folder
works), integer times stored as TEXT (cast in SQL, so they stay exact int64 ns), names stored as
ids into ``STRING_IDS``, and tables or columns a profiler level or CANN version does not write
(an optional column reads as NULL; a required one raises a ``TraceFormatError`` naming the file,
table and column).
"""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import stat
import tempfile
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dynprof_nb.traces.errors import TraceFormatError, TraceRepairWarning, warn
from dynprof_nb.traces.formats.common import budget

SQLITE_MAGIC = b"SQLite format 3\x00"
DAMAGED = "the database is truncated, damaged or of an unknown schema version; re-export it"


def connect(path: str | Path, limit_values: bool = True) -> sqlite3.Connection:
    """Open read-only and immutable (never writes beside the file, works in read-only folders).

    A database with a non-empty ``-wal`` beside it is read from a private copy with that WAL
    applied (:func:`committed`), so its committed content is what is read. With
    ``limit_values``, SQLite refuses any string or blob longer than the value budget
    (``DYNPROF_NB_DB_MAX_VALUE``)."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise TraceFormatError(p, f"cannot open it: {exc}", offset=0) from exc
    if head != SQLITE_MAGIC:
        raise TraceFormatError(
            p,
            "not a SQLite database (bad header)",
            offset=0,
            hint="the profiler may still be writing it, or it is not a .db",
        )
    uri = "file:" + urllib.parse.quote(str(committed(p).resolve())) + "?immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True, check_same_thread=False)
        if limit_values:
            set_length_limit(con, budget.db_max_value())
        con.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(
            p,
            f"not a readable SQLite database ({exc})",
            offset=0,
            hint="the file is truncated or damaged; re-export it",
        ) from exc
    return con


def set_length_limit(con: sqlite3.Connection, n: int) -> None:
    """SQLite's own limit on the length of any string or blob (``SQLITE_LIMIT_LENGTH``): a
    longer value fails its query with "string or blob too big" before it is built.
    ``Connection.setlimit`` is Python 3.11+; on 3.10 the same C call, ``sqlite3_limit``, is made
    on the connection's handle through ctypes, so a 3.10 user gets the same budget."""
    if hasattr(con, "setlimit"):
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, n)
        return
    _limit_310(con, n)


_SQLITE3_LIMIT = None


def _limit_310(con: sqlite3.Connection, n: int) -> None:
    """``sqlite3_limit(db, SQLITE_LIMIT_LENGTH, n)`` on CPython 3.10, whose
    ``pysqlite_Connection`` has the ``sqlite3 *db`` handle right after its object header (the
    layout of 3.6 to 3.10, which get no new features). Checked by reading the limit back."""
    import _sqlite3
    import ctypes
    import sys

    if sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 10):
        raise RuntimeError(
            f"no way to limit SQLite value lengths on {sys.implementation.name} "
            f"{sys.version.split()[0]}; use CPython 3.10+ (3.11+ has Connection.setlimit)"
        )
    global _SQLITE3_LIMIT
    if _SQLITE3_LIMIT is None:  # the sqlite3_limit that _sqlite3 itself calls
        limit = ctypes.CDLL(_sqlite3.__file__).sqlite3_limit
        limit.restype = ctypes.c_int
        limit.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        _SQLITE3_LIMIT = limit
    limit = _SQLITE3_LIMIT
    db = ctypes.c_void_p.from_address(id(con) + object.__basicsize__).value
    limit(db, 0, n)  # 0: SQLITE_LIMIT_LENGTH (sqlite3 of 3.10 does not name it)
    if limit(db, 0, -1) > n:  # -1 reads it back (at most SQLite's compiled-in maximum)
        raise RuntimeError("sqlite3_limit did not take: SQLite value lengths are not limited")


_WAL_COPIES: dict[tuple, Path] = {}


def committed(p: Path) -> Path:
    """``p`` itself, or when a non-empty ``-wal`` lies beside it (a live profiler's database,
    or one copied with its WAL), a private copy (0700 temp dir, removed at exit) with the WAL
    checkpointed into it: ``immutable=1`` alone would read the last checkpoint and silently miss
    every commit since. Nothing is written beside ``p``. When the copy cannot be made, the file
    is read as last checkpointed, with a warning that says so."""
    wal = p.with_name(p.name + "-wal")
    try:
        ws, ds = wal.stat(), p.stat()
    except OSError:
        return p
    if not ws.st_size or not stat.S_ISREG(ws.st_mode):
        return p
    key = (str(p.resolve()), ds.st_size, ds.st_mtime_ns, ws.st_size, ws.st_mtime_ns)
    copy = _WAL_COPIES.get(key)
    if copy is not None and copy.exists():
        return copy
    tmp = Path(tempfile.mkdtemp(prefix="dynprof_nb-wal-"))
    atexit.register(shutil.rmtree, tmp, True)
    copy = tmp / "copy.db"
    try:
        shutil.copyfile(p, copy)
        shutil.copyfile(wal, tmp / "copy.db-wal")
        con = sqlite3.connect(copy)
        try:
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            con.execute("PRAGMA journal_mode=DELETE").fetchall()
        finally:
            con.close()
    except (OSError, sqlite3.DatabaseError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        warn(
            TraceRepairWarning(
                f"{p}: its write-ahead log {wal.name} was NOT applied ({exc}): reading the "
                "database as last checkpointed, which misses what was committed since"
            ),
            stacklevel=3,
        )
        return p
    _WAL_COPIES[key] = copy
    return copy


@dataclass(frozen=True)
class Col:
    """One selected column: ``src`` in the table, returned as ``alias``.

    kind: ``raw`` (as stored), ``ns`` (an integer time, possibly stored as TEXT: exact int64),
    ``str`` (an id into STRING_IDS, resolved to its string) or ``enum:TABLE`` (an id into an
    ``ENUM_*`` table's ``name``). ``required`` columns raise when absent; others read as NULL.
    """

    src: str
    alias: str
    kind: str = "raw"
    required: bool = False


def ns(src: str, alias: str, required: bool = True) -> Col:
    return Col(src, alias, "ns", required)


def text(src: str, alias: str, required: bool = False) -> Col:
    return Col(src, alias, "str", required)


def raw(src: str, alias: str, required: bool = False) -> Col:
    return Col(src, alias, "raw", required)


def enum(src: str, table: str, alias: str) -> Col:
    return Col(src, alias, "enum:" + table)


class DbFile:
    """One SQLite file: its table list (read once), STRING_IDS (read once, when first needed)
    and queries into frames. Every query opens its own immutable connection, so the object
    pickles and many can be read in parallel."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._tables: dict[str, list[str]] | None = None
        self._types: dict[str, dict[str, str]] = {}
        self._strings: dict[int, str] | None = None

    @property
    def tables(self) -> dict[str, list[str]]:
        """Table name -> its column names."""
        if self._tables is None:
            self._types = table_columns(self.path)
            self._tables = {t: list(cols) for t, cols in self._types.items()}
        return self._tables

    def int_affinity(self, table: str, col: str) -> bool:
        """Whether ``col`` is declared an integer (then sqlite stores any text or real that is
        a whole number as an integer, so only other text and reals stay non-integer)."""
        _ = self.tables
        return "INT" in self._types.get(table, {}).get(col, "").upper()

    def has(self, *tables: str) -> bool:
        return all(t in self.tables for t in tables)

    def columns(self, table: str) -> list[str]:
        return self.tables.get(table, [])

    def require(self, table: str, cols: Sequence[str]) -> None:
        """Raise a TraceFormatError naming the file, table and columns when any is absent."""
        have = self.tables.get(table)
        if have is None:
            raise TraceFormatError(
                self.path,
                f"table {table} is missing",
                hint=f"tables present: {', '.join(sorted(self.tables)) or 'none'}; "
                "re-export the window at a profiler level that writes it",
            )
        lost = [c for c in cols if c not in have]
        if lost:
            raise TraceFormatError(
                self.path,
                f"table {table} has no column {', '.join(lost)} (it has {', '.join(have)})",
                hint="an unknown schema version, or a damaged export",
            )

    def query(self, sql: str, what: str = "", strings: Sequence[str] = ()) -> pd.DataFrame:
        """Rows of ``sql`` as a frame; the ``strings`` columns hold STRING_IDS ids and come back
        as strings (resolved here once per distinct id: far faster than a join)."""
        con = connect(self.path)
        try:
            cur = con.execute(sql)
            cols = [d[0] for d in cur.description]
            df = frame(cur.fetchall(), cols)
        except sqlite3.DatabaseError as exc:
            raise read_error(self.path, what or "a table", exc) from exc
        finally:
            con.close()
        if strings and "STRING_IDS" in self.tables:
            for c in cols:
                if c in strings:
                    df[c] = self.resolve(df[c])
        return df

    def expr(self, table: str, alias: str, col: Col) -> str:
        """The SQL for one column of ``table`` (aliased ``alias``); NULL when it is absent."""
        if col.src not in self.columns(table):
            return f"NULL AS {col.alias}"
        ref = f"{alias}.{col.src}"
        if col.kind == "ns":
            return f"CAST({ref} AS INTEGER) AS {col.alias}"
        if col.kind.startswith("enum:") and col.kind[5:] in self.tables:
            return f"(SELECT name FROM {col.kind[5:]} WHERE id = {ref}) AS {col.alias}"
        return f"{ref} AS {col.alias}"

    def select(
        self,
        table: str,
        cols: Sequence[Col],
        *,
        what: str | None = None,
        distinct: bool = False,
        order: str | None = None,
    ) -> pd.DataFrame:
        """Read ``cols`` of ``table``: raise when the table or a required column is absent,
        NULL for an absent optional one, STRING_IDS names resolved, ``ns`` times exact."""
        self.require(table, [c.src for c in cols if c.required])
        sql = (
            f"SELECT {'DISTINCT ' if distinct else ''}"
            + ", ".join(self.expr(table, "t", c) for c in cols)
            + f' FROM "{table}" t'
            + (f" ORDER BY {order}" if order else "")
        )
        return self.query(sql, what or table, [c.alias for c in cols if c.kind == "str"])

    def int_columns(self, table: str, cols: Sequence[Col]) -> dict[str, IntColumn] | None:
        """Integer columns of ``table`` as numpy arrays, read column-wise: one aggregate query
        whose ``group_concat`` per column numpy parses in C. At 100k rows this is 3x faster
        than ``fetchall`` (which builds a Python tuple and int per value). A ``str`` column
        comes back as its STRING_IDS ids (see :meth:`strings`). ``None`` when a value is not
        an integer or NULL (text, real, blob), or the table is too large for one string: then
        the caller reads it with :meth:`select`, which keeps such values as they are."""
        self.require(table, [c.src for c in cols if c.required])
        have = self.columns(table)
        exprs = {
            c.alias: (f"CAST(t.{c.src} AS INTEGER)" if c.kind == "ns" else f"t.{c.src}")
            for c in cols
            if c.src in have
        }
        # NOT INDEXED: every query scans the table in rowid order (a covering index would be
        # scanned in its own order, and the NULL masks would not line up with the values)
        src = f'"{table}" t NOT INDEXED'
        # per column its values (group_concat skips NULLs) and how many there are (so a text
        # "1,2" cannot pass for two); a column not declared an integer also its max: text and
        # blobs sort above every number, so an integer max means there is none
        checked = [c.alias for c in cols if c.alias in exprs and not self._plain_int(table, c)]
        parts = ["count(*)", *(f"group_concat({e}), count({e})" for e in exprs.values())]
        parts += [f"max({exprs[a]})" for a in checked]
        row = self._one(f"SELECT {', '.join(parts)} FROM {src}", table)
        if row is None:
            return None
        n, out, holes = row[0], {}, []
        tops = row[1 + 2 * len(exprs) :]
        if any(top is not None and type(top) is not int for top in tops):
            return None
        for i, alias in enumerate(exprs):
            joined, count = row[1 + 2 * i], row[2 + 2 * i]
            values = _parse_ints(joined, count)
            if values is None:
                return None
            if count < n:
                holes.append(alias)
            out[alias] = IntColumn(values, None)
        if holes:  # columns with NULLs: read again with the NULLs as 0, and where they are
            parts = [
                f"group_concat(ifnull({exprs[a]}, 0)), group_concat({exprs[a]} IS NULL)"
                for a in holes
            ]
            row = self._one(f"SELECT {', '.join(parts)} FROM {src}", table) or ()
            for i, alias in enumerate(holes):
                values, mask = (_parse_ints(v, n) for v in row[2 * i : 2 * i + 2])
                if values is None or mask is None:
                    return None
                out[alias] = IntColumn(values, mask.astype(bool))
        for c in cols:
            if c.alias not in out:  # an optional column this file does not have: all NULL
                out[c.alias] = IntColumn(np.zeros(n, "int64"), np.ones(n, bool))
        return out

    def _plain_int(self, table: str, col: Col) -> bool:
        """Whether every non-NULL value of ``col`` prints as an integer or as something
        ``_parse_ints`` refuses: a CAST, or a column declared an integer."""
        return col.kind == "ns" or self.int_affinity(table, col.src)

    def _one(self, sql: str, what: str) -> tuple | None:
        """The one row of an aggregate query; None when it is too large for sqlite's strings."""
        con = connect(self.path, limit_values=False)
        try:
            return con.execute(sql).fetchone()
        except sqlite3.DataError:  # string or blob too big: over ~50M rows in one column
            return None
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, f"cannot read {what}: {exc}", hint=DAMAGED) from exc
        finally:
            con.close()

    @property
    def strings(self) -> dict[int, str]:
        """STRING_IDS as id -> string (read once)."""
        if self._strings is None:
            con = connect(self.path)
            try:
                n, size = con.execute(
                    "SELECT count(*), coalesce(sum(length(value)), 0) FROM STRING_IDS"
                ).fetchone()
                # as Python strings in a dict: the text, plus ~100 bytes per entry
                budget.check_memory(self.path, 2 * size + 100 * n, "reading its STRING_IDS")
                self._strings = dict(con.execute("SELECT id, value FROM STRING_IDS").fetchall())
            except sqlite3.DatabaseError as exc:
                raise read_error(self.path, "STRING_IDS", exc) from exc
            finally:
                con.close()
        return self._strings

    def read_all(self, table: str) -> pd.DataFrame:
        """Every column of ``table`` as stored (the analysis.db tables: plain values)."""
        self.require(table, ())
        return self.query(f'SELECT * FROM "{table}"', table)

    def resolve(self, ids: pd.Series) -> pd.Series:
        """STRING_IDS ids to their strings (an unknown id stays as its own text)."""
        strings = self.strings
        codes, uniq = pd.factorize(ids, use_na_sentinel=True)
        names = np.array(
            [strings.get(u, None if u is None else str(u)) for u in uniq] + [None],
            dtype=object,
        )
        return pd.Series(names[codes], index=ids.index, dtype=object)


@dataclass(frozen=True)
class IntColumn:
    """A column read by :meth:`DbFile.int_columns`: int64 values (0 where NULL) and the NULL
    mask (None when there is no NULL)."""

    values: np.ndarray
    mask: np.ndarray | None


def _integers_only(raw: bytes) -> bool:
    """``raw`` (digits, commas and minus signs only) is comma-separated integers: no empty
    field, and a minus sign only at the start of a field. Checked with bytes searches, not by
    turning numpy's parse warning into an error: warning filters are process-wide, and the
    ranks are read in threads (a regex would cost 20 ms per column of 93k values)."""
    if not raw or raw[:1] == b"," or raw[-1:] in (b",", b"-"):
        return False
    if b",," in raw or b"-," in raw or b"--" in raw:
        return False
    return raw.count(b"-") == raw.count(b",-") + (raw[:1] == b"-")


def _parse_ints(joined: str | None, n: int) -> np.ndarray | None:
    """``group_concat`` text of ``n`` integers to int64 (exact over the whole int64 range); None
    when it holds anything else: a real ("1.5"), text, a sign alone (which numpy reads as 0),
    or another count of values. The one thing it cannot tell from an integer is a BLOB of
    ASCII digits."""
    if joined is None:  # no row, or every value NULL
        return np.empty(0, "int64") if n == 0 else None
    raw = joined.encode()
    if raw.translate(None, b"0123456789,-") or not _integers_only(raw):
        return None  # checked first: numpy would warn and stop at text it cannot parse
    values = np.fromstring(joined, dtype=np.int64, sep=",")
    if len(values) != n or np.count_nonzero(values < 0) != raw.count(b"-"):
        return None
    return values


def frame(rows: list[tuple], cols: list[str]) -> pd.DataFrame:
    """Rows to columns: int64 where a column holds only integers, float64 where it holds only
    numbers, else object (several times faster than DataFrame.from_records)."""
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    data = {}
    for c, vals in zip(cols, zip(*rows, strict=True), strict=True):
        try:
            arr = np.array(vals)
        except (OverflowError, ValueError):
            arr = np.array(vals, dtype=object)
        if arr.dtype.kind not in "if" or (  # None, text: keep the values
            arr.dtype.kind == "f" and np.nanmax(np.abs(arr)) >= 2**53  # ints a float would round
        ):
            arr = np.array(vals, dtype=object)
        data[c] = arr
    return pd.DataFrame(data, copy=False)


def table_columns(path: Path) -> dict[str, dict[str, str]]:
    """Every table of the file and its columns with their declared types (validates the file
    as a side effect)."""
    con = connect(path)
    try:
        rows = con.execute("SELECT name, sql FROM sqlite_master WHERE type='table'").fetchall()
        out = {}
        for name, sql in rows:
            if (sql or "").lstrip()[:14].upper() == "CREATE VIRTUAL":  # computed: never read
                continue
            cols = con.execute(f'PRAGMA table_xinfo("{name}")').fetchall()
            made = [r[1] for r in cols if r[6] in (2, 3)]
            if made:
                raise TraceFormatError(
                    path,
                    f"{name}.{made[0]} is a generated column: SQLite computes it on every read, "
                    "which can take any time and memory; profiler databases store their values",
                    hint="refused; re-export the database from the profiler",
                )
            out[name] = {r[1]: r[2] for r in cols}
        return out
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(
            path,
            f"cannot read its table list: {exc}",
            hint="the database is truncated or damaged; re-export it",
        ) from exc
    finally:
        con.close()


def read_error(path: Path, what: str, exc: sqlite3.DatabaseError) -> TraceFormatError:
    """The error for a failed read: the value budget named when SQLite refused a long value."""
    if isinstance(exc, sqlite3.DataError) and "too big" in str(exc):
        return TraceFormatError(
            path,
            f"cannot read {what}: a value is longer than the limit of "
            f"{budget.human(budget.db_max_value())} per value",
            hint="set DYNPROF_NB_DB_MAX_VALUE (e.g. 256M) to raise it",
        )
    return TraceFormatError(path, f"cannot read {what}: {exc}", hint=DAMAGED)


def int_or_none(v: object) -> int | None:
    try:
        return None if v is None or v != v else int(v)
    except (TypeError, ValueError):
        return None
