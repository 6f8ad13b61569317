"""The interactive timeline: ``w.plot_timeline(interactive=True)`` in a notebook.

A canvas widget (anywidget; its front-end, ``timeline_view.js``, ships in the package and
loads nothing from the network) that zooms with the mouse wheel and pans by dragging, from the
whole window down to one kernel. It draws what the static timeline draws (the same lanes, depth
stacking, step alignment: :func:`.plots.timeline_layout`), and on every zoom and pan the
kernel redoes the "longest event in each pixel of a row" choice for the visible range only.

That choice stays cheap at any size because the events are laid out once, sorted by row then
start (:class:`VisibleIndex`): a redraw is two ``searchsorted`` over the rows and one
vectorised per-pixel maximum over the events in range, never a pass over the whole window.
Hovering an event shows its name, duration and lane; clicking it shows its rank, process,
thread or stream, step and ``args`` (read back from the trace file). Where widgets do not run
(a static export, nbconvert, GitHub) the display falls back to a PNG of the current view.
"""

from __future__ import annotations

import base64
import io
import time
from pathlib import Path
from typing import Any

import anywidget
import numpy as np
import traitlets
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from dynprof_nb.analysis import plots
from dynprof_nb.traces.formats.chrome.event_args import event_args

_ROW_PX = 14  # row height in the canvas, shrunk to fit ~640 px with many rows
_CANVAS_ROWS_PX = 640


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


def _colours(
    layout: plots.TimelineLayout, legend: int
) -> tuple[np.ndarray, list[str], list[list[str]], list[str]]:
    """Compact name ids for the drawn names, their colours (the ``legend`` names with the most
    time get the palette, the rest grey, as in the static plot) and the legend entries."""
    used, compact = np.unique(layout.codes, return_inverse=True)
    weight = np.bincount(compact, weights=layout.dur, minlength=len(used))
    top = [int(c) for c in np.argsort(-weight)[:legend] if weight[c] > 0]
    colours = [plots.OTHER] * len(used)
    for i, c in enumerate(top):
        colours[c] = plots.PALETTE[i % len(plots.PALETTE)]
    cats = layout.names.cat.categories
    names = [plots.short_label(cats[int(c)], 120) for c in used]
    entries = [[plots.short_label(names[c], 40), colours[c]] for c in top]
    if len(top) < len(used):
        entries.append(["other", plots.OTHER])
    return compact.astype(np.int32), names, entries, colours


