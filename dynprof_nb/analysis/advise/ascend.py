"""msprof-analyze 26.2.0 advisor's rules (``msprof-analyze advisor all``), on a loaded window's
frames, with its thresholds and definitions (docs/definitions.md, "Advice"):

- slow rank: per step and rank, Computing, Communication(Not Overlapped) and Free (the
  ClusterStepTraceTime columns); a dimension is slow when its max - min across the (step, rank)
  rows exceeds 5% of the mean (step, rank) total (``SlowRankAnalyzer.RATIO_THRESHOLD``);
- slow link: per step and rank, SDMA and RDMA bandwidth = transit size / transit time summed
  over the ops; the advisor prints mean, max, min and their gap for each (``SlowLinkAnalyzer``);
- byte alignment: an op whose SDMA data tasks (off-chip, > 512 B) move a size that is not a
  multiple of 512 B (``ByteAlignmentChecker``);
- small packets: more than 20% of a rank's ops move under 16 MB over SDMA (1 MB over RDMA)
  (``PacketChecker``);
- bandwidth contention: an SDMA op (one that moves SDMA data) running while a MatMul runs at
  under 80% of the 18 GB/s SDMA baseline (``BandwidthContentionChecker``);
- AICPU operators: device tasks on the AI CPU, when the longest task is >= 20 µs
  (``AicpuChecker``);
- operator compile: operators compiled at run time (aclopCompileAndExecute, opCompile) taking
  >= 5% of a rank's host self time (the summary's note; the advisor's dynamic-shape check
  needs kernel_details' OpState, which a window rarely has);
- memory operators: aclMallocMemInner / aclrtFreePhysical / aclrtFree taking > 10 ms in all
  (``MemoryOpsChecker``);
- slow dataloader: a framework call whose name has "dataloader" taking >= 10 ms
  (``DataloaderChecker``);
- GC: garbage-collection events (cat ``gc``, the Monitor's ``gc.callbacks`` pauses) of >= 1 ms
  (``GcChecker``);
- synchronizing stream: aclrtSynchronizeStream right after a Node@launch for more than half of
  the launches: ASCEND_LAUNCH_BLOCKING is likely set (``SynchronizeStreamChecker``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.traces.interface import Window

from .affinity import affinity_api
from .dynamic_shape import dynamic_shape
from .findings import Finding, NotApplicable
from .frames import names_where, rank_window, ranks_of, span, with_rank
from .scope import Scope

PEER = "msprof-analyze advisor"

SLOW_RANK_RATIO = 0.05
SLOW_LINK_RATIO = 0.05
ALIGN_BYTES = 512
SMALL_SDMA_MB, SMALL_RDMA_MB, SMALL_RATIO = 16.0, 1.0, 0.2
AICPU_MIN_TASK_US = 20.0
SDMA_BASELINE_GBPS, CONTENTION_RATIO, BANDWIDTH_TOP = 18.0, 0.8, 10
MEMORY_OPS = ("aclMallocMemInner", "aclrtFreePhysical", "aclrtFree")
MEMORY_MAX_US = 10_000.0
DATALOADER_US = 10_000.0
GC_US = 1_000.0
COMPILE_SHARE = 0.05  # the summary's "operators compiled at run time" note
GC_EVENT = "GC"  # dynprof_nb.training.gcpauses.GC_EVENT (training/ is not imported here)
SYNC_STREAM, NODE_LAUNCH = "aclrtSynchronizeStream", "Node@launch"
SYNC_RATIO = 0.5


def _bare(names: pd.Series) -> pd.Series:
    """Event names without the ``AscendCL@`` prefix text exports add (a .db has none)."""
    return names.str.replace(r"^AscendCL@", "", regex=True)


def _named(e: pd.DataFrame, test: Any) -> pd.DataFrame:
    """The events whose bare name passes ``test`` (a string Series -> bool Series)."""
    return e[names_where(e["name"], lambda n: test(_bare(n)))]


def slow_rank(w: Window) -> list[Finding]:
    st = w.step_trace()
    cols = ["Computing", "Communication(Not Overlapped)", "Free"]
    if st.empty or st[cols].isna().all().any():
        raise NotApplicable("no per-step Computing / Communication / Free (step trace)")
    if st["Index"].nunique() < 2:
        raise NotApplicable("one rank: nothing to compare it with")
    st = st.dropna(subset=cols)
    mean_total = float(st[cols].sum(axis=1).mean())
    out = []
    for col, label in zip(cols, ("Computing", "Communication", "Free"), strict=True):
        v = st[col].astype(float)
        gap = float(v.max() - v.min())
        ratio = gap / mean_total if mean_total else 0.0
        if ratio <= SLOW_RANK_RATIO:
            continue
        hi, lo = st.loc[v.idxmax()], st.loc[v.idxmin()]
        out.append(
            Finding(
                rule="slow rank",
                severity="high" if ratio > 2 * SLOW_RANK_RATIO else "medium",
                evidence=(
                    "msprof-analyze's slow-rank rule ((max - min) of a step-trace dimension "
                    "across (step, rank) over the mean step total): "
                    f"{label} differs by {gap / 1000:.3f} ms across ranks (rank {int(hi['Index'])}"
                    f" {float(hi[col]) / 1000:.3f} ms, rank {int(lo['Index'])} "
                    f"{float(lo[col]) / 1000:.3f} ms): {100 * ratio:.1f}% of the mean step "
                    f"{mean_total / 1000:.3f} ms (threshold {100 * SLOW_RANK_RATIO:.0f}%)"
                ),
                suggestion=(
                    f"look at what rank {int(hi['Index'])} does differently in {label.lower()}"
                    " (w.explain / compare the ranks' top operators)"
                    if label != "Communication"
                    else f"ranks wait in communication for the slowest: rank {int(lo['Index'])}"
                    " communicates least, so the others wait for it"
                ),
                peer=PEER,
                ranks=sorted({int(hi["Index"]), int(lo["Index"])}),
                steps=sorted({int(hi["Step"]), int(lo["Step"])}),
                numbers={
                    "dimension": label,
                    "max_minus_min_us": gap,
                    "max_minus_min_ms": round(gap / 1000, 3),
                    "mean_total_us": mean_total,
                    "ratio": ratio,
                    "threshold": SLOW_RANK_RATIO,
                },
            )
        )
    return out


def _step_rank_bandwidth(w: Window) -> pd.DataFrame:
    """Per (step, rank, transport SDMA/RDMA): size_mb, transit_us, bandwidth_gbps (MB/ms)."""
    b = w.communication_bandwidth()
    if b.empty:
        raise NotApplicable("no per-transport communication sizes and times")
    b = with_rank(b, w)
    b = b[b["transport"].isin(["SDMA", "RDMA"])]
    g = b.groupby(["step", "rank", "transport"], dropna=False)[["size_mb", "transit_us"]].sum()
    g = g.reset_index()
    t_ms = g["transit_us"] / 1000.0
    g["bandwidth_gbps"] = np.where(t_ms > 1e-15, g["size_mb"] / t_ms.where(t_ms > 1e-15), 0.0)
    return g


def slow_link(w: Window) -> list[Finding]:
    g = _step_rank_bandwidth(w)
    out = []
    for transport in ("RDMA", "SDMA"):
        part = g[g["transport"] == transport]
        if part.empty or not (part["size_mb"] > 0).any():
            continue
        # the advisor counts every (step, rank) of the cluster: one without this transport as 0
        keys = g[["step", "rank"]].drop_duplicates()
        bw = keys.merge(part, on=["step", "rank"], how="left")["bandwidth_gbps"].fillna(0.0)
        bw = bw.round(4)
        mean, mx, mn = float(bw.mean()), float(bw.max()), float(bw.min())
        ratio = (mx - mn) / mean if mean else 0.0
        slow = part.loc[part["bandwidth_gbps"].idxmin()]
        out.append(
            Finding(
                rule="slow link",
                severity="medium" if ratio > SLOW_LINK_RATIO else "info",
                evidence=(
                    f"{transport} bandwidth mean {mean:.3f} GB/s, max {mx:.3f}, min {mn:.3f} "
                    f"(rank {int(slow['rank'])}), gap {mx - mn:.3f} GB/s = {100 * ratio:.1f}% "
                    f"of the mean (threshold {100 * SLOW_LINK_RATIO:.0f}%)"
                ),
                suggestion=(
                    f"check rank {int(slow['rank'])}'s {transport} links (w.communication_matrix())"
                    if ratio > SLOW_LINK_RATIO
                    else "no link is slower than the others"
                ),
                peer=PEER,
                ranks=[int(slow["rank"])] if ratio > SLOW_LINK_RATIO else [],
                steps=sorted(int(s) for s in part["step"].dropna().unique()),
                numbers={
                    "transport": transport,
                    "mean_gbps": round(mean, 3),
                    "max_gbps": round(mx, 3),
                    "min_gbps": round(mn, 3),
                    "gap_gbps": round(mx - mn, 3),
                    "ratio": ratio,
                    "threshold": SLOW_LINK_RATIO,
                },
            )
        )
    if not out:
        raise NotApplicable("no SDMA or RDMA traffic")
    return out


def _comm_tasks(rw: Any) -> pd.DataFrame | None:
    db = getattr(rw, "database", None)
    adb = db() if callable(db) else None
    tasks = getattr(adb, "comm_tasks", None)
    if not callable(tasks):
        return None
    t = tasks()
    return t if t is not None and not t.empty else None


def byte_alignment(w: Window) -> list[Finding]:
    out, seen = [], False
    comm = None  # read only once a rank has tasks: a Kineto window builds it from its events
    for r in ranks_of(w):
        t = _comm_tasks(rank_window(w, r))
        if t is None:
            continue
        seen = True
        if comm is None:
            comm = with_rank(w.communication, w)
        data = t[(t["transport"] == "SDMA") & (t["link"] != "ON_CHIP")]
        data = data[data["task"].astype(str).str.match(r"SDMA|Memcpy|Reduce")]
        data = data[data["size_bytes"] > ALIGN_BYTES]
        bad = data[data["size_bytes"] % ALIGN_BYTES != 0]
        if bad.empty:
            continue
        ops = sorted(int(o) for o in bad["op_id"].unique())
        per_op = bad.groupby("op_id")
        names = _op_names(comm[comm["rank"] == r], data, ops)
        out.append(
            Finding(
                rule="byte alignment",
                severity="medium",
                evidence=(
                    f"{len(ops)} communication operator(s) move SDMA data in sizes that are "
                    f"not a multiple of {ALIGN_BYTES} B ({len(bad)} of {len(data)} data tasks "
                    f"over {ALIGN_BYTES} B; e.g. {int(bad['size_bytes'].iloc[0])} B)"
                    + (f": {', '.join(names)}" if names else "")
                ),
                suggestion=(
                    f"pad or bucket the communicated tensors to multiples of {ALIGN_BYTES} B"
                ),
                peer=PEER,
                ranks=[r],
                start_ns=int(bad["start_ns"].min()),
                end_ns=int(bad["end_ns"].max()),
                lanes=[f"rank {r} HCCL"],
                numbers={
                    "ops": len(ops),
                    "unaligned_tasks": len(bad),
                    "data_tasks": len(data),
                    "unaligned_us": float((per_op["end_ns"].sum() - per_op["start_ns"].sum()).sum())
                    / 1e3,
                    "threshold_bytes": ALIGN_BYTES,
                },
            )
        )
    if not seen:
        raise NotApplicable("no per-task HCCL sizes (a torch_npu .db export has them)")
    return out


def _op_names(comm: pd.DataFrame, tasks: pd.DataFrame, ops: list[int]) -> list[str]:
    """The communication frame's names of the task ops (by start order), where they line up."""
    if comm.empty or "start_ns" not in comm:
        return []
    first = tasks.groupby("op_id")["start_ns"].min().sort_values()
    names = comm.sort_values("start_ns")["name"].astype(str).tolist()
    if len(first) != len(names):
        return []
    order = {int(o): i for i, o in enumerate(first.index)}
    return [names[order[o]] for o in ops if o in order]


