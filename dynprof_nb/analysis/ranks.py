"""Multi-rank analyses of an NPU window in pandas: the questions msprof-analyze's cluster
recipes answer (compute_op_sum, hccl_sum, cluster_time_summary, communication_time_sum,
communication_matrix, slow_rank, slow_link), each one call on a loaded window, with the same
numbers.

Every function takes a :class:`~dynprof_nb.traces.window.TraceWindow` (one rank or several) and
returns a DataFrame; times are µs like msprof-analyze's CSVs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.traces.interface import Window
from dynprof_nb.traces.intervals import overlap_breakdown

STAT_COLS = ["count", "sum_us", "mean_us", "std_us", "min_us", "median_us", "max_us"]


def _ops_only(comm: pd.DataFrame) -> pd.DataFrame:
    """Communication rows of real ops (communication.json also has per-step "Total Op Info"
    aggregates, which have no op name)."""
    return comm[comm["name"].notna()] if "name" in comm else comm


def _with_rank(frame: pd.DataFrame, window: Window) -> pd.DataFrame:
    if "rank" in frame.columns:
        return frame
    rank = getattr(window, "rank", None)
    return frame.assign(
        rank=pd.array([rank if rank is not None else 0] * len(frame), dtype="Int64")
    )


def _describe(
    frame: pd.DataFrame, keys: list[str], col: str = "duration_us", filled: tuple[str, ...] = ()
) -> pd.DataFrame:
    if frame.empty:
        return pd.DataFrame(columns=[*keys, *STAT_COLS])
    g = frame.groupby(keys, dropna=False, observed=True)[col]
    out = g.agg(["count", "sum", "mean", "std", "min", "median", "max"])
    out.columns = STAT_COLS
    out = out.reset_index()
    if filled:  # a key made categorical only to group fast: give it as grouping by its values
        # would (inferred from the objects), in that grouping's order (ties in sum_us keep it)
        for c in filled:
            out[c] = pd.Series(np.asarray(out[c].astype(object)), index=out.index)
        out = out.sort_values(keys, kind="stable")
    return out.sort_values("sum_us", ascending=False, ignore_index=True)


def compute_ops(window: Window, per_rank: bool = True, by_name: bool = False) -> pd.DataFrame:
    """Which compute ops (by op type and accelerator core: AI_CORE, AI_VECTOR_CORE, AI_CPU...)
    take the device's time, per rank and overall? (msprof-analyze ``compute_op_sum``: its
    rank_stats_by_optype.csv with ``per_rank``, all_stats.csv without, rank_stats_by_opname.csv
    with ``by_name``.) Communication ops (core HCCL) are left out, as that recipe does, and so
    are a database's raw TASK rows read without COMPUTE_TASK_INFO (no op type, no core: that
    recipe has no row for such a rank either)."""
    k = _with_rank(window.kernels, window)
    keys = (["name"] if by_name else []) + ["type", "core"]
    if by_name and "input_shapes" in k:
        keys.append("input_shapes")
    keys = (["rank"] if per_rank else []) + keys
    # only the columns used, so the filters copy little (a window can have 100k's of kernels)
    used = [*keys, "core", "type", "duration_us"] + (["task_type"] if "task_type" in k else [])
    k = k[list(dict.fromkeys(used))]
    k = k[(k["core"] != "HCCL").to_numpy(bool)]
    if "task_type" in k:
        k = k[~(k["type"].isna() & k["core"].isna() & k["task_type"].notna())]
    fill = {c: _fill_na(k[c], "N/A") for c in ("type", "core", "input_shapes") if c in keys}
    cats = tuple(c for c, v in fill.items() if isinstance(v.dtype, pd.CategoricalDtype))
    return _describe(k.assign(**fill), keys, filled=cats)


def _fill_na(col: pd.Series, value: str) -> pd.Series:
    """``col`` with NA as ``value``; a categorical stays one (grouping by its codes is several
    times faster than by strings), anything else becomes object as before."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        if value not in col.cat.categories and col.isna().any():
            col = col.cat.add_categories([value])
        return col.fillna(value) if col.isna().any() else col
    return col.astype(object).fillna(value)


