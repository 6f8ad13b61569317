"""Frames as Parquet bytes and back, exactly: the dtypes, categoricals (their codes, with the
categories, their dtype and order kept in the metadata), nullable ints, str and object columns
(object cells as tagged text, so None, NaN, pd.NA, ints and strs stay what they were), the index
and attrs. pyarrow's own pandas conversion changes several of these (object becomes str under
pandas 3, empty categoricals lose their categories' dtype, mixed categories do not convert), so
the frame cache (:mod:`dynprof_nb.traces.cache`) stores frames with this instead. A frame
holding anything else raises :class:`Unsupported` and is simply not cached."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

META_KEY = b"dynprof_nb"


class Unsupported(Exception):
    """A frame holding something the cache cannot store exactly: it is read, not cached."""


def encode(frame: pd.DataFrame, meta: dict) -> bytes:
    """``frame`` as Parquet bytes, with ``meta`` and how to rebuild each column exactly."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = list(frame.columns)
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise Unsupported("column names that are not distinct strings")
    arrays, specs = [], []
    index = frame.index
    if isinstance(index, pd.RangeIndex):
        index_spec: dict = {
            "range": [index.start, index.stop, index.step],
            "name": _jsonable(index.name),
        }
    else:
        arr, spec = _encode_column(pd.Series(index, copy=False))
        arrays.append(arr)
        index_spec = {"column": spec, "name": _jsonable(index.name)}
    for i, name in enumerate(names):
        arr, spec = _encode_column(frame.iloc[:, i])
        arrays.append(arr)
        specs.append(dict(spec, name=name))
    attrs = _jsonable(dict(frame.attrs))
    meta = dict(meta, columns=specs, index=index_spec, attrs=attrs, rows=len(frame))
    text = json.dumps(meta)  # TypeError on anything that is not JSON: not cached
    table = pa.Table.from_arrays(
        arrays, names=[f"c{i}" for i in range(len(arrays))], metadata={META_KEY: text.encode()}
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="lz4")
    return sink.getvalue().to_pybytes()


def write_parts(sink: Any, parts: Iterable[pd.DataFrame], rows: int, meta: dict) -> None:
    """A frame of ``rows`` rows under a RangeIndex from 0, given as ``parts`` (frames of the
    same columns, dtypes and categories, in order), written to ``sink`` as one entry that
    :func:`decode` reads as :func:`encode`'s, one row group per part: the whole frame is never
    in memory (the first pass's events, :mod:`..formats.chrome.first_pass`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    done = 0
    try:
        for part in parts:
            names = list(part.columns)
            coded = [_encode_column(part.iloc[:, i]) for i in range(len(names))]
            specs = [dict(spec, name=name) for (_, spec), name in zip(coded, names, strict=True)]
            if writer is None:
                if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
                    raise Unsupported("column names that are not distinct strings")
                full = dict(
                    meta,
                    columns=specs,
                    index={"range": [0, rows, 1], "name": None},
                    attrs=_jsonable(dict(part.attrs)),
                    rows=rows,
                )
                fields = [pa.field(f"c{i}", arr.type) for i, (arr, _) in enumerate(coded)]
                schema = pa.schema(fields, metadata={META_KEY: json.dumps(full).encode()})
                first_specs = specs
                writer = pq.ParquetWriter(sink, schema, compression="lz4")
            elif specs != first_specs:
                raise Unsupported("parts that differ in their columns")
            arrays = [arr.cast(f.type) for (arr, _), f in zip(coded, schema, strict=True)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
            done += len(part)
    finally:
        if writer is not None:
            writer.close()
    if writer is None or done != rows:
        raise Unsupported("parts that do not add up to the frame")


def read_entry(fh: BinaryIO, size: int) -> Any:
    """The ``size`` bytes of an open entry, in memory Arrow owns (a ``pyarrow.Buffer``).

    Not ``bytes``: Parquet's reader threads drop their hold on the source whenever they finish
    with it, and releasing a ``bytes`` object takes the GIL. A thread doing that while the
    interpreter exits is stopped inside a C++ destructor, and the whole process aborts
    ("terminate called without an active exception", exit -6) after its work is done: about one
    script in a hundred that loaded a window."""
    import pyarrow as pa

    buf = pa.allocate_buffer(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = fh.readinto(view[got:])
        if not n:
            raise Unsupported("the entry ended early")
        got += n
    return buf


def decode(data: Any) -> tuple[pd.DataFrame, dict]:
    """The frame and metadata of an entry (its bytes, or :func:`read_entry`'s buffer); raises on
    anything that is not a whole, good one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not isinstance(data, pa.Buffer):  # bytes: copied, for the reason read_entry gives
        data = read_entry(io.BytesIO(data), len(data))
    # ParquetFile, not read_table: read_table imports pyarrow.dataset (a third of a cached
    # load's time in a new process)
    table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=True)
    meta = json.loads(table.schema.metadata[META_KEY])
    columns = table.columns
    index_spec = meta["index"]
    at = 0
    if "range" in index_spec:
        index: pd.Index = pd.RangeIndex(*index_spec["range"], name=index_spec["name"])
    else:
        spec = index_spec["column"]
        index = pd.Index(
            _decode_column(columns[0], spec),
            name=index_spec["name"],
            dtype=object if spec["kind"] == "object" else None,
        )
        at = 1
    data_cols = {}
    for spec, col in zip(meta["columns"], columns[at:], strict=True):
        values = _decode_column(col, spec)
        if spec["kind"] == "object":  # else pandas 3 makes an object array of str a str column
            values = pd.Series(values, index=index, dtype=object, copy=False)
        data_cols[spec["name"]] = values
    frame = pd.DataFrame(data_cols, index=index, copy=False)
    if len(frame) != meta["rows"] or len(index) != meta["rows"]:
        raise Unsupported("row count")
    if [str(t) for t in frame.dtypes] != [s["dtype"] for s in meta["columns"]]:
        raise Unsupported("dtypes do not match what was stored")
    frame.attrs.update(meta["attrs"])
    return frame, meta