def small_packets(w: Window) -> list[Finding]:
    b = w.communication_bandwidth()
    if b.empty:
        raise NotApplicable("no per-transport communication sizes")
    b = with_rank(b, w)
    out = []
    for r, part in b.groupby("rank"):
        for transport, limit in (("SDMA", SMALL_SDMA_MB), ("RDMA", SMALL_RDMA_MB)):
            p = part[(part["transport"] == transport) & (part["size_mb"] > 0)]
            if p.empty:
                continue
            small = p[p["size_mb"] < limit]
            ratio = len(small) / len(p)
            if ratio <= SMALL_RATIO:
                continue
            ms = float(small["transit_us"].sum()) / 1000.0
            out.append(
                Finding(
                    rule="small packets",
                    severity="medium" if ratio > 0.5 else "low",
                    evidence=(
                        f"{100 * ratio:.2f}% of rank {int(r)}'s {transport} communication ops "
                        f"({len(small)} of {len(p)}) move under {limit:g} MB (threshold "
                        f"{100 * SMALL_RATIO:.0f}%), {ms:.4f} ms of transit in all"
                    ),
                    suggestion=(
                        "fewer, larger messages: a larger batch or gradient accumulation, "
                        "bucketed or fused gradients (Zero3 -> Zero2/Zero1 where memory allows)"
                    ),
                    peer=PEER,
                    ranks=[int(r)],
                    steps=sorted(int(s) for s in small["step"].dropna().unique()),
                    numbers={
                        "transport": transport,
                        "ratio": ratio,
                        "small_ops": len(small),
                        "ops": len(p),
                        "small_transit_ms": ms,
                        "threshold_mb": limit,
                        "threshold_ratio": SMALL_RATIO,
                    },
                )
            )
    return out


