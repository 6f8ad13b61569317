"""Matplotlib figures of a TraceWindow. Built on ``matplotlib.figure.Figure`` directly (no pyplot
state), so they work under any backend, in threads and in tests; Jupyter displays them inline."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

_BREAKDOWN = [("computing_us", "computing", "#4c72b0"),
              ("_comm_not_overlapped", "communication (not overlapped)", "#dd8452"),
              ("free_us", "free", "#c0c0c0")]


def _empty(title: str, why: str) -> Figure:
    fig = Figure(figsize=(8, 2))
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes)
    return fig


def timeline(window: Any, max_events: int = 20_000, lanes: int = 30) -> Figure:
    """One lane per process/thread with complete events as bars, steps shaded."""
    ev = window.events
    ev = ev[(ev["ph"] == "X") & ev["ts_ns"].notna()]
    if ev.empty:
        return _empty("timeline", "no complete events")
    key = ev["process"].astype(str) + " / " + ev["thread"].astype(str)
    if "rank" in ev:
        key = "rank " + ev["rank"].astype(str) + " " + key
    busy = ev.groupby(key, observed=True)["dur_ns"].sum().sort_values(ascending=False)
    keep = list(busy.index[:lanes])
    ev = ev[key.isin(keep)]
    key = key[ev.index]
    if len(ev) > max_events:  # longest events first: what is visible at this zoom
        ev = ev.nlargest(max_events, "dur_ns")
        key = key[ev.index]
    t0 = int(ev["ts_ns"].min())
    fig = Figure(figsize=(12, max(2.5, 1 + 0.35 * len(keep))))
    ax = fig.add_subplot()
    lane = {k: i for i, k in enumerate(keep)}
    y = key.map(lane).to_numpy()
    start = (ev["ts_ns"].to_numpy("int64") - t0) / 1e6
    width = np.maximum(ev["dur_ns"].to_numpy("int64") / 1e6, 1e-4)
    colors = pd.factorize(ev["name"].astype(str))[0] % 10
    ax.barh(y, width, left=start, height=0.8, color=[f"C{c}" for c in colors], linewidth=0)
    st = window.steps
    if not st.empty and st["start_ns"].notna().any():
        for i, r in enumerate(st.dropna(subset=["start_ns"]).itertuples()):
            s = (int(r.start_ns) - t0) / 1e6
            ax.axvspan(s, s + r.duration_us / 1000, color="grey" if i % 2 else "lightgrey", alpha=0.25, lw=0)
            ax.text(s, -0.9, f"step {r.step}", fontsize=8, va="bottom")
    ax.set_yticks(range(len(keep)), keep, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(f"timeline ({window.framework})")
    fig.tight_layout()
    return fig


def top_ops(window: Any, n: int = 15, by: str = "self_us") -> Figure:
    """Horizontal bars of the operations with the most self (or total) time."""
    ops = window.ops
    if ops.empty:
        return _empty("top operations", "no operations")
    top = ops.nlargest(n, by).iloc[::-1]
    fig = Figure(figsize=(9, 1 + 0.3 * len(top)))
    ax = fig.add_subplot()
    ax.barh(top["name"].astype(str).str.slice(0, 60), top[by] / 1000.0, color="#4c72b0")
    ax.set_xlabel(f"{by.replace('_us', '')} time (ms)")
    ax.set_title("top operations")
    fig.tight_layout()
    return fig


def step_breakdown(window: Any) -> Figure:
    """Stacked bars per step: computing, communication not overlapped, free (or just duration)."""
    st = window.steps
    if st.empty:
        return _empty("step breakdown", "no steps in this window")
    fig = Figure(figsize=(max(6, 0.5 * len(st)), 4))
    ax = fig.add_subplot()
    label = st["step"].astype(str)
    if "rank" in st:
        label = "r" + st["rank"].astype(str) + ":" + label
    x = np.arange(len(st))
    if st["computing_us"].notna().any():
        parts = st.assign(_comm_not_overlapped=(st["communication_us"].fillna(0)
                                                - st["overlapped_us"].fillna(0)).clip(lower=0))
        bottom = np.zeros(len(st))
        for col, name, color in _BREAKDOWN:
            vals = parts[col].fillna(0).to_numpy() / 1000.0
            ax.bar(x, vals, bottom=bottom, label=name, color=color)
            bottom += vals
        ax.legend(fontsize=8)
    else:
        ax.bar(x, st["duration_us"] / 1000.0, color="#4c72b0", label="step time")
    ax.set_xticks(x, label, rotation=90 if len(st) > 20 else 0)
    ax.set_ylabel("ms")
    ax.set_title("step breakdown")
    fig.tight_layout()
    return fig


def memory_over_time(window: Any) -> Figure:
    """Allocated and reserved bytes over time, one line per device."""
    mem = window.memory
    if mem.empty:
        return _empty("memory", "no memory records (was profile_memory on?)")
    fig = Figure(figsize=(10, 3.5))
    ax = fig.add_subplot()
    t0 = int(mem["ts_ns"].min())
    for dev, g in mem.groupby(mem["device"].astype(str)):
        t = (g["ts_ns"].to_numpy("int64") - t0) / 1e6
        for col, style in (("allocated_bytes", "-"), ("reserved_bytes", "--")):
            if g[col].notna().any():
                ax.step(t, g[col] / 2**20, style, where="post", label=f"{dev} {col.split('_')[0]}")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("MiB")
    ax.legend(fontsize=8)
    ax.set_title("memory over time")
    fig.tight_layout()
    return fig
