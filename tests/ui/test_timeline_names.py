"""Hostile names in the interactive timeline, in real chromium (tests/timeline_page.py: the
widget's own JS in a plain page wired to the real TimelineView): a script in every name runs
nothing; a right-to-left override shows written out in the tooltip and the details; lane
labels that the pixel fit would cut to the same text are drawn apart (issue 42)."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
from testdata import fixtures_dir
from timeline_page import LEFT, TOP, TimelinePage

import dynprof_nb

sys.path.insert(0, str(fixtures_dir() / "hostile"))
import make_names  # noqa: E402

PWNED = "() => Object.keys(window).filter((k) => k.startsWith('__pwned'))"


@pytest.fixture
def page(browser):
    p = browser.new_page(viewport={"width": 1450, "height": 1100})
    p.set_default_timeout(30_000)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    p.close()
    assert not errors, errors


@pytest.fixture(scope="module")
def view_of(tmp_path_factory):
    case = make_names.trace(tmp_path_factory.mktemp("names"))

    def make():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return dynprof_nb.load_trace(case.path).plot_timeline(interactive=True)

    return make


def test_a_hostile_name_is_shown_written_out_and_runs_nothing(page, view_of):
    view = view_of()
    tp = TimelinePage(page, view)
    i = int(np.flatnonzero([view._full_names[c] == make_names.BIDI_NAME
                            for c in view._name_of])[0])
    x0, x1 = view.index.x0[i], view.index.x1[i]
    view.zoom(x0 - 2 * (x1 - x0), x1 + 2 * (x1 - x0))
    tp.push()
    box, st = tp.box(), tp.state()
    lo, hi = float(st["lo"]), float(st["hi"])
    x = LEFT + ((x0 + x1) / 2 - lo) / (hi - lo) * (box["width"] - LEFT - 10)
    page.mouse.move(box["x"] + x, box["y"] + TOP + int(view.index.y[i]) * view.row_height + 9)
    tip = tp.root.locator(".dynprof-tl-tip")
    page.wait_for_function("() => document.querySelector('.dynprof-tl-tip').style.display"
                           " === 'block'")
    assert tip.inner_text().split("\n")[0] == "aten::add\\u202egnp.exe"
    page.mouse.click(box["x"] + x, box["y"] + TOP + int(view.index.y[i]) * view.row_height + 9)
    details = tp.root.locator(".dynprof-tl-details")
    page.wait_for_function("() => document.querySelector('.dynprof-tl-details')"
                           ".textContent.includes('args:')")
    text = details.inner_text()
    assert "name: aten::add\\u202egnp.exe" in text and "\u202e" not in text
    assert "<script>window.__pwned2=1</script>" in text  # the args. scripts, as text
    texts = tp.root.evaluate("(el) => JSON.parse(el.dataset.laneTexts)")
    assert len(set(texts)) == len(texts), texts
    tp.root.locator(".dynprof-tl-search").fill("svg onload")  # matches listed as text
    tp.root.locator(".dynprof-tl-search").press("Enter")
    page.wait_for_timeout(500)
    assert page.evaluate(PWNED) == []
    assert tp.root.locator("img, script, svg, iframe").count() == 0


def test_lane_labels_the_fit_would_cut_alike_are_drawn_apart(page, view_of):
    view = view_of()
    # labels that differ only in their middle: fitted into the label column they read the same
    view.lanes = [{**lane, "label": f"rank 0 · {'a' * 40}{k}{'b' * 40}"}
                  for k, lane in enumerate(view.lanes)]
    tp = TimelinePage(page, view)
    texts = tp.root.evaluate("(el) => JSON.parse(el.dataset.laneTexts)")
    assert len(texts) == len(view.lanes) > 1
    assert len(set(texts)) == len(texts), texts
    assert all(t.endswith(f"#{k + 1}") for k, t in enumerate(texts)), texts
