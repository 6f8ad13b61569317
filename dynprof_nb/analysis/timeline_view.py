"""The interactive timeline: ``w.plot_timeline(interactive=True)`` in a notebook.

A canvas widget (anywidget; its front-end, the ES modules of ``timeline_js/`` joined into one
by :func:`front_end`, ships in the package and loads nothing from the network) that zooms and
pans in the browser, from the whole window down to one kernel. It draws what the static timeline
draws (the same lanes, depth stacking, step alignment: :func:`.plots.timeline_layout`).

Zoom and pan never wait on the kernel: the widget is sent once a multi-resolution summary
(:func:`summary_levels`: per row, the longest event starting in each bucket at a few bucket
widths, 8x finer each, as compact column arrays), and the browser redraws every wheel, drag
and key step from it. Only when a view needs finer events than the summary holds does the
browser ask the kernel (``view`` -> ``rects``), asynchronously, drawing the summary meanwhile.
That answer stays cheap at any size because the events are laid out once, sorted by row then
start (:class:`VisibleIndex`): two ``searchsorted`` over the rows and one vectorised per-pixel
maximum over the events in range, never a pass over the whole window.

Names are drawn inside the bars they fit in, every name has its own colour
(:func:`.plots.name_colour`), the steps are numbered along the top; the kernel also answers a
search by name (``query`` -> ``matches``), a range's summed time per name (``span`` ->
``span_summary``) and a clicked event's details: its step, its launch or kernels (Kineto's
correlation id) and a collective's peers on other ranks, which the browser draws as arrows.
Where widgets do not run (a static export, nbconvert, GitHub) the display falls back to a PNG
of the current view.
"""

from __future__ import annotations

import base64
import io
import re
import time
import warnings
from pathlib import Path
from typing import Any

import anywidget
import numpy as np
import pandas as pd
import traitlets
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from dynprof_nb.analysis import plots
from dynprof_nb.analysis.timeline_groups import CommGroups
from dynprof_nb.safetext import visible, visible_in
from dynprof_nb.traces.formats.chrome.event_args import event_args
from dynprof_nb.traces.formats.derived.from_events import (
    DEVICE_CATS,
    DEVICE_PROCESSES,
)
from dynprof_nb.traces.interface import Window

_ROW_PX = 18  # row height in the canvas: an 11 px name fits inside a bar

#: the front-end: its ES modules (in the order :func:`front_end` joins them), its style sheet,
#: and PROTOCOL.md, which says what every synced trait carries
FRONT_END = Path(__file__).with_name("timeline_js")
FRONT_END_MODULES = ("model", "layout", "draw", "input", "widget")
_IMPORT = re.compile(r'^import \{([^}]*)\} from "\./(\w+)\.mjs";\n', re.M)
_EXPORTED = re.compile(r"^export (?:function|const|let|class) (\w+)", re.M)
_EXPORT = re.compile(r"^export (?=function |const |let |class )", re.M)
_OTHER_MODULE_SYNTAX = re.compile(r"^(?:import\b|export (?!default\b))", re.M)


def front_end() -> str:
    """The front-end's ES modules (``timeline_js/*.mjs``) joined into the one module anywidget
    loads: each module's ``import {a, b} from "./x.mjs";`` lines dropped and its ``export``
    keywords removed, in :data:`FRONT_END_MODULES` order, so every module reads the names of
    those before it. No npm, no build step: the modules are what Node's tests import, and this
    join is all there is between them and the browser. A module that imports a name its source
    does not export, or from a module joined after it, is refused here (a ``SyntaxError`` in
    the browser would say much less); two modules declaring one top-level name fail the
    browser's parse and ``node --check`` (tests/ui/test_timeline_js.py)."""
    exported: dict[str, set[str]] = {}
    parts = []
    for k, name in enumerate(FRONT_END_MODULES):
        text = (FRONT_END / f"{name}.mjs").read_text(encoding="utf-8")
        for names, source in _IMPORT.findall(text):
            wanted = {n.strip() for n in names.split(",") if n.strip()}
            if source not in FRONT_END_MODULES[:k] or wanted - exported[source]:
                raise ImportError(
                    f"timeline_js/{name}.mjs imports {sorted(wanted)} from ./{source}.mjs: "
                    f"only names exported by a module joined before it can be (order: "
                    f"{', '.join(FRONT_END_MODULES)})"
                )
        body = _IMPORT.sub("", text)
        exported[name] = set(_EXPORTED.findall(body))
        body = _EXPORT.sub("", body)
        other = _OTHER_MODULE_SYNTAX.search(body)
        last = k == len(FRONT_END_MODULES) - 1
        if other or (not last and "export default" in body):
            raise ImportError(
                f"timeline_js/{name}.mjs: module syntax front_end() cannot join ("
                "'import {...} from \"./x.mjs\";', 'export function|const|let|class', and "
                "'export default' in the last module only)"
            )
        parts.append(f"// ---- timeline_js/{name}.mjs ----\n{body}")
    return "\n".join(parts)