def bandwidth_contention(w: Window) -> list[Finding]:
    """SDMA ops running while a MatMul runs, at under 80% of the 18 GB/s SDMA baseline."""
    b = w.communication_bandwidth()  # Ascend's per-transport table first: no events needed
    if b.empty:
        raise NotApplicable("no communication ops with SDMA bandwidths and device tasks")
    c, k = with_rank(w.communication, w), w.kernels
    if c.empty or k.empty or "start_ns" not in c:
        raise NotApplicable("no communication ops with SDMA bandwidths and device tasks")
    b = with_rank(b, w)
    sdma = b[(b["transport"] == "SDMA") & (b["size_mb"] > 0)][["rank", "name", "bandwidth_gbps"]]
    ops = c.merge(
        sdma.drop_duplicates(["rank", "name"]),
        on=["rank", "name"],
        how="inner",
        suffixes=("_op", ""),
    )
    k = with_rank(k, w)
    mm = k[names_where(k["name"], lambda n: n.str.lower().str.contains("matmul"))]
    limit = CONTENTION_RATIO * SDMA_BASELINE_GBPS
    out = []
    for r, part in ops.groupby("rank"):
        m = mm[mm["rank"] == r]
        if m.empty:
            continue
        ms = m["start_ns"].to_numpy("float64")
        me = ms + m["duration_us"].to_numpy("float64") * 1000
        s0 = part["start_ns"].to_numpy("float64")
        s1 = s0 + part["elapse_us"].to_numpy("float64") * 1000
        under = [((ms <= b1) & (me >= a0)).any() for a0, b1 in zip(s0, s1, strict=True)]
        hit = part[np.array(under, bool) & (part["bandwidth_gbps"] < limit).to_numpy(bool)]
        if hit.empty:
            continue
        worst = hit.sort_values("bandwidth_gbps").head(BANDWIDTH_TOP)
        out.append(
            Finding(
                rule="bandwidth contention",
                severity="medium",
                evidence=(
                    f"{len(hit)} SDMA communication op(s) on rank {int(r)} run beside a MatMul at "
                    f"under {limit:g} GB/s ({100 * CONTENTION_RATIO:.0f}% of the "
                    f"{SDMA_BASELINE_GBPS:g} GB/s SDMA baseline): "
                    + ", ".join(
                        f"{n} {v:.2f} GB/s"
                        for n, v in zip(worst["name"], worst["bandwidth_gbps"], strict=True)
                    )
                ),
                suggestion=(
                    "computing and communicating at once costs bandwidth here: compare with "
                    "the overlap turned off to see whether the overlap still pays"
                ),
                peer=PEER,
                ranks=[int(r)],
                steps=sorted(int(s) for s in hit["step"].dropna().unique()),
                start_ns=int(hit["start_ns"].min()),
                end_ns=int((hit["start_ns"] + hit["elapse_us"] * 1000).max()),
                lanes=[f"rank {int(r)} HCCL"],
                numbers={"ops": len(hit), "names": list(hit["name"]), "threshold_gbps": limit},
            )
        )
    return out


