"""Matplotlib figures of a TraceWindow. Built on ``matplotlib.figure.Figure`` directly (no pyplot
state), so they work under any backend, in threads and in tests; Jupyter displays them inline.

Every figure is bounded in size whatever the window holds (ranks, steps, events): a person reads
a figure, and a 100,000-pixel PNG is unreadable. The timeline draws each lane as one collection
of rectangles built with numpy (no per-event Python), so a 352k-event window takes well under a
second or two; what it leaves out (short events, deep nesting, lanes, ranks) is said on the plot.
"""

from __future__ import annotations

import colorsys
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.patches import Patch

from dynprof_nb.analysis.figure import Figure
from dynprof_nb.contract.protocol import STEP_FOLDED, STEP_RE
from dynprof_nb.safetext import visible
from dynprof_nb.traces.formats.derived.from_events import (
    DEVICE_CATS,
    DEVICE_PROCESSES,
    device_mask,
)
from dynprof_nb.traces.interface import Window
from dynprof_nb.traces.partitioned import is_out_of_core, per_partition

_BREAKDOWN = [
    ("computing_us", "computing", "#4c72b0"),
    ("_comm_not_overlapped", "communication (not overlapped)", "#dd8452"),
    ("free_us", "free", "#c0c0c0"),
]
# Synthetic lanes that summarise other lanes (Ascend's overlap analysis) and the profiler's own
# span: drawn as bars they would show idle time as busy.
_NOT_DRAWN_PROCESSES = {"Overlap Analysis"}
_NOT_DRAWN_CATS = {"Trace", "gpu_user_annotation"}
# OTHER, PALETTE, short_label, time_unit and aligned_steps are what the timeline view
# (timeline_view.py) shares with these plots: its lanes look and read the same
OTHER = "#b8b8b8"
PALETTE = [
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#ccb974",
    "#64b5cd",
    "#2f4b7c",
    "#ff7c43",
    "#665191",
]
WIDTH_IN = 12.0  # every wide figure is this wide (1,200 px at 100 dpi)
_PIXELS = 1100  # about the timeline's data area in pixels at 100 dpi
MAX_HEIGHT_IN = 14.0


def name_colour(name: str) -> str:
    """One colour per event name, the same in every view, rank and window: a hue from a hash
    of the name (FNV-1a, not Python's salted ``hash``), at a saturation and lightness that
    keep black text readable on it. The interactive timeline colours every bar with it, so a
    kernel outside any top-N list is still told apart from its neighbours."""
    h = 0x811C9DC5
    for b in name.encode("utf-8", "surrogatepass"):
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    hue = (h % 360) / 360.0
    sat = 0.45 + ((h >> 9) % 30) / 100.0
    light = 0.58 + ((h >> 17) % 16) / 100.0
    return _hls_hex(hue, light, sat)


def _hls_hex(h: float, l: float, s: float) -> str:  # noqa: E741 -- the colour space's name
    r, g, b = colorsys.hls_to_rgb(h, l, s)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def _empty(title: str, why: str) -> Figure:
    fig = Figure(figsize=(8, 2))
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes)
    return fig