def _lane_of_row(lanes: Any, row: int) -> Any:
    """The lane (a row of ``TimelineLayout.lanes``) that row ``row`` belongs to."""
    y0 = lanes["y0"].to_numpy()
    k = int(np.searchsorted(y0, row, "right")) - 1
    return lanes.iloc[max(k, 0)]


class VisibleIndex:
    """A layout's events, sorted by row then start, with two search keys per event: the start
    and the running maximum of the ends within its row (an event that starts long before the
    view may still cover it), both offset by ``row * span`` so that one ``searchsorted`` over
    all rows at once finds each row's run of events overlapping a range."""

    def __init__(self, layout: plots.TimelineLayout) -> None:
        self.tl = layout
        self.x0 = layout.x0
        self.dur = layout.dur
        self.x1 = layout.x0 + layout.dur
        self.y = layout.y
        self.lo, self.hi = layout.lo, layout.hi
        self.span = 2.0 * (self.hi - self.lo) + 1.0  # > any start or end relative to lo
        row_off = self.y.astype(np.float64) * self.span
        self.start_key = row_off + (self.x0 - self.lo)
        self.end_key = np.maximum.accumulate(row_off + (self.x1 - self.lo))  # per row: y sorted
        self.rows = np.arange(layout.rows, dtype=np.float64) * self.span

    def visible(self, lo: float, hi: float) -> np.ndarray:
        """Indices of the events overlapping [lo, hi), row by row, in time order."""
        a = np.searchsorted(self.end_key, self.rows + (max(lo, self.lo) - self.lo), "right")
        b = np.searchsorted(self.start_key, self.rows + (min(hi, self.hi + 1) - self.lo), "left")
        n = np.maximum(b - a, 0)
        total = int(n.sum())
        if not total:
            return np.empty(0, np.int64)
        first = np.repeat(a - np.r_[0, np.cumsum(n)[:-1]], n)
        idx = first + np.arange(total)
        return idx[self.x1[idx] > lo]  # within a run, a short event may end before lo

    def select(self, lo: float, hi: float, pixels: int) -> tuple[np.ndarray, int]:
        """The longest event starting in each pixel of each row of [lo, hi) (plus every event
        when few are visible), and how many were visible."""
        idx = self.visible(lo, hi)
        if len(idx) > pixels:  # fewer than one per pixel: all drawn, exactly
            pick = plots.longest_per_pixel(
                np.maximum(self.x0[idx], lo), self.dur[idx], self.y[idx], lo, hi, pixels
            )
            return idx[pick], len(idx)
        return idx, len(idx)


MAX_DEPTH = 12  # nesting levels drawn per lane by default (fewer where max_rows needs)
SUMMARY_BUDGET = 400_000  # events held in the browser at most (~12 MB of arrays)
_LEVEL0_BUCKETS = 2048  # the coarsest level: about two buckets per pixel of a wide view
_LEVEL_FACTOR = 8
_MAX_MATCHES = 500
_MIN_SPAN_NS = 1000.0  # the narrowest whole-window view
#: the critical path's segment kinds, in the order of the front-end's colours
_PATH_KINDS = ("compute", "communication", "host", "idle")


def summary_levels(
    index: VisibleIndex, budget: int = SUMMARY_BUDGET
) -> tuple[np.ndarray, np.ndarray, list[float], bool]:
    """The events the browser holds: level by level (buckets of ``span / (2048 * 8**k)``
    ns), the longest event starting in each bucket of each row, each event at the coarsest
    level that picks it. Returns the held events' indices sorted by level, row, start; each
    one's level; the bucket widths; and whether every event is held (no zoom then needs the
    kernel). Levels are added while the total stays within ``budget``."""
    n = len(index.x0)
    lo, hi = index.lo, index.hi + 1.0
    level = np.full(n, -1, np.int8)
    widths: list[float] = []
    buckets = _LEVEL0_BUCKETS
    held = 0
    while n:
        pick = plots.longest_per_pixel(index.x0, index.dur, index.y, lo, hi, buckets)
        new = pick[level[pick] < 0]
        if widths and held + len(new) > budget:
            break
        level[new] = len(widths)
        held += len(new)
        widths.append((hi - lo) / buckets)
        if held == n or buckets >= 2**31 // _LEVEL_FACTOR:
            break
        buckets *= _LEVEL_FACTOR
    idx = np.flatnonzero(level >= 0)
    order = np.lexsort((index.x0[idx], index.y[idx], level[idx]))
    idx = idx[order]
    return idx, level[idx].astype(np.int32), widths, held == n


