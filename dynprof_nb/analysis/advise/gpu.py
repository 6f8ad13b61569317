"""HTA 0.5.0's diagnoses of a GPU window, on its definitions (docs/definitions.md, "Advice"):

- :func:`idle_time_breakdown` (HTA ``get_idle_time_breakdown``): per stream, each gap between
  one kernel's end and the next one's start is *host wait* when the next kernel's launch (its
  runtime call) began after the previous kernel ended (the CPU did not enqueue in time),
  *kernel wait* when it is shorter than ``consecutive_kernel_delay`` (30 µs: launching
  back-to-back kernels), else *other* (e.g. waiting on an event). Kernels, memsets and
  memcopies count; syncs do not.
- :func:`kernel_launch_stats` (HTA ``get_cuda_kernel_launch_stats``): per launch
  (cudaLaunchKernel[ExC], cudaMemcpyAsync, cudaMemsetAsync, correlated with its device row):
  ``cpu_duration``, ``gpu_duration`` and ``launch_delay`` = device start - launch end (>= 0);
  HTA's cut-offs: runtime > 50 µs, launch delay > 100 µs, and kernels shorter than their launch.

The rules turn them into findings: the idle share of the device's span when it is >= 10%
(with host wait / kernel wait / other), and the launch outliers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dynprof_nb.analysis import gpu as gpu_frames
from dynprof_nb.traces.interface import Window

from .findings import Finding, NotApplicable
from .frames import with_rank
from .scope import Scope

PEER = "HTA"
IDLE_CATS = {"kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events"}
CONSECUTIVE_KERNEL_DELAY_US = 30.0
LAUNCH_NAMES = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "runFunction - job_prep_and_submit_for_execution",
)
MEMORY_LAUNCH_NAMES = ("cudaMemcpyAsync", "cudaMemsetAsync")
RUNTIME_CUTOFF_US = 50.0
LAUNCH_DELAY_CUTOFF_US = 100.0
IDLE_SHARE = 0.10
STRAGGLER_MIN_DURATION = 0.01  # HTA's min_normalized_duration
STRAGGLER_GAP = 0.05  # dynprof_nb's: a straggler finding is medium when this much later


def _device(w: Window, kernels_sel: gpu_frames.Selection, include_last_step: bool) -> pd.DataFrame:
    k = w.kernels
    if k.empty or "correlation" not in k:
        raise NotApplicable("no GPU kernels with their launches (a Kineto trace has them)")
    return with_rank(gpu_frames.select(k, w.steps, kernels_sel, include_last_step), w)


def idle_gaps(
    w: Window,
    consecutive_kernel_delay_us: float = CONSECUTIVE_KERNEL_DELAY_US,
    kernels_sel: gpu_frames.Selection = "steps",
    include_last_step: bool = False,
) -> pd.DataFrame:
    """Every gap between consecutive device rows of a stream: rank, stream, ``start_ns`` (of
    the kernel after it), ``gap_us``, ``launch_margin_us`` (its launch minus the previous
    kernel's end: > 0 is host wait) and ``idle_category``. Exact ns arithmetic (µs since the
    epoch in a float would keep only a quarter of a µs)."""
    k = _device(w, kernels_sel, include_last_step)
    k = k[k["type"].astype(str).isin(IDLE_CATS)]
    stream = k["stream_arg"] if "stream_arg" in k else k["stream"]
    k = k.assign(_stream=stream)
    parts = []
    for (r, s), part in k.groupby(["rank", "_stream"], sort=True):
        part = part.sort_values("start_ns", kind="stable")
        start = part["start_ns"].to_numpy("int64")
        end = start + np.rint(part["duration_us"].to_numpy("float64") * 1000).astype(np.int64)
        launch = part["launch_ns"].astype("Float64").to_numpy("float64", na_value=np.nan)
        gap = (start[1:] - end[:-1]) / 1e3
        margin = (launch[1:] - end[:-1].astype("float64")) / 1e3
        host = margin > 0
        kern = ~host & (gap < consecutive_kernel_delay_us)
        cat = np.where(host, "host wait", np.where(kern, "kernel wait", "other"))
        parts.append(
            pd.DataFrame(
                {
                    "rank": int(r),
                    "stream": int(s),
                    "start_ns": start[1:],
                    "gap_us": gap,
                    "launch_margin_us": margin,
                    "idle_category": cat,
                }
            )
        )
    cols = ["rank", "stream", "start_ns", "gap_us", "launch_margin_us", "idle_category"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def idle_time_breakdown(
    w: Window,
    consecutive_kernel_delay_us: float = CONSECUTIVE_KERNEL_DELAY_US,
    kernels_sel: gpu_frames.Selection = "steps",
    include_last_step: bool = False,
) -> pd.DataFrame:
    """Per rank, stream and idle category (``host wait``, ``kernel wait``, ``other``):
    ``idle_time_us`` and ``idle_time_ratio`` (of the stream's idle time), as HTA's table, and
    ``gaps`` (how many gaps; HTA's ``show_idle_interval_stats`` count). A stream's first
    kernel has no gap; HTA files it under "other" with none, so every stream has that row."""
    g = idle_gaps(w, consecutive_kernel_delay_us, kernels_sel, include_last_step)
    k = _device(w, kernels_sel, include_last_step)
    k = k[k["type"].astype(str).isin(IDLE_CATS)]
    stream = k["stream_arg"] if "stream_arg" in k else k["stream"]
    rows = []
    for (r, s), _ in k.groupby([k["rank"], stream], sort=True):
        part = g[(g["rank"] == r) & (g["stream"] == s)]
        total = float(part["gap_us"].sum())
        for c in ("host wait", "kernel wait", "other"):
            sel = part[part["idle_category"] == c]
            if sel.empty and c != "other":
                continue
            t = float(sel["gap_us"].sum())
            rows.append((int(r), int(s), c, t, t / total if total else np.nan, len(sel)))
    return pd.DataFrame(
        rows,
        columns=["rank", "stream", "idle_category", "idle_time_us", "idle_time_ratio", "gaps"],
    )


def kernel_launch_stats(
    w: Window,
    include_memory_events: bool = True,
    kernels_sel: gpu_frames.Selection = "steps",
    include_last_step: bool = False,
) -> pd.DataFrame:
    """Per launch: rank, correlation, name, cpu_duration_us, gpu_duration_us, launch_delay_us
    (HTA's table, plus the kernel's name and start)."""
    k = _device(w, kernels_sel, include_last_step)
    e = with_rank(w.events, w)
    names = LAUNCH_NAMES + (MEMORY_LAUNCH_NAMES if include_memory_events else ())
    if e.empty or "correlation" not in e:
        raise NotApplicable("no host launch events with correlation ids")
    host = e[e["name"].astype(str).isin(names) & e["correlation"].notna()]
    host = host[["rank", "correlation", "ts_ns", "dur_ns"]]
    dev = k[k["correlation"].notna()][["rank", "correlation", "name", "start_ns", "duration_us"]]
    m = host.merge(dev, on=["rank", "correlation"], how="inner")
    cpu = m["dur_ns"].astype("float64") / 1e3
    delay = (m["start_ns"].astype("float64") - m["ts_ns"].astype("float64")) / 1e3 - cpu
    return pd.DataFrame(
        {
            "rank": m["rank"].astype(int),
            "correlation": m["correlation"].astype("int64"),
            "name": m["name"].astype(str),
            "start_ns": m["start_ns"].astype("int64"),
            "cpu_duration_us": cpu,
            "gpu_duration_us": m["duration_us"].astype("float64"),
            "launch_delay_us": delay.clip(lower=0),
        }
    )


def idle_time(w: Window) -> list[Finding]:
    tb = gpu_frames.temporal_breakdown(with_rank(w.kernels, w), w.steps)
    if tb.empty:
        raise NotApplicable("no device activity")
    br = idle_time_breakdown(w)
    out = []
    for row in tb.itertuples(index=False):
        share = row.idle_time_us / row.kernel_time_us if row.kernel_time_us else 0.0
        if share < IDLE_SHARE:
            continue
        part = br[br["rank"] == row.rank].groupby("idle_category")["idle_time_us"].sum()
        tot = float(part.sum())
        by = {c: float(part.get(c, 0.0)) for c in ("host wait", "kernel wait", "other")}
        main = max(by, key=lambda c: by[c])
        out.append(
            Finding(
                rule="GPU idle time",
                severity="high" if share >= 0.3 else "medium",
                evidence=(
                    f"rank {int(row.rank)}'s GPU is idle {100 * share:.1f}% of its "
                    f"{row.kernel_time_us / 1000:.3f} ms (threshold {100 * IDLE_SHARE:.0f}%); "
                    f"gaps between kernels, summed over its "
                    f"{int((br['rank'] == row.rank).groupby(br['stream']).any().sum())} "
                    "stream(s): "
                    + ", ".join(
                        f"{c} {v / 1000:.3f} ms ({100 * v / tot if tot else 0:.0f}%)"
                        for c, v in by.items()
                    )
                    + f" (kernel wait: gaps < {CONSECUTIVE_KERNEL_DELAY_US:g} µs)"
                ),
                suggestion={
                    "host wait": "the CPU does not launch fast enough: CUDA graphs, fewer small "
                    "ops (fusion, torch.compile), no synchronizations in the step",
                    "kernel wait": "many back-to-back small kernels: fuse them (torch.compile, "
                    "fused optimizers)",
                    "other": "kernels wait on events (communication, copies): overlap them",
                }[main],
                peer=PEER,
                ranks=[int(row.rank)],
                numbers={
                    "idle_share": share,
                    "kernel_time_us": float(row.kernel_time_us),
                    **{f"{c}_us": v for c, v in by.items()},
                    "threshold": IDLE_SHARE,
                },
            )
        )
    return out


def launch_stats(w: Window) -> list[Finding]:
    s = kernel_launch_stats(w)
    if s.empty:
        raise NotApplicable("no kernel launches matched to their kernels")
    out = []
    for r, part in s.groupby("rank"):
        short = part[part["gpu_duration_us"] < part["cpu_duration_us"]]
        slow = part[part["cpu_duration_us"] > RUNTIME_CUTOFF_US]
        late = part[part["launch_delay_us"] > LAUNCH_DELAY_CUTOFF_US]
        n = len(part)
        parts = []
        if len(short) / n >= 0.5:
            parts.append(f"{len(short)} of {n} kernels run shorter than their launch call")
        if len(slow):
            parts.append(
                f"{len(slow)} launch calls take > {RUNTIME_CUTOFF_US:g} µs "
                f"(max {slow['cpu_duration_us'].max():.1f} µs)"
            )
        if len(late):
            parts.append(
                f"{len(late)} kernels start > {LAUNCH_DELAY_CUTOFF_US:g} µs after "
                f"their launch (max {late['launch_delay_us'].max():.1f} µs)"
            )
        if not parts:
            continue
        out.append(
            Finding(
                rule="kernel launches",
                severity="medium",
                evidence="; ".join(parts) + f" (rank {int(r)}, {n} launches)",
                suggestion=(
                    "kernels shorter than their launch: fuse them or capture the step in a CUDA "
                    "graph; slow launch calls: the host is the bottleneck there; long launch "
                    "delays: the host runs ahead and the device's queue (or a wait on another "
                    "stream) holds the kernel"
                ),
                peer=PEER,
                ranks=[int(r)],
                numbers={
                    "launches": n,
                    "shorter_than_launch": len(short),
                    "runtime_outliers": len(slow),
                    "delay_outliers": len(late),
                    "runtime_cutoff_us": RUNTIME_CUTOFF_US,
                    "launch_delay_cutoff_us": LAUNCH_DELAY_CUTOFF_US,
                },
            )
        )
    return out


def _steps_kept(w: Window, include_last_step: bool) -> list[int]:
    """HTA's profiler steps: every step of the window but the last (kept only with
    ``include_last_step``), the last possibly incomplete in a Kineto trace."""
    st = sorted(int(s) for s in with_rank(w.steps, w)["step"].dropna().unique())
    return st if include_last_step or len(st) < 2 else st[:-1]


def straggler_metric(
    w: Window,
    min_normalized_duration: float = STRAGGLER_MIN_DURATION,
    include_last_step: bool = False,
) -> pd.DataFrame:
    """HTA's straggler metric (``_compute_normalized_start_time_of_significant_comm_kernels``):
    of the NCCL kernels lasting >= 1% of the mean step, the last one per (rank, stream, step,
    kernel); the (stream, kernel) whose duration differs most across ranks (mean over steps
    of the ranks' standard deviation) is the probe, and each rank's ``normalized_start_time``
    is when it started that kernel, from the first event of the steps, in mean steps."""
    steps = _steps_kept(w, include_last_step)
    if not steps:
        raise NotApplicable("no profiler steps")
    k = _device(w, "hta", include_last_step)
    k = k[k["step"].isin(steps)]
    e = with_rank(w.events, w)
    e = e[e["step"].isin(steps)] if "step" in e else e.iloc[:0]
    starts = [k["start_ns"].astype("float64").min(), e["ts_ns"].astype("float64").min()]
    ends = [
        (k["start_ns"].astype("float64") + k["duration_us"] * 1000).max(),
        (e["ts_ns"].astype("float64") + e["dur_ns"].astype("float64")).max(),
    ]
    t_min = float(np.nanmin(starts))
    mean_iter = (float(np.nanmax(ends)) - t_min) / len(steps)
    stream = k["stream_arg"] if "stream_arg" in k else k["stream"]
    comm = k[
        (stream > 0).fillna(False).to_numpy(bool)
        & (k["step"] > 0).fillna(False).to_numpy(bool)
        & (k["duration_us"] * 1000 >= mean_iter * min_normalized_duration).to_numpy(bool)
        & k["name"].astype(str).str.startswith("ncclKernel").to_numpy(bool)
    ].assign(_stream=stream)
    comm = comm.drop(columns=[c for c in ("stream",) if c in comm])
    if comm.empty or comm["rank"].nunique() < 2:
        raise NotApplicable("no NCCL kernels on two ranks or more")
    last = (
        comm.sort_values("start_ns", kind="stable")
        .groupby(["rank", "_stream", "step", comm["name"].astype(str)], observed=True)
        .last()
        .drop(columns="name")
        .reset_index()
        .rename(columns={"_stream": "stream"})
    )
    last["normalized_start_time"] = (last["start_ns"].astype("float64") - t_min) / mean_iter
    last["duration"] = last["duration_us"] * 1000 / mean_iter
    spread = (
        last.groupby(["stream", "step", "name"])["duration"]
        .std()
        .groupby(["stream", "name"])
        .mean()
    )
    if spread.isna().all():
        raise NotApplicable("one rank per NCCL kernel: nothing to compare")
    probe = spread.idxmax()
    out = last[(last["stream"] == probe[0]) & (last["name"] == probe[1])]
    return out[["rank", "step", "stream", "name", "normalized_start_time", "duration"]]


def potential_stragglers(
    w: Window, num_candidates: int = 2, include_last_step: bool = False
) -> pd.DataFrame:
    """HTA's ``get_potential_stragglers``: per step the ``num_candidates`` ranks that start the
    probe kernel latest (:func:`straggler_metric`); per rank ``times`` it was one, the ranks
    HTA names first (``straggler``: the top ``num_candidates`` by ``times``)."""
    m = straggler_metric(w, include_last_step=include_last_step)
    n = max(1, num_candidates)
    flags = []
    for _, g in m.groupby("step"):
        vals = g["normalized_start_time"].sort_values(ascending=False).tolist()
        thr = vals[min(n, len(vals)) - 1]
        flags.append(g.assign(is_straggler=(g["normalized_start_time"] >= thr).astype(int)))
    f = pd.concat(flags)
    times = f.groupby("rank")["is_straggler"].sum()
    top = set(times.sort_values(ascending=False, kind="stable").index[:n])
    mean = m.groupby("rank")["normalized_start_time"].mean()
    return pd.DataFrame(
        {
            "rank": times.index.astype(int),
            "times": times.to_numpy(),
            "mean_normalized_start": mean.reindex(times.index).to_numpy(),
            "straggler": [r in top for r in times.index],
        }
    )


def stragglers(w: Window) -> list[Finding]:
    t = potential_stragglers(w)
    late = t[t["straggler"]]
    rest = t[~t["straggler"]]
    if rest.empty:
        raise NotApplicable(
            f"{len(t)} ranks: HTA's {len(late)} candidates are every rank, nothing to tell apart"
        )
    gap = float(late["mean_normalized_start"].min() - rest["mean_normalized_start"].max())
    ranks = sorted(int(r) for r in late["rank"])
    return [
        Finding(
            rule="potential stragglers",
            severity="medium" if gap >= STRAGGLER_GAP else "info",
            evidence=(
                f"ranks {', '.join(map(str, ranks))} start the probe NCCL kernel latest "
                f"(HTA's get_potential_stragglers); they start it "
                f"{100 * gap:.1f}% of a mean step after the others "
                f"(threshold {100 * STRAGGLER_GAP:.0f}%)"
            ),
            suggestion=(
                "the others wait for these ranks in the collective: compare their compute "
                "(w.slow_ranks(), w.explain) and host (dataloader, CPU contention)"
            ),
            peer=PEER,
            ranks=ranks,
            numbers={
                "ranks": ranks,
                "gap_mean_steps": gap,
                "times": dict(zip(t["rank"].astype(int), t["times"].astype(int), strict=True)),
                "threshold": STRAGGLER_GAP,
            },
        )
    ]


SCOPES = {
    "GPU idle time": Scope(("gpu",), needs="GPU kernels with their launches (a Kineto trace)"),
    "kernel launches": Scope(("gpu",), needs="CUDA launch events correlated to kernels"),
    "potential stragglers": Scope(("gpu",), needs="NCCL kernels on three ranks or more"),
}

RULES = {
    "GPU idle time": idle_time,
    "kernel launches": launch_stats,
    "potential stragglers": stragglers,
}

__all__ = [
    "RULES",
    "SCOPES",
    "idle_gaps",
    "idle_time_breakdown",
    "kernel_launch_stats",
    "potential_stragglers",
    "straggler_metric",
]
