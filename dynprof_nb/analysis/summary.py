"""Summaries over TraceWindow DataFrames: op table, step statistics, ranks, window comparison.

No file reading here: everything takes frames (or a window's frames) and returns frames or a
small result object with HTML and text reprs for notebooks.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.analysis import gpu
from dynprof_nb.analysis.configdiff import (
    WindowLengthWarning,
    config_line,
    warn_if_configs_differ,
)
from dynprof_nb.analysis.profiler_cost import profiler_cost_note
from dynprof_nb.analysis.ranks import is_npu_window, npu_first
from dynprof_nb.analysis.recent_explain import parts_line
from dynprof_nb.analysis.step_time import OUTLIER_FACTOR, step_outliers
from dynprof_nb.contract.protocol import STEP_FOLDED
from dynprof_nb.safetext import escape, frame_html
from dynprof_nb.traces import schema
from dynprof_nb.traces.comm import PatternSpec
from dynprof_nb.traces.interface import Window
from dynprof_nb.traces.partitioned import per_partition

BREAKDOWN_COLUMNS = [
    "step",
    "duration_us",
    "computing_us",
    "communication_us",
    "overlapped_us",
    "free_us",
]


def step_breakdown(steps: pd.DataFrame) -> pd.DataFrame:
    """The step table a person reads: one rank's time split per step, or with several ranks
    the step time of each rank side by side (one column per rank)."""
    if steps.empty:
        return steps
    if "rank" in steps and steps["rank"].nunique() > 1:
        table = steps.pivot_table(index="step", columns="rank", values="duration_us")
        table.columns = [f"rank {r} (us)" for r in table.columns]
        return table.reset_index()
    cols = [c for c in BREAKDOWN_COLUMNS if c in steps and steps[c].notna().any()]
    return steps[cols].reset_index(drop=True)


#: the summary's word on the folded step marker, said once when it is among the top operators:
#: it keeps torch's name everywhere (``w.ops``, the summary, the plots, compare), so a row in
#: one table is found by the same name in every other and in ``key_averages()``
STEP_FOLDED_NOTE = (
    f"{STEP_FOLDED} is no operator: its self time is the steps' time outside every range and "
    "op (as in torch's key_averages())"
)


def ops_across_ranks(ops: pd.DataFrame) -> pd.DataFrame:
    """Fold a multi-rank ``ops`` frame (one row per rank and name) into one row per name."""
    if ops.empty or "rank" not in ops:
        return ops
    t = (
        ops.groupby(ops["name"].astype(object), sort=False)
        .agg(
            count=("count", "sum"),
            total_us=("total_us", "sum"),
            self_us=("self_us", "sum"),
            min_us=("min_us", "min"),
            max_us=("max_us", "max"),
        )
        .reset_index()
    )
    t["avg_us"] = t["total_us"] / t["count"]
    total_self = t["self_us"].sum()
    t["share"] = t["self_us"] / total_self if total_self > 0 else 0.0
    t = t.sort_values(["self_us", "total_us"], ascending=False, ignore_index=True)
    return schema.conform(t, "ops")


# ---- device side ----------------------------------------------------------------------------

# Host-side costs of driving a device, by op name (self time, so nested calls count once):
# run-time operator compilation on Ascend (aclopCompileAndExecute: an op without a prebuilt
# binary is compiled on the hot path), kernel launches and their preparation, and the host
# waiting for the device (synchronize, .item()).
OVERHEAD = [
    ("op compile", re.compile(r"aclopCompile|@opCompile\b|CompileAndExecute", re.I)),
    (
        "kernel launch",
        re.compile(
            r"^(?:cuda|cu|hip)(?:Launch|GraphLaunch|Memcpy|Memset)|^AscendCL@(?:aclnn|aclrtLaunch|"
            r"aclrtMemcpy|\w+_Tiling)|^(?:Enqueue|Dequeue@)",
            re.I,
        ),
    ),
    (
        "host waits for device",
        re.compile(r"Synchronize|^cudaEventQuery|^cudaStreamQuery|aten::_local_scalar_dense", re.I),
    ),
]


def _name_codes(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each row's name as a code and the names by code, NA as "?": a categorical's own codes,
    so grouping takes ints, not one Python string per kernel (0.45 s of a 0.5 GB trace's
    summary went to making 267k of them into an Arrow column)."""
    if not isinstance(names.dtype, pd.CategoricalDtype):
        codes, uniq = pd.factorize(names.astype(object).fillna("?"))
        return codes, np.asarray(uniq, dtype=object)
    labels = names.cat.categories.to_numpy(dtype=object)
    codes = names.cat.codes.to_numpy().astype(np.int64)
    if (codes < 0).any():
        named = np.flatnonzero(labels == "?")  # NA and a kernel named "?" are one row
        if not len(named):
            labels, named = np.append(labels, "?"), [len(labels)]
        codes[codes < 0] = named[0]
    return codes, labels