def short_label(text: str, n: int = 60) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _distinct_labels(texts: Sequence[str], n: int = 30) -> list[str]:
    """Labels of at most ``n`` characters that stay distinct: two long names cut to the same
    head keep their ends as well (``aten::convolution…ackward``), else a number."""
    labels = [short_label(t, n) for t in texts]
    for i, t in enumerate(texts):
        if labels.count(labels[i]) > 1 and len(str(t)) > n:
            labels[i] = str(t)[: n // 2 - 1] + "…" + str(t)[-(n - n // 2) :]
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[i] = f"{label} ({seen[label]})"
    return labels


def _ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st ..."""
    last = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{last}"


def _display_names(names: pd.Series) -> pd.Series:
    """Operation names as every plot shows them: as ``w.ops`` has them (``ProfilerStep*``
    too), object addresses left out ("<built-in method ... at 0x7f..>" differs per process)."""
    return names.astype(str).str.replace(_ADDRESS, "", regex=True)


def op_colors(window: Window) -> dict[str, str]:
    """One colour per operation across every plot of a window: the names with the most time
    in its events (step markers aside) get the palette in order; the rest are grey. The
    timeline and the ops plot both colour by it, so an op is one colour everywhere."""
    sums = per_partition(window.events, _time_by_name)  # (out of core: partition by partition)
    if not sums:
        return {}
    weight = sums[0] if len(sums) == 1 else pd.concat(sums).groupby(level=0).sum()
    if weight.empty:
        return {}
    weight = weight[[not STEP_RE.match(n) and n != STEP_FOLDED for n in weight.index]]
    top = weight[weight > 0].nlargest(len(PALETTE)).index
    return {name: PALETTE[i] for i, name in enumerate(top)}


#: what the timeline and the Perfetto export say of a window whose events are out of core (a
#: single Kineto trace, which Perfetto reads as it is)
OUT_OF_CORE_TIMELINE = (
    "its events are out of core (too big for memory, or DYNPROF_NB_OUT_OF_CORE=1), and a "
    "timeline needs them all: open the trace file itself in https://ui.perfetto.dev, or load "
    "with DYNPROF_NB_OUT_OF_CORE=0 if they fit"
)


def _time_by_name(ev: pd.DataFrame) -> pd.Series:
    """Drawn time (ns) per display name of the complete events a plot draws."""
    keep = (ev["ph"] == "X") & ~ev["process"].astype(object).isin(_NOT_DRAWN_PROCESSES)
    keep &= ~ev["cat"].astype(object).isin(_NOT_DRAWN_CATS | {"python_function"})
    ev = ev[keep]
    return ev["dur_ns"].groupby(_display_names(ev["name"].astype(object)).to_numpy()).sum()


def _multi_rank(frame: pd.DataFrame) -> bool:
    return "rank" in frame and frame["rank"].nunique() > 1


def _rank_column(frame: pd.DataFrame, window: Window) -> np.ndarray:
    if "rank" in frame:
        return frame["rank"].to_numpy("int64")
    r = getattr(window, "rank", None)
    return np.full(len(frame), -1 if r is None else int(r), np.int64)


def time_unit(span_ns: float) -> tuple[float, str]:
    return (1e9, "s") if span_ns > 20e9 else (1e6, "ms")


# ---- alignment ---------------------------------------------------------------------------------


def rank_of_events(frame: pd.DataFrame, window: Window) -> np.ndarray:
    """Each row's rank: its rank column, else the window's rank (-1 when unknown)."""
    return _rank_column(frame, window)


def rank_offsets(
    window: Window, align: str | None, ranks: Sequence[int], first_ts: dict[int, int]
) -> tuple[dict[int, int], str, str]:
    """Time zero of each rank: ``"step"`` puts every rank's first common step at 0 (ranks on
    different hosts have skewed clocks, and a barrier-free job drifts: wall time would put them
    seconds apart); ``"comm"`` corrects each rank's clock by its collectives (see
    :func:`comm_clock_offsets`), so that what one rank waits for in a collective is seen
    against the others' time; ``"wall"`` keeps their clocks. Returns (offsets, align used, how
    said)."""
    if align not in (None, "step", "wall", "comm"):
        raise ValueError(
            f"align={align!r}: expected 'step' (each rank on its own steps), 'comm' (clocks "
            "corrected by the collectives' ends) or 'wall' (wall-clock time)"
        )
    if align == "comm":
        t0 = min(first_ts.values()) if first_ts else 0
        skew, matched = comm_clock_offsets(window, ranks)
        if matched:
            return (
                {r: t0 + skew.get(r, 0) for r in ranks},
                "comm",
                f"rank clocks corrected by {matched:,} collectives' ends",
            )
        return {r: t0 for r in ranks}, "wall", "wall-clock time (no collective on every rank)"
    st = window.steps
    st = st[st["start_ns"].notna()] if not st.empty else st
    if align is None:
        align = "step" if len(ranks) > 1 and not st.empty else "wall"
    if align == "step" and not st.empty:
        rk = _rank_column(st, window)
        steps = st["step"].to_numpy("int64")
        common = None
        for r in ranks:
            have = set(steps[rk == r].tolist())
            common = have if common is None else common & have
        if common:
            ref = min(common)
            starts = st["start_ns"].to_numpy("int64", na_value=0)
            out = {r: int(starts[(rk == r) & (steps == ref)].min()) for r in ranks}
            return out, "step", f"ranks aligned on step {ref}"
    t0 = min(first_ts.values()) if first_ts else 0
    return {r: t0 for r in ranks}, "wall", "wall-clock time" if len(ranks) > 1 else ""


def comm_clock_offsets(window: Window, ranks: Sequence[int]) -> tuple[dict[int, int], int]:
    """Each rank's clock offset from the first rank's, estimated from its collectives, and how
    many collectives were matched between ranks.

    A synchronous collective ends on every rank of its group at nearly the same moment: the
    last rank to arrive releases the others. So the n-th occurrence of a collective (same name,
    same communication group where the trace names it: Kineto's ``Process Group Name``) is
    matched between two ranks, and the offset between them is the median of their end
    differences; the median keeps one late completion from moving the clock. A rank that
    shares no group with the first rank (tensor-parallel groups {0,1}, {2,3} and data-parallel
    {0,2}, {1,3}: rank 3 with rank 0) is reached through one that does, shown or not. The
    collectives are the device ones where a window has any, else the host ranges (gloo on the
    CPU), by the summary's definition (:func:`dynprof_nb.traces.comm.is_communication`).
    Offsets are in ns, to add to the first rank's time zero; a rank matched to none is left
    out (its caller keeps it at 0)."""
    ranks = list(ranks)
    table = _collective_ends(window) if len(ranks) > 1 else None
    if table is None or ranks[0] not in table:
        return {}, 0
    out = {ranks[0]: 0}
    # every rank of the window may link two of those asked for (ranks=[0, 3]: through 1 or 2)
    todo = [r for r in table.columns if r != ranks[0]]
    while todo:
        found = {}
        for r in todo:
            for q, off in out.items():
                both = table[[q, r]].dropna()
                if len(both):
                    found[r] = off + int(np.median(both[r].to_numpy() - both[q].to_numpy()))
                    break
        if not found:
            break  # the rest share no group with any rank placed
        out.update(found)
        todo = [r for r in todo if r not in found]
    if not all(r in out for r in ranks):
        return {r: out[r] for r in ranks if r in out}, 0
    matched = int((table[list(out)].notna().sum(axis=1) > 1).sum())
    return {r: out[r] for r in ranks}, matched


def _collective_ends(window: Window) -> pd.DataFrame | None:
    """The collectives' end times (ns): one row per (name, group, n-th occurrence), one column
    per rank, NaN where a rank has no such call; None for a window with none."""
    from dynprof_nb.traces.comm import is_communication

    ev = window.events
    if is_out_of_core(ev) or ev.empty:
        return None
    names = (
        ev["name"]
        if isinstance(ev["name"].dtype, pd.CategoricalDtype)
        else ev["name"].astype("category")
    )
    codes = names.cat.codes.to_numpy()
    sel = (codes >= 0) & (ev["ph"] == "X").to_numpy() & ev["ts_ns"].notna().to_numpy()
    sel &= is_communication(pd.Series(names.cat.categories, dtype=object))[np.maximum(codes, 0)]
    device = device_mask(ev).to_numpy()
    if (sel & device).any():
        sel &= device
    rows = np.flatnonzero(sel)
    if not len(rows):
        return None
    end = ev["ts_ns"].to_numpy("int64", na_value=0)[rows] + np.nan_to_num(
        ev["dur_ns"].to_numpy("float64", na_value=np.nan)[rows]
    ).astype(np.int64)
    group = (
        ev["pg_name"].astype(object).to_numpy()[rows]
        if "pg_name" in ev
        else np.full(len(rows), None, dtype=object)
    )
    frame = pd.DataFrame(
        {
            "rank": _rank_column(ev, window)[rows],
            "name": codes[rows],
            "group": pd.Series(group, dtype=object).fillna("").to_numpy(),
            "end": end - end.min(),  # small enough to be exact in the table's float64
        }
    ).sort_values(["rank", "name", "group", "end"], kind="stable")
    frame["nth"] = frame.groupby(["rank", "name", "group"]).cumcount()
    return frame.pivot_table(
        index=["name", "group", "nth"], columns="rank", values="end", aggfunc="first"
    )


# ---- timeline ----------------------------------------------------------------------------------


def _depths(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting depth of each event in its lane: how many events of the lane are open when it
    starts. One sort of all starts and ends (ends first at a tie, longer first among equal
    starts) and a running sum; every lane sums to zero, so lanes need no separate pass."""
    n = len(lane)
    end = np.maximum(end, start + 1)
    t = np.concatenate([start, end])
    ln = np.concatenate([lane, lane])
    kind = np.concatenate([np.ones(n, np.int8), np.zeros(n, np.int8)])  # end (0) before start
    length = np.concatenate([-(end - start), np.zeros(n, np.int64)])
    order = np.lexsort((length, kind, t, ln))
    delta = np.where(kind[order] == 1, 1, -1)
    open_after = np.cumsum(delta)
    depth = np.empty(2 * n, np.int64)
    depth[order] = open_after - 1
    return depth[:n]


def _step_name_codes(names: pd.Series) -> np.ndarray:
    cats = names.cat.categories
    return np.array(
        [i for i, c in enumerate(cats) if isinstance(c, str) and STEP_RE.match(c)], np.int64
    )


def process_in_label(process: str) -> bool:
    """Whether a lane label needs the process name (the built-in backend's "rank 1 (pid N)"
    repeats what the label already says)."""
    return not re.match(r"^(python )?rank \d+\b", process)


def _rank_priority(window: Window, ranks: list[int]) -> list[int]:
    """Ranks most worth showing first: the slowest and the fastest by median step time, in
    turn, then the rest."""
    st = window.steps
    if st.empty or "rank" not in st:
        return ranks
    med = st.groupby("rank")["duration_us"].median().reindex(ranks).fillna(0)
    by = list(med.sort_values(ascending=False).index)
    out: list[int] = []
    while by:
        out.append(int(by.pop(0)))
        if by:
            out.append(int(by.pop()))
    return out


class NothingToDraw(ValueError):
    """The window has no complete events to put on a timeline (the reason is the message)."""


@dataclass
class TimelineLayout:
    """What the timeline draws, before any per-pixel choice: every drawable event (complete,
    in a shown lane, not nested too deep) sorted by row then start, with its row ``y`` (lane
    base + depth), aligned start ``x0`` (ns from its rank's time zero) and duration; the
    lanes (rank, process, thread, y0, rows) and what was left out. The static figure and the
    interactive view (:mod:`.timeline_view`) both draw from it."""

    names: pd.Series  # the window's event names, categorical: ``codes`` index its categories
    lanes: pd.DataFrame
    rows: int
    index: np.ndarray  # row of each event in window.events
    x0: np.ndarray
    dur: np.ndarray
    y: np.ndarray
    codes: np.ndarray
    lo: float
    hi: float
    offsets: dict[int, int]
    align: str
    how: str
    n_all: int
    n_drawable: int
    hidden_frames: int
    too_deep: int
    cap: int
    hidden_lanes: int
    lanes_asked: int
    shown_ranks: list[int]
    all_ranks: list[int]


def timeline_layout(
    window: Window,
    lanes: int = 6,
    align: str | None = None,
    max_depth: int = 4,
    max_rows: int = 64,
    ranks: Sequence[int] | None = None,
    python: bool | None = None,
) -> TimelineLayout:
    """Lanes rank -> process -> thread/stream (the ``lanes`` busiest per rank), nested events
    stacked by depth (at most ``max_depth`` levels and ``max_rows`` rows: fewer levels first,
    then fewer ranks, the slowest and fastest kept), ranks aligned (see :func:`rank_offsets`).
    Raises :class:`NothingToDraw` for a window without complete events."""
    ev = window.events
    if is_out_of_core(ev):
        raise NothingToDraw(OUT_OF_CORE_TIMELINE)
    if ev.empty:
        raise NothingToDraw("no events")
    keep = (ev["ph"] == "X").to_numpy() & ev["ts_ns"].notna().to_numpy()
    keep &= ~ev["process"].isin(list(_NOT_DRAWN_PROCESSES)).to_numpy()
    keep &= ~ev["cat"].isin(list(_NOT_DRAWN_CATS)).to_numpy()
    names = (
        ev["name"]
        if isinstance(ev["name"].dtype, pd.CategoricalDtype)
        else ev["name"].astype("category")
    )
    name_codes = names.cat.codes.to_numpy()
    keep &= ~np.isin(name_codes, _step_name_codes(names))
    frames = (ev["cat"] == "python_function").to_numpy()
    hidden_frames = 0
    if python is None:  # Python frames hide the operations under them, unless they are all
        python = not (keep & ~frames).any()  # there is (a with_stack window of plain Python)
    if not python:
        hidden_frames = int((keep & frames).sum())
        keep &= ~frames
    if not keep.any():
        raise NothingToDraw("no complete events besides the step markers")
    idx = np.flatnonzero(keep)
    rank = _rank_column(ev, window)[idx]
    pid = pd.factorize(ev["pid"])[0][idx]  # pid/tid are strings in some Kineto traces
    tid = pd.factorize(ev["tid"])[0][idx]
    start = ev["ts_ns"].to_numpy("int64", na_value=0)[idx]  # (idx: rows with a ts)
    dur = np.maximum(ev["dur_ns"].to_numpy("int64", na_value=0)[idx], 0)
    codes = name_codes[idx]
    n_all = len(idx)

    rank_codes = pd.factorize(rank)[0]
    lane_key = (rank_codes.astype(np.int64) * (int(pid.max()) + 1) + pid) * (
        int(tid.max()) + 1
    ) + tid
    lane_id, _ = pd.factorize(lane_key)  # one integer key: a MultiIndex here costs 0.4 s
    nl = int(lane_id.max()) + 1
    busy = np.bincount(lane_id, weights=dur, minlength=nl)
    first = np.full(nl, len(idx))
    np.minimum.at(first, lane_id, np.arange(len(idx)))
    at_first = ev.iloc[idx[first]]
    lanes_df = pd.DataFrame(
        {
            "rank": rank[first],
            "pid": pid[first],
            "tid": at_first["tid"].astype(str).to_numpy(),
            "busy": busy,
            "process": at_first["process"].astype(object).fillna("").astype(str).to_numpy(),
            "thread": at_first["thread"].astype(object).fillna("").astype(str).to_numpy(),
            "device": (
                at_first["process"].astype(object).isin(DEVICE_PROCESSES)
                | at_first["cat"].astype(object).isin(DEVICE_CATS)
            ).to_numpy(),
        }
    )
    all_ranks = sorted(set(lanes_df["rank"].tolist()))
    if not isinstance(lanes, int | np.integer) or isinstance(lanes, bool) or lanes < 1:
        raise ValueError(f"lanes={lanes!r}: expected how many lanes to show per rank, e.g. 6")
    if ranks is not None and not len(ranks):
        raise ValueError(f"ranks=[]: name at least one of the window's ranks {all_ranks}")
    if ranks is not None:
        missing = sorted(set(ranks) - set(all_ranks))
        if missing:
            raise ValueError(
                f"ranks={list(ranks)}: no events for rank(s) {missing}; "
                f"the window has ranks {all_ranks}"
            )
        all_ranks = sorted(set(ranks))
    lanes_df = lanes_df[lanes_df["rank"].isin(all_ranks)]
    # the busiest lanes of each rank, then shown host first, process by process
    lanes_df = lanes_df.sort_values(["rank", "busy"], ascending=[True, False])
    per_rank = lanes_df.groupby("rank").cumcount()
    hidden_lanes = int((per_rank >= lanes).sum())
    lanes_df = lanes_df[per_rank < lanes]

    sel_lane = np.isin(lane_id, lanes_df.index.to_numpy())
    depth = np.full(len(idx), -1, np.int64)
    depth[sel_lane] = _depths(lane_id[sel_lane], start[sel_lane], start[sel_lane] + dur[sel_lane])
    lane_depth = np.zeros(nl, np.int64)
    np.maximum.at(lane_depth, lane_id[sel_lane], depth[sel_lane] + 1)
    lanes_df = lanes_df.assign(levels=lane_depth[lanes_df.index.to_numpy()])

    cap = max_depth
    while cap > 1 and np.minimum(lanes_df["levels"], cap).sum() > max_rows:
        cap -= 1
    shown_ranks = all_ranks
    if np.minimum(lanes_df["levels"], cap).sum() > max_rows and ranks is None:
        rows_of = np.minimum(lanes_df["levels"], cap).groupby(lanes_df["rank"]).sum()
        shown, used = [], 0
        for r in _rank_priority(window, all_ranks):
            if used + rows_of.get(r, 0) > max_rows and shown:
                continue
            shown.append(r)
            used += rows_of.get(r, 0)
        shown_ranks = sorted(shown)
        lanes_df = lanes_df[lanes_df["rank"].isin(shown_ranks)]
    lanes_df = lanes_df.sort_values(
        ["rank", "device", "process", "busy"], ascending=[True, True, True, False]
    )
    lanes_df["rows"] = np.minimum(lanes_df["levels"], cap).clip(lower=1)
    lanes_df["y0"] = np.concatenate([[0], np.cumsum(lanes_df["rows"].to_numpy())[:-1]])
    n_rows = int(lanes_df["rows"].sum())

    base = np.full(nl, -1, np.int64)
    base[lanes_df.index.to_numpy()] = lanes_df["y0"].to_numpy()
    drawable = (base[lane_id] >= 0) & (depth >= 0)
    too_deep = int((drawable & (depth >= cap)).sum())
    drawable &= depth < cap
    sel = np.flatnonzero(drawable)
    n_drawable = len(sel)

    first_ts = {int(r): int(start[rank == r].min()) for r in shown_ranks}
    offsets, align, how = rank_offsets(window, align, shown_ranks, first_ts)
    off = np.zeros(len(idx), np.int64)
    for r, o in offsets.items():
        off[rank == r] = o
    x0 = (start[sel] - off[sel]).astype(np.float64)
    lo = float(x0.min()) if len(sel) else 0.0
    hi = float((x0 + dur[sel]).max()) if len(sel) else 1.0
    y = base[lane_id[sel]] + depth[sel]
    order = np.lexsort((x0, y))  # row by row, in time: a row's events are a contiguous run
    return TimelineLayout(
        names=names,
        lanes=lanes_df,
        rows=n_rows,
        index=idx[sel[order]],
        x0=x0[order],
        dur=dur[sel][order],
        y=y[order],
        codes=codes[sel][order],
        lo=lo,
        hi=hi,
        offsets=offsets,
        align=align,
        how=how,
        n_all=n_all,
        n_drawable=n_drawable,
        hidden_frames=hidden_frames,
        too_deep=too_deep,
        cap=cap,
        hidden_lanes=hidden_lanes,
        lanes_asked=lanes,
        shown_ranks=shown_ranks,
        all_ranks=all_ranks,
    )


def lane_labels(lanes_df: pd.DataFrame) -> list[str]:
    """ "rank R · [process ·] thread or stream" for each lane, the process only where a rank
    has several. Names are shown as they are (control and bidirectional characters written
    out: :func:`dynprof_nb.safetext.visible`), and lanes whose labels would read the same once
    cut stay apart: cut around where their names differ, then with the thread id, then a
    number."""
    multi_proc = lanes_df.groupby("rank")["process"].nunique()
    parts = []
    for r in lanes_df.itertuples():
        head = [f"rank {r.rank}"] if r.rank >= 0 else []
        proc = visible(r.process) if multi_proc[r.rank] > 1 and process_in_label(r.process) else ""
        parts.append((head, proc, visible(r.thread or f"thread {r.tid}"), str(r.tid)))

    def label(i: int, at: tuple[int, int] = (0, 0), tid: bool = False) -> str:
        head, proc, thread, t = parts[i]
        words = [*head, *([_cut_at(proc, at[0], 24)] if proc else []), _cut_at(thread, at[1], 32)]
        return " · ".join(words) + (f" · tid {t}" if tid else "")

    labels = [label(i) for i in range(len(parts))]
    at = [(0, 0)] * len(parts)  # where each lane's names are cut around
    for tid in (False, True):
        groups: dict[str, list[int]] = {}
        for i, text in enumerate(labels):
            groups.setdefault(text, []).append(i)
        for same in groups.values():
            if len(same) < 2:
                continue
            p_at = _differ_at([parts[i][1] for i in same])
            t_at = _differ_at([parts[i][2] for i in same])
            for i in same:
                at[i] = (p_at or at[i][0], t_at or at[i][1])
                labels[i] = label(i, at[i], tid)
    seen: dict[str, int] = {}
    count = {t: labels.count(t) for t in set(labels)}
    for i, text in enumerate(labels):  # the same names and thread id: a number each
        if count[text] > 1:
            seen[text] = seen.get(text, 0) + 1
            labels[i] = f"{text} #{seen[text]}"
    return labels


def _differ_at(texts: list[str]) -> int:
    """Where the first of ``texts`` that differ from each other do: their common prefix's
    length (0 when they are all the same)."""
    if len(set(texts)) < 2:
        return 0
    n = 0
    for chars in zip(*texts, strict=False):
        if len(set(chars)) > 1:
            break
        n += 1
    return n


def _cut_at(text: str, at: int, n: int) -> str:
    """``text`` in at most ``n`` characters: its head, and the part from a little before
    ``at`` (where it differs from its neighbours') when that lies past the head."""
    if len(text) <= n:
        return text
    if at < n - 1:
        return short_label(text, n)
    head = text[: n // 3]
    rest = text[max(at - 2, len(head)) :]
    room = n - len(head) - 1
    return head + "…" + (rest if len(rest) <= room else rest[: room - 1] + "…")


def longest_per_pixel(
    x0: np.ndarray, dur: np.ndarray, y: np.ndarray, lo: float, hi: float, pixels: int
) -> np.ndarray:
    """Indices of the longest event starting in each pixel of each row, for events sorted by
    row then start (so a cell is a contiguous run: one pass, no sort). Where events crowd,
    one per pixel is all the eye can see; a global "longest N" would instead keep one rank's
    slightly longer events and blank the rest."""
    if not len(x0):
        return np.empty(0, np.int64)
    px = np.clip(((x0 - lo) * (pixels / max(hi - lo, 1e-9))).astype(np.int64), 0, pixels - 1)
    cell = y.astype(np.int64) * pixels + px
    starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
    longest = np.maximum.reduceat(dur, starts)
    run = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(cell)]))
    hit = np.flatnonzero(dur == longest[run])
    return hit[np.r_[True, run[hit][1:] != run[hit][:-1]]]  # the first longest of each cell


