"""Script in every string field runs nothing in a real JupyterLab (issue 42): one notebook,
run in JupyterLab on 127.0.0.1 with Debian's chromium (test_browser.py's server), displays
every ``_repr_html_`` of the package built with a script in every field
(tests/test_safetext.py's ``MADE``), the config file of the issue, the panel of a real job
whose config, messages, field errors, progress line and window row carry scripts, and the
interactive timeline of a trace whose every name is one; no ``window.__pwned*`` is set, no
element of theirs is in the page, and their text is shown as text.
Screenshot: tests/artifacts/hostile_html.png."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, Lab, started_lab

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parents[1]
PWNED = "() => Object.keys(window).filter((k) => k.startsWith('__pwned'))"

CODE = """\
import sys, warnings
from pathlib import Path
sys.path[:0] = [{tests!r}, {hostile!r}]
warnings.simplefilter("ignore")
from IPython.display import display
import dynprof_nb, make_names, test_safetext
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.ui.panel import Panel
tmp = Path({tmp!r})
for where, make in sorted(test_safetext.MADE.items()):
    display(make(tmp))
display(test_safetext._hang().findings_html())
display(ProfilerConfig.load(make_names.config(tmp).path))
P = test_safetext.PAYLOAD
job = dynprof_nb.attach({job!r}, create=True)
job.set(prof_path=P, mstx_domain_include=[P])
panel = Panel(job, poll=False)  # what is set below stays
panel._show_errors({{"start_step": P, "prof_path": P}})
panel.progress_label.value = P
panel.window_rows.children = [panel._window_row(0, {{"label": P, "key": P}})]
display(panel)
panel._say(P, error=True)
view = dynprof_nb.load_trace(make_names.trace(tmp).path).plot_timeline(interactive=True)
display(view)
print("ALL" + " SHOWN")
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    """One JupyterLab for the module, serving the notebook of every hostile display."""
    tmp = tmp_path_factory.mktemp("hostile_lab")
    root = tmp / "lab"
    root.mkdir()
    job = f"hostile-{uuid.uuid4().hex[:8]}"
    code = CODE.format(tests=str(TESTS), hostile=str(TESTS / "data" / "hostile"),
                       tmp=str(tmp), job=job)
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None,
                           "outputs": [], "source": code, "id": "hostile"}]}
    (root / "hostile.ipynb").write_text(json.dumps(notebook))
    with started_lab(tmp, root, "hostile.ipynb", job) as handle:
        yield handle


def test_no_script_of_a_hostile_value_runs_in_jupyterlab(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert Path(CHROMIUM).exists(), "make test installs chromium with apt"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.set_default_timeout(60_000)
            page.goto(f"{lab.url}/lab/tree/hostile.ipynb?token={lab.token}")
            expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible(
                timeout=120_000)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.commands"
                                   ".hasCommand('notebook:run-all-cells')", timeout=120_000)
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            out = page.locator(".jp-OutputArea")
            try:
                expect(out.get_by_text("ALL SHOWN")).to_be_visible(timeout=180_000)
            except AssertionError:
                page.screenshot(path=str(ARTIFACTS / "hostile_html_failed.png"))
                raise
            expect(page.locator(".dynprof-panel")).to_be_visible(timeout=60_000)
            expect(page.locator(".dynprof-timeline")).to_have_attribute("data-ready", "1",
                                                                       timeout=60_000)
            expect(page.locator(".dynprof-message")).to_contain_text("<script>", timeout=30_000)
            # an <img src=x> fails to load at once; give any handler time to have run
            page.wait_for_timeout(2000)
            page.screenshot(path=str(ARTIFACTS / "hostile_html.png"))
            assert page.evaluate(PWNED) == []
            assert out.locator("img[src=x], script, svg[onload], iframe[srcdoc]").count() == 0
            # the scripts are text on the page: the config's, a status cell's, the panel's
            expect(out.get_by_text("<img src=x onerror=window.__pwned5=1>").first).to_be_visible()
            assert out.locator("td", has_text='<img src=x onerror="window.__pwned=1">').count()
            for where in (".dynprof-error-prof_path", ".dynprof-progress", ".dynprof-window-row"):
                expect(page.locator(where)).to_contain_text("<img src=x onerror=")
        finally:
            browser.close()
