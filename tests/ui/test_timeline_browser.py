"""The interactive timeline in a real browser: JupyterLab on 127.0.0.1 and Debian's chromium
(Playwright's Python package, no browser download, as test_browser.py) open a notebook that
shows ``w.plot_timeline(interactive=True)`` of a real 2-rank Kineto window, zoom with the mouse
wheel and pan by dragging as a person does (drawn in the browser from the summary the widget
was sent through the real comm), check the range and events the widget says it drew, hover an
event for its tooltip, click it for its details (args from the trace file, its launch), and
move the view from the kernel with ``view.zoom_to(step=5)``. Each feature has its own quicker
test in a plain page: test_timeline_page.py.
Screenshots go to tests/artifacts/timeline_browser_*.png."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, Lab, started_lab
from testdata import fixtures_dir

pytestmark = pytest.mark.slow
NCCL = "kineto/hta__nccl_parser_config__nccl_data.json.gz"


def _notebook(window: Path) -> dict:
    code = ("import dynprof_nb\n"
            f"w = dynprof_nb.load_window({str(window)!r})\n"
            "view = w.plot_timeline(interactive=True)\n"
            "view")
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None,
                       "outputs": [], "source": code, "id": "timeline"}]}


@pytest.fixture
def lab(tmp_path: Path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
    from test_plots import replicate

    window = replicate(fixtures_dir() / NCCL, tmp_path / "w2", 2, skew_us=28_000_000)
    root = tmp_path / "lab"
    root.mkdir()
    (root / "timeline.ipynb").write_text(json.dumps(_notebook(window)))
    with started_lab(tmp_path, root, "timeline.ipynb") as handle:
        yield handle


# a pixel of an event in the last three rows (rank 1's GPU streams: kernels), darker
# than the step shading and the separators, and so 3 px above and below (not a 1 px line)
_FIND_KERNEL = """(canvas) => {
  const ctx = canvas.getContext('2d');
  const w = canvas.width, h = canvas.height;
  const img = ctx.getImageData(0, 0, w, h).data;
  const dark = (x, y) => { const i = (y * w + x) * 4; return Math.min(img[i], img[i + 1],
                                                                      img[i + 2]) < 200; };
  for (let y = h - 12; y > h - 12 - 3 * 18; y -= 2) for (let x = 200; x < w - 20; x += 1) {
    if (dark(x, y) && dark(x, y - 3) && dark(x, y + 3)) return [x, y];
  }
  return null;
}"""


def test_timeline_zooms_pans_and_shows_an_event_in_jupyterlab(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert Path(CHROMIUM).exists(), "make test installs chromium with apt"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{lab.url}/lab/tree/timeline.ipynb?token={lab.token}")
            expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible(
                timeout=120_000)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.commands"
                                   ".hasCommand('notebook:run-all-cells')", timeout=120_000)
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            root = page.locator(".dynprof-timeline")
            expect(root).to_be_visible(timeout=120_000)
            expect(root).to_have_attribute("data-ready", "1", timeout=60_000)
            canvas = root.locator("canvas")
            canvas.scroll_into_view_if_needed()
            news = page.get_by_role("button", name="No", exact=True)
            if news.count():
                news.first.click()

            def state() -> dict:
                return root.evaluate("(el) => ({...el.dataset})")

            first = state()
            lo0, hi0 = float(first["lo"]), float(first["hi"])
            assert int(first["drawn"]) > 1000  # the whole window: many events
            root.screenshot(path=str(ARTIFACTS / "timeline_browser_full.png"))

            box = canvas.bounding_box()
            for _ in range(80):  # wheel in on a kernel, keeping the mouse on one (~50 µs)
                if float(state()["hi"]) - float(state()["lo"]) < 50_000:
                    break
                at = canvas.evaluate(_FIND_KERNEL)
                assert at is not None, "no kernel drawn on rank 1's streams"
                page.mouse.move(box["x"] + at[0] + 0.5, box["y"] + at[1])
                page.mouse.wheel(0, -300)
                page.wait_for_timeout(80)
            page.wait_for_timeout(800)  # the last answer drawn
            zoomed = state()
            span = float(zoomed["hi"]) - float(zoomed["lo"])
            assert span < 50_000 and span < (hi0 - lo0) / 5000
            assert int(zoomed["drawn"]) < int(first["drawn"])
            assert float(zoomed["drawMs"]) < 200  # drawn here: no kernel round trip

            # drag to the left by 300 px and back: the view moves by 300 px worth of time
            x, y = box["x"] + 190 + (box["width"] - 200) * 0.6, box["y"] + 60
            page.mouse.move(x, y)
            page.mouse.down()
            page.mouse.move(x - 150, y, steps=5)
            page.mouse.move(x - 300, y, steps=5)
            page.mouse.up()
            page.wait_for_timeout(500)
            panned = state()
            shift = float(panned["lo"]) - float(zoomed["lo"])
            plot_w = box["width"] - 200
            assert shift == pytest.approx(300 / plot_w * span, rel=0.05)
            page.mouse.move(x - 300, y)
            page.mouse.down()
            page.mouse.move(x, y, steps=8)
            page.mouse.up()
            page.wait_for_timeout(500)
            assert float(state()["lo"]) == pytest.approx(float(zoomed["lo"]), abs=span * 0.02)
            root.screenshot(path=str(ARTIFACTS / "timeline_browser_zoomed.png"))

            # hover and click an event
            at = canvas.evaluate(_FIND_KERNEL)
            assert at is not None, "nothing drawn in the zoomed view"
            px, py = box["x"] + at[0] + 1, box["y"] + at[1] + 1
            page.mouse.move(px, py)
            tip = root.locator(".dynprof-tl-tip")
            expect(tip).to_be_visible(timeout=5_000)
            assert "rank" in tip.inner_text()
            page.mouse.click(px, py)
            details = root.locator(".dynprof-tl-details")
            expect(details).to_contain_text("args:", timeout=30_000)
            text = details.inner_text()
            assert "name: " in text and "rank: " in text and "duration: " in text
            assert "thread/stream: stream " in text  # zoomed to one GPU op (kernel, memcpy)
            assert tip.inner_text().split("\n")[0] in text  # the hovered event's details
            root.screenshot(path=str(ARTIFACTS / "timeline_browser_details.png"))
            print("browser draw ms:", zoomed["drawMs"])

            # Python moves the view through the comm: step 5 of w.steps fills it
            page.evaluate("() => { const nb = window.jupyterapp.shell.currentWidget;"
                          " nb.content.activeCellIndex = 0; }")
            code = "view.zoom_to(step=5); print('moved', view.goto)"
            page.evaluate(f"""() => {{
                const nb = window.jupyterapp.shell.currentWidget;
                const cell = nb.content.model.sharedModel.insertCell(1, {{cell_type: 'code',
                  source: {json.dumps(code)}}});
                nb.content.activeCellIndex = 1;
                window.jupyterapp.commands.execute('notebook:run-cell');
            }}""")
            expect(page.get_by_text("moved [")).to_be_visible(timeout=60_000)
            page.wait_for_function("() => JSON.parse(document.querySelector('.dynprof-timeline')"
                                   ".dataset.stepLabels || '[]').some(([s]) => s === 5)",
                                   timeout=30_000)
        finally:
            browser.close()
