"""A real browser: JupyterLab on 127.0.0.1 and Debian's chromium (driven by Playwright's Python
package; no browser download) open the quickstart, run it, render the panel, type a new window
key by key and click Apply without pressing Enter (what a person does), and the test reads the
new config from the job segment; a typo shows its error under the field. Screenshots of the
panel are saved under ``tests/artifacts/``."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from jobutil import wait_until

import dynprof_nb
from dynprof_nb.contract import segment

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM = "/usr/bin/chromium"
# Scroll an element into view in one step inside the page (a locator's evaluate resolves it
# afresh and runs atomically): the panel test's "Element is not attached to the DOM" came from
# element scrolls and clips Playwright does in several steps, while the widgets re-render
SCROLL = "e => e.scrollIntoView({block: 'start'})"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage"]

pytestmark = pytest.mark.slow


@dataclass
class Lab:
    url: str
    token: str
    job: str
    root: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(lab: Lab, path: str, method: str = "GET", body: dict | None = None) -> object:
    request = urllib.request.Request(
        f"{lab.url}{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """JupyterLab started by the test: 127.0.0.1, a free port, a token, a temp root holding a
    copy of the quickstart up to its panel (its last cells close the panel and stop the ranks,
    which this test does itself once it has used the panel); everything it started is stopped
    at the end."""
    root = tmp_path / "lab"
    root.mkdir()
    notebook = json.loads((REPO / "notebooks" / "quickstart.ipynb").read_text())
    cells = notebook["cells"]
    last = max(i for i, c in enumerate(cells) if "%dynprof panel" in "".join(c["source"]))
    notebook["cells"] = cells[:last + 1]
    (root / "quickstart.ipynb").write_text(json.dumps(notebook))
    job = f"browser-{uuid.uuid4().hex[:8]}"
    with started_lab(tmp_path, root, "quickstart.ipynb", job, {"DYNPROF_JOB": job}) as handle:
        yield handle


@contextmanager
def started_lab(tmp_path: Path, root: Path, notebook: str, job: str = "",
                env: dict[str, str] | None = None) -> Iterator[Lab]:
    """JupyterLab serving ``root`` on 127.0.0.1, a free port and a token, with the kernel of
    ``notebook`` started up front (so the page does not ask which kernel to use); at the end
    it is stopped with everything it started (:func:`_stop_lab`). The browser tests share it."""
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, **(env or {}), JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={token}",
         "--ServerApp.port_retries=0", "--ServerApp.allow_root=True",
         "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    handle = Lab(f"http://127.0.0.1:{port}", token, job, root)
    try:
        def up() -> bool:
            assert server.poll() is None, (tmp_path / "lab.log").read_text()[-3000:]
            try:
                return bool(_api(handle, "/api/status"))
            except (urllib.error.URLError, ConnectionError, OSError):
                return False

        wait_until(up, timeout=90, what="the JupyterLab server to answer")
        _api(handle, "/api/sessions", method="POST",
             body={"path": notebook, "name": notebook, "type": "notebook",
                   "kernel": {"name": "python3"}})
        yield handle
    finally:
        _stop_lab(handle, server)
        log.close()


def _stop_lab(lab: Lab, server: subprocess.Popen) -> None:
    try:  # kernels first: ipykernel stops the training ranks it started
        for kernel in _api(lab, "/api/kernels") or []:
            _api(lab, f"/api/kernels/{kernel['id']}", method="DELETE")
    except Exception:
        pass
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    if not lab.job:  # a lab with no job of its own
        return
    try:  # anything of this job still alive was started by this test
        job = dynprof_nb.attach(lab.job, create=False)
        for slot in job.live_slots():
            os.kill(slot.pid, signal.SIGTERM)
        job.close()
    except Exception:
        pass
    segment.unlink(lab.job)


def test_panel_in_jupyterlab_applies_a_new_window(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert Path(CHROMIUM).exists(), "make test installs chromium with apt"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.set_default_timeout(60_000)
            page.goto(f"{lab.url}/lab/tree/quickstart.ipynb?token={lab.token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible(
                timeout=120_000)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.commands"
                                   ".hasCommand('notebook:run-all-cells')", timeout=120_000)
            # not awaited: the command's promise settles only when every cell has run
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

            panel = page.locator(".dynprof-panel")
            try:
                expect(panel).to_be_visible(timeout=180_000)
            except AssertionError:
                page.screenshot(path=str(ARTIFACTS / "no_panel.png"))
                raise
            rows = panel.locator(".dynprof-ranks table tbody tr")
            expect(rows).to_have_count(2, timeout=60_000)

            news = page.get_by_role("button", name="No", exact=True)
            if news.count():  # JupyterLab's "notified about news?" toast, out of the picture
                news.first.click()
            # what the new-user pass misread: a cut label ("max wind..."), the heat map's
            # title said twice, a "Stop" that did not say what it stops
            section = panel.locator(".dynprof-section-steptimes")
            cut = section.locator(".widget-label").evaluate_all(
                "els => els.filter(e => e.scrollWidth > e.clientWidth).map(e => e.textContent)")
            assert cut == [], f"labels cut short in chromium: {cut}"
            expect(section.locator(".dynprof-trigger-field-max_windows .widget-label")
                   ).to_have_text("max windows")
            assert section.inner_text().lower().count("step times") == 1, section.inner_text()
            stop = panel.locator(".dynprof-stop")
            expect(stop).to_have_text("Stop window")
            expect(stop).to_have_attribute("title", re.compile("stop the current window"))
            job = dynprof_nb.attach(lab.job, create=False)
            try:
                message = panel.locator(".dynprof-message")
                stop_field = panel.locator(".dynprof-field-stop_step input")
                # the kernel busy while the user types: ipywidgets holds the later keystrokes
                # back but sends the click at once, and Apply must still see all of "12x5"
                page.evaluate("() => { window.jupyterapp.shell.currentWidget.sessionContext"
                              ".session.kernel.requestExecute({code: 'import time; "
                              "time.sleep(3)'}); }")
                stop_field.fill("")
                stop_field.press_sequentially("12x5")  # a typo: an error under the field
                panel.locator(".dynprof-apply").click()
                expect(panel.locator(".dynprof-error-stop_step")).to_contain_text(
                    "not a number", timeout=30_000)
                # a page screenshot: a clip of an element the widgets re-render under it
                # failed with "Element is not attached to the DOM" (the panel test's flake)
                panel.evaluate(SCROLL)
                page.screenshot(path=str(ARTIFACTS / "panel_error.png"))
                panel.locator(".dynprof-revert").click()

                step = max(s.step for s in job.live_slots())
                start, stop = step + 100_000, step + 100_009
                for key, value in (("start_step", start), ("stop_step", stop)):
                    field = panel.locator(f".dynprof-field-{key} input")
                    field.fill("")
                    field.press_sequentially(str(value), delay=20)  # typed; no Enter, no blur
                panel.locator(".dynprof-field-with_stack input[type=checkbox]").check()
                panel.locator(".dynprof-apply").click()
                expect(message).to_contain_text(
                    f"applied start_step={start}, stop_step={stop}, with_stack=True",
                    timeout=30_000)

                def written() -> bool:
                    cfg = job.config
                    return (cfg.start_step, cfg.stop_step, cfg.with_stack) == (start, stop, True)

                wait_until(written, timeout=30, what="the new window in the job segment")
                target = job.generation
                wait_until(lambda: all(s.applied == target for s in job.live_slots()),
                           timeout=30, what="both ranks to apply the new config")
                assert {s.state for s in job.live_slots()} == {"armed"}
                expect(panel.locator(".dynprof-ranks")).to_contain_text("armed", timeout=30_000)

                # a key set elsewhere (a cell, the CLI) shows in the form without a click
                job.set(record_shapes=True)
                expect(panel.locator(".dynprof-field-record_shapes input[type=checkbox]")
                       ).to_be_checked(timeout=30_000)
                # editing another field and applying keeps that key and the window (a key
                # this torch job reads: MindSpore's own, mstx among them, are folded away)
                panel.locator(".dynprof-field-profile_memory input[type=checkbox]").check()
                panel.locator(".dynprof-apply").click()
                expect(message).to_contain_text("applied profile_memory=True", timeout=30_000)
                cfg = job.config
                assert (cfg.start_step, cfg.stop_step, cfg.record_shapes,
                        cfg.profile_memory) == (start, stop, True, True)
            finally:
                job.close()
            panel.evaluate(SCROLL)
            page.screenshot(path=str(ARTIFACTS / "panel.png"))
            row = panel.locator(".dynprof-window-row").first  # the newest window
            expect(row).to_contain_text("ranks 2/2 complete", timeout=60_000)
            row.get_by_role("button", name="Summary").click()  # the Output area, plots
            image = panel.locator(".jp-OutputArea-output img").first
            expect(image).to_be_visible(timeout=60_000)
            expect(panel.locator(".jp-OutputArea-output", has_text="matmul").first
                   ).to_be_visible()
            image.evaluate(SCROLL)
            page.screenshot(path=str(ARTIFACTS / "panel_summary.png"))

            # Summary, then Compare (the order a person clicks): Compare keeps its a=/b= labels
            # and the warning that the two windows were recorded with different configs
            job = dynprof_nb.attach(lab.job, create=False)
            try:
                job.stop()  # the far window applied above: never reached
                job.start("+5", "+9")  # recorded with the standing with_stack/shapes/memory
                job.wait(timeout=120, progress=False)
            finally:
                job.close()
            expect(panel.locator(".dynprof-window-row")).to_have_count(2, timeout=60_000)
            rows = panel.locator(".dynprof-window-row")
            expect(rows.first).to_contain_text("ranks 2/2 complete", timeout=60_000)
            rows.nth(1).get_by_role("button", name="Summary").click()
            expect(panel.locator(".jp-OutputArea-output img").first).to_be_visible(
                timeout=60_000)
            rows.first.get_by_role("button", name="Compare").click()
            shown = panel.locator(".dynprof-output")
            expect(shown).to_contain_text("a = ", timeout=60_000)
            expect(shown).to_contain_text("b = ")
            expect(shown).to_contain_text("recorded with different profiler settings",
                                          timeout=10_000)
            expect(shown.locator("table").first).to_be_visible()
            page.wait_for_timeout(2000)  # nothing blanks the labels afterwards
            expect(shown).to_contain_text("a = ")
            shown.evaluate(SCROLL)
            page.screenshot(path=str(ARTIFACTS / "panel_compare.png"))
        finally:
            browser.close()
    assert (ARTIFACTS / "panel.png").stat().st_size > 10_000
