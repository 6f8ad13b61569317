"""The kernels frame of an Ascend profiler database, read column-wise (the fast path).

At 93k compute tasks a rank, reading TASK and COMPUTE_TASK_INFO through ``fetchall`` (a Python
tuple and int per value), joining them in pandas and resolving names as Python strings took half
a second a rank. Here the integer columns come back as numpy arrays (``DbFile.int_columns``,
3x faster than ``fetchall``), the two tables are joined by ``searchsorted`` on ``globalTaskId``
(two plain scans: sqlite's per-row primary-key lookup for the same join took twice as long), and
the STRING_IDS columns become categoricals from their distinct ids, so no per-row string is ever
built: 0.15 s a rank. The frame is the one
``AscendDb.kernels`` builds the generic way, value for value and dtype for dtype; any file this
path does not cover (a text or real value where an id or integer belongs, no STRING_IDS, NULL or
repeated task ids) returns None and takes the generic path.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dynprof_nb.traces import schema, validate
from dynprof_nb.traces.formats.common.sqlite import DbFile, IntColumn, ns, raw
from dynprof_nb.traces.intervals import steps_of, stream_wait

TASK_COLS = [
    raw("globalTaskId", "gid", required=True),
    ns("startNs", "start", required=True),
    ns("endNs", "end", required=True),
    raw("streamId", "stream"),
    raw("taskType", "task_type"),
    raw("taskId", "task_id"),
    raw("deviceId", "device"),
]
INFO_COLS = [
    raw("globalTaskId", "gid", required=True),
    raw("name", "name"),
    raw("opType", "type"),
    raw("taskType", "core"),
    raw("blockDim", "block_dim"),
    raw("inputShapes", "input_shapes"),
]


def kernels(db: DbFile, comm: pd.DataFrame | None, step_time: pd.DataFrame) -> pd.DataFrame | None:
    """Compute tasks (TASK x COMPUTE_TASK_INFO) plus ``comm``'s HCCL ops as the kernels frame,
    or None when the file needs the generic path."""
    if not db.has("TASK", "COMPUTE_TASK_INFO", "STRING_IDS"):
        return None
    task = db.int_columns("TASK", TASK_COLS)
    info = db.int_columns("COMPUTE_TASK_INFO", INFO_COLS) if task is not None else None
    if task is None or info is None or task["gid"].mask is not None or info["gid"].mask is not None:
        return None
    first = validate.first_rows(task["gid"].values)  # a copied TASK row: once (AscendDb says)
    if first is not None:
        task = {k: _take(v, np.flatnonzero(first)) for k, v in task.items()}
    it, ii = _join(task["gid"].values, info["gid"].values)
    if it is None:
        return None
    for c in ("start", "end"):  # tasks without both times are left out
        m = task[c].mask
        if m is not None:
            ok = ~m[it]
            it, ii = it[ok], ii[ok]
    cols = {
        **{k: _take(v, it) for k, v in task.items()},
        **{k: _take(v, ii) for k, v in info.items()},
    }
    n_comm = 0 if comm is None else len(comm)
    start = cols["start"].values
    end = cols["end"].values
    if n_comm:
        start = np.concatenate([start, comm["start_ns"].to_numpy("int64")])
        end = np.concatenate([end, comm["end_ns"].to_numpy("int64")])
    order = np.lexsort((end, start))  # stable: equal times keep TASK order, then the ops'
    start, end = start[order], end[order]
    dev = cols["device"]
    dev_ok = dev.values if dev.mask is None else dev.values[~dev.mask]
    comm_dev = int(dev_ok[0]) if len(dev_ok) else None
    strings = db.strings
    stream = _int_array(cols["stream"], n_comm, None, order)
    out = pd.DataFrame(
        {
            "name": _categorical(
                cols["name"], strings, _values(comm, "name", n_comm), order, "N/A"
            ),
            "type": _categorical(cols["type"], strings, _values(comm, "type", n_comm), order),
            "core": _categorical(cols["core"], strings, ["HCCL"] * n_comm, order),
            "stream": stream,
            "start_ns": pd.array(start, dtype="Int64"),
            "duration_us": (end - start) / 1000.0,
            "wait_us": stream_wait(
                pd.Series(stream.to_numpy("float64", na_value=np.nan)), start, end
            ),
            "step": steps_of(start, step_time),
            "duration_ns": end - start,
            "device": _int_array(dev, n_comm, comm_dev, order),
            "task_type": _categorical(cols["task_type"], strings, ["HCCL"] * n_comm, order),
            "task_id": _int_array(cols["task_id"], n_comm, None, order),
            "block_dim": _int_array(cols["block_dim"], n_comm, None, order),
            "input_shapes": _categorical(cols["input_shapes"], strings, [None] * n_comm, order),
        }
    )
    return schema.conform(out, "kernels")


def _join(task_gid: np.ndarray, info_gid: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """Row numbers of the TASK rows that have a COMPUTE_TASK_INFO row (in TASK order, as an
    inner merge keeps them) and of that row; (None, _) when an info id repeats."""
    sorted_ = len(info_gid) < 2 or bool((info_gid[1:] > info_gid[:-1]).all())
    by = None if sorted_ else np.argsort(info_gid, kind="stable")
    g = info_gid if by is None else info_gid[by]
    if len(g) > 1 and not sorted_ and bool((g[1:] == g[:-1]).any()):
        return None, task_gid
    if len(g) == 0:
        return np.empty(0, "int64"), np.empty(0, "int64")
    pos = np.searchsorted(g, task_gid)
    pos[pos == len(g)] = 0
    hit = g[pos] == task_gid
    it = np.flatnonzero(hit)
    ii = pos[hit] if by is None else by[pos[hit]]
    return it, ii


def _take(col: IntColumn, rows: np.ndarray) -> IntColumn:
    return IntColumn(col.values[rows], None if col.mask is None else col.mask[rows])


def _values(comm: pd.DataFrame | None, col: str, n: int) -> list:
    if not n:
        return []
    return list(comm[col]) if col in comm else [None] * n


def _int_array(
    col: IntColumn, n_extra: int, extra: int | None, order: np.ndarray
) -> pd.arrays.IntegerArray:
    """``col`` then ``n_extra`` rows of ``extra`` (NA when None), in ``order``, as Int64."""
    values = np.concatenate([col.values, np.full(n_extra, extra or 0, "int64")])
    mask = np.concatenate(
        [
            np.zeros(len(col.values), bool) if col.mask is None else col.mask,
            np.full(n_extra, extra is None),
        ]
    )
    return pd.arrays.IntegerArray(values[order], mask[order])


def _categorical(
    ids: IntColumn,
    strings: dict[int, str],
    extra: list,
    order: np.ndarray,
    na: str | None = None,
) -> pd.Categorical:
    """STRING_IDS ids (an unknown id is its own text) then the ``extra`` values, in ``order``,
    as the categorical ``astype("category")`` makes of those strings (NULL stays NA, or is
    ``na``). Strings are built once per distinct id, never per row."""
    if ids.mask is None:
        codes, uniq = pd.factorize(ids.values)
    else:  # factorize the ids that are there: the 0 a NULL reads as may be a real id
        codes = np.full(len(ids.values), -1, "int64")
        codes[~ids.mask], uniq = pd.factorize(ids.values[~ids.mask])
    labels = [strings.get(u, str(u)) for u in uniq.tolist()]
    labels += [None if v is None or v is pd.NA or v != v else str(v) for v in extra]
    rows = np.concatenate([codes, len(uniq) + np.arange(len(extra))])
    if (rows < 0).any():  # NULL ids: NA, or the ``na`` label
        labels.append(na)
        rows[rows < 0] = len(labels) - 1
    small = pd.Categorical(np.array(labels, dtype=object))
    return pd.Categorical.from_codes(small.codes[rows[order]], dtype=small.dtype)