def communication_ops(window: Window, per_rank: bool = True) -> pd.DataFrame:
    """How much time does each rank spend in communication ops, and how much of it is waiting
    rather than moving data? Per rank and op type: count, total/mean/max elapse, wait, transit,
    size and bandwidth (msprof-analyze ``hccl_sum`` rank_stats.csv, plus wait/transit)."""
    c = _ops_only(_with_rank(window.communication, window))
    if c.empty:
        return pd.DataFrame(
            columns=[
                "rank",
                "type",
                *STAT_COLS,
                "wait_us",
                "transit_us",
                "size_mb",
                "bandwidth_gbps",
                "wait_ratio",
            ]
        )
    typ = c["type"] if "type" in c else c["name"].astype(str).str.replace(r"_\d.*$", "", regex=True)
    c = c.assign(
        type=pd.Series(typ, index=c.index).astype(object).fillna("N/A"), duration_us=c["elapse_us"]
    )
    keys = (["rank"] if per_rank else []) + ["type"]
    out = _describe(c, keys)
    # min_count=1: an op type whose wait is unknown (Level0 tasks have no planes) stays NaN, not 0
    extra = (
        c.groupby(keys, dropna=False)[["wait_us", "transit_us", "size_mb"]]
        .sum(min_count=1)
        .reset_index()
    )
    out = out.merge(extra, on=keys, how="left")
    out["bandwidth_gbps"] = out["size_mb"] / (out["transit_us"] / 1000.0)
    out["wait_ratio"] = out["wait_us"] / (out["wait_us"] + out["transit_us"])
    return out


def communication_by_op(window: Window) -> pd.DataFrame:
    """Which communication op is slowest, and on which rank? Per op name across ranks: count,
    sum, mean, min/max and the ranks holding them (msprof-analyze ``hccl_sum`` top_op_stats)."""
    c = _ops_only(_with_rank(window.communication, window))
    if c.empty:
        return pd.DataFrame(columns=["name", *STAT_COLS, "min_rank", "max_rank"])
    c = c.assign(duration_us=c["elapse_us"])
    out = _describe(c, ["name"])
    i_min = c.groupby("name")["duration_us"].idxmin()
    i_max = c.groupby("name")["duration_us"].idxmax()
    out["min_rank"] = out["name"].map(c.loc[i_min.values].set_index("name")["rank"])
    out["max_rank"] = out["name"].map(c.loc[i_max.values].set_index("name")["rank"])
    return out


def step_breakdown(window: Window) -> pd.DataFrame:
    """Where does each rank's step time go: computing, communication not overlapped with
    computing, overlapped, free (idle)? One row per rank and step, from step_trace_time.csv or
    analysis.db where the window has them, else computed from the device tasks.

    Which definition each column follows (docs/definitions.md):

    - ``computing_us``, ``communication_us``, ``overlapped_us``,
      ``communication_not_overlapped_us``: torch_npu's step_trace_time / analysis.db
      StepTraceTime, the same numbers as msprof-analyze's ClusterStepTraceTime and
      cluster_time_summary (Computing, Communication, Overlapped, Communication(Not
      Overlapped)).
    - ``free_us``: StepTraceTime's Free = Stage - Computing - Communication(Not Overlapped);
      it includes device memory copies. cluster_time_summary's Free(us) takes those copies
      out: see :func:`time_summary`.
    - ``duration_us``: Computing + Communication(Not Overlapped) + Free, i.e. StepTraceTime's
      Stage (first device task to last) where the window has it; for a .db without
      StepTraceTime it is the STEP_TIME span (cluster_time_summary's Step Time(us)).
      :func:`step_trace` and :func:`time_summary` give each peer's own columns.
    """
    st = _with_rank(window.steps, window)
    cols = [
        "rank",
        "step",
        "duration_us",
        "computing_us",
        "communication_not_overlapped_us",
        "overlapped_us",
        "communication_us",
        "free_us",
    ]
    if st.empty:
        return pd.DataFrame(columns=cols)
    st = st.copy()
    if (
        "communication_not_overlapped_us" not in st
        or st["communication_not_overlapped_us"].isna().all()
    ):
        st["communication_not_overlapped_us"] = st["communication_us"] - st["overlapped_us"]
    if st["computing_us"].isna().all():  # steps from markers only: compute from device tasks
        k = _with_rank(window.kernels, window)
        rows = []
        for (r, s), part in k.groupby(["rank", "step"], dropna=True):
            rows.append({"rank": r, "step": s, **overlap_breakdown(part)})
        return pd.DataFrame(rows, columns=cols)
    out = st[[c for c in cols if c in st]].sort_values(["rank", "step"], ignore_index=True)
    return out