class TimelineView(anywidget.AnyWidget):
    """A window's timeline that zooms and pans in the notebook (see the module docstring).

    ``zoom(lo, hi)`` sets the visible range from Python (in the axis' unit, ms or s);
    ``visible_range`` and ``drawn`` say what the front-end shows; ``figure()`` is the current
    view as a matplotlib figure (what a static export shows)."""

    _esm = Path(__file__).with_name("timeline_view.js")
    _css = Path(__file__).with_name("timeline_view.css")

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
    # the front-end asks for a range: [lo_ns, hi_ns, pixels, seq]; the kernel answers with
    # rects (x0, x1 as float32 ns from drawn["lo"]; id, row, name as int32; duration as
    # float32 ns; column by column)
    view = traitlets.List().tag(sync=True)
    rects = traitlets.Bytes(b"").tag(sync=True)
    drawn = traitlets.Dict().tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    details = traitlets.Dict().tag(sync=True)

    def __init__(self, window: Any, legend: int = 10, **layout_kw: Any) -> None:
        self.window = window
        self.tl = plots.timeline_layout(window, **layout_kw)
        self.index = VisibleIndex(self.tl)
        lay = self.tl
        self._name_of, names, entries, colours = _colours(lay, legend)
        lanes = lay.lanes
        rank_first = lanes["rank"].ne(lanes["rank"].shift()).to_numpy()
        lane_rows = [
            {"label": label, "y0": int(y0), "rows": int(n), "rank_first": bool(f)}
            for label, y0, n, f in zip(
                plots.lane_labels(lanes), lanes["y0"], lanes["rows"], rank_first, strict=True
            )
        ]
        span = max(lay.hi - lay.lo, 1.0)
        super().__init__(
            title=self._title(),
            note=self._note(),
            zero=f" (0 = start of step {lay.how.rsplit(' ', 1)[-1]})"
            if lay.align == "step"
            else "",
            lanes=lane_rows,
            rows=lay.rows,
            row_height=int(max(4, min(_ROW_PX, _CANVAS_ROWS_PX // max(lay.rows, 1)))),
            names=names,
            colors=colours,
            legend=entries,
            full=[lay.lo - span * 0.005, lay.hi + span * 0.005],
            steps=self._step_bands(),
        )
        self._answer([*self.full, 1000, 0])

    # ---- what is drawn ----------------------------------------------------------------------

    def _title(self) -> str:
        lay = self.tl
        ranks = f" · {len(lay.all_ranks)} ranks, {lay.how}" if len(lay.all_ranks) > 1 else ""
        return f"timeline · {self.window.framework} · {lay.n_all:,} events{ranks}"

    def _note(self) -> str:
        lay = self.tl
        out = []
        if lay.hidden_frames:
            out.append(f"{lay.hidden_frames:,} Python frames not drawn (python=True draws them)")
        if lay.too_deep:
            out.append(f"{lay.too_deep:,} events nested deeper than {lay.cap} levels hidden")
        if lay.hidden_lanes:
            out.append(f"{lay.hidden_lanes} quieter lanes hidden (lanes={lay.lanes_asked})")
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
                "select_ms": round(ms, 2),
            }

    @property
    def visible_range(self) -> tuple[float, float]:
        """The range last drawn, in ns on the aligned axis (0 = the rank's time zero)."""
        return self.drawn.get("lo", self.full[0]), self.drawn.get("hi", self.full[1])

    def zoom(self, lo_ns: float, hi_ns: float, pixels: int = 1000) -> TimelineView:
        """Show [lo_ns, hi_ns) (ns on the aligned axis); returns the view, for chaining."""
        self._answer([lo_ns, hi_ns, pixels, int(self.drawn.get("seq", 0)) + 1])
        return self

    # ---- one event --------------------------------------------------------------------------

    @traitlets.observe("selected")
    def _on_selected(self, change: dict) -> None:
        i = change["new"]
        if 0 <= i < len(self.tl.index):
            self.details = self.event(i)

    def event(self, i: int) -> dict[str, Any]:
        """Everything known of drawn event ``i``: name, duration, rank, process, thread or
        stream, category, step, start on the axis, and its args from the trace file."""
        row = self.window.events.iloc[int(self.tl.index[i])]
        rank = int(row["rank"]) if "rank" in row.index else (self.window.rank or 0)
        dur = int(self.index.dur[i])
        out = {
            "name": str(row["name"]),
            "duration": f"{dur / 1000:,.3f} µs",
            "rank": rank,
            "process": str(row.get("process", "")),
            "thread/stream": str(row.get("thread", "")),
            "category": str(row.get("cat", "")),
            "start": f"{self.index.x0[i] / 1e6:,.6f} ms on the axis",
        }
        step = row.get("step")
        if step is not None and step == step:
            out["step"] = int(step)
        out["args"] = event_args(self.window, rank, str(row["name"]), int(row["ts_ns"]))
        return out

    # ---- without a widget frontend ----------------------------------------------------------

    def figure(self, pixels: int = 1100) -> Figure:
        """The current view as a matplotlib figure: the same choice of events, lanes, labels."""
        lo, hi = self.visible_range
        idx, _ = self.index.select(lo, hi, pixels)
        scale, unit = plots.time_unit(hi - lo) if hi - lo > 2e6 else (1e3, "µs")
        lay = self.tl
        fig = Figure(
            figsize=(plots.WIDTH_IN, min(plots.MAX_HEIGHT_IN, 1.6 + 0.2 * lay.rows)),
            layout="constrained",
        )
        ax = fig.add_subplot()
        x0 = np.maximum(self.index.x0[idx], lo) / scale
        x1 = np.maximum(
            np.minimum(self.index.x1[idx], hi) / scale, x0 + (hi - lo) / scale / (2 * pixels)
        )
        y = self.index.y[idx].astype(np.float64)
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
        ax.set_ylim(lay.rows, 0)
        ax.set_yticks(
            [lane["y0"] + 0.5 for lane in self.lanes],
            [lane["label"] for lane in self.lanes],
            fontsize=8 if len(self.lanes) <= 24 else 6,
        )
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