def aicpu(w: Window) -> list[Finding]:
    k = w.kernels
    if k.empty or "core" not in k or k["core"].isna().all():
        raise NotApplicable("no device tasks with their accelerator core (Ascend's AI CPU)")
    k = with_rank(k, w)
    out = []
    for r, part in k.groupby("rank"):
        comp = part[part["core"].astype(str) != "HCCL"]
        cpu = comp[comp["core"].astype(str) == "AI_CPU"]
        if cpu.empty or float(comp["duration_us"].max()) < AICPU_MIN_TASK_US:
            continue
        total, mine = float(comp["duration_us"].sum()), float(cpu["duration_us"].sum())
        top = cpu.groupby(cpu["type"].astype(str))["duration_us"].sum().sort_values()[::-1]
        lo, hi = span(cpu)
        out.append(
            Finding(
                rule="AICPU operators",
                severity="medium" if mine / total > 0.05 else "low",
                evidence=(
                    f"{len(cpu)} device task(s) run on the AI CPU, {mine:.2f} µs = "
                    f"{100 * mine / total:.2f}% of rank {int(r)}'s compute task time (longest task "
                    f"{float(comp['duration_us'].max()):.2f} µs >= {AICPU_MIN_TASK_US:g} µs): "
                    + ", ".join(f"{n} {v:.2f} µs" for n, v in top.head(5).items())
                ),
                suggestion=(
                    "replace these operators or their data types (double -> float, int64 "
                    "indices -> int32) with ones the AI Core runs"
                ),
                peer=PEER,
                ranks=[int(r)],
                steps=sorted(int(s) for s in cpu["step"].dropna().unique()),
                start_ns=lo,
                end_ns=hi,
                lanes=[f"rank {int(r)} AI_CPU"],
                numbers={
                    "tasks": len(cpu),
                    "aicpu_us": mine,
                    "share": mine / total,
                    "ops": list(top.index),
                    "threshold_us": AICPU_MIN_TASK_US,
                },
            )
        )
    return out