def timeline(
    window: Window,
    max_events: int = 60_000,
    lanes: int = 6,
    align: str | None = None,
    max_depth: int = 4,
    max_rows: int = 64,
    ranks: Sequence[int] | None = None,
    legend: int = 10,
    python: bool | None = None,
) -> Figure:
    """Complete events as bars, one lane per rank -> process -> thread/stream, nested events
    stacked by depth, steps shaded per rank and labelled once on top.

    ``align``: ``"step"`` (the default with several ranks) puts each rank on its own steps,
    ``"wall"`` on wall-clock time, ``"comm"`` on clocks corrected by the collectives' ends
    (:func:`comm_clock_offsets`). Where events crowd, the longest in each pixel of a row is
    drawn, and at most ``max_events`` in all (the longest of each row), at most
    ``lanes`` busiest lanes per rank, ``max_depth`` nesting levels and ``max_rows`` rows in all
    (fewer levels first, then fewer ranks: the slowest and fastest are kept; pass ``ranks=`` to
    choose). Python stack frames are left out when the window has other events (they would
    bury its operations under levels of wrappers; ``python=True`` draws them). What is left out
    is said under the title. The same timeline that zooms and pans in a notebook:
    :class:`.timeline_view.TimelineView` (``w.plot_timeline(interactive=True)``).
    """
    try:
        lay = timeline_layout(window, lanes, align, max_depth, max_rows, ranks, python)
    except NothingToDraw as e:
        return _empty("timeline", str(e))
    names, lanes_df, n_rows, lo, hi = lay.names, lay.lanes, lay.rows, lay.lo, lay.hi
    offsets, align, how, cap = lay.offsets, lay.align, lay.how, lay.cap
    n_all, n_drawable, hidden_frames = lay.n_all, lay.n_drawable, lay.hidden_frames
    too_deep, hidden_lanes = lay.too_deep, lay.hidden_lanes
    shown_ranks, all_ranks = lay.shown_ranks, lay.all_ranks
    x0, x1, y, dur, codes = lay.x0, lay.x0 + lay.dur, lay.y, lay.dur, lay.codes
    sel = np.arange(len(x0))
    if len(sel) > 20_000:  # (below that, drawing them all is cheap and exact)
        firsts = longest_per_pixel(x0, dur, y, lo, hi, _PIXELS)
    else:
        firsts = np.arange(len(sel))
    if len(firsts) > max_events:  # still too many: the longest of each row, rows alike
        yf, df = y[firsts], dur[sel][firsts]
        o = np.lexsort((-df, yf))
        new_row = np.r_[True, yf[o][1:] != yf[o][:-1]]
        row_start = np.maximum.accumulate(np.where(new_row, np.arange(len(o)), 0))
        budget = max(1, max_events // int(new_row.sum()))
        firsts = firsts[o[np.arange(len(o)) - row_start < budget]]
    sel, x0, x1, y = sel[firsts], x0[firsts], x1[firsts], y[firsts].astype(np.float64)
    scale, unit = time_unit(hi - lo)
    x0, x1, lo, hi = x0 / scale, x1 / scale, lo / scale, hi / scale
    x1 = np.maximum(x1, x0 + (hi - lo) / (2 * _PIXELS))  # short events stay visible

    # colours: each operation's own across the window's plots (op_colors); the legend lists
    # the coloured ones with the most drawn time here, the rest are grey
    weight = np.bincount(codes[sel], weights=dur[sel], minlength=len(names.cat.categories))
    shown_as = _display_names(pd.Series(names.cat.categories.astype(object))).tolist()
    palette = op_colors(window)
    top = [int(c) for c in np.argsort(-weight) if weight[c] > 0 and shown_as[c] in palette]
    top = top[:legend]
    color_of = np.tile(np.array(to_rgba(OTHER)), (len(names.cat.categories), 1))
    for c in top:
        color_of[c] = to_rgba(palette[shown_as[c]])

    height = min(MAX_HEIGHT_IN, 1.9 + 0.22 * n_rows + 0.22 * math.ceil((len(top) + 1) / 4))
    fig = Figure(figsize=(WIDTH_IN, height), layout="constrained")
    ax = fig.add_subplot()
    verts = np.empty((len(sel), 4, 2))
    verts[:, 0, 0] = verts[:, 1, 0] = x0
    verts[:, 2, 0] = verts[:, 3, 0] = x1
    verts[:, 0, 1] = verts[:, 3, 1] = y + 0.08
    verts[:, 1, 1] = verts[:, 2, 1] = y + 0.92
    ax.add_collection(
        PolyCollection(
            verts, facecolors=color_of[codes[sel]], linewidths=0, antialiaseds=False, zorder=2
        )
    )
    step_pos = aligned_steps(window, offsets, scale)
    if step_pos is not None and len(step_pos):
        lo = min(lo, float(step_pos["a"].min()))
        hi = max(hi, float(step_pos["b"].max()))
        _draw_steps(ax, step_pos, lanes_df, lo, hi, wall=align == "wall")
    # lane and rank separators, one collection
    ys = lanes_df["y0"].to_numpy()
    rank_first = lanes_df["rank"].ne(lanes_df["rank"].shift()).to_numpy()
    segs = [[(lo, v), (hi, v)] for v in ys[1:]]
    ax.add_collection(
        LineCollection(
            segs,
            colors=["#555555" if f else "#dddddd" for f in rank_first[1:]],
            linewidths=0.6,
            zorder=3,
        )
    )
    ax.set_xlim(lo - (hi - lo) * 0.005, hi + (hi - lo) * 0.005)
    ax.set_ylim(n_rows, 0)
    labels = lane_labels(lanes_df)
    ax.set_yticks(
        ys + np.minimum(lanes_df["rows"].to_numpy(), 1) * 0.5,
        labels,
        fontsize=8 if len(labels) <= 24 else 6,
    )
    ax.tick_params(axis="y", length=0)
    zero = f" (0 = start of step {how.rsplit(' ', 1)[-1]})" if align == "step" else ""
    ax.set_xlabel(f"time ({unit}){zero}")
    ax.margins(x=0)

    left_out = []
    if hidden_frames:
        left_out.append(f"{hidden_frames:,} Python frames not drawn (python=True draws them)")
    if len(sel) < n_drawable:
        left_out.append(
            f"{len(sel):,} of {n_drawable:,} events drawn (the longest in each "
            "pixel: zoom with ranks=, or open in Perfetto)"
        )
    if too_deep:
        left_out.append(
            f"{too_deep:,} events nested deeper than {cap} level{'s' if cap > 1 else ''} hidden"
        )
    if hidden_lanes:
        left_out.append(f"{hidden_lanes} quieter lanes hidden (lanes={lanes})")
    if len(shown_ranks) < len(all_ranks):
        left_out.append(
            f"{len(shown_ranks)} of {len(all_ranks)} ranks shown, the slowest and "
            "fastest (ranks=[...] to choose)"
        )
    fig.suptitle(
        f"timeline · {window.framework} · {n_all:,} events"
        + (f" · {len(all_ranks)} ranks, {how}" if len(all_ranks) > 1 else ""),
        fontsize=11,
    )
    if left_out:
        ax.set_title(
            textwrap.fill("; ".join(left_out), 125), fontsize=8, loc="left", color="#444444"
        )
    if top:
        labels = _distinct_labels([shown_as[c] for c in top], 30)
        handles = [
            Patch(color=palette[shown_as[c]], label=label)
            for c, label in zip(top, labels, strict=True)
        ]
        if len(top) < np.count_nonzero(weight):
            handles.append(Patch(color=OTHER, label="other"))
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncol=min(4, len(handles)),
            fontsize=8,
            frameon=False,
        )
    return fig