# msprof-analyze ClusterStepTraceTime's columns (= torch_npu step_trace_time.csv's): ours -> its
STEP_TRACE_NAMES = {
    "step": "Step",
    "computing_us": "Computing",
    "communication_not_overlapped_us": "Communication(Not Overlapped)",
    "overlapped_us": "Overlapped",
    "communication_us": "Communication",
    "free_us": "Free",
    "stage_us": "Stage",
    "bubble_us": "Bubble",
    "communication_not_overlapped_and_exclude_receive_us": (
        "Communication(Not Overlapped and Exclude Receive)"
    ),
    "preparing_us": "Preparing",
}


def step_trace(window: Window) -> pd.DataFrame:
    """msprof-analyze's ClusterStepTraceTime (cluster_step_trace_time.csv), under its names and
    definitions: one row per rank (Type "rank", Index = rank) and step, µs. Stage is the span
    from the step's first device task to its last; Free = Stage - Computing -
    Communication(Not Overlapped) (memory copies included); Bubble the pipeline receive time
    (0 without pipeline parallelism); Preparing from the step's start (STEP_TIME) to its first
    device task. Read from StepTraceTime / step_trace_time.csv where the window has them,
    else computed from the device tasks by those definitions."""
    st = _with_rank(window.steps, window).copy()
    names = ["Step", "Type", "Index", *list(STEP_TRACE_NAMES.values())[1:]]
    if st.empty:
        return pd.DataFrame(columns=names)
    if (
        "communication_not_overlapped_us" not in st
        or st["communication_not_overlapped_us"].isna().all()
    ):
        st["communication_not_overlapped_us"] = st["communication_us"] - st["overlapped_us"]
    if "stage_us" not in st or st["stage_us"].isna().all():
        st["stage_us"] = st["computing_us"] + st["communication_not_overlapped_us"] + st["free_us"]
    if "stage_us" in st and "span_us" in st and st["free_us"].notna().all():
        # a .db without StepTraceTime: its free is against the STEP_TIME span; Free is stage's
        st["free_us"] = st["stage_us"] - st["computing_us"] - st["communication_not_overlapped_us"]
    if "bubble_us" not in st:
        st["bubble_us"] = np.nan
    st["communication_not_overlapped_and_exclude_receive_us"] = st[
        "communication_not_overlapped_us"
    ] - st["bubble_us"].fillna(0)
    if "preparing_us" not in st:
        st["preparing_us"] = np.nan
    out = st[["rank", *STEP_TRACE_NAMES]].rename(columns=STEP_TRACE_NAMES)
    out.insert(1, "Type", "rank")
    out = out.rename(columns={"rank": "Index"})[names]
    return out.sort_values(["Index", "Step"], ignore_index=True)