def _host_events(w: Window) -> pd.DataFrame:
    e = w.events
    if e.empty:
        raise NotApplicable("no host events (trace_view.json or the .db's API tables)")
    return with_rank(e, w)


def memory_operators(w: Window) -> list[Finding]:
    e = _named(_host_events(w), lambda n: n.isin(MEMORY_OPS))
    bare = _bare(e["name"].astype(str))
    out = []
    for name in MEMORY_OPS:
        hit = e[bare == name]
        for r, part in hit.groupby("rank"):
            total = float(part["dur_ns"].sum()) / 1e3
            if total <= MEMORY_MAX_US:
                continue
            lo, hi = span(part, "ts_ns", None, None)
            out.append(
                Finding(
                    rule="memory operators",
                    severity="high",
                    evidence=(
                        f"{len(part)} {name} call(s) took {total:.2f} µs on rank {int(r)} "
                        f"(threshold {MEMORY_MAX_US:g} µs in all): the device waits (free time)"
                    ),
                    suggestion=(
                        "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"
                        if name == "aclMallocMemInner"
                        else "stay below the device memory limit (smaller batch) and remove "
                        "empty_cache() calls from the step"
                    ),
                    peer=PEER,
                    ranks=[int(r)],
                    start_ns=lo,
                    end_ns=(int(part["ts_ns"].max() + part["dur_ns"].max()) if hi else None),
                    lanes=[f"rank {int(r)} host"],
                    numbers={
                        "name": name,
                        "count": len(part),
                        "total_us": total,
                        "threshold_us": MEMORY_MAX_US,
                    },
                )
            )
    return out