def aligned_steps(window: Window, offsets: dict[int, int], scale: float) -> pd.DataFrame | None:
    """Each rank's steps on the plot's time axis: rank, step, a (start), b (end)."""
    st = window.steps
    if st.empty or st["start_ns"].isna().all():
        return None
    st = st[st["start_ns"].notna()]
    rk = _rank_column(st, window)
    show = np.isin(rk, list(offsets))
    if not show.any():
        return None
    st, rk = st[show], rk[show]
    off = np.array([offsets[int(r)] for r in rk], np.int64)
    a = (st["start_ns"].to_numpy("int64") - off) / scale
    b = a + st["duration_us"].fillna(0).to_numpy() * 1000 / scale
    return pd.DataFrame({"rank": rk, "step": st["step"].to_numpy("int64"), "a": a, "b": b})


def _draw_steps(
    ax: Any, pos_df: pd.DataFrame, lanes_df: pd.DataFrame, lo: float, hi: float, wall: bool
) -> None:
    """Alternate step shading in each rank's band of lanes, and the step numbers once on top
    (at the median aligned start over ranks), thinned to what fits."""
    rk, steps = pos_df["rank"].to_numpy(), pos_df["step"].to_numpy()
    a, b = pos_df["a"].to_numpy(), pos_df["b"].to_numpy()
    bands = lanes_df.groupby("rank").agg(top=("y0", "min"), rows=("rows", "sum"))
    bands["bottom"] = bands["top"] + bands["rows"]
    show = np.isin(rk, bands.index.to_numpy()) & (steps % 2 == 1)
    dense = np.median(b - a) < 4 * (hi - lo) / _PIXELS  # bands under 4 px are noise
    if np.count_nonzero(show) <= 20_000 and not dense:
        t = bands["top"].reindex(rk[show]).to_numpy()
        btm = bands["bottom"].reindex(rk[show]).to_numpy()
        v = np.stack(
            [
                np.stack([a[show], t], 1),
                np.stack([a[show], btm], 1),
                np.stack([b[show], btm], 1),
                np.stack([b[show], t], 1),
            ],
            1,
        )
        ax.add_collection(PolyCollection(v, facecolors="#e9e9e9", linewidths=0, zorder=0))
    if wall:  # ranks' clocks differ: label the first rank's steps (the others are shaded)
        first = rk == rk.min()
        pos = pd.Series(a[first]).groupby(steps[first]).min()
    else:  # on their own steps the ranks agree: one label per step for all of them
        pos = pd.Series(a).groupby(steps).median()
    pos = pos[(pos >= lo) & (pos <= hi)]
    if pos.empty:
        return
    px = (pos.to_numpy() - lo) / max(hi - lo, 1e-12) * _PIXELS
    stride = 1
    for k in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10_000):
        stride = k
        keep = (pos.index.to_numpy() % k == 0) if k > 1 else np.ones(len(pos), bool)
        if keep.sum() <= 1 or np.diff(px[keep]).min() >= 40:  # labels ~40 px apart at least
            break
    pos = pos[keep]
    top = ax.secondary_xaxis("top")
    of_rank = f" of rank {rk.min()}" if wall and len(set(rk.tolist())) > 1 else ""
    if len(pos) == 1:  # a lone number over the corner reads as a tick value: name it there
        top.set_xticks(pos.to_numpy(), [f"step {pos.index[0]}{of_rank} starts"], fontsize=7)
        for label in top.get_xticklabels():
            label.set_horizontalalignment("left")
        return
    top.set_xticks(pos.to_numpy(), [str(s) for s in pos.index], fontsize=7)
    top.set_xlabel(
        "step" + (f" (every {_ordinal(stride)} labelled)" if stride > 1 else "") + of_rank,
        fontsize=8,
    )