TIME_SUMMARY_NAMES = [
    "Rank",
    "Step",
    "Step Time(us)",
    "Computation(us)",
    "Communication Not Overlap Computation(us)",
    "Communication Overlap Computation(us)",
    "Communication(us)",
    "Free(us)",
    "Communication Wait Stage Time(us)",
    "Communication Transmit Stage Time(us)",
    "Memory(us)",
    "Memory Not Overlap Computation Communication(us)",
]


def time_summary(window: Window) -> pd.DataFrame:
    """msprof-analyze's cluster_time_summary (cluster_time_summary_*.csv), under its names and
    definitions, one row per rank and step (µs):

    - Step Time: the whole step, STEP_TIME end - start (not Stage); where the window has no
      STEP_TIME, Computation + Communication Not Overlap + Free, as that recipe falls back to.
    - Computation, Communication (Not) Overlap Computation, Communication: StepTraceTime's.
    - Memory: the summed durations of the step's MEMCPY_ASYNC tasks; Memory Not Overlap
      Computation Communication: the part of them outside compute tasks and communication ops
      (that recipe's sweep, repeated exactly, quirks included: see _memory_not_overlapped).
    - Free: StepTraceTime's Free minus Memory Not Overlap (memory copies are not idle time).
    - Communication Transmit Stage Time: per communication op (group, name, step), the
      shortest duration any rank of the group took, summed per rank and step; Wait Stage Time:
      each rank's duration minus that shortest one (time spent waiting for the slowest peer).
      Both 0 with one rank, as in that recipe. The group's ranks are those of this window.
    """
    st = step_trace(window)
    if st.empty:
        return pd.DataFrame(columns=TIME_SUMMARY_NAMES)
    steps = _with_rank(window.steps, window)
    span = (
        steps.set_index(["rank", "step"])["span_us"]
        if "span_us" in steps
        else pd.Series(dtype="float64")
    )
    out = pd.DataFrame(
        {
            "Rank": st["Index"].astype("int64"),
            "Step": st["Step"].astype("int64"),
            "Computation(us)": st["Computing"],
            "Communication Not Overlap Computation(us)": st["Communication(Not Overlapped)"],
            "Communication Overlap Computation(us)": st["Overlapped"],
            "Communication(us)": st["Communication"],
        }
    )
    key = pd.MultiIndex.from_frame(out[["Rank", "Step"]])
    fallback = st["Computing"] + st["Communication(Not Overlapped)"] + st["Free"]
    out["Step Time(us)"] = pd.Series(span.reindex(key).to_numpy(), index=out.index).fillna(fallback)
    mem, mem_free = _memory_per_step(window)
    out["Memory(us)"] = mem.reindex(key).fillna(0.0).to_numpy()
    out["Memory Not Overlap Computation Communication(us)"] = (
        mem_free.reindex(key).fillna(0.0).to_numpy()
    )
    out["Free(us)"] = st["Free"] - out["Memory Not Overlap Computation Communication(us)"]
    wait, transmit = _wait_and_transmit(window)
    out["Communication Wait Stage Time(us)"] = wait.reindex(key).fillna(0.0).to_numpy()
    out["Communication Transmit Stage Time(us)"] = transmit.reindex(key).fillna(0.0).to_numpy()
    return out[TIME_SUMMARY_NAMES]


def _wait_and_transmit(window: Window) -> tuple[pd.Series, pd.Series]:
    """(wait, transmit) µs per (rank, step): see :func:`time_summary`."""
    c = _ops_only(_with_rank(window.communication, window))
    c = c[c["step"].notna()]
    empty = pd.Series(dtype="float64")
    if c.empty or c["rank"].nunique() < 2:
        return empty, empty
    op = [c["group"].astype(str), c["name"].astype(str), c["step"]]
    ranks_of_group = c.groupby(c["group"].astype(str))["rank"].transform("nunique")
    ranks_of_op = c.groupby(op)["rank"].transform("nunique")
    c = c[ranks_of_op == ranks_of_group]
    op = [c["group"].astype(str), c["name"].astype(str), c["step"]]
    shortest = c.groupby(op)["elapse_us"].transform("min")
    g = c.assign(transmit=shortest, wait=c["elapse_us"] - shortest).groupby(["rank", "step"])
    return g["wait"].sum(), g["transmit"].sum()


