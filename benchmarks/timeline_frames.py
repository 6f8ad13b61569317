"""Interactive timeline: frame time of zoom and pan in chromium, drawn in the browser from the
summary the widget holds, with a CPU-bound process beside it (as on a busy 2-core box).

Windows (as benchmarks/timeline_zoom.py builds them, under benchmarks/out/):
  - 352k events: 13 copies of HTA's real 27k-event NCCL Kineto trace as 13 rank files;
  - 64 ranks x 1,000 steps in the built-in backend's format (tests/testdata.py).
Each is shown in a plain chromium page running the widget's own JS and CSS, its model wired
to the real TimelineView (tests/timeline_page.py). An interaction is a wheel step (zooming in
24 steps on one point, then out) or a drag step (40 px), alternately; its time is from the
input event to its pixels (the canvas read back, which makes the software canvas rasterise),
and the frame interval is the time between the animation frames around it. The issue's
target: median <= 16 ms and p99 <= 50 ms per interaction.

Usage: .venv/bin/python benchmarks/timeline_frames.py [--screenshots] [-n 240]
  --screenshots also writes docs/img/timeline_{1rank,2ranks,64ranks}.png
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE.parent / "tests" / "analysis"), str(HERE)]

from test_plots import NCCL, replicate  # noqa: E402
from testdata import fixtures_dir  # noqa: E402
from timeline_page import CHROMIUM, CHROMIUM_ARGS, MEASURE, TimelinePage, percentile  # noqa: E402
from timeline_zoom import OUT, windows  # noqa: E402

import dynprof_nb  # noqa: E402

DOCS_IMG = HERE.parent / "docs" / "img"


def measure(browser, path: Path, n: int) -> dict:
    w = dynprof_nb.load_window(path)
    view = w.plot_timeline(interactive=True)
    page = browser.new_page(viewport={"width": 1450, "height": 1100})
    tp = TimelinePage(page, view)
    page.evaluate(MEASURE, [16, 0.5, 120])  # warm-up: the first frames compile the drawing
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        res = page.evaluate(MEASURE, [n, 0.45, 120])
    finally:
        hog.kill()
        hog.wait()
    page.close()
    out = {"events": len(w.events), "held": view.summary_info["count"],
           "levels": len(view.summary_info["levels"]), "kernel_calls": tp.calls.count("view")}
    for key in ("work", "frames"):
        out[f"{key}_p50"] = percentile(res[key], 50)
        out[f"{key}_p99"] = percentile(res[key], 99)
    for kind in ("zoom", "pan"):
        vals = [v for v, k in zip(res["work"], res["kinds"], strict=True) if k == kind]
        out[f"{kind}_p50"] = percentile(vals, 50)
    return out


def screenshots(browser) -> None:
    """The docs' pictures: the Kineto sample (1 rank), two ranks of it, and 64 ranks."""
    one = fixtures_dir() / NCCL
    two = OUT / "timeline_nccl2"
    if not two.exists():
        replicate(one, two, 2, skew_us=28_000_000)
    DOCS_IMG.mkdir(parents=True, exist_ok=True)
    for name, path, zoom in [("timeline_1rank", one, "kernel"), ("timeline_2ranks", two, None),
                             ("timeline_64ranks", windows()["64 ranks x 1,000 steps"], 500)]:
        w = dynprof_nb.load_window(path)
        view = w.plot_timeline(interactive=True)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        tp = TimelinePage(page, view, width=1260)
        if zoom == "kernel":  # a step's backward, where kernels and their launches are named
            view.zoom_to(step=int(w.steps["step"].iloc[0]))
            lo, hi = view.visible_range
            view.zoom(lo + (hi - lo) * 0.55, lo + (hi - lo) * 0.58)
            tp.push()
            search = tp.root.locator(".dynprof-tl-search")
            search.fill("vectorized_elementwise")
            search.press("Enter")
            page.wait_for_function("() => document.querySelector('.dynprof-timeline')"
                                   ".dataset.flows")
            ends = [*view.details["flows"], {"x0": view.index.x0[view.details["id"]],
                                             "x1": view.index.x1[view.details["id"]]}]
            a, b = min(e["x0"] for e in ends), max(e["x1"] for e in ends)
            view.zoom(a - (b - a) * 0.6, b + (b - a) * 0.6)  # the kernel and its launch
            tp.push()
        elif zoom:  # ten steps either side of rank 0's step `zoom`
            view.zoom_to(step=zoom, rank=0)
            lo, hi = view.visible_range
            view.zoom(lo - 10 * (hi - lo), hi + 10 * (hi - lo))
            tp.push()
        page.wait_for_timeout(300)
        tp.root.screenshot(path=str(DOCS_IMG / f"{name}.png"))
        page.close()
        print("wrote", DOCS_IMG / f"{name}.png")


def main() -> None:
    warnings.simplefilter("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=240)
    ap.add_argument("--screenshots", action="store_true")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            if args.screenshots:
                screenshots(browser)
            for label, path in windows().items():
                r = measure(browser, path, args.n)
                print(f"{label}: {r['events']:,} events, {r['held']:,} held in {r['levels']} "
                      f"levels, {r['kernel_calls']} kernel requests")
                print(f"  input to pixels: median {r['work_p50']:.1f} ms, p99 "
                      f"{r['work_p99']:.1f} ms (zoom median {r['zoom_p50']:.1f}, pan median "
                      f"{r['pan_p50']:.1f}); frame interval: median {r['frames_p50']:.1f} ms, "
                      f"p99 {r['frames_p99']:.1f} ms")
        finally:
            browser.close()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