# ---- operations --------------------------------------------------------------------------------


def kernel_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """Device time per kernel name (and rank): count, total_us."""
    if kernels.empty:
        return pd.DataFrame(columns=["name", "count", "total_us"])
    keys = ["rank", "name"] if "rank" in kernels else ["name"]
    k = kernels.assign(name=kernels["name"].astype(object))
    return (
        k.groupby(keys, sort=False)
        .agg(count=("duration_us", "size"), total_us=("duration_us", "sum"))
        .reset_index()
    )


_ADDRESS = r" at 0x[0-9a-fA-F]+"


def top_ops(
    window: Window,
    n: int = 15,
    by: str = "self_us",
    what: str = "ops",
    per_rank: bool | None = None,
) -> Figure:
    """Horizontal bars of the operations (``what="ops"``) or device kernels (``"kernels"``)
    with the most time, largest on top. With several ranks: the mean over ranks with a min-max
    whisker (and the slowest rank named), or one bar per rank side by side (``per_rank``, the
    default up to 4 ranks)."""
    if what == "kernels":
        ops, by, label = kernel_table(window.kernels), "total_us", "device time"
    elif what == "ops":
        ops, label = window.ops, by.replace("_us", "") + " time"
    else:
        raise ValueError(f"what={what!r}: expected 'ops' (host operations) or 'kernels'")
    if ops.empty:
        return _empty(f"top {what}", f"no {what} in this window")
    if by not in ops:
        raise ValueError(f"by={by!r}: expected one of {[c for c in ops if c.endswith('_us')]}")
    title = "top device kernels" if what == "kernels" else "top operations"
    # "<built-in method run_backward of ... object at 0xfffdc7cc1890>" differs per process:
    # without the address the ranks' rows of one operation share one label
    ops = ops.assign(name=_display_names(ops["name"]))
    palette = op_colors(window) if what == "ops" else {}
    if not _multi_rank(ops):
        top = ops.groupby(ops["name"].astype(object))[by].sum().nlargest(n).iloc[::-1]
        fig = Figure(figsize=(9, 1.2 + 0.3 * len(top)), layout="constrained")
        ax = fig.add_subplot()
        ax.barh(
            _distinct_labels(list(top.index), 60),
            top.to_numpy() / 1000.0,
            color=[palette.get(s, "#4c72b0" if not palette else OTHER) for s in top.index],
        )
        ax.set_xlabel(f"{label} (ms)")
        ax.set_title(title)
        return fig
    wide = (
        ops.pivot_table(
            index=ops["name"].astype(object),
            columns="rank",
            values=by,
            aggfunc="sum",
            fill_value=0.0,
        )
        / 1000.0
    )
    nr = wide.shape[1]
    mean = wide.mean(axis=1)
    order = mean.nlargest(n).index[::-1]
    wide, mean = wide.loc[order], mean.loc[order]
    yl = _distinct_labels(list(order), 60)
    per_rank = nr <= 4 if per_rank is None else per_rank
    fig = Figure(
        figsize=(9, 1.4 + (0.18 * nr + 0.12 if per_rank else 0.3) * len(order)),
        layout="constrained",
    )
    ax = fig.add_subplot()
    y = np.arange(len(order))
    if per_rank:
        h = 0.8 / nr
        for i, r in enumerate(wide.columns):
            ax.barh(
                y - 0.4 + h * (nr - i - 0.5),
                wide[r].to_numpy(),
                height=h,
                color=PALETTE[i % len(PALETTE)],
                label=f"rank {r}",
            )
        ax.legend(fontsize=8, loc="lower right")
        ax.set_title(f"{title} per rank ({nr} ranks, by mean)")
    else:
        lo, hi = wide.min(axis=1), wide.max(axis=1)
        ax.barh(y, mean.to_numpy(), color="#4c72b0", label=f"mean over {nr} ranks")
        ax.errorbar(
            mean.to_numpy(),
            y,
            xerr=[mean - lo, hi - mean],
            fmt="none",
            ecolor="#333333",
            capsize=3,
            lw=1,
            label="min-max over ranks",
        )
        slowest = wide.idxmax(axis=1)
        for yi, (v, r) in enumerate(zip(hi.to_numpy(), slowest.to_numpy(), strict=True)):
            ax.text(v, yi, f" r{r}", va="center", fontsize=7, color="#333333")
        ax.legend(fontsize=8, loc="lower right")
        ax.set_title(f"{title}: mean over {nr} ranks, whiskers min-max, slowest rank named")
    ax.set_yticks(y, yl)
    ax.set_xlabel(f"{label} (ms)")
    return fig


