"""Summaries over TraceWindow DataFrames: op table, step statistics, ranks, window comparison.

No file reading here: everything takes frames (or a window's frames) and returns frames or a
small result object with HTML and text reprs for notebooks.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.protocol import STEP_FOLDED, STEP_PREFIX
from dynprof_nb.traces import schema
from dynprof_nb.traces.derive import DEVICE_CATS

# Not host operations: Python stack frames (they would swallow their ops' time as children and
# torch's key_averages has no such rows), the profiler's own span, device-side tasks, Ascend's
# synthetic overlap lanes and MindSpore's scope lane (which spans everything).
NON_OP_CATS = {"python_function", "Trace", "gpu_user_annotation", "step_marker", *DEVICE_CATS}
NON_OP_PROCESSES = {"Ascend Hardware", "Overlap Analysis", "HCCL", "Scope Layer"}


def host_ops(events: pd.DataFrame) -> pd.DataFrame:
    """The complete events that count as host operations.

    Python frames are left out (torch's key_averages has no such rows), except when they are
    all a trace has besides its steps: a built-in ``with_stack`` window of plain Python code,
    whose functions are then its operations.
    """
    ev = events[events["ph"] == "X"]
    ev = ev[~ev["process"].astype(object).isin(NON_OP_PROCESSES)]
    cats = ev["cat"].astype(object)
    ops = ev[~cats.isin(NON_OP_CATS)]
    frames = ev[cats == "python_function"]
    if len(frames) and ops["name"].astype(str).str.startswith(STEP_PREFIX).all():
        return ev[~cats.isin(NON_OP_CATS - {"python_function"})]
    return ops


def self_times(ev: pd.DataFrame) -> np.ndarray:
    """Duration minus the durations of direct children on the same thread (ns), per row of ev."""
    n = len(ev)
    if n == 0:
        return np.zeros(0, np.int64)
    keys = [pd.factorize(ev["pid"])[0], pd.factorize(ev["tid"])[0]]
    if "rank" in ev:
        keys.append(pd.factorize(ev["rank"])[0])
    thread = np.zeros(n, np.int64)
    for k in keys:
        thread = thread * (int(k.max()) + 1) + k
    ts = ev["ts_ns"].to_numpy("int64", na_value=0)
    dur = ev["dur_ns"].to_numpy("int64")
    order = np.lexsort((-dur, ts, thread))
    th, st, du = thread[order].tolist(), ts[order].tolist(), dur[order].tolist()
    child = [0] * n
    stack: list[int] = []  # positions in sorted order
    ends: list[int] = []
    cur = None
    for i in range(n):
        if th[i] != cur:
            cur = th[i]
            stack.clear()
            ends.clear()
        s = st[i]
        while ends and ends[-1] <= s:
            ends.pop()
            stack.pop()
        if stack:
            child[stack[-1]] += du[i]
        stack.append(i)
        ends.append(s + du[i])
    out = np.empty(n, np.int64)
    out[order] = np.asarray(du, np.int64) - np.asarray(child, np.int64)
    return out


def op_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per host operation name, sorted by self time."""
    ev = host_ops(events)
    if ev.empty:
        return schema.empty("ops")
    selfs = self_times(ev)
    names = ev["name"].astype(object)
    # Like torch's key_averages(): all step markers fold into one STEP_FOLDED row
    # (the per-step view is the steps frame).
    names = names.where(~names.str.startswith(STEP_PREFIX, na=False), STEP_FOLDED)
    g = pd.DataFrame({"name": names.to_numpy(),
                      "dur": ev["dur_ns"].to_numpy("int64") / 1000.0, "self": selfs / 1000.0})
    t = g.groupby("name", sort=False).agg(count=("dur", "size"), total_us=("dur", "sum"),
                                          self_us=("self", "sum"), min_us=("dur", "min"),
                                          max_us=("dur", "max")).reset_index()
    t["avg_us"] = t["total_us"] / t["count"]
    total_self = t["self_us"].sum()
    t["share"] = t["self_us"] / total_self if total_self > 0 else 0.0
    t = t.sort_values(["self_us", "total_us"], ascending=False, ignore_index=True)
    return schema.conform(t, "ops")


BREAKDOWN_COLUMNS = ["step", "duration_us", "computing_us", "communication_us", "overlapped_us",
                     "free_us"]


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


def ops_across_ranks(ops: pd.DataFrame) -> pd.DataFrame:
    """Fold a multi-rank ``ops`` frame (one row per rank and name) into one row per name."""
    if ops.empty or "rank" not in ops:
        return ops
    t = ops.groupby(ops["name"].astype(object), sort=False).agg(
        count=("count", "sum"), total_us=("total_us", "sum"), self_us=("self_us", "sum"),
        min_us=("min_us", "min"), max_us=("max_us", "max")).reset_index()
    t["avg_us"] = t["total_us"] / t["count"]
    total_self = t["self_us"].sum()
    t["share"] = t["self_us"] / total_self if total_self > 0 else 0.0
    t = t.sort_values(["self_us", "total_us"], ascending=False, ignore_index=True)
    return schema.conform(t, "ops")


# ---- summaries -----------------------------------------------------------------------------

def step_stats(steps: pd.DataFrame) -> dict[str, Any]:
    if steps.empty or steps["duration_us"].isna().all():
        return {}
    d = steps["duration_us"]
    med = float(d.median())
    return {"count": int(len(d)), "median_us": med, "mean_us": float(d.mean()),
            "max_us": float(d.max()), "slowest_step": int(steps.loc[d.idxmax(), "step"]),
            "slowest_ratio": float(d.max() / med) if med > 0 else float("nan")}


def rank_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Step time per rank: median and total step time, and how much slower than the fastest."""
    if steps.empty or "rank" not in steps:
        return pd.DataFrame(columns=["rank", "steps", "median_step_us", "total_us", "vs_fastest"])
    t = steps.groupby("rank").agg(steps=("step", "size"), median_step_us=("duration_us", "median"),
                                  total_us=("duration_us", "sum")).reset_index()
    fastest = t["median_step_us"].min()
    t["vs_fastest"] = t["median_step_us"] / fastest - 1.0 if fastest and fastest > 0 else np.nan
    return t.sort_values("median_step_us", ascending=False, ignore_index=True)


def notes_for(steps: pd.DataFrame, ops: pd.DataFrame, ranks: pd.DataFrame | None = None,
              slow_factor: float = 1.5) -> list[str]:
    """Plain-language findings a user would otherwise compute by hand."""
    notes: list[str] = []
    if not steps.empty and steps["duration_us"].notna().any():
        by = steps.groupby("step")["duration_us"].max() if "rank" in steps else \
            steps.set_index("step")["duration_us"]
        med = by.median()
        for step, d in by.items():
            if med > 0 and d >= slow_factor * med and len(by) > 2:
                notes.append(f"step {step} took {d / med:.1f}x the median ({d / 1000:.1f} ms vs {med / 1000:.1f} ms)")
        comm = steps.get("communication_us")
        ov = steps.get("overlapped_us")
        if comm is not None and ov is not None and comm.notna().any():
            not_ov = (comm - ov.fillna(0)).clip(lower=0).sum()
            tot = steps["duration_us"].sum()
            if tot > 0 and not_ov / tot >= 0.05:
                notes.append(f"communication not overlapped: {not_ov / tot:.0%} of step time")
        free = steps.get("free_us")
        if free is not None and free.notna().any():
            tot = steps["duration_us"].sum()
            if tot > 0 and free.sum() / tot >= 0.2:
                notes.append(f"device idle (free) for {free.sum() / tot:.0%} of step time")
    if ranks is not None and len(ranks) > 1:
        top = ranks.iloc[0]
        if top["vs_fastest"] > 0.05:
            notes.append(f"rank {int(top['rank'])} is the slowest by {top['vs_fastest']:.0%}")
    if not ops.empty and ops["share"].iloc[0] >= 0.3:
        notes.append(f"{ops['name'].iloc[0]} takes {ops['share'].iloc[0]:.0%} of host self time")
    return notes


@dataclass
class Summary:
    """What a window contains and what stands out; renders as HTML in Jupyter, text elsewhere."""

    header: dict[str, Any]
    top_ops: pd.DataFrame
    steps: pd.DataFrame
    ranks: pd.DataFrame | None
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        h = self.header
        lines = [f"{h['framework']} window: ranks {h['ranks'] or '-'}, steps {h['steps']}, span {h['span_ms']:.1f} ms"]
        if not self.top_ops.empty:
            lines.append("\nTop operations (self time):")
            lines.append(self.top_ops.to_string(index=False, float_format=lambda v: f"{v:,.1f}"))
        if not self.steps.empty:
            lines.append("\nSteps:")
            lines.append(self.steps.to_string(index=False, float_format=lambda v: f"{v:,.1f}"))
        if self.ranks is not None and len(self.ranks) > 1:
            lines.append("\nRanks:")
            lines.append(self.ranks.to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
        if self.notes:
            lines.append("\nNotes:")
            lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        h = self.header
        parts = [f"<b>{html.escape(str(h['framework']))} window</b>: ranks {html.escape(str(h['ranks'] or '-'))}, "
                 f"steps {html.escape(str(h['steps']))}, span {h['span_ms']:.1f} ms"]
        if self.notes:
            parts.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in self.notes) + "</ul>")
        if not self.top_ops.empty:
            parts.append("<h4>Top operations</h4>" + self.top_ops.to_html(index=False, float_format=lambda v: f"{v:,.1f}"))
        if not self.steps.empty:
            parts.append("<h4>Steps</h4>" + self.steps.to_html(index=False, float_format=lambda v: f"{v:,.1f}"))
        if self.ranks is not None and len(self.ranks) > 1:
            parts.append("<h4>Ranks</h4>" + self.ranks.to_html(index=False, float_format=lambda v: f"{v:,.3f}"))
        return "<div>" + "".join(parts) + "</div>"


def summarize(window: Any, top: int = 10) -> Summary:
    ev = window.events
    steps = window.steps
    ops = ops_across_ranks(window.ops)
    span = 0.0
    if not ev.empty and ev["ts_ns"].notna().any():
        end = (ev["ts_ns"] + ev["dur_ns"]).max()
        span = float(end - ev["ts_ns"].min()) / 1e6
    step_list = sorted(steps["step"].unique().tolist()) if not steps.empty else []
    if not step_list and window.start_step is not None:
        step_list = list(range(window.start_step, (window.stop_step or window.start_step) + 1))
    ranks = rank_table(steps) if "rank" in steps else None
    header = {"framework": window.framework, "ranks": window.ranks,
              "steps": f"{step_list[0]}..{step_list[-1]}" if step_list else "-", "span_ms": span}
    top_ops = ops.head(top)[["name", "count", "total_us", "self_us", "share"]].copy()
    top_ops["share"] = (top_ops["share"] * 100).round(1).astype(str) + "%"
    summary = Summary(header, top_ops, step_breakdown(steps), ranks, notes_for(steps, ops, ranks))
    # ---- NPU-first notes (issue 11): device time, communication share, slow rank -------------
    from dynprof_nb.analysis.cluster import is_npu_window, npu_first

    return npu_first(window, summary) if is_npu_window(window) else summary


def ranks_view(window: Any) -> pd.DataFrame:
    """Step time per rank (slowest first) for a multi-rank window."""
    return rank_table(window.steps)


def compare(a: Any, b: Any, top: int = 20) -> pd.DataFrame:
    """Operations whose self time changed most from window ``a`` to window ``b``."""
    oa = a.ops.set_index("name")
    ob = b.ops.set_index("name")
    t = pd.DataFrame({"count_a": oa["count"], "count_b": ob["count"],
                      "self_us_a": oa["self_us"], "self_us_b": ob["self_us"]}).fillna(0)
    t["delta_us"] = t["self_us_b"] - t["self_us_a"]
    t["ratio"] = t["self_us_b"] / t["self_us_a"].where(t["self_us_a"] > 0)
    t = t.reindex(t["delta_us"].abs().sort_values(ascending=False).index)
    return t.head(top).rename_axis("name").reset_index()