def _memory_per_step(window: Window) -> tuple[pd.Series, pd.Series]:
    """(Memory, Memory Not Overlap Computation Communication) µs per (rank, step)."""
    copies = _with_rank(window.memory_copies(), window)
    empty = pd.Series(dtype="float64")
    if copies.empty:
        return empty, empty
    copies = copies[copies["step"].notna()]
    mem = (
        ((copies["end_ns"] - copies["start_ns"]) / 1000.0)
        .groupby([copies["rank"], copies["step"]])
        .sum()
    )
    # compute tasks (type 0) and communication ops (1, the kernels of core HCCL: exact ns)
    k = _with_rank(window.kernels, window)
    k = k[k["step"].notna() & k["start_ns"].notna()]
    k_start = k["start_ns"].astype("int64").to_numpy()
    k_end = k_start + np.round(k["duration_us"].to_numpy("float64") * 1000).astype("int64")
    is_comm = (k["core"].astype(str) == "HCCL").to_numpy(bool)
    k = pd.DataFrame(
        {
            "rank": k["rank"].to_numpy(),
            "step": k["step"].to_numpy(),
            "start": k_start,
            "end": k_end,
            "type": np.where(is_comm, 1, 0),
        }
    )
    k = k[(k["start"] != k["end"]) | (k["type"] == 1)]
    m = pd.DataFrame(
        {
            "rank": copies["rank"],
            "step": copies["step"],
            "start": copies["start_ns"],
            "end": copies["end_ns"],
            "type": 4,
        }
    )
    allv = pd.concat([k, m], ignore_index=True).sort_values(
        ["rank", "step", "start", "end"], kind="stable"
    )
    free = {
        key: _memory_not_overlapped(
            part["start"].to_numpy("int64"), part["end"].to_numpy("int64"), part["type"].to_numpy()
        )
        for key, part in allv.groupby(["rank", "step"])
    }
    idx = pd.MultiIndex.from_tuples(list(free), names=["rank", "step"])
    return mem, pd.Series(list(free.values()), index=idx, dtype="float64")


def _memory_not_overlapped(start: np.ndarray, end: np.ndarray, kind: np.ndarray) -> float:
    """µs of memory copies (kind 4) outside compute (0) and communication (1), sorted by
    start: msprof-analyze cluster_time_summary's sweep (get_memory_not_overlap) step for step,
    so the numbers are its own (where two copies overlap it counts the later-ending one's
    remainder only)."""
    total = 0
    cur_start = cur_end = int(start[0]) if len(start) else 0
    cur_type = -1
    for s, e, t in zip(start.tolist(), end.tolist(), kind.tolist(), strict=True):
        if cur_type == 4:
            stop = cur_end if s > cur_end else s
            if cur_start < stop:
                total += stop - cur_start
        if s > cur_end:
            cur_start, cur_end, cur_type = s, e, t
        elif e > cur_end:
            cur_start, cur_end, cur_type = cur_end, e, t
        else:
            cur_start = e
    if cur_type == 4:
        total += cur_end - cur_start
    return total / 1000.0


def step_breakdown_from_tasks(window: Window) -> pd.DataFrame:
    """The same breakdown recomputed from the device tasks alone (kernels and communication
    ops), to check a step_trace_time.csv / analysis.db against the raw tasks."""
    k = _with_rank(window.kernels, window)
    k = k[k["step"].notna()]
    rows = [
        {"rank": r, "step": s, **overlap_breakdown(part)}
        for (r, s), part in k.groupby(["rank", "step"])
    ]
    return pd.DataFrame(rows)