def operator_compile(w: Window) -> list[Finding]:
    """Operators compiled at run time (aclopCompileAndExecute ...): the summary's host
    overhead table's "op compile" row, per rank, when >= 5% of host self time."""
    from dynprof_nb.analysis.summary import overhead_table

    ops = with_rank(w.ops, w)
    if ops.empty or "self_us" not in ops:
        raise NotApplicable("no host operators with self time")
    out = []
    for r, part in ops.groupby("rank"):
        t = overhead_table(part)
        row = t[t["overhead"] == "op compile"]
        if row.empty or float(row["share"].iloc[0]) < COMPILE_SHARE:
            continue
        row = row.iloc[0]
        out.append(
            Finding(
                rule="operator compile",
                severity="high" if row["share"] >= 0.2 else "medium",
                evidence=(
                    f"operators compiled at run time take {row['self_us'] / 1000:.3f} ms = "
                    f"{100 * row['share']:.1f}% of rank {int(r)}'s host self time "
                    f"({int(row['calls'])} calls: {row['ops']}; threshold "
                    f"{100 * COMPILE_SHARE:.0f}%)"
                ),
                suggestion=(
                    "dynamic shapes recompile operators: pad to fixed shapes, or "
                    "torch_npu.npu.set_compile_mode(jit_compile=False) to use prebuilt binaries"
                ),
                peer=PEER,
                ranks=[int(r)],
                numbers={
                    "self_us": float(row["self_us"]),
                    "share": float(row["share"]),
                    "calls": int(row["calls"]),
                    "threshold": COMPILE_SHARE,
                },
            )
        )
    return out


def slow_dataloader(w: Window) -> list[Finding]:
    e = _host_events(w)
    hit = e[names_where(e["name"], lambda n: n.str.contains("dataloader", case=False))]
    hit = hit[hit["dur_ns"] >= DATALOADER_US * 1e3]
    out = []
    for r, part in hit.groupby("rank"):
        worst = part.loc[part["dur_ns"].idxmax()]
        steps = [int(s) for s in part["step"].dropna().unique()] if "step" in part else []
        out.append(
            Finding(
                rule="slow dataloader",
                severity="high",
                evidence=(
                    f"the dataloader took {float(worst['dur_ns']) / 1e3:.2f} µs in one call on "
                    f"rank {int(r)} ({worst['name']}), normally under {DATALOADER_US:g} µs"
                ),
                suggestion=(
                    "check the data disk's I/O, num_workers and pin_memory=True; avoid reading "
                    "archives (tar, zip) in the loop; check core binding (taskset)"
                ),
                peer=PEER,
                ranks=[int(r)],
                steps=sorted(steps),
                start_ns=int(worst["ts_ns"]),
                end_ns=int(worst["ts_ns"] + worst["dur_ns"]),
                lanes=[f"rank {int(r)} host"],
                numbers={
                    "max_us": float(worst["dur_ns"]) / 1e3,
                    "calls": len(part),
                    "threshold_us": DATALOADER_US,
                },
            )
        )
    return out


def gc_pauses(w: Window) -> list[Finding]:
    e = _host_events(w)
    # category gc (torch_npu's GC records; the built-in and MindSpore backends' pauses), or
    # the torch backend's record_function named GC (Kineto files it as a user_annotation)
    gc = e[
        names_where(e["cat"], lambda c: c.str.lower() == "gc")
        | (
            names_where(e["name"], lambda n: n == GC_EVENT)
            & names_where(e["cat"], lambda c: c == "user_annotation")
        )
    ]
    if gc.empty:
        raise NotApplicable(
            "no garbage-collection events (torch_npu records them with gc_detect_threshold; "
            "the Monitor records gc.callbacks pauses)"
        )
    out = []
    for r, part in gc[gc["dur_ns"] >= GC_US * 1e3].groupby("rank"):
        total = float(part["dur_ns"].sum()) / 1e6
        lo, hi = span(part, "ts_ns", None)
        out.append(
            Finding(
                rule="GC",
                severity="medium",
                evidence=(
                    f"{len(part)} garbage collection pause(s) of >= {GC_US:g} µs on rank {int(r)}, "
                    f"{total:.3f} ms in all (longest {float(part['dur_ns'].max()) / 1e3:.1f} µs)"
                ),
                suggestion=(
                    "free memory promptly and avoid reference cycles; gc.set_threshold() or "
                    "gc.disable()/gc.collect() between steps (gc.freeze() after setup)"
                ),
                peer=PEER,
                ranks=[int(r)],
                steps=sorted(int(s) for s in part["step"].dropna().unique()),
                start_ns=lo,
                end_ns=int((part["ts_ns"] + part["dur_ns"]).max()),
                lanes=[f"rank {int(r)} host"],
                numbers={"count": len(part), "total_ms": total, "threshold_us": GC_US},
            )
        )
    return out