# ---- steps -------------------------------------------------------------------------------------


def _breakdown_parts(st: pd.DataFrame) -> pd.DataFrame:
    return st.assign(
        _comm_not_overlapped=(
            st["communication_us"].fillna(0) - st["overlapped_us"].fillna(0)
        ).clip(lower=0)
    )


def _stacked(ax: Any, st: pd.DataFrame, legend: bool) -> None:
    """One rank's steps: stacked bars (few steps) or stacked areas (many)."""
    x = st["step"].to_numpy()
    has_parts = st["computing_us"].notna().any()
    cols = _BREAKDOWN if has_parts else [("duration_us", "step time", "#4c72b0")]
    parts = _breakdown_parts(st) if has_parts else st
    bars = len(st) <= 60
    bottom = np.zeros(len(st))
    for col, name, color in cols:
        vals = parts[col].fillna(0).to_numpy() / 1000.0
        if bars:
            ax.bar(x, vals, bottom=bottom, label=name, color=color, width=0.8)
        else:
            ax.fill_between(x, bottom, bottom + vals, step="mid", label=name, color=color, lw=0)
        bottom = bottom + vals
    if legend:  # beside the plot: inside, it covered the tallest bars
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_ylabel("ms")
    if bars and len(st) <= 30:
        ax.set_xticks(x)