def communication_matrix(window: Window, step: int | None = None) -> pd.DataFrame:
    """Which links are slow? One row per (src_rank, dst_rank, transport): total size, transit
    time and bandwidth over the window's ops (msprof-analyze ``communication_matrix_sum``'s
    "Total Op Info" rows, summed over steps; ``slow_link``). Links reported by both ends are
    counted once.

    Newer Ascend matrices (analysis.db CommAnalyzerMatrix, communication_matrix.json) hold
    per-size categories (``allreduce-top1``, ``-middle``, ``-bottom1..3``, ``-total``), not
    ops: only the ``-total`` rows are summed (adding every category counted the data about six
    times). Their ranks are ranks within the group: they become global ranks through each
    rank's own (LOCAL, src == dst) row, and links to a rank the window does not hold are left
    out, as communication_matrix_sum does."""
    lk = _with_rank(window.communication_links(), window)
    cols = ["src_rank", "dst_rank", "transport", "ops", "size_mb", "transit_us", "bandwidth_gbps"]
    if lk.empty:
        return pd.DataFrame(columns=cols)
    if step is not None:
        lk = lk[lk["step"] == step]
    lk = _global_ranks(lk)
    name = lk["name"].astype(str)
    totals = name.str.endswith("-total")
    lk = lk[totals | ~name.str.contains(r"-(?:top|middle|bottom)\d*$", regex=True)]
    lk = lk[totals.loc[lk.index] | ~lk["step"].isin(lk.loc[totals.loc[lk.index], "step"])]
    lk = lk.drop(columns=["rank"]).drop_duplicates(
        ["step", "name", "group", "src_rank", "dst_rank", "transport"]
    )
    lk = lk[lk["src_rank"] != lk["dst_rank"]]
    out = (
        lk.groupby(["src_rank", "dst_rank", "transport"], dropna=False)
        .agg(ops=("name", "count"), size_mb=("size_mb", "sum"), transit_us=("transit_us", "sum"))
        .reset_index()
    )
    out["bandwidth_gbps"] = out["size_mb"] / (out["transit_us"] / 1000.0)
    return out.sort_values("bandwidth_gbps", ignore_index=True)[cols]


def _global_ranks(lk: pd.DataFrame) -> pd.DataFrame:
    """Links with group-local ranks mapped to the window's ranks where each rank's LOCAL row
    (src == dst) says its local rank; unchanged where no group has such rows (older matrices
    already use global ranks)."""
    local = lk[(lk["src_rank"] == lk["dst_rank"]) & lk["group"].notna()]
    if local.empty:
        return lk
    table = local.drop_duplicates(["group", "src_rank"]).set_index(["group", "src_rank"])["rank"]
    mapped_groups = set(local["group"])
    in_group = lk["group"].isin(mapped_groups)

    def to_global(col: str) -> pd.Series:
        key = pd.MultiIndex.from_arrays([lk["group"], lk[col]])
        return pd.Series(table.reindex(key).to_numpy(), index=lk.index)

    src, dst = to_global("src_rank"), to_global("dst_rank")
    keep = ~in_group | (src.notna() & dst.notna())
    out = lk.copy()
    out.loc[in_group, "src_rank"] = src[in_group].astype("Int64")
    out.loc[in_group, "dst_rank"] = dst[in_group].astype("Int64")
    return out[keep]


def slow_links(window: Window, threshold: float = 0.5) -> pd.DataFrame:
    """Which links run well below their transport's typical bandwidth? The links of
    :func:`communication_matrix` whose bandwidth is under ``threshold`` x the median of the
    same transport type, with a plain-language note."""
    m = communication_matrix(window)
    if m.empty:
        return m.assign(ratio=pd.Series(dtype=float), note=pd.Series(dtype=object))
    med = m.groupby("transport", dropna=False)["bandwidth_gbps"].transform("median")
    m = m.assign(ratio=m["bandwidth_gbps"] / med)
    slow = m[m["ratio"] < threshold].copy()
    slow["note"] = [
        f"{t} link {a}->{b} moves {bw:.1f} GB/s, {r:.0%} of the median {t} link"
        for t, a, b, bw, r in slow[
            ["transport", "src_rank", "dst_rank", "bandwidth_gbps", "ratio"]
        ].itertuples(index=False)
    ]
    return slow.reset_index(drop=True)