def _pack_summary(index: VisibleIndex, idx: np.ndarray, lev: np.ndarray, rows: int) -> bytes:
    """The held events as columns: x0, dur (float64 ns); per (level, row) run the longest
    duration (float64); id, row, name (int32); and each run's first index (int32, one more
    than runs). Sorted by level, row, start, so a run is a range and the browser finds a
    view's events in it by bisection."""
    nlev = int(lev.max()) + 1 if len(lev) else 1
    run = lev.astype(np.int64) * rows + index.y[idx]
    first = np.searchsorted(run, np.arange(nlev * rows + 1), "left").astype(np.int32)
    longest = np.zeros(nlev * rows, np.float64)
    if len(idx):
        np.maximum.at(longest, run, index.dur[idx].astype(np.float64))
    return b"".join(
        [
            index.x0[idx].astype(np.float64).tobytes(),
            index.dur[idx].astype(np.float64).tobytes(),
            longest.tobytes(),
            idx.astype(np.int32).tobytes(),
            index.y[idx].astype(np.int32).tobytes(),
            index.name_of[idx].astype(np.int32).tobytes(),
            first.tobytes(),
        ]
    )


def _names(layout: plots.TimelineLayout, legend: int) -> tuple[np.ndarray, list[str], list]:
    """Compact name ids for the drawn names, the names, and the legend: the ``legend`` names
    with the most time, in their colours (every name has its own: :func:`.plots.name_colour`)."""
    used, compact = np.unique(layout.codes, return_inverse=True)
    weight = np.bincount(compact, weights=layout.dur, minlength=len(used))
    top = [int(c) for c in np.argsort(-weight)[:legend] if weight[c] > 0]
    cats = layout.names.cat.categories
    full = [str(cats[int(c)]) for c in used]
    names = [plots.short_label(visible(n), 120) for n in full]
    entries = [[plots.short_label(names[c], 40), plots.name_colour(full[c])] for c in top]
    return compact.astype(np.int32), full, entries


def framework_label(window: Window) -> str:
    """What the title calls the window's profiler: a Kineto (PyTorch) trace read as a plain
    Chrome trace says so, rather than "chrome"."""
    fw = str(getattr(window, "framework", "") or "")
    if fw != "chrome":
        return fw
    ev = window.events
    cats = set(ev["cat"].astype(object).dropna().unique().tolist()) if "cat" in ev else set()
    if cats & {"kernel", "cuda_runtime", "cpu_op", "gpu_memcpy", "cuda_driver"}:
        return "PyTorch (Kineto)"
    return "Chrome trace"