LEGEND_IN = 2.3  # the step legend sits beside the bars: room for it, not taken from them


def step_breakdown(
    window: Window, heatmap: bool | None = None, value: str = "duration_us"
) -> Figure:
    """Step time split into computing / communication / free where known.

    One rank: stacked bars (areas beyond 60 steps). Several ranks: one small panel per rank
    while there are few steps and ranks; otherwise (or with ``heatmap=True``) a heat map of
    ``value`` for step x rank, with each rank's median beside it: a straggler is a bright row.
    The figure stays within 12 x 14 inches whatever the window holds.
    """
    st = window.steps
    if st.empty:
        return _empty("step breakdown", "no steps in this window")
    if not _multi_rank(st):
        st = st.sort_values("step")
        fig = Figure(
            figsize=(min(WIDTH_IN, max(6.0, 2 + 0.25 * len(st)) + LEGEND_IN), 4),
            layout="constrained",
        )
        ax = fig.add_subplot()
        _stacked(ax, st, legend=True)
        ax.set_xlabel("step")
        ax.set_title(f"step breakdown ({len(st)} step{'s' if len(st) != 1 else ''})")
        return fig
    ranks = sorted(st["rank"].unique().tolist())
    nsteps = st["step"].nunique()
    if heatmap is None:
        heatmap = len(ranks) > 8 or nsteps > 30
    if not heatmap:
        fig = Figure(
            figsize=(
                min(WIDTH_IN, max(6.0, 2 + 0.25 * nsteps) + LEGEND_IN),
                1.2 + 1.7 * len(ranks),
            ),
            layout="constrained",
        )
        axes = fig.subplots(len(ranks), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
        for i, (ax, r) in enumerate(zip(axes, ranks, strict=True)):
            _stacked(ax, st[st["rank"] == r].sort_values("step"), legend=i == 0)
            ax.set_title(f"rank {r}", fontsize=9, loc="left")
        axes[-1].set_xlabel("step")
        fig.suptitle(
            f"step breakdown per rank ({nsteps} step{'s' if nsteps != 1 else ''}, "
            f"{len(ranks)} ranks)",
            fontsize=11,
        )
        return fig
    if value not in st or st[value].isna().all():
        have = [c for c in st if c.endswith("_us") and st[c].notna().any()]
        raise ValueError(f"value={value!r}: this window's steps have {have}")
    grid = st.pivot_table(index="rank", columns="step", values=value, aggfunc="max") / 1000.0
    fig = Figure(
        figsize=(WIDTH_IN, min(MAX_HEIGHT_IN, 2.4 + 0.14 * len(ranks))), layout="constrained"
    )
    ax, side = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [6, 1]})
    data = grid.to_numpy()
    finite = data[np.isfinite(data)]
    vmin, vmax = np.percentile(finite, [1, 99]) if finite.size else (0, 1)
    steps = grid.columns.to_numpy()
    im = ax.imshow(
        data,
        aspect="auto",
        interpolation="nearest",
        cmap="magma",
        vmin=vmin,
        vmax=max(vmax, vmin + 1e-9),
        extent=(steps[0] - 0.5, steps[-1] + 0.5, len(ranks) - 0.5, -0.5),
    )
    fig.colorbar(im, ax=side, label=f"{value.replace('_us', '')} (ms)", fraction=0.5)
    ax.set_xlabel("step")
    ax.set_ylabel("rank")
    tick = max(1, len(ranks) // 16)
    ax.set_yticks(np.arange(0, len(ranks), tick), [str(r) for r in grid.index[::tick]], fontsize=7)
    med = grid.median(axis=1)
    side.barh(np.arange(len(ranks)), med.to_numpy(), color="#4c72b0", height=0.8)
    side.set_xlabel("median (ms)")
    slow = med.idxmax()
    fast = med.min()
    side.set_title(
        f"slowest: rank {slow}\n{med.max() / fast - 1:+.0%} vs fastest"
        if fast > 0
        else f"slowest: rank {slow}",
        fontsize=8,
    )
    ax.set_title(
        f"{value.replace('_us', '')} per step and rank ({nsteps} steps x "
        f"{len(ranks)} ranks; colour clipped to the 1-99th percentile)",
        fontsize=10,
    )
    return fig


# ---- memory ------------------------------------------------------------------------------------

_TOTAL_COMPONENTS = ("PTA+GE", "APP", "PTA", "PROCESS", "PYTHON", "Memory")


def _one_component(mem: pd.DataFrame, component: str | None) -> tuple[pd.DataFrame, str]:
    """The records of one memory component: Ascend's memory_record.csv holds several (APP, PTA,
    GE, PTA+GE) and its other CSVs hold per-operator and per-module rows; one line mixing them
    would zigzag between unrelated totals. The default is the framework's total."""
    src = mem["source"].astype(object)
    if component is None and (src == "memory_record.csv").any():
        mem = mem[(src == "memory_record.csv").to_numpy()]
    names = mem["name"].astype(object)
    have = names.dropna().unique().tolist()
    if not have:
        return mem, ""
    if component is None:
        component = next((c for c in _TOTAL_COMPONENTS if c in have), None) or str(
            names.value_counts().index[0]
        )
    if component not in have:
        raise ValueError(f"component={component!r}: this window's memory has {sorted(have)}")
    return mem[(names == component).to_numpy()], component


def memory_over_time(
    window: Window, align: str | None = None, component: str | None = None
) -> Figure:
    """Allocated (solid) and reserved (dashed) memory over time, one line per rank and device,
    each rank on its own steps (``align="step"``, the default with several ranks) or on
    wall-clock time (``"wall"``). Past 8 lines the colour is the rank (a colour bar, no legend).
    ``component`` picks one of the records' components (default: the framework's total)."""
    mem = window.memory
    if mem.empty:
        return _empty("memory", "no memory records (was profile_memory on?)")
    several_components = mem["name"].astype(object).dropna().nunique() > 1
    mem, component = _one_component(mem, component)
    rk = _rank_column(mem, window)
    ranks = sorted(set(rk.tolist()))
    ts = mem["ts_ns"].to_numpy("int64")
    first = {r: int(ts[rk == r].min()) for r in ranks}
    offsets, align, how = rank_offsets(window, align, ranks, first)
    off = (
        np.array([offsets[int(r)] for r in rk], np.int64)
        if len(ranks) > 1
        else np.full(len(rk), offsets[ranks[0]])
    )
    dev = mem["device"].astype(object).fillna("?").astype(str).to_numpy()
    dev = np.where(np.char.lower(dev.astype(str)) == "cpu:-1", "CPU", dev)  # Kineto's host
    groups = pd.DataFrame({"r": rk, "d": dev}).groupby(["r", "d"], sort=True).indices
    series = [(int(r), str(d), rows) for (r, d), rows in groups.items()]
    cols = [c for c in ("allocated_bytes", "reserved_bytes") if mem[c].notna().any()]
    t_all = ts - off
    scale, unit = time_unit(float(t_all.max() - t_all.min()) if len(t_all) else 0.0)
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax = fig.add_subplot()
    many = len(series) > 8
    drawn: set[str] = set()
    cmap = None
    if many:
        from matplotlib import colormaps

        cmap = colormaps["viridis"]
    for i, (r, d, rows) in enumerate(series):
        order = rows[np.argsort(ts[rows], kind="stable")]
        t = t_all[order] / scale
        color = cmap(ranks.index(r) / max(1, len(ranks) - 1)) if many else PALETTE[i % len(PALETTE)]
        who = (f"rank {r} · " if r >= 0 else "") + d
        for col, style in zip(cols, ("-", "--"), strict=False):
            v = mem[col].to_numpy()[order]
            ok = np.isfinite(v)
            if col == "reserved_bytes" and not np.any(v[ok]):
                continue  # nothing reserved recorded (a CPU trace): no flat line at zero
            drawn.add(col)
            if ok.any():
                ax.step(
                    t[ok],
                    v[ok] / 2**20,
                    style,
                    where="post",
                    color=color,
                    lw=1,
                    label=None if many else f"{who} {col.split('_')[0]}",
                )
    if many:
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize

        fig.colorbar(ScalarMappable(Normalize(min(ranks), max(ranks)), cmap), ax=ax, label="rank")
    else:
        ax.legend(fontsize=8, loc="best")
    zero = f" (0 = start of step {how.rsplit(' ', 1)[-1]})" if align == "step" else ""
    ax.set_xlabel(f"time ({unit}){zero}")
    ax.set_ylabel("MiB")
    styles = " (solid: allocated, dashed: reserved)" if len(drawn) == 2 else ""
    # the component only when there was a choice ("[memory]", Kineto's one event name, said
    # nothing); the counts in words, not "2 rank x device series"
    comp = f" · {component}" if component and several_components else ""
    devices = len({d for _, d, _ in series})
    who = f"{len(ranks)} rank{'s' if len(ranks) != 1 else ''}" if ranks != [-1] else ""
    what = ", ".join(p for p in (who, f"{devices} device{'s' if devices != 1 else ''}") if p)
    ax.set_title(f"memory over time{comp} · {what}{styles}", fontsize=10)
    return fig
