"""Interactive timeline: the kernel-side cost of one redraw, zooming from a whole window to one
kernel and panning, against the static full timeline (draw + PNG) of the same window, same run.

Windows (built as tests/analysis/test_plots.py builds them, under benchmarks/out/):
  - 352k events: 13 copies of HTA's real 27k-event NCCL Kineto trace as 13 rank files;
  - 64 ranks x 1,000 steps in the built-in backend's format (tests/testdata.py).
A redraw is what the widget does when the browser asks for a range: pick the longest event in
each pixel of each row of the visible range and pack the rectangles (``TimelineView._answer``).
The zoom goes by 5x per step, centred on the window's longest device kernel, until the view is
twice that kernel; each step is then panned by half a view. The issue's bound: 200 ms a redraw.

Usage: .venv/bin/python benchmarks/timeline_zoom.py
"""

from __future__ import annotations

import io
import statistics
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE.parent / "tests" / "analysis")]

import numpy as np  # noqa: E402
from test_plots import NCCL, replicate  # noqa: E402
from testdata import fixtures_dir, write_builtin_window  # noqa: E402

import dynprof_nb  # noqa: E402
from dynprof_nb.analysis.timeline_view import TimelineView  # noqa: E402

OUT = HERE / "out"


def windows() -> dict[str, Path]:
    nccl = OUT / "timeline_nccl13"
    if not nccl.exists():
        replicate(fixtures_dir() / NCCL, nccl, 13, skew_us=2_000_000)
    b64 = OUT / "timeline_builtin64"
    if not b64.exists():
        for r in range(64):
            write_builtin_window(b64, rank=r, start=1, stop=1000,
                                 step_us=1000 * (1.3 if r == 37 else 1.0 + 0.001 * r))
    return {"352k events, 13 ranks": nccl, "64 ranks x 1,000 steps": b64}


def redraw_ms(view: TimelineView, lo: float, hi: float) -> float:
    t = time.perf_counter()
    view._answer([lo, hi, 1100, 1])
    return (time.perf_counter() - t) * 1000


def main() -> None:
    warnings.simplefilter("ignore")
    for label, path in windows().items():
        w = dynprof_nb.load_window(path)
        w.events  # noqa: B018
        w.steps  # noqa: B018
        t = time.perf_counter()
        w.plot_timeline().savefig(io.BytesIO(), format="png", dpi=100)
        static_ms = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        view = w.plot_timeline(interactive=True)
        build_ms = (time.perf_counter() - t) * 1000
        idx = view.index
        device = view.tl.lanes.loc[view.tl.lanes["device"], "y0"].to_numpy()
        on_device = np.isin(idx.y, device) if len(device) else np.ones(len(idx.y), bool)
        k = int(np.flatnonzero(on_device)[np.argmax(idx.dur[on_device])])
        centre, target = idx.x0[k] + idx.dur[k] / 2, 2.0 * max(idx.dur[k], 1)
        lo, hi = view.full
        times, steps = [], 0
        while True:
            times.append(redraw_ms(view, lo, hi))
            times.append(redraw_ms(view, lo + (hi - lo) / 2, hi + (hi - lo) / 2))  # a pan
            steps += 1
            if hi - lo <= target:
                break
            span = max((hi - lo) / 5, target)
            lo, hi = centre - span / 2, centre + span / 2
        view._answer([lo, hi, 1100, 1])
        shown = k in np.frombuffer(view.rects, np.int32, view.drawn["count"],
                                   8 * view.drawn["count"])
        print(f"{label}: {len(w.events):,} events, {view.tl.n_drawable:,} drawable, "
              f"{view.tl.rows} rows")
        print(f"  static full timeline (draw + PNG): {static_ms:.0f} ms; widget build "
              f"{build_ms:.0f} ms ({build_ms / static_ms:.2f}x)")
        print(f"  {len(times)} redraws over {steps} zoom steps to one kernel "
              f"({idx.dur[k] / 1000:.1f} µs, drawn at the end: {shown}): median "
              f"{statistics.median(times):.2f} ms, max {max(times):.2f} ms "
              f"(max / static full draw = {max(times) / static_ms:.4f}; bound 200 ms)")


if __name__ == "__main__":
    main()
