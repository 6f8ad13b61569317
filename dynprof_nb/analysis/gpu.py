"""GPU (and other accelerator) breakdowns of a window's ``kernels`` frame, on HTA's definitions.

HTA (HolisticTraceAnalysis 0.5.0) is the reference for these numbers; each function says which
HTA function gives the same number under which name (see docs/definitions.md, "Kineto / GPU").
Two choices differ between dynprof_nb and HTA, and both are arguments here:

- ``kernels="steps"`` (dynprof_nb): the device activity launched in the window's steps (each
  kernel's ``step`` is its launch's step). ``kernels="hta"``: HTA's ``Trace.load_traces()``
  set, every device row launched before the last step began (the last step is dropped as
  possibly incomplete; ``include_last_step=True`` keeps the kernels launched until it ended),
  including those launched before the first step, and only rows with an ``args.stream``
  (HTA leaves out MTIA's stream-less DMA requests). dynprof_nb records exactly the asked steps
  and each is complete, so its default keeps them all and nothing outside them.

And one HTA habit is not followed: by default HTA rounds ns-resolution times inward to whole
microseconds (start up, end down: its workaround for pytorch#122425; ``HTA_DISABLE_NS_ROUNDING=1``
turns it off, and then HTA's numbers are these). dynprof_nb keeps the trace's exact ns.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd

from dynprof_nb.traces import comm as comm_names
from dynprof_nb.traces.formats.derived.from_events import device_kinds
from dynprof_nb.traces.intervals import intersection_ns

Selection = Literal["steps", "hta"]


def select(
    kernels: pd.DataFrame,
    steps: pd.DataFrame,
    kernels_sel: Selection = "steps",
    include_last_step: bool = False,
) -> pd.DataFrame:
    """The device rows a breakdown counts (see the module docstring)."""
    k = kernels[kernels["start_ns"].notna()] if not kernels.empty else kernels
    if k.empty:
        return k
    if kernels_sel == "steps":
        has_step = k["step"].notna()
        return k[has_step] if has_step.any() else k
    if kernels_sel != "hta":
        raise ValueError(f"kernels={kernels_sel!r}: use 'steps' (dynprof_nb) or 'hta'")
    if "stream_arg" in k:  # HTA files device activity by its args.stream: none, not counted
        k = k[k["stream_arg"].notna()]
    parts = []
    for r, kr in _by_rank(k):
        st = steps[steps["rank"] == r] if "rank" in steps and r is not None else steps
        st = st[st["start_ns"].notna()] if not st.empty else st
        if len(st) < 2:  # HTA filters nothing with fewer than two steps
            parts.append(kr)
            continue
        last = st.loc[st["start_ns"].idxmax()]
        bound = int(last["start_ns"]) + (
            round(float(last["duration_us"]) * 1000) if include_last_step else 0
        )
        launch = kr["launch_ns"] if "launch_ns" in kr else pd.Series(pd.NA, index=kr.index)
        corr = kr["correlation"] if "correlation" in kr else pd.Series(pd.NA, index=kr.index)
        # a correlated kernel counts by its launch (none found: HTA drops it); an uncorrelated
        # device row by its own start, as HTA keeps it among the host events
        t = launch.where(corr.notna(), kr["start_ns"]).astype("float64")
        ok = (t <= bound) if include_last_step else (t < bound)
        parts.append(kr[ok.fillna(False).to_numpy(bool)])
    return pd.concat(parts) if parts else k.iloc[:0]


def _by_rank(k: pd.DataFrame) -> list[tuple[Any, pd.DataFrame]]:
    if "rank" not in k:
        return [(None, k)]
    return [(int(r), g) for r, g in k.groupby("rank", sort=True)]


def _intervals(k: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    s = k["start_ns"].to_numpy("int64")
    e = s + np.rint(k["duration_us"].to_numpy("float64", na_value=0.0) * 1000).astype(np.int64)
    return s, e


def _union(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Merged [start, end) intervals as an (n, 2) array (HTA's ``merge_kernel_intervals``)."""
    if not len(s):
        return np.zeros((0, 2), np.int64)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run_end[:-1]
    starts = s[new]
    ends = np.maximum.reduceat(e, np.flatnonzero(new))
    return np.stack([starts, ends], axis=1)


def _length(iv: np.ndarray) -> int:
    return int((iv[:, 1] - iv[:, 0]).sum()) if len(iv) else 0


def _intersection(a: np.ndarray, b: np.ndarray) -> int:
    return intersection_ns(a[:, 0], a[:, 1], b[:, 0], b[:, 1])