SLOW_RANK_COLS = [
    "rank",
    "own_us",
    "others_own_us",
    "excess_us",
    "threshold_us",
    "wait_us",
    "slow",
    "cause",
    "note",
]


def slow_ranks(window: Window, threshold: float = 0.05) -> pd.DataFrame:
    """Is one rank holding the others back, and why? The straggler rule
    (:mod:`dynprof_nb.analysis.straggler`, the one ``w.advise()`` and ``w.explain()`` use) per
    rank: its own work (median µs per step of its step outside waiting in collectives), the
    other ranks' (``others_own_us``), the excess, the threshold (the larger of ``threshold`` x
    the mean step and the noise bound), its wait in collectives (``wait_us``, mean per step),
    ``slow`` (True only for the rank named: the culprit, never a rank that waits for it), its
    ``cause`` (its own phase that exceeds the others' most, CPU contention, or "same work,
    slower": the same operator calls, each slower) and a note.
    msprof-analyze's own slow-rank rule, under its name and definition, is ``w.advise()``'s
    "slow rank"."""
    from .same_work import SLOWER, refine, same_work_text
    from .straggler import contention_text, find_straggler, phases_per_step, thread_cpu_of

    ph, phases, _ = phases_per_step(window)
    if ph.empty:
        return pd.DataFrame(columns=SLOW_RANK_COLS)
    wait = ph.groupby("rank")["communication"].mean()
    if ph["rank"].nunique() < 2:
        r = int(ph["rank"].iloc[0])
        own = float((ph["duration_us"] - ph["communication"]).median())
        one = "one rank only: nothing to compare with"
        nan = float("nan")  # no other rank: no reference, no excess, no threshold to show
        return pd.DataFrame(
            [[r, own, nan, nan, nan, float(wait[r]), False, "", one]], columns=SLOW_RANK_COLS
        )
    mean_step = float(ph["duration_us"].mean())
    v = find_straggler(ph, phases, None, threshold * mean_step, cpu=thread_cpu_of(window))
    v = refine(v, window)  # the same calls, each slower: its processor, not more work
    if v.table.empty:
        return pd.DataFrame(columns=SLOW_RANK_COLS)
    t = v.table.rename(columns={"reference_us": "others_own_us", "bound_us": "threshold_us"})
    t["wait_us"] = t["rank"].map(wait).astype(float)
    t["slow"] = t["rank"] == v.rank
    t["cause"] = [v.cause if s else "" for s in t["slow"]]

    def note(r: pd.Series) -> str:
        if r["slow"]:
            most = f"most in {v.cause}"
            if v.cause == "CPU contention":
                most = contention_text(v)
            elif v.cause == SLOWER:
                most = same_work_text(v)
            return (
                f"rank {r['rank']} is the straggler: its own work is {r['excess_us'] / 1000:.3f} "
                f"ms per step more than the others' (threshold {r['threshold_us'] / 1000:.3f} "
                f"ms), {most}; the others wait for it in communication"
            )
        return (
            f"rank {r['rank']}: own work {r['excess_us'] / 1000:+.3f} ms per step against the "
            f"others' (threshold {r['threshold_us'] / 1000:.3f} ms); waits "
            f"{r['wait_us'] / 1000:.3f} ms per step in collectives"
        )

    t["note"] = t.apply(note, axis=1)
    return t[SLOW_RANK_COLS].reset_index(drop=True)