def _encode_column(s: pd.Series) -> tuple[Any, dict]:
    import pyarrow as pa

    dtype = s.dtype
    spec: dict[str, Any] = {"dtype": str(dtype)}
    if isinstance(dtype, pd.CategoricalDtype):
        cats = dtype.categories
        spec.update(
            kind="category",
            ordered=bool(dtype.ordered),
            categories=_cells(cats),
            categories_dtype=_dtype_spec(cats.dtype),
        )
        return pa.array(np.asarray(s.cat.codes)), spec
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        spec.update(kind="object")
        return pa.array(_cells(s), type=pa.string()), spec
    spec.update(kind="plain", spec=_dtype_spec(dtype))
    if isinstance(dtype, np.dtype):
        if dtype.kind not in "biufcmM" or dtype.kind == "c":
            raise Unsupported(f"dtype {dtype}")
        return pa.array(s.to_numpy()), spec
    try:
        return pa.array(s.array), spec  # Int64, boolean, Float64, str, ...: their nulls kept
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise Unsupported(f"dtype {dtype}") from exc


def categories(spec: dict) -> pd.Index:
    """The categories of a ``category`` column of an entry (``spec``: its entry in the
    metadata's ``columns``), in code order: the column itself holds the codes (-1: missing)."""
    return pd.Index(_uncells(spec["categories"]), dtype=_dtype_of(spec["categories_dtype"]))


def _decode_column(col: Any, spec: dict) -> Any:
    kind = spec["kind"]
    if kind == "category":
        cats = categories(spec)
        codes = col.to_numpy()
        return pd.Categorical.from_codes(
            codes, dtype=pd.CategoricalDtype(cats, ordered=spec["ordered"])
        )
    if kind == "object":
        out = np.empty(len(col), dtype=object)
        out[:] = _uncells(col.to_pylist())
        return out
    dtype = _dtype_of(spec["spec"])
    if isinstance(dtype, np.dtype):
        return col.to_numpy()
    return dtype.__from_arrow__(col)


def _dtype_spec(dtype: Any) -> Any:
    if isinstance(dtype, pd.StringDtype):
        return {"string": dtype.storage, "na": "nan" if dtype.na_value is not pd.NA else "NA"}
    return str(dtype)


def _dtype_of(spec: Any) -> Any:
    if isinstance(spec, dict):
        na = np.nan if spec["na"] == "nan" else pd.NA
        return pd.StringDtype(storage=spec["string"], na_value=na)
    return pd.api.types.pandas_dtype(spec)


# object cells as tagged text: "s" a str, "n" None, "a" pd.NA, "f" a float (NaN, inf included),
# "i" an int, "b" a bool, "j" JSON of a list/dict of such values (the first character is the tag,
# the rest the value: ``w.sql`` decodes them in SQL)
MISSING_CELLS = ("n", "a", "fnan")  # None, pd.NA, NaN: what pandas counts as missing


def _cells(values: Any) -> list[str]:
    from pandas.api.types import infer_dtype

    if infer_dtype(values, skipna=False) == "string":
        return ["s" + v for v in values]
    return [_cell(v) for v in values]


def _cell(v: Any) -> str:
    if isinstance(v, np.generic):
        v = v.item()
    if v is None:
        return "n"
    if v is pd.NA:
        return "a"
    if isinstance(v, bool):
        return "b1" if v else "b0"
    if isinstance(v, str):
        return "s" + v
    if isinstance(v, int):
        return "i" + str(v)
    if isinstance(v, float):
        return "f" + repr(v)
    if isinstance(v, (list, dict)):
        text = json.dumps(v)
        if json.loads(text) != v:
            raise Unsupported("a list/dict cell that JSON does not round-trip")
        return "j" + text
    raise Unsupported(f"a cell of type {type(v).__name__}")


def _uncells(cells: list[str]) -> list[Any]:
    out: list[Any] = []
    for c in cells:
        tag, rest = c[:1], c[1:]
        if tag == "s":
            out.append(rest)
        elif tag == "n":
            out.append(None)
        elif tag == "a":
            out.append(pd.NA)
        elif tag == "b":
            out.append(rest == "1")
        elif tag == "i":
            out.append(int(rest))
        elif tag == "f":
            out.append(float(rest))
        elif tag == "j":
            out.append(json.loads(rest))
        else:
            raise Unsupported(f"cell tag {tag!r}")
    return out


def _jsonable(value: Any) -> Any:
    """``value`` if JSON gives it back equal (attrs, index names), else Unsupported."""
    try:
        back = json.loads(json.dumps(value, allow_nan=True))
    except (TypeError, ValueError) as exc:
        raise Unsupported("attrs that are not JSON") from exc
    if not same(back, value):
        raise Unsupported("attrs that JSON does not give back equal")
    return value


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b