def temporal_breakdown(
    kernels: pd.DataFrame,
    steps: pd.DataFrame,
    *,
    comm_patterns: comm_names.PatternSpec = None,
    kernels_sel: Selection = "steps",
    include_last_step: bool = False,
) -> pd.DataFrame:
    """Per rank, HTA's ``get_temporal_breakdown``: ``kernel_time_us`` from the first device
    activity's start to the last one's end; ``idle_time_us`` the part of it with no activity
    at all; ``compute_time_us`` the union of computation kernels (HTA's COMPUTATION: no copy,
    set, sync or communication); ``non_compute_time_us`` the rest (copies, communication not
    under computation...). Also ``comm_us`` (union of communication) and ``comm_overlap``
    (HTA's ``get_comm_comp_overlap`` ratio: communication time under computation / ``comm_us``)."""
    cols = [
        "rank",
        "kernel_time_us",
        "busy_us",
        "idle_time_us",
        "compute_time_us",
        "non_compute_time_us",
        "comm_us",
        "comm_overlap",
        "idle_time_pctg",
        "compute_time_pctg",
        "non_compute_time_pctg",
    ]
    k = select(kernels, steps, kernels_sel, include_last_step)
    rows = []
    for r, kr in _by_rank(k):
        if kr.empty:
            continue
        s, e = _intervals(kr)
        kinds = device_kinds(kr["name"], kr["type"], comm_patterns)
        every = _union(s, e)
        comp = _union(s[kinds == "computation"], e[kinds == "computation"])
        comm = _union(s[kinds == "communication"], e[kinds == "communication"])
        span = int(every[-1, 1] - every[0, 0]) if len(every) else 0
        busy, comp_t, comm_t = _length(every), _length(comp), _length(comm)
        rows.append(
            (
                0 if r is None else r,
                span / 1e3,
                busy / 1e3,
                (span - busy) / 1e3,
                comp_t / 1e3,
                (busy - comp_t) / 1e3,
                comm_t / 1e3,
                _intersection(comp, comm) / comm_t if comm_t else np.nan,
            )
        )
    out = pd.DataFrame(rows, columns=cols[:8])
    for name in ("idle_time", "compute_time", "non_compute_time"):
        out[f"{name}_pctg"] = (
            100 * out[f"{name}_us"] / out["kernel_time_us"].where(out["kernel_time_us"] > 0)
        )
    return out[cols]


def kernel_type_breakdown(
    kernels: pd.DataFrame,
    steps: pd.DataFrame,
    *,
    comm_patterns: comm_names.PatternSpec = None,
    kernels_sel: Selection = "steps",
    include_last_step: bool = False,
    hta_truncation: bool = False,
) -> pd.DataFrame:
    """HTA's ``get_gpu_kernel_breakdown`` kernel-type table (``include_memory_kernels=True``):
    device time by which kinds run at that moment, ``COMPUTATION``, ``COMMUNICATION``,
    ``MEMORY`` and "A overlapping B" (each moment counted once, summed over ranks), with
    its share of the sum in ``percentage``. HTA truncates each such stretch to whole
    microseconds (``astype(int)``), which on a ns-resolution trace loses up to 1 µs a stretch;
    ``hta_truncation=True`` does the same, to compare with it."""
    k = select(kernels, steps, kernels_sel, include_last_step)
    order = ["COMPUTATION", "COMMUNICATION", "MEMORY"]  # HTA's bit order
    label = {"communication": "COMMUNICATION", "computation": "COMPUTATION", "memory": "MEMORY"}
    totals: dict[str, int] = {}
    for _, kr in _by_rank(k):
        s, e = _intervals(kr)
        kinds = device_kinds(kr["name"], kr["type"], comm_patterns)
        t, d = [], []
        for bit, name in enumerate(order):
            iv = _union(*(a[[label.get(x) == name for x in kinds]] for a in (s, e)))
            t += [iv[:, 0], iv[:, 1]]
            d += [np.full(len(iv), 1 << bit), np.full(len(iv), -(1 << bit))]
        if not t:
            continue
        tt, dd = np.concatenate(t), np.concatenate(d)
        o = np.argsort(tt, kind="stable")
        tt, dd = tt[o], dd[o]
        running = np.cumsum(dd)[:-1]
        seg = np.diff(tt)
        if hta_truncation:
            seg = seg // 1000 * 1000
        for state in np.unique(running[running > 0]):
            names = [n for bit, n in enumerate(order) if state & (1 << bit)]
            key = " overlapping ".join(names)
            totals[key] = totals.get(key, 0) + int(seg[running == state].sum())
    out = pd.DataFrame({"kernel_type": list(totals), "sum_us": [v / 1e3 for v in totals.values()]})
    total = out["sum_us"].sum()
    out["percentage"] = 100 * out["sum_us"] / total if total > 0 else 0.0
    return out.sort_values("sum_us", ascending=False, ignore_index=True)


def step_kernels(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per (rank,) step: device rows launched in it and their summed device time (HTA: the
    ``iteration`` column of its trace frame, grouped)."""
    k = kernels[kernels["step"].notna()]
    keys = ["rank", "step"] if "rank" in k else ["step"]
    return k.groupby(keys)["duration_us"].agg(count="size", total_us="sum").reset_index()


__all__ = ["kernel_type_breakdown", "select", "step_kernels", "temporal_breakdown"]