def kernel_summary(kernels: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """Device kernels with the most device time (summed over ranks): count, total, average,
    share of all device time."""
    if kernels.empty:
        return pd.DataFrame(columns=["name", "count", "total_us", "avg_us", "share"])
    codes, labels = _name_codes(kernels["name"])
    k = pd.DataFrame(
        {
            "code": codes,
            "dur": kernels["duration_us"].to_numpy(dtype="float64", na_value=0.0),
        }
    )
    t = k.groupby("code", sort=False)["dur"].agg(count="size", total_us="sum").reset_index()
    t.insert(0, "name", labels[t.pop("code").to_numpy()])
    t["avg_us"] = t["total_us"] / t["count"]
    total = t["total_us"].sum()
    t["share"] = t["total_us"] / total if total > 0 else 0.0
    return t.sort_values("total_us", ascending=False, ignore_index=True).head(top)


def device_table(
    kernels: pd.DataFrame, steps: pd.DataFrame, comm_patterns: PatternSpec = None
) -> pd.DataFrame:
    """Per rank, on HTA's temporal-breakdown definition (:func:`dynprof_nb.analysis.gpu.
    temporal_breakdown`) over the device activity launched in the window's steps: ``span_ms``
    from its first start to its last end (HTA's ``kernel_time``), ``busy_ms`` the union of all
    of it (kernels, copies, sets, syncs, other accelerators' events), ``idle_ms`` the rest
    (HTA's ``idle_time``), ``comm_ms`` the union of communication and ``comm_overlapped`` the
    share of it under computation, copies and sets not counted as computation (HTA's
    ``get_comm_comp_overlap``). HTA drops the last step; every step here is one the user asked
    for and complete, so all count (``gpu.temporal_breakdown(..., kernels_sel="hta")`` is HTA's).
    ``comm_patterns``: which kernels are communication (a window's ``comm_patterns``)."""
    cols = ["rank", "span_ms", "busy_ms", "idle_ms", "busy", "comm_ms", "comm_overlapped"]
    if kernels.empty:
        return pd.DataFrame(columns=cols)
    tb = gpu.temporal_breakdown(kernels, steps, comm_patterns=comm_patterns)
    if tb.empty:
        return pd.DataFrame(columns=cols)
    span = tb["kernel_time_us"] / 1e3
    return pd.DataFrame(
        {
            "rank": tb["rank"].astype("int64"),
            "span_ms": span,
            "busy_ms": tb["busy_us"] / 1e3,
            "idle_ms": tb["idle_time_us"] / 1e3,
            "busy": (tb["busy_us"] / 1e3) / span.where(span > 0),
            "comm_ms": tb["comm_us"] / 1e3,
            "comm_overlapped": tb["comm_overlap"],
        }
    )[cols]


def overhead_table(ops: pd.DataFrame) -> pd.DataFrame:
    """Host self time spent driving the device, per kind (see ``OVERHEAD``), with its share
    of all host self time and the names that make it up."""
    cols = ["overhead", "calls", "self_us", "share", "ops"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    names = ops["name"].astype(object).fillna("")
    total = ops["self_us"].sum()
    taken = np.zeros(len(ops), bool)
    rows = []
    for label, pattern in OVERHEAD:
        m = names.str.contains(pattern).to_numpy() & ~taken
        taken |= m
        if not m.any():
            continue
        sub = ops[m].sort_values("self_us", ascending=False)
        rows.append(
            (
                label,
                int(sub["count"].sum()),
                float(sub["self_us"].sum()),
                float(sub["self_us"].sum() / total) if total > 0 else 0.0,
                ", ".join(sub["name"].astype(str).head(3)),
            )
        )
    return pd.DataFrame(rows, columns=cols)


def span_by_rank(events: pd.DataFrame) -> pd.Series:
    """Each rank's span of events in ms: ranks' clocks differ (and ranks drift apart without a
    barrier), so a span across ranks measures the skew, not the window. An out-of-core events
    frame gives its bounds partition by partition."""
    bounds = [b for b in per_partition(events, _rank_bounds) if not b.empty]
    if not bounds:
        return pd.Series(dtype="float64")
    b = bounds[0]
    if len(bounds) > 1:
        b = pd.concat(bounds).groupby(level=0).agg({"s": "min", "e": "max"})
    return (b["e"] - b["s"]) / 1e6


def streamed_spans(window: Window) -> tuple[pd.Series | None, bool]:
    """Each rank's span in ms as its one-pass read measured it (``streamed``: the first pass
    of :mod:`dynprof_nb.traces.formats.chrome.first_pass`), as :func:`span_by_rank` has it, and
    whether they are per rank (a window of several); None where a rank had no such pass or the
    window's events are loaded anyway (then they are measured from those)."""
    ranks = list(getattr(window, "ranks", None) or [])
    several = callable(getattr(window, "rank_window", None)) and len(ranks) > 1
    parts = {r: window.rank_window(r) for r in ranks} if several else {0: window}
    passes = {r: getattr(w, "streamed", None) for r, w in parts.items()}
    if window.loaded("events") or any(p is None for p in passes.values()):
        return None, several
    kept = {r: p.span_ms for r, p in sorted(passes.items()) if p.span_ms is not None}
    return pd.Series(kept, dtype="float64"), several  # (a rank with no timed event: no span)


def _rank_bounds(events: pd.DataFrame) -> pd.DataFrame:
    """Each rank's first start (``s``) and last end (``e``), in ns, indexed by rank (``r``)."""
    ev = events[events["ts_ns"].notna()]
    end = ev["ts_ns"] + ev["dur_ns"].fillna(0)
    key = ev["rank"] if "rank" in ev else pd.Series(0, index=ev.index)
    g = pd.DataFrame(
        {"r": key.to_numpy(), "s": ev["ts_ns"].to_numpy("int64"), "e": end.to_numpy("int64")}
    ).groupby("r")
    return pd.DataFrame({"s": g["s"].min(), "e": g["e"].max()})


# ---- summaries -----------------------------------------------------------------------------


def rank_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Step time per rank: median and total step time, and how much slower than the fastest."""
    if steps.empty or "rank" not in steps:
        return pd.DataFrame(columns=["rank", "steps", "median_step_us", "total_us", "vs_fastest"])
    t = (
        steps.groupby("rank")
        .agg(
            steps=("step", "size"),
            median_step_us=("duration_us", "median"),
            total_us=("duration_us", "sum"),
        )
        .reset_index()
    )
    fastest = t["median_step_us"].min()
    t["vs_fastest"] = t["median_step_us"] / fastest - 1.0 if fastest and fastest > 0 else np.nan
    return t.sort_values("median_step_us", ascending=False, ignore_index=True)


#: slow steps the summary's notes describe one by one; the rest are one line of step numbers
OUTLIER_NOTES = 3


def outlier_notes(outliers: pd.DataFrame, ranked: bool = True) -> list[str]:
    """One note per slow step (:func:`dynprof_nb.analysis.step_time.step_outliers`), against
    its rank's own median step: the number ``w.advise()``'s "step outliers" and the Ranks
    table's ``median_step_us`` give. A step slow on several ranks is one note that names
    them and gives the slowest against its rank's median. ``ranked``: the steps name their
    rank (a bare trace's do not: "the median step"). Past :data:`OUTLIER_NOTES` steps, one
    line names the others (``w.advise()`` has each)."""
    notes = []
    by_step = list(outliers.groupby("step", sort=True))
    for step, part in by_step[:OUTLIER_NOTES]:
        worst = part.loc[part["factor"].idxmax()]
        whose = f"rank {int(worst['rank'])}'s" if ranked else "the"
        numbers = (
            f"{worst['factor']:.1f}x {whose} median step "
            f"({worst['duration_us'] / 1000:.1f} ms vs {worst['median_us'] / 1000:.1f} ms)"
        )
        if len(part) == 1:
            notes.append(f"step {step} took {numbers}")
        else:
            ranks = ", ".join(str(int(r)) for r in part["rank"])
            notes.append(f"step {step} was slow on ranks {ranks}: up to {numbers}")
    rest = [str(step) for step, _ in by_step[OUTLIER_NOTES:]]
    if rest:
        notes.append(
            f"{len(rest)} more steps took >= {OUTLIER_FACTOR}x their rank's median step: "
            f"{', '.join(rest)} (w.advise() has each)"
        )
    return notes


def notes_for(
    steps: pd.DataFrame,
    ops: pd.DataFrame,
    ranks: pd.DataFrame | None = None,
    slow_factor: float = OUTLIER_FACTOR,
    device: bool = True,
    top: int = 10,
) -> list[str]:
    """Plain-language findings a user would otherwise compute by hand. ``device``: the window
    has device kernels (without them there is no device to call idle); ``top``: how many
    operators the summary's table shows (what ``ProfilerStep*`` is, is said when it is among
    them)."""
    notes: list[str] = []
    if not steps.empty and steps["duration_us"].notna().any():
        notes += outlier_notes(step_outliers(steps, slow_factor), ranked="rank" in steps)
        comm = steps.get("communication_us")
        ov = steps.get("overlapped_us")
        if comm is not None and ov is not None and comm.notna().any():
            not_ov = (comm - ov.fillna(0)).clip(lower=0).sum()
            tot = steps["duration_us"].sum()
            if tot > 0 and not_ov / tot >= 0.05:
                many = "rank" in steps and steps["rank"].nunique() > 1
                whose = "all ranks' step time together" if many else "step time"
                notes.append(f"communication not overlapped: {not_ov / tot:.0%} of {whose}")
        free = steps.get("free_us")
        if device and free is not None and free.notna().any():
            tot = steps["duration_us"].sum()
            if tot > 0 and free.sum() / tot >= 0.2:
                notes.append(f"device idle (free) for {free.sum() / tot:.0%} of step time")
    if ranks is not None and len(ranks) > 1:
        slowest = ranks.iloc[0]
        if slowest["vs_fastest"] > 0.05:
            notes.append(
                f"rank {int(slowest['rank'])} is the slowest by {slowest['vs_fastest']:.0%}"
            )
    if not ops.empty and ops["share"].iloc[0] >= 0.3:
        name = ops["name"].iloc[0]
        notes.append(f"{name} takes {ops['share'].iloc[0]:.0%} of host self time")
    if not ops.empty and (ops["name"].head(top).astype(str) == STEP_FOLDED).any():
        notes.append(STEP_FOLDED_NOTE)
    return notes


def device_notes(
    device: pd.DataFrame,
    overhead: pd.DataFrame,
    kernels: pd.DataFrame,
    steps: pd.DataFrame | None = None,
) -> list[str]:
    """What stands out on the device side, before anything about host operators (the idle
    share is said once: by the steps' own "free" column when the profiler wrote one)."""
    notes: list[str] = []
    has_free = steps is not None and "free_us" in steps and steps["free_us"].notna().any()
    if not device.empty and not has_free:
        busy = device["busy_ms"].sum() / device["span_ms"].sum()
        if busy < 0.8:
            notes.append(
                f"device busy {busy:.0%} of the window (idle {1 - busy:.0%}): the "
                "host is not feeding it fast enough, or it waits for communication"
            )
    if not kernels.empty and kernels["share"].iloc[0] >= 0.3:
        notes.append(
            f"kernel {kernels['name'].iloc[0]} takes {kernels['share'].iloc[0]:.0%} of device time"
        )
    for row in overhead.itertuples():
        if row.overhead == "op compile" and row.share >= 0.05:
            notes.append(
                f"operators compiled at run time ({row.ops}) take {row.share:.0%} of "
                "host time: with torch_npu, torch_npu.npu.set_compile_mode("
                "jit_compile=False) uses prebuilt kernels"
            )
        elif row.overhead == "kernel launch" and row.share >= 0.2:
            notes.append(
                f"kernel launches take {row.share:.0%} of host time: many small "
                "kernels (fusing them or graph capture helps)"
            )
        elif row.overhead == "host waits for device" and row.share >= 0.1:
            notes.append(
                f"the host waits for the device {row.share:.0%} of its time "
                f"({row.ops}): a sync in the step (.item(), printing a loss)"
            )
    return notes


def _fmt(v: float) -> str:
    return f"{v:,.1f}"


def _short(text: Any, n: int = 72) -> Any:
    """A kernel name fit for a table row (CUDA template names run to hundreds of characters)."""
    if not isinstance(text, str) or len(text) <= n:
        return text
    text = text.removeprefix("void ")
    return text if len(text) <= n else text[: n - 1] + "…"


def _pct(frame: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """A display copy: shares as percentages, long names shortened."""
    out = frame.copy()
    for c in cols:
        if c in out:
            out[c] = out[c].map(lambda v: "-" if pd.isna(v) else f"{v:.1%}")
    for c in ("name", "ops"):
        if c in out:
            out[c] = out[c].map(_short)
    return out


@dataclass
class Summary:
    """What a window contains and what stands out; renders as HTML in Jupyter, text elsewhere.

    For a GPU/NPU window the device comes first: ``kernels`` (top kernels by device time),
    ``device`` (per rank: busy/idle, communication and how much of it overlapped computation),
    ``overhead`` (host time spent compiling ops, launching kernels, waiting for the device);
    then the host operators (``top_ops``), steps and ranks. ``header["span_ms"]`` is the
    longest rank's own span (``span_by_rank`` has each).
    """

    header: dict[str, Any]
    top_ops: pd.DataFrame
    steps: pd.DataFrame
    ranks: pd.DataFrame | None
    notes: list[str] = field(default_factory=list)
    kernels: pd.DataFrame | None = None
    device: pd.DataFrame | None = None
    overhead: pd.DataFrame | None = None
    findings: list[str] = field(default_factory=list)  # w.advise()'s top findings, one line each

    def _headline(self) -> str:
        h = self.header
        span = f"span {h['span_ms']:,.1f} ms"
        by = h.get("span_by_rank") or {}
        if len(by) > 1:
            lo, hi = min(by.values()), max(by.values())
            span = (
                f"span {hi:,.1f} ms per rank"
                if hi - lo < 0.05 * hi
                else f"span {lo:,.1f}-{hi:,.1f} ms per rank"
            )
        line = f"{h['framework']} window: ranks {h['ranks'] or '-'}, steps {h['steps']}, {span}"
        line = f"{line}; {h['config']}" if h.get("config") else line
        # a triggered window leads with why it was recorded (the trigger's sentence)
        return f"triggered because {h['reason']}: {line}" if h.get("reason") else line

    def _sections(self) -> list[tuple[str, pd.DataFrame, Any]]:
        """(title, table, float format) in reading order: device first, then host."""
        out: list[tuple[str, pd.DataFrame, Any]] = []
        if self.device is not None and not self.device.empty:
            out.append(
                (
                    "Device (busy = device activity launched in the steps, over its own span)",
                    _pct(self.device, ["busy", "comm_overlapped"]),
                    _fmt,
                )
            )
        if self.kernels is not None and not self.kernels.empty:
            out.append(("Top kernels (device time)", _pct(self.kernels, ["share"]), _fmt))
        if self.overhead is not None and not self.overhead.empty:
            out.append(
                (
                    "Host time driving the device (share of host self time)",
                    _pct(self.overhead, ["share"]),
                    _fmt,
                )
            )
        if not self.top_ops.empty:
            out.append(
                (
                    "Top operations (host self time)"
                    if self.kernels is not None
                    else "Top operations (self time)",
                    _pct(self.top_ops, []),
                    _fmt,
                )
            )
        if not self.steps.empty:
            out.append(("Steps", self.steps, _fmt))
        if self.ranks is not None and len(self.ranks) > 1:
            out.append(("Ranks", _pct(self.ranks, ["vs_fastest"]), _fmt))
        return out

    def __str__(self) -> str:
        lines = [self._headline()]
        for title, table, fmt in self._sections():
            lines.append(f"\n{title}:")
            lines.append(table.to_string(index=False, float_format=fmt))
        if self.notes:
            lines.append("\nNotes:")
            lines += [f"- {n}" for n in self.notes]
        if self.findings:
            lines.append("\nTop findings (w.advise() has them all, with their numbers):")
            lines += [f"- {n}" for n in self.findings]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        parts = [escape(self._headline()).replace(" window:", " window</b>:", 1)]
        parts[0] = "<b>" + parts[0]
        if self.notes:
            parts.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in self.notes) + "</ul>")
        if self.findings:
            parts.append(
                "<h4>Top findings (w.advise() has them all)</h4><ul>"
                + "".join(f"<li>{escape(n)}</li>" for n in self.findings)
                + "</ul>"
            )
        for title, table, fmt in self._sections():
            parts.append(
                f"<h4>{escape(title)}</h4>" + frame_html(table, index=False, float_format=fmt)
            )
        return "<div>" + "".join(parts) + "</div>"


def summarize(window: Window, top: int = 10) -> Summary:
    """The window in one object: device first for GPU/NPU windows (kernels, busy/idle, host
    overhead, communication overlap), then host operators, steps, ranks and notes.

    A window whose trace was read in one pass (``window.streamed``, a trace too big for its
    events frame: :mod:`dynprof_nb.traces.formats.chrome.summaries`) is summarised without
    loading its events."""
    steps = window.steps  # first: a multi-rank window's ranks take their first passes here
    spans, per_rank = streamed_spans(window)
    if spans is None:
        ev = window.events
        spans, per_rank = span_by_rank(ev), "rank" in ev
    ops = ops_across_ranks(window.ops)
    step_list = sorted(steps["step"].unique().tolist()) if not steps.empty else []
    if not step_list and window.start_step is not None:
        step_list = list(range(window.start_step, (window.stop_step or window.start_step) + 1))
    ranks = rank_table(steps) if "rank" in steps else None
    header = {
        "framework": window.framework,
        "ranks": window.ranks,
        "steps": f"{step_list[0]}..{step_list[-1]}" if step_list else "-",
        "span_ms": float(spans.max()) if len(spans) else 0.0,
        "span_by_rank": ({int(r): float(v) for r, v in spans.items()} if per_rank else {}),
        "config": config_line(window),
        "reason": window_reason(window),
    }
    top_ops = top_ops_table(ops, top)
    kernels = device = overhead = None
    notes: list[str] = []
    k = window.kernels
    if not k.empty:
        kernels = kernel_summary(k, top)
        device = device_table(k, steps, getattr(window, "comm_patterns", None))
        overhead = overhead_table(ops)
        notes = device_notes(device, overhead, kernels, steps)
    notes += notes_for(steps, ops, ranks, device=not k.empty, top=top)
    seen = parts_line(window)  # a recent-steps record: what it saw and what it could not
    if seen:
        notes.insert(0, seen)
    cost = profiler_cost_note(window)  # the window's steps against the job's own before it
    if cost:
        notes.insert(0, cost)
    summary = Summary(
        header,
        top_ops,
        step_breakdown(steps),
        ranks,
        notes,
        kernels,
        device,
        overhead,
        top_findings(window),  # never from the events frame: the same for a streamed window
    )
    # an NPU window leads with device time, the communication share and the slow rank
    return npu_first(window, summary) if is_npu_window(window) else summary


def top_findings(window: Window, n: int = 3) -> list[str]:
    """The ``n`` most severe of ``w.advise()``'s findings, one line each (rule: evidence); a
    triggered window's first line is ``w.explain()``'s answer. Through the window's
    shortcuts (the advice builds on this module's tables: no import of it here)."""
    advise = getattr(window, "advise", None)
    if not callable(advise):
        return []
    # without the events frame: a summary never builds it (a big trace's is streamed)
    lines = [f"[{f.severity}] {f.rule}: {f.evidence}" for f in advise(events=False).top(n)]
    if _triggered(window):  # a triggered window: why, against the job's last normal one
        try:
            lines.insert(0, f"why (vs the last normal window): {window.explain()}")
        except (ValueError, OSError):
            pass  # no normal window beside it: w.explain(baseline) names one
    return lines


def _triggered(window: Window) -> bool:
    """The window, or any of its ranks, was recorded by the trigger (a ``reason``)."""
    if window_reason(window):
        return True
    rank_window = getattr(window, "rank_window", None)
    ranks = getattr(window, "ranks", None) or []
    return (
        callable(rank_window)
        and len(ranks) > 1
        and any(window_reason(rank_window(r)) for r in ranks)
    )


def top_ops_table(ops: pd.DataFrame, top: int) -> pd.DataFrame:
    """The summary's operator table: the ``top`` first rows of ``ops``, share in percent, with
    the names ``ops`` has (``ProfilerStep*`` among them: see :data:`STEP_FOLDED_NOTE`)."""
    top_ops = ops.head(top)[["name", "count", "total_us", "self_us", "share"]].copy()
    top_ops["share"] = (top_ops["share"] * 100).round(1).astype(str) + "%"
    return top_ops


def host_summary(
    header: dict[str, Any],
    steps: pd.DataFrame,
    ops: pd.DataFrame,
    ranks: pd.DataFrame | None,
    top: int = 10,
) -> Summary:
    """The summary without its device part, from frames already reduced (a cluster's nodes
    send op totals and steps, not kernels)."""
    return Summary(
        header,
        top_ops_table(ops, top),
        step_breakdown(steps),
        ranks,
        notes_for(steps, ops, ranks, top=top),
    )


def window_reason(window: Window) -> str:
    """Why the window was recorded (its manifest's ``reason``, set by a trigger), or ""."""
    manifest = getattr(window, "manifest", None) or {}
    if not manifest.get("reason"):  # a multi-rank window: its ranks' manifests say it
        for child in getattr(window, "children", None) or []:
            reason = (getattr(child, "manifest", None) or {}).get("reason")
            if reason:
                return str(reason)
    return str(manifest.get("reason") or "")


def ranks_view(window: Window) -> pd.DataFrame:
    """Step time per rank (slowest first) for a multi-rank window."""
    return rank_table(window.steps)


def window_length(window: Window) -> tuple[int, int, int]:
    """``(steps, ranks, rank_steps)`` a window recorded, from its step table: ``steps`` is the
    most any rank recorded (ranks count steps on their own, so their step numbers may
    differ), ``rank_steps`` counts each (rank, step) pair once. ``(0, 0, 0)`` for a window
    without steps (a bare trace)."""
    steps = window.steps
    if steps.empty or "step" not in steps:
        return 0, 0, 0
    if "rank" not in steps:
        n = int(steps["step"].nunique())
        return n, 1, n
    per_rank = steps[["rank", "step"]].drop_duplicates().groupby("rank").size()
    return int(per_rank.max()), len(per_rank), int(per_rank.sum())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _basis(la: tuple[int, int, int], lb: tuple[int, int, int]) -> tuple[bool, str, bool]:
    """Whether ``compare`` can go per step per rank for windows of lengths ``la`` and ``lb``
    (``window_length``), the sentence that says what it compares, and whether that sentence
    is a warning (the lengths differ, or a window has no steps)."""
    (sa, ra, na), (sb, rb, nb) = la, lb
    if na and nb:
        da = f"{_plural(sa, 'step')} x {_plural(ra, 'rank')}"
        db = f"{_plural(sb, 'step')} x {_plural(rb, 'rank')}"
        if (sa, ra) == (sb, rb):
            return True, f"per step per rank: both windows have {da}", False
        return (
            True,
            (
                f"the windows differ in length (a: {da}, b: {db}): calls and self time "
                "are compared per step per rank"
            ),
            True,
        )
    which = "neither window has" if not (na or nb) else f"window {'b' if na else 'a'} has no"
    return (
        False,
        (
            f"{which} steps (a bare trace): whole-window totals are compared, which "
            "is fair only when both windows cover the same work"
        ),
        True,
    )


def compare(a: Any, b: Any, top: int = 20) -> pd.DataFrame:
    """Operations whose self time changed most from window ``a`` to window ``b``, biggest
    change first.

    When both windows have steps the numbers are per step per rank (every rank's time summed
    per name, divided by the window's (rank, step) pairs), so a 10-step window compares fairly
    with a 5-step one, and a 2-rank window with a 1-rank one: columns ``calls_per_step_a/b``,
    ``self_us_per_step_a/b``. When either has no steps the totals are compared (``calls_a/b``,
    ``self_us_a/b``). ``delta_us`` (b - a) and ``ratio`` (b / a) are on the same basis;
    ``table.attrs`` holds ``basis``, each window's ``steps_a``/``ranks_a``/... and a ``note``.

    Warns ``ConfigMismatchWarning`` when the windows were recorded with settings whose
    overheads differ (the difference would then be the profiler's), and
    ``WindowLengthWarning`` when they differ in steps or ranks, or either has no steps."""
    warn_if_configs_differ(a, b)
    la, lb = window_length(a), window_length(b)
    per_step, note, warn = _basis(la, lb)
    if warn:
        warnings.warn(WindowLengthWarning(note), stacklevel=2)
    div_a, div_b = (la[2], lb[2]) if per_step else (1, 1)
    calls, self_us = ("calls_per_step", "self_us_per_step") if per_step else ("calls", "self_us")
    oa = ops_across_ranks(a.ops).set_index("name")
    ob = ops_across_ranks(b.ops).set_index("name")
    t = pd.DataFrame(
        {
            f"{calls}_a": oa["count"] / div_a,
            f"{calls}_b": ob["count"] / div_b,
            f"{self_us}_a": oa["self_us"] / div_a,
            f"{self_us}_b": ob["self_us"] / div_b,
        }
    ).fillna(0)
    t["delta_us"] = t[f"{self_us}_b"] - t[f"{self_us}_a"]
    t["ratio"] = t[f"{self_us}_b"] / t[f"{self_us}_a"].where(t[f"{self_us}_a"] > 0)
    t = t.reindex(t["delta_us"].abs().sort_values(ascending=False).index)
    t = t.head(top).rename_axis("name").reset_index()
    t.attrs.update(
        basis="per step per rank" if per_step else "total",
        note=note,
        steps_a=la[0],
        ranks_a=la[1],
        steps_b=lb[0],
        ranks_b=lb[1],
    )
    return t
