"""Open a window in Perfetto: a Chrome-trace JSON of every event that ui.perfetto.dev (or
chrome://tracing) opens, for zooming into what a static figure cannot show.

Perfetto's UI runs in the browser and reads the file locally: nothing here uploads anything.
Ranks become processes named "rank R · process" (one per rank and process) and, as in the
timeline plot, each rank can sit on its own steps (``align="step"``) so skewed clocks do not put
them seconds apart.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from dynprof_nb.analysis.plots import OUT_OF_CORE_TIMELINE, process_in_label, rank_offsets
from dynprof_nb.safetext import escape, file_href
from dynprof_nb.traces.interface import Window
from dynprof_nb.traces.partitioned import is_out_of_core

PERFETTO_URL = "https://ui.perfetto.dev"


def _records(frame: pd.DataFrame) -> str:
    """A frame as the inside of a JSON array (pandas' C writer: fast for 100k+ rows)."""
    if frame.empty:
        return ""
    return frame.to_json(orient="records", double_precision=3)[1:-1]


def write(window: Window, path: str | Path, align: str | None = None) -> Path:
    """Write the window's events as Chrome-trace JSON (gzip if ``path`` ends in ``.gz``);
    returns the path. ``align`` as in the timeline: ``"step"`` (default with several ranks),
    ``"comm"`` (clocks corrected by the collectives' ends) or ``"wall"``."""
    path = Path(path)
    ev = window.events
    if is_out_of_core(ev):
        raise ValueError(f"{window.path}: {OUT_OF_CORE_TIMELINE}")
    ev = ev[ev["ts_ns"].notna() & ev["ph"].isin(["X", "i", "I"])]
    if ev.empty:
        raise ValueError(
            f"{window.path}: no events to write (this window has only aggregate "
            "tables; load the window's trace files to see a timeline)"
        )
    rank = ev["rank"].to_numpy("int64") if "rank" in ev else np.zeros(len(ev), np.int64)
    ranks = sorted(set(rank.tolist()))
    first = {r: int(ev["ts_ns"].to_numpy("int64")[rank == r].min()) for r in ranks}
    offsets, _, _ = rank_offsets(window, align, ranks, first)
    off = np.zeros(len(ev), np.int64)
    for r, o in offsets.items():
        off[rank == r] = o
    lo = int((ev["ts_ns"].to_numpy("int64") - off).min())
    ts_us = (ev["ts_ns"].to_numpy("int64") - off - lo) / 1000.0
    # pid/tid may be strings in Kineto traces and repeat across ranks: number them afresh
    proc_key = pd.MultiIndex.from_arrays([rank, ev["pid"].astype(str).to_numpy()])
    pid, procs = pd.factorize(proc_key)
    thread_key = pd.MultiIndex.from_arrays([pid, ev["tid"].astype(str).to_numpy()])
    tid, threads = pd.factorize(thread_key)
    pid, tid = pid + 1, tid + 1
    out = pd.DataFrame(
        {
            "name": ev["name"].astype(object).fillna("").to_numpy(),
            "cat": ev["cat"].astype(object).fillna("").to_numpy(),
            "ph": ev["ph"].astype(object).to_numpy(),
            "pid": pid,
            "tid": tid,
            "ts": ts_us,
        }
    )
    is_x = (out["ph"] == "X").to_numpy()
    complete = out[is_x].assign(dur=ev["dur_ns"].to_numpy("float64", na_value=0.0)[is_x] / 1000.0)
    instant = out[~is_x].assign(ph="i", s="t")
    pnames = ev["process"].astype(object).fillna("").to_numpy()
    tnames = ev["thread"].astype(object).fillna("").to_numpy()
    first_p = pd.Series(np.arange(len(ev))).groupby(pid).first()
    first_t = pd.Series(np.arange(len(ev))).groupby(tid).first()
    multi = len(ranks) > 1 or "rank" in ev
    meta = []
    for p, i in first_p.items():
        label = str(pnames[i]) or f"pid {procs[p - 1][1]}"
        meta.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": int(p),
                "tid": 0,
                "args": {
                    "name": f"rank {rank[i]} · {label}"
                    if multi and process_in_label(label)
                    else label
                },
            }
        )
        meta.append(
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": int(p),
                "tid": 0,
                "args": {"sort_index": int(p)},
            }
        )
    for t, i in first_t.items():
        meta.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": int(pid[i]),
                "tid": int(t),
                "args": {"name": str(tnames[i]) or f"thread {threads[t - 1][1]}"},
            }
        )
    body = ",".join(x for x in (json.dumps(meta)[1:-1], _records(complete), _records(instant)) if x)
    text = '{"displayTimeUnit":"ns","traceEvents":[' + body + "]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


class PerfettoFile:
    """A written trace and how to open it: a link and instructions in Jupyter, text elsewhere."""

    def __init__(self, path: Path, events: int):
        self.path = Path(path)
        self.events = events

    def __repr__(self) -> str:
        return (
            f"Wrote {self.path} ({self.events:,} events). Open {PERFETTO_URL} and drop the "
            "file on it (or 'Open trace file'); Perfetto reads it in your browser, nothing "
            "is uploaded."
        )

    def _repr_html_(self) -> str:
        try:
            href = os.path.relpath(self.path)  # Jupyter serves files relative to the notebook
        except ValueError:
            href = str(self.path)
        size = self.path.stat().st_size / 2**20 if self.path.exists() else 0.0
        return (
            f"<div>Wrote <a href='{file_href(href)}' download>{escape(self.path.name)}"
            f"</a> ({self.events:,} events, {size:.1f} MiB). Open "
            f"<a href='{PERFETTO_URL}' target='_blank' rel='noopener'>ui.perfetto.dev</a> "
            "and drop the file on it (or <i>Open trace file</i>). Perfetto reads the file "
            "in your browser; nothing is uploaded.</div>"
        )


def open_in_perfetto(
    window: Window, path: str | Path | None = None, align: str | None = None
) -> PerfettoFile:
    """Write the window for Perfetto (default ``<window dir name>.perfetto.json`` in the
    current directory) and say how to open it."""
    if path is None:
        path = Path.cwd() / f"{Path(window.path).name or 'window'}.perfetto.json"
    p = write(window, path, align=align)
    return PerfettoFile(p, int(window.events["ph"].isin(["X", "i", "I"]).sum()))