def synchronize_stream(w: Window) -> list[Finding]:
    e = _named(
        _host_events(w), lambda n: n.str.startswith(SYNC_STREAM) | n.str.startswith(NODE_LAUNCH)
    )
    if e.empty:
        return []
    out = []
    for r, part in e.assign(bare=_bare(e["name"].astype(str))).groupby("rank"):
        part = part.sort_values("ts_ns", kind="stable")
        is_launch = part["bare"].str.startswith(NODE_LAUNCH).to_numpy()
        is_sync = part["bare"].str.startswith(SYNC_STREAM).to_numpy()
        launches, syncs = int(is_launch.sum()), int(is_sync.sum())
        co = int((is_sync[1:] & is_launch[:-1]).sum())
        ratio = round(co / launches, 4) if launches else 0.0
        if ratio <= SYNC_RATIO:
            continue
        out.append(
            Finding(
                rule="synchronize stream",
                severity="high",
                evidence=(
                    f"{syncs} SynchronizeStream and {launches} Node@launch on rank {int(r)}; "
                    f"{100 * ratio:.1f}% of the launches are followed by a synchronize "
                    f"(threshold {100 * SYNC_RATIO:.0f}%)"
                ),
                suggestion="unset ASCEND_LAUNCH_BLOCKING (it makes every launch synchronous)",
                peer=PEER,
                ranks=[int(r)],
                numbers={
                    "synchronize": syncs,
                    "launches": launches,
                    "ratio": ratio,
                    "threshold": SYNC_RATIO,
                },
            )
        )
    return out


RULES = {
    "slow rank": slow_rank,
    "slow link": slow_link,
    "byte alignment": byte_alignment,
    "small packets": small_packets,
    "bandwidth contention": bandwidth_contention,
    "AICPU operators": aicpu,
    "memory operators": memory_operators,
    "operator compile": operator_compile,
    "dynamic shape": dynamic_shape,
    "slow dataloader": slow_dataloader,
    "GC": gc_pauses,
    "synchronize stream": synchronize_stream,
    "affinity API": affinity_api,
}

_NPU = ("npu",)
# where each rule applies (scope.py): the Ascend device and CANN rules only on Ascend windows
SCOPES = {
    "slow rank": Scope(
        _NPU,
        needs="the step trace: Computing, Communication(Not Overlapped), "
        "Free per step and rank (step_trace_time.csv / analysis.db / a .db)",
    ),
    "slow link": Scope(_NPU, needs="HCCL transport sizes and times (communication.json / .db)"),
    "byte alignment": Scope(_NPU, needs="HCCL per-task sizes (a torch_npu .db)"),
    "small packets": Scope(_NPU, needs="HCCL transport sizes (communication.json / .db)"),
    "bandwidth contention": Scope(_NPU, needs="HCCL SDMA bandwidths and device tasks"),
    "AICPU operators": Scope(_NPU, needs="device tasks with their core (kernel_details / .db)"),
    "memory operators": Scope(_NPU, needs="AscendCL API events (trace_view.json / .db)"),
    "operator compile": Scope(_NPU, needs="host operators with aclopCompile"),
    "dynamic shape": Scope(_NPU, needs="kernels with OP State (kernel_details / .db)"),
    "slow dataloader": Scope(needs="host events with a data-loader call"),
    "GC": Scope(needs="GC events (the Monitor's gc.callbacks pauses, torch_npu's GC records)"),
    "synchronize stream": Scope(_NPU, needs="AscendCL launch and synchronize events"),
    "affinity API": Scope(
        _NPU,
        ("torch_npu", "ascend"),
        needs="torch_npu host events (the affine APIs are torch_npu's)",
    ),
}

__all__ = ["PEER", "RULES", "SCOPES"]
