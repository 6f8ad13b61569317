"""Column schemas of the TraceWindow frames, so every frame is typed the same way from every
source, and an absent source still gives an empty frame with the right columns."""

from __future__ import annotations

import numpy as np
import pandas as pd

EVENTS = {
    "name": "category",
    "cat": "category",
    "ph": "category",
    "pid": "int64",
    "tid": "int64",
    "process": "category",
    "thread": "category",
    "ts_ns": "int64",
    "dur_ns": "int64",
    "step": "Int64",
}
OPS = {
    "name": "object",
    "count": "int64",
    "total_us": "float64",
    "self_us": "float64",
    "avg_us": "float64",
    "min_us": "float64",
    "max_us": "float64",
    "share": "float64",
}
STEPS = {
    "step": "int64",
    "start_ns": "Int64",
    "duration_us": "float64",
    "computing_us": "float64",
    "communication_us": "float64",
    "overlapped_us": "float64",
    "free_us": "float64",
}
KERNELS = {
    "name": "category",
    "type": "category",
    "core": "category",
    "stream": "Int64",
    "start_ns": "Int64",
    "duration_us": "float64",
    "wait_us": "float64",
    "step": "Int64",
}
MEMORY = {
    "ts_ns": "int64",
    "device": "category",
    "allocated_bytes": "float64",
    "reserved_bytes": "float64",
    "active_bytes": "float64",
    "delta_bytes": "float64",
    "name": "category",
    "source": "category",
}
COMMUNICATION = {
    "step": "Int64",
    "name": "object",
    "group": "object",
    "start_ns": "Int64",
    "elapse_us": "float64",
    "transit_us": "float64",
    "wait_us": "float64",
    "synchronization_us": "float64",
    "idle_us": "float64",
    "size_mb": "float64",
    "bandwidth_gbps": "float64",
    "source": "category",
}

SCHEMAS = {
    "events": EVENTS,
    "ops": OPS,
    "steps": STEPS,
    "kernels": KERNELS,
    "memory": MEMORY,
    "communication": COMMUNICATION,
}


def empty(kind: str) -> pd.DataFrame:
    """An empty frame of ``kind`` with its documented columns and dtypes."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in SCHEMAS[kind].items()})


def conform(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Add missing columns (as NA), order the documented ones first, cast where it is safe."""
    schema = SCHEMAS[kind]
    cols = list(frame.columns)
    if cols[: len(schema)] == list(schema) and all(
        str(frame[c].dtype) == t or (c in ("pid", "tid") and t == "int64")
        for c, t in schema.items()
    ):
        return frame  # already conforming: no copy (the events frame can be large)
    out = frame.copy() if not frame.empty else frame
    for col, dtype in schema.items():
        if col not in out.columns:
            out[col] = pd.Series(
                pd.NA if dtype in ("Int64", "object") else None,
                index=out.index,
                dtype=dtype if dtype != "float64" else "float64",
            )
        elif dtype in ("float64", "Int64") and str(out[col].dtype) != dtype:
            out[col] = pd.to_numeric(out[col], errors="coerce").astype(dtype)
        elif dtype == "category" and str(out[col].dtype) != "category":
            out[col] = out[col].astype("category")
    extra = [c for c in out.columns if c not in schema]
    return out[list(schema) + extra]


def constant_int(value: int | None, n: int) -> pd.arrays.IntegerArray:
    """An Int64 column of ``n`` copies of ``value`` (NA for None), without a list of n objects."""
    return pd.arrays.IntegerArray(
        np.full(n, 0 if value is None else value, dtype="int64"), np.full(n, value is None)
    )


def concat_frames(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate keeping categoricals categorical (pandas falls back to object otherwise)."""
    frames = [f for f in frames if f is not None]
    if not frames:
        return pd.DataFrame()
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    cat_cols = [
        c
        for c in frames[0].columns
        if all(c in f.columns and isinstance(f[c].dtype, pd.CategoricalDtype) for f in frames)
    ]
    recoded: list[dict[str, pd.Categorical]] = [{} for _ in frames]
    for c in cat_cols:
        first = frames[0][c].dtype
        if all(
            f[c].dtype == first and f[c].cat.categories.equals(first.categories) for f in frames[1:]
        ):
            continue  # the same categories in the same order: the codes concatenate as they are
        cats = pd.Index([])
        for f in frames:
            cats = cats.union(f[c].cat.categories.astype(object), sort=False)
        for f, new in zip(frames, recoded, strict=True):
            new[c] = f[c].cat.set_categories(cats)
    frames = [f.assign(**new) if new else f for f, new in zip(frames, recoded, strict=True)]
    return pd.concat(frames, ignore_index=True)