def slow_rank_note(window: Window) -> str:
    """One sentence: which rank holds the others back (:func:`slow_ranks`: the straggler rule
    of :mod:`dynprof_nb.analysis.straggler`, the one ``w.advise()`` and ``w.explain()`` use: the
    rank whose own work is larger, never the one that waits longer), or that none does."""
    t = slow_ranks(window)
    if t.empty:
        return "no step breakdown: cannot compare ranks"
    if len(t) < 2:
        return "one rank only: nothing to compare with"
    if t["slow"].any():
        return str(t.loc[t["slow"], "note"].iloc[0])
    return (
        f"no slow rank: no rank's own work (its step outside waiting in collectives) "
        f"exceeds the others' by more than {t['threshold_us'].max() / 1000:.3f} ms per step "
        "(5% of the mean step, or the noise)"
    )


def communication_share(window: Window) -> float:
    """Fraction of the step time spent in communication not hidden behind computation."""
    br = step_breakdown(window)
    if br.empty or not br["duration_us"].sum():
        return float("nan")
    return float(br["communication_not_overlapped_us"].sum() / br["duration_us"].sum())


def top_kernels(window: Window, n: int = 10, compute_only: bool = False) -> pd.DataFrame:
    """Which device kernels take the most device time (all ranks together)? ``compute_only``
    leaves out the communication ops (core HCCL)."""
    k = window.kernels
    if compute_only:
        k = k[k["core"].astype(str) != "HCCL"]
    if k.empty:
        return pd.DataFrame(columns=["name", "core", *STAT_COLS, "share"])
    k = k.assign(core=k["core"].astype(object).fillna("N/A"), name=k["name"].astype(object))
    out = _describe(k, ["name", "core"])
    out["share"] = out["sum_us"] / out["sum_us"].sum()
    return out.head(n)


def compare(
    ours: pd.DataFrame, theirs: pd.DataFrame, on: list[str], pairs: dict[str, str]
) -> pd.DataFrame:
    """Our numbers beside msprof-analyze's (``pairs``: our column -> its column), with the
    relative difference of each pair; rows only one side has show NaN."""
    t = theirs[[*on, *pairs.values()]].rename(columns={b: f"{a}_msprof" for a, b in pairs.items()})
    m = ours[[*on, *pairs]].merge(t, on=on, how="outer")
    for a in pairs:
        ref = m[f"{a}_msprof"].astype(float)
        m[f"{a}_rel_diff"] = (m[a].astype(float) - ref) / ref.where(ref != 0, np.nan)
    return m


NPU_FRAMEWORKS = ("torch_npu", "mindspore", "ascend")


def is_npu_window(window: Window) -> bool:
    """An Ascend window with device tasks (what the NPU-first summary needs)."""
    fw = str(getattr(window, "framework", ""))
    return fw in NPU_FRAMEWORKS and not window.kernels.empty


def npu_notes(window: Window, top: int = 3) -> list[str]:
    """What matters first on an NPU, in plain language: the kernels holding the device time,
    the communication share of the step, and whether one rank is slow."""
    notes = []
    tk = top_kernels(window, n=top, compute_only=True)
    if not tk.empty:
        k = window.kernels
        total_ms = k.loc[k["core"].astype(str) != "HCCL", "duration_us"].sum() / 1000.0
        parts = ", ".join(
            f"{n} ({c}) {s:.0%}"
            for n, c, s in tk[["name", "core", "share"]].itertuples(index=False)
        )
        notes.append(f"compute kernels {total_ms:,.1f} ms of device time; top: {parts}")
    share = communication_share(window)
    if share == share:
        notes.append(f"communication not hidden behind computation: {share:.0%} of step time")
    if len(getattr(window, "ranks", [])) > 1:
        notes.append(slow_rank_note(window))
    return notes


def npu_first(window: Window, summary: Any) -> Any:
    """Put :func:`npu_notes` before the generic notes of a Summary (hook for summarize())."""
    summary.notes = npu_notes(window) + [
        n for n in summary.notes if not n.startswith("communication not overlapped")
    ]
    summary.header["device_time_ms"] = float(window.kernels["duration_us"].sum() / 1000.0)
    return summary