class TimelineView(anywidget.AnyWidget):
    """A window's timeline that zooms and pans in the notebook (see the module docstring).

    ``zoom(lo, hi)`` and ``zoom_to(step=...)`` set the visible range from Python (ns on the
    aligned axis); ``visible_range`` says what the browser shows; ``search(name)`` lists the
    events whose name contains ``name``; ``figure()`` is the current view as a matplotlib
    figure (what a static export shows); ``comm_groups`` lists the communication groups whose
    lanes the group menu pins."""

    _esm = front_end()
    _css = FRONT_END / "timeline.css"

    title = traitlets.Unicode("").tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    zero = traitlets.Unicode("").tag(sync=True)
    lanes = traitlets.List().tag(sync=True)
    rows = traitlets.Int(1).tag(sync=True)
    row_height = traitlets.Int(_ROW_PX).tag(sync=True)
    names = traitlets.List().tag(sync=True)
    colors = traitlets.List().tag(sync=True)
    legend = traitlets.List().tag(sync=True)
    full = traitlets.List().tag(sync=True)
    steps = traitlets.Bytes(b"").tag(sync=True)
    step_labels = traitlets.Bytes(b"").tag(sync=True)
    step_title = traitlets.Unicode("step").tag(sync=True)
    # the held summary (see _pack_summary) and what it holds: count, level bucket widths (ns),
    # rows, whether every event is held
    summary = traitlets.Bytes(b"").tag(sync=True)
    summary_info = traitlets.Dict().tag(sync=True)
    # the front-end asks for a range finer than the summary: [lo_ns, hi_ns, pixels, seq]; the
    # kernel answers with rects (x0, x1 as float32 ns from drawn["lo"]; id, row, name as int32;
    # duration as float32 ns; column by column)
    view = traitlets.List().tag(sync=True)
    rects = traitlets.Bytes(b"").tag(sync=True)
    drawn = traitlets.Dict().tag(sync=True)
    # Python moves the view: [lo_ns, hi_ns, seq]; the browser says what it shows: [lo, hi]
    goto = traitlets.List().tag(sync=True)
    shown = traitlets.List().tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    details = traitlets.Dict().tag(sync=True)
    query = traitlets.Unicode("").tag(sync=True)
    query_page = traitlets.Int(0).tag(sync=True)  # which _MAX_MATCHES of them ``matches`` holds
    matches = traitlets.Dict().tag(sync=True)
    span = traitlets.List().tag(sync=True)
    span_summary = traitlets.Dict().tag(sync=True)
    # a critical path drawn over the lanes (mark_path): [start, end, lane, kind] per segment
    path = traitlets.List().tag(sync=True)
    # the communication groups the lanes run (Kineto's Process Group Name): key, label, lanes
    comm_groups = traitlets.List().tag(sync=True)
    # the browser's lanes, collapsed and pinned, for figure(): see _arrangement
    arranged = traitlets.Dict().tag(sync=True)

    def __init__(self, window: Window, legend: int = 10, **layout_kw: Any) -> None:
        self.window = window
        # deeper than the static plot (lanes collapse here), so that a kernel's launch, under
        # a stack of framework ops, is drawn where the rows allow it
        layout_kw.setdefault("max_depth", MAX_DEPTH)
        self.tl = plots.timeline_layout(window, **layout_kw)
        self._asked_ranks = layout_kw.get("ranks")
        self.index = VisibleIndex(self.tl)
        lay = self.tl
        self._name_of, self._full_names, entries = _names(lay, legend)
        # the names as shown: control and bidirectional characters written out (safetext)
        self._shown_names = [visible(n) for n in self._full_names]
        self.index.name_of = self._name_of  # (the summary packs it)
        self._pos_of: np.ndarray | None = None
        lanes = lay.lanes
        rank_first = lanes["rank"].ne(lanes["rank"].shift()).to_numpy()
        self._comm = CommGroups(window, lay, self.index, self._name_of, self._full_names)
        comm, lane_groups, groups = self._comm.lanes()
        lane_rows = [
            {
                "label": label,
                "y0": int(y0),
                "rows": int(n),
                "rank_first": bool(f),
                "rank": int(r),
                "thread": visible(th),
                "device": bool(dev),
                "process": visible(proc),
                "comm": bool(c),
                "groups": g,
            }
            for label, y0, n, f, r, th, dev, proc, c, g in zip(
                plots.lane_labels(lanes),
                lanes["y0"],
                lanes["rows"],
                rank_first,
                lanes["rank"],
                lanes["thread"],
                lanes["device"],
                lanes["process"],
                comm,
                lane_groups,
                strict=True,
            )
        ]
        lo, hi = lay.lo, lay.hi
        if hi - lo < _MIN_SPAN_NS:  # one instant, or events of no duration: 1 µs around them
            lo, hi = (lo + hi - _MIN_SPAN_NS) / 2, (lo + hi + _MIN_SPAN_NS) / 2
        span = hi - lo
        held, lev, widths, complete = summary_levels(self.index, SUMMARY_BUDGET)
        self._held = held
        marks, step_title = self._step_marks()
        super().__init__(
            title=visible(self._title()),
            note=self._note(),
            zero=f" (0 = start of step {lay.how.rsplit(' ', 1)[-1]})"
            if lay.align == "step"
            else "",
            lanes=lane_rows,
            rows=lay.rows,
            row_height=_ROW_PX,
            names=[plots.short_label(n, 120) for n in self._shown_names],
            colors=[plots.name_colour(n) for n in self._full_names],
            legend=entries,
            full=[lo - span * 0.005, hi + span * 0.005],
            steps=self._step_bands(),
            step_labels=marks,
            step_title=step_title,
            summary=_pack_summary(self.index, held, lev, lay.rows),
            summary_info={
                "count": len(held),
                "levels": widths,
                "rows": lay.rows,
                "complete": complete,
                "events": len(self.index.x0),
            },
            comm_groups=[{**g, "label": visible(g["label"])} for g in groups],
        )
        self._answer([*self.full, 1000, 0])

    # ---- what is drawn ----------------------------------------------------------------------

    def _title(self) -> str:
        lay = self.tl
        ranks = f" · {len(lay.all_ranks)} ranks, {lay.how}" if len(lay.all_ranks) > 1 else ""
        return f"timeline · {framework_label(self.window)} · {lay.n_all:,} events{ranks}"

    def _note(self) -> str:
        lay = self.tl
        out = []
        if lay.hidden_frames:
            out.append(f"{lay.hidden_frames:,} Python frames not drawn (python=True draws them)")
        if lay.too_deep:
            out.append(f"{lay.too_deep:,} events nested deeper than {lay.cap} levels hidden")
        if lay.hidden_lanes:
            out.append(f"{lay.hidden_lanes} quieter lanes hidden (lanes={lay.lanes_asked})")
        empty = sorted(set(getattr(self.window, "ranks", None) or []) - set(lay.all_ranks))
        if empty and self._asked_ranks is None:
            out.append(f"rank(s) {empty} have no events to draw")
        if len(lay.shown_ranks) < len(lay.all_ranks):
            out.append(
                f"{len(lay.shown_ranks)} of {len(lay.all_ranks)} ranks shown, the "
                "slowest and fastest (ranks=[...] to choose)"
            )
        return "; ".join(out)

    def _step_bands(self) -> bytes:
        """Every other step of each shown rank, shaded in the rank's band of lanes: a, b (ns),
        top, bottom (rows), column by column as float64."""
        pos = plots.aligned_steps(self.window, self.tl.offsets, 1.0)
        if pos is None or pos.empty:
            return b""
        lanes = self.tl.lanes
        bands = lanes.groupby("rank").agg(top=("y0", "min"), rows=("rows", "sum"))
        pos = pos[(pos["step"] % 2 == 1) & pos["rank"].isin(bands.index)]
        top = bands["top"].reindex(pos["rank"]).to_numpy(np.float64)
        bottom = top + bands["rows"].reindex(pos["rank"]).to_numpy(np.float64)
        cols = [pos["a"].to_numpy(np.float64), pos["b"].to_numpy(np.float64), top, bottom]
        return np.concatenate(cols).tobytes()

    def step_marks(self) -> Any:
        """Where each step's number goes along the top, as a Series step -> ns on the axis:
        the ranks' median start on their own steps, the lowest rank's start on wall-clock time
        (as the static plot labels them), from ``w.steps``."""
        pos = plots.aligned_steps(self.window, self.tl.offsets, 1.0)
        if pos is None or pos.empty:
            return None
        pos = pos[pos["rank"].isin(self.tl.shown_ranks)]
        if self.tl.align == "wall":
            pos = pos[pos["rank"] == pos["rank"].min()]
            return pos.groupby("step")["a"].min()
        return pos.groupby("step")["a"].median()

    def _step_marks(self) -> tuple[bytes, str]:
        marks = self.step_marks()
        if marks is None or marks.empty:
            return b"", "step"
        ranks = self.tl.shown_ranks
        title = (
            f"step (of rank {min(ranks)})" if self.tl.align == "wall" and len(ranks) > 1 else "step"
        )
        cols = [marks.index.to_numpy(np.float64), marks.to_numpy(np.float64)]
        return np.concatenate(cols).tobytes(), title

    @traitlets.observe("view")
    def _on_view(self, change: dict) -> None:
        self._answer(change["new"])

    def _answer(self, view: list) -> None:
        """Choose the events of the asked range and send them, with what was asked."""
        if len(view) != 4:
            return
        lo, hi, pixels, seq = float(view[0]), float(view[1]), int(view[2]), int(view[3])
        hi = max(hi, lo + 1.0)
        pixels = int(min(max(pixels, 50), 8000))
        t = time.perf_counter()
        idx, visible = self.index.select(lo, hi, pixels)
        margin = hi - lo  # far outside the view, float32 offsets would lose the edges
        x0 = np.clip(self.index.x0[idx], lo - margin, hi + margin) - lo
        x1 = np.clip(self.index.x1[idx], lo - margin, hi + margin) - lo
        payload = b"".join(
            [
                x0.astype(np.float32).tobytes(),
                x1.astype(np.float32).tobytes(),
                idx.astype(np.int32).tobytes(),
                self.index.y[idx].astype(np.int32).tobytes(),
                self._name_of[idx].tobytes(),
                self.index.dur[idx].astype(np.float32).tobytes(),
            ]
        )
        ms = (time.perf_counter() - t) * 1000
        with self.hold_sync():
            self.rects = payload
            self.drawn = {
                "seq": seq,
                "lo": lo,
                "hi": hi,
                "pixels": pixels,
                "count": len(idx),
                "visible": visible,
                "exact": visible <= pixels,
                "select_ms": round(ms, 2),
            }

    @property
    def visible_range(self) -> tuple[float, float]:
        """The range the browser shows (or was last asked for), in ns on the aligned axis."""
        if len(self.shown) == 2:
            return float(self.shown[0]), float(self.shown[1])
        return self.drawn.get("lo", self.full[0]), self.drawn.get("hi", self.full[1])

    def zoom(self, lo_ns: float, hi_ns: float, pixels: int = 1000) -> TimelineView:
        """Show [lo_ns, hi_ns) (ns on the aligned axis); returns the view, for chaining."""
        self._answer([lo_ns, hi_ns, pixels, int(self.drawn.get("seq", 0)) + 1])
        seq = int(self.goto[2]) + 1 if len(self.goto) == 3 else 1
        with self.hold_sync():
            self.shown = [float(lo_ns), float(hi_ns)]
            self.goto = [float(lo_ns), float(hi_ns), seq]
        return self

    def mark_path(self, cp: Any) -> TimelineView:
        """Draw a :class:`~dynprof_nb.analysis.critical_path.CriticalPath` over the lanes:
        each segment a bar under its lane's first row, coloured by its kind (compute red,
        communication orange, host purple, idle grey), and a line where the path moves to
        another lane. Segments on a lane not shown (hidden by ``lanes=``) are left out, and
        the note says how many."""
        lanes = self.tl.lanes
        where = {
            (int(r), f"{p} / {t}"): j
            for j, (r, p, t) in enumerate(
                zip(lanes["rank"], lanes["process"], lanes["thread"], strict=True)
            )
        }
        offsets = self.tl.offsets or {}
        rows, missing = [], 0
        for start, end, lane, kind, rank in zip(
            cp["start_ns"], cp["end_ns"], cp["lane"], cp["kind"], cp["rank"], strict=True
        ):
            j = where.get((int(rank), str(lane)))
            if j is None:
                missing += 1
                continue
            off = offsets.get(int(rank), 0)
            code = _PATH_KINDS.index(kind) if kind in _PATH_KINDS else len(_PATH_KINDS)
            rows.append([float(start - off), float(end - off), j, code])
        self.path = rows
        said = f"critical path: {len(rows)} segments, {cp.length_us:,.0f} µs"
        if missing:
            said += f" ({missing} on lanes not shown)"
        self.note = "; ".join(n for n in (self._note(), said) if n)
        return self

    def zoom_to(
        self, step: int | None = None, rank: int | None = None, pad: float = 0.02
    ) -> TimelineView:
        """Show step ``step`` (as ``w.steps`` numbers it): from its earliest start to its
        latest end over the shown ranks (or rank ``rank``'s), with ``pad`` of it either side."""
        if step is None:
            return self.zoom(*self.full)
        pos = plots.aligned_steps(self.window, self.tl.offsets, 1.0)
        if pos is not None and rank is not None:
            pos = pos[pos["rank"] == rank]
        if pos is not None:
            pos = pos[(pos["step"] == step) & pos["rank"].isin(self.tl.shown_ranks)]
        if pos is None or pos.empty:
            have = sorted(set(self.window.steps["step"].tolist())) if len(self.window.steps) else []
            raise ValueError(f"step {step} is not in this window (steps: {have})")
        a, b = float(pos["a"].min()), float(pos["b"].max())
        margin = max((b - a) * pad, 1.0)
        return self.zoom(a - margin, b + margin)

    # ---- search and ranges ------------------------------------------------------------------

    def search(self, text: str, limit: int = _MAX_MATCHES, page: int = 0) -> dict[str, Any]:
        """The drawn events whose name contains ``text`` (any case), in time order: total and
        page ``page`` of them, ``limit`` a page (the last page for one past it), as [id, x0,
        x1, row, name id] (ns on the axis). The page steps through every match ``limit`` at a
        time, so next and previous reach the last of 20,000 as they reach the first."""
        if int(limit) < 1:
            raise ValueError(f"limit={limit!r}: a page holds at least one match")
        limit, page, text = int(limit), int(page), text.strip()
        if not text:
            return {"query": text, "total": 0, "items": [], "page": 0, "limit": limit}
        low = text.lower()  # as the name is, or as it is shown (``\u202e`` written out)
        hit = [
            i
            for i, (n, shown) in enumerate(zip(self._full_names, self._shown_names, strict=True))
            if low in n.lower() or low in shown.lower()
        ]
        idx = np.flatnonzero(np.isin(self._name_of, np.asarray(hit, np.int32)))
        idx = idx[np.argsort(self.index.x0[idx], kind="stable")]
        page = min(max(page, 0), max(len(idx) - 1, 0) // limit)
        items = [
            [
                int(i),
                float(self.index.x0[i]),
                float(self.index.x1[i]),
                int(self.index.y[i]),
                int(self._name_of[i]),
            ]
            for i in idx[page * limit : (page + 1) * limit]
        ]
        return {
            "query": text,
            "total": len(idx),
            "names": len(hit),
            "items": items,
            "page": page,
            "limit": limit,
        }

    @traitlets.observe("query")
    def _on_query(self, change: dict) -> None:
        if self.query_page:
            self.query_page = 0  # a new search starts at its first page (_on_query_page)
        else:
            self.matches = self.search(change["new"])

    @traitlets.observe("query_page")
    def _on_query_page(self, change: dict) -> None:
        self.matches = self.search(self.query, page=change["new"])

    def range_summary(self, lo: float, hi: float, top: int = 12) -> dict[str, Any]:
        """[lo, hi) on the axis: its duration and the summed time per name of the events in
        it (each clipped to the range), the most first, over the drawn rows."""
        lo, hi = float(min(lo, hi)), float(max(lo, hi))
        idx = self.index.visible(lo, hi)
        inside = np.minimum(self.index.x1[idx], hi) - np.maximum(self.index.x0[idx], lo)
        total = np.bincount(self._name_of[idx], weights=inside, minlength=len(self._full_names))
        count = np.bincount(self._name_of[idx], minlength=len(self._full_names))
        order = [int(c) for c in np.argsort(-total)[:top] if total[c] > 0]
        return {
            "lo": lo,
            "hi": hi,
            "duration_ns": hi - lo,
            "events": len(idx),
            "names": [
                [
                    plots.short_label(self._shown_names[c], 80),
                    float(total[c]),
                    int(count[c]),
                ]
                for c in order
            ],
        }

    @traitlets.observe("span")
    def _on_span(self, change: dict) -> None:
        if len(change["new"]) == 2:
            self.span_summary = self.range_summary(*change["new"])

    # ---- one event --------------------------------------------------------------------------

    @traitlets.observe("selected")
    def _on_selected(self, change: dict) -> None:
        i = change["new"]
        if 0 <= i < len(self.tl.index):
            self.details = visible_in(self.event(i))  # names and args as they are

    def _layout_position(self, rows: np.ndarray) -> np.ndarray:
        """The layout index of each ``window.events`` row (-1 where not drawn)."""
        if self._pos_of is None:
            pos = np.full(len(self.window.events), -1, np.int64)
            pos[self.tl.index] = np.arange(len(self.tl.index))
            self._pos_of = pos
        return self._pos_of[rows]

    def _end(self, i: int, why: str) -> dict[str, Any]:
        """A drawn event as one end of an arrow: its place, name and why it is linked."""
        return {
            "id": int(i),
            "x0": float(self.index.x0[i]),
            "x1": float(self.index.x1[i]),
            "row": int(self.index.y[i]),
            "name": self._full_names[int(self._name_of[i])],
            "why": why,
        }

    def flows(self, i: int) -> list[dict[str, Any]]:
        """What drawn event ``i`` links to: its launch or its kernels (Kineto's correlation,
        the ``ac2g`` flow: the same id on the host call and the device op, on one rank), and
        for a collective the same call on the other shown ranks of its group (the same name
        and group, the same occurrence on its rank)."""
        ev = self.window.events
        at = int(self.tl.index[i])
        out: list[dict[str, Any]] = []
        rank_col = plots.rank_of_events(ev, self.window)
        if "correlation" in ev:
            corr = ev["correlation"].to_numpy("float64", na_value=np.nan)
            c = corr[at]
            if not pd.isna(c):
                same = np.flatnonzero((corr == c) & (rank_col == rank_col[at]))
                same = same[same != at]
                here_device = bool(_lane_of_row(self.tl.lanes, int(self.index.y[i]))["device"])
                for j in self._layout_position(same):
                    if j < 0:
                        continue
                    other = bool(_lane_of_row(self.tl.lanes, int(self.index.y[j]))["device"])
                    if other == here_device:
                        continue
                    out.append(self._end(int(j), "launch" if here_device else "kernel"))
        name = self._full_names[int(self._name_of[i])]
        collective = "collective" in ev and not pd.isna(ev["collective"].iloc[at])
        if (collective or self._comm.is_comm([name])[0]) and len(self.tl.shown_ranks) > 1:
            out += [self._end(j, f"rank {r}") for j, r in self._comm.peers(i, rank_col)]
        return out

    def _linked(self, at: int, rank: int) -> dict[str, str]:
        """A kernel's launch, or a launch's kernels, by name and start on the axis, from the
        events frame (drawn or not: a launch nested deeper than the rows shown still has a
        name)."""
        ev = self.window.events
        if "correlation" not in ev:
            return {}
        corr = ev["correlation"].to_numpy("float64", na_value=np.nan)
        c = corr[at]
        if pd.isna(c):
            return {}
        same = np.flatnonzero(corr == c)
        rk = plots.rank_of_events(ev, self.window)
        same = same[(rk[same] == rk[at]) & (same != at)]
        rows = ev.iloc[np.r_[at, same]]
        device = (
            rows["cat"].astype(object).isin(DEVICE_CATS)
            | rows["process"].astype(object).isin(DEVICE_PROCESSES)
        ).to_numpy()
        linked = device[1:] != device[0]
        other, at_rows = rows.iloc[1:][linked], same[linked]
        if other.empty:
            return {}
        off = self.tl.offsets.get(rank, 0) if self.tl.offsets else 0
        drawn = self._layout_position(at_rows) >= 0
        text = ", ".join(
            f"{plots.short_label(str(n), 60)} at {(int(t) - off) / 1e6:,.6f} ms"
            + ("" if d else " (not drawn: nested deeper than the rows shown)")
            for n, t, d in zip(other["name"][:4], other["ts_ns"][:4], drawn[:4], strict=True)
        )
        return {"launch" if device[0] else "kernels": text}

    def event(self, i: int) -> dict[str, Any]:
        """Everything known of drawn event ``i``: name, duration, rank, process, thread or
        stream, category, step, start on the axis, its launch (a kernel) or kernels (a launch),
        and its args from the trace file; ``flows`` are the linked events the browser draws
        arrows to."""
        row = self.window.events.iloc[int(self.tl.index[i])]
        rank = int(row["rank"]) if "rank" in row.index else (self.window.rank or 0)
        dur = int(self.index.dur[i])
        out: dict[str, Any] = {
            "id": int(i),
            "name": str(row["name"]),
            "duration": f"{dur / 1000:,.3f} µs",
            "rank": rank,
            "process": str(row.get("process", "")),
            "thread/stream": str(row.get("thread", "")),
            "category": str(row.get("cat", "")),
            "start": f"{self.index.x0[i] / 1e6:,.6f} ms on the axis",
        }
        step = row.get("step")
        if step is not None:
            out["step"] = "outside every recorded step" if pd.isna(step) else int(step)
        flows = self.flows(i)
        out.update(self._linked(int(self.tl.index[i]), rank))
        peers = [f for f in flows if f["why"].startswith("rank ")]
        if peers:
            out["peers"] = ", ".join(f"{e['why']} at {e['x0'] / 1e6:,.6f} ms" for e in peers[:8])
        out["args"] = event_args(self.window, rank, str(row["name"]), int(row["ts_ns"]))
        out["flows"] = flows
        return out

    # ---- without a widget frontend ----------------------------------------------------------

    def _arrangement(self) -> tuple[np.ndarray, list, float]:
        """The lanes as the browser draws them (``arranged``: collapsed and pinned lanes): the
        drawn row of each layout row (-1: hidden), each drawn lane's (row, rows, label,
        pinned), and the rows drawn; the layout's own while nothing is collapsed or pinned."""
        got = self.arranged
        if got:
            try:
                rows = np.asarray(got["rows"], dtype=np.float64)
                shown = [(float(y), int(n), str(t), bool(p)) for y, n, t, p in got["lanes"]]
                height = float(got["height"])
                if rows.shape == (self.tl.rows,) and height > 0 and rows.max() < height:
                    return rows, shown, height
            except (KeyError, TypeError, ValueError):
                pass
            warnings.warn(  # not what layout.mjs arrangement() sends: drawn as laid out
                "TimelineView.arranged is not an arrangement of this view's lanes; figure() "
                "draws the lanes uncollapsed and unpinned",
                stacklevel=3,
            )
        shown = [(lane["y0"], lane["rows"], lane["label"], False) for lane in self.lanes]
        return np.arange(self.tl.rows, dtype=np.float64), shown, float(self.tl.rows)

    def figure(self, pixels: int = 1100) -> Figure:
        """The current view as a matplotlib figure: the same choice of events, lanes, labels,
        and the lanes collapsed and pinned in the browser."""
        lo, hi = self.visible_range
        idx, _ = self.index.select(lo, hi, pixels)
        row_of, shown, height = self._arrangement()
        y = row_of[self.index.y[idx]]
        idx, y = idx[y >= 0], y[y >= 0]  # in a collapsed lane's nested levels: not drawn
        scale, unit = plots.time_unit(hi - lo) if hi - lo > 2e6 else (1e3, "µs")
        lay = self.tl
        fig = Figure(
            figsize=(plots.WIDTH_IN, min(plots.MAX_HEIGHT_IN, 1.6 + 0.2 * height)),
            layout="constrained",
        )
        ax = fig.add_subplot()
        x0 = np.maximum(self.index.x0[idx], lo) / scale
        x1 = np.maximum(
            np.minimum(self.index.x1[idx], hi) / scale, x0 + (hi - lo) / scale / (2 * pixels)
        )
        verts = np.stack(
            [
                np.stack([x0, y + 0.08], 1),
                np.stack([x0, y + 0.92], 1),
                np.stack([x1, y + 0.92], 1),
                np.stack([x1, y + 0.08], 1),
            ],
            1,
        )
        colours = np.array(self.colors, dtype=object)[self._name_of[idx]]
        ax.add_collection(
            PolyCollection(verts, facecolors=list(colours), linewidths=0, antialiaseds=False)
        )
        ax.set_xlim(lo / scale, hi / scale)
        ax.set_ylim(height, 0)
        ax.set_yticks(
            [row + 0.5 for row, _, _, _ in shown],
            [f"● {label}" if pin else label for _, _, label, pin in shown],
            fontsize=8 if len(shown) <= 24 else 6,
        )
        pinned_end = max((row + n for row, n, _, pin in shown if pin), default=0)
        if pinned_end:  # the line under the pinned lanes, as the browser draws it
            ax.axhline(pinned_end, color="#2862c8", linewidth=1.5)
        ax.tick_params(axis="y", length=0)
        ax.set_xlabel(f"time ({unit}){self.zero}")
        fig.suptitle(self.title, fontsize=11)
        ax.set_title(
            f"{len(idx):,} of {lay.n_drawable:,} events drawn (the longest in each "
            "pixel); open the notebook in JupyterLab to zoom",
            fontsize=8,
            loc="left",
        )
        return fig

    def _png(self) -> str:
        buf = io.BytesIO()
        self.figure().savefig(buf, format="png", dpi=100)
        return base64.b64encode(buf.getvalue()).decode("ascii")

    def __repr__(self) -> str:
        lo, hi = self.visible_range
        return (
            f"<TimelineView {self.title}: {lo / 1e6:.3f}-{hi / 1e6:.3f} ms shown, "
            f"{self.drawn.get('count', 0):,} events drawn>"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)  # anywidget: (data, metadata)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data is not None:  # a frontend without widgets shows the PNG instead
            data["image/png"] = self._png()
            data["text/plain"] = repr(self)
        return bundle
