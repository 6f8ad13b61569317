"""The documentation site as a new user meets it: the site ``make docs`` built (mkdocs
--strict, site/), served on 127.0.0.1 as any static host serves it, in Debian's chromium; the
search finds a page; from the home page
the nav leads to "Getting started > PyTorch", whose steps are there in order (install from a
clone, the two lines, attach / start / load / timeline), and on to the API reference, where the
names those steps call are documented; the notebooks are rendered with their outputs."""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "site"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage"]

pytestmark = pytest.mark.slow


def built_site() -> Path:
    """site/index.html, built after every page it is made from (make test builds it first)."""
    index = SITE / "index.html"
    assert index.exists(), "no site/: run `make docs` (make test runs it before the tests)"
    sources = [REPO / "mkdocs.yml", *(REPO / "docs").rglob("*.md")]
    stale = [p.name for p in sources if p.stat().st_mtime > index.stat().st_mtime]
    assert not stale, f"site/ is older than {stale}: run `make docs`"
    return index


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base's name)
        pass


@pytest.fixture
def site_url() -> Iterator[str]:
    """The built site served on 127.0.0.1 (a free port), stopped after the test."""
    built_site()
    handler = functools.partial(_Quiet, directory=str(SITE))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_getting_started_leads_from_the_nav_to_the_api_reference(site_url: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert Path(CHROMIUM).exists(), "make test installs chromium with apt"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{site_url}/index.html")
            expect(page.locator("h1")).to_have_text(re.compile(r"^dynprof_nb"))
            page.keyboard.press("/")  # Material's key for the search box
            page.keyboard.type("flight recorder")
            expect(page.locator(".md-search-result__item").first).to_be_visible()
            page.keyboard.press("Escape")

            nav = page.locator("nav.md-nav--primary")
            nav.get_by_role("link", name="PyTorch").first.click()
            expect(page.locator("h1")).to_have_text(re.compile(r"^Getting started with PyTorch"))
            assert page.url.endswith("getting-started/pytorch.html")
            code = page.locator("article pre").all_inner_texts()
            steps = ['pip install -e ".[notebook]"', "dynprof_nb.Monitor(job=", "monitor.step()",
                     "%dynprof attach llama", 'job.start("+10", "+19")', "w = job.load()",
                     "w.timeline()"]
            joined = "\n".join(code)
            places = [joined.find(s) for s in steps]
            assert -1 not in places and places == sorted(places), places

            page.locator("article").get_by_role("link", name="step numbering").click()
            expect(page.locator("h2#step-numbering")).to_be_in_viewport()

            nav.get_by_role("link", name="API").click()
            expect(page.locator("h1")).to_have_text(re.compile(r"^API reference"), timeout=30_000)
            for name in ("dynprof_nb.control.registry.attach", "dynprof_nb.control.job.Job.start",
                         "dynprof_nb.traces.window.TraceWindow.timeline"):
                heading = page.locator(f"[id='{name}']")
                expect(heading).to_have_count(1)
                assert name.rsplit(".", 1)[1] in heading.inner_text()
            doc = page.locator("[id='dynprof_nb.traces.window.TraceWindow.timeline'] + div")
            expect(doc).to_contain_text("interactive")

            # a rendered notebook is a 0.7 MB page: wait for its load (the navigation's own
            # deadline), then its outputs are in the DOM (in CI the 5 s of an expect ran out
            # while the page was still loading)
            with page.expect_navigation(url=re.compile(r"notebooks/analysis\.html$"),
                                        wait_until="load"):
                nav.locator("a[href$='notebooks/analysis.html']").click()
            expect(page.locator(".jp-OutputArea-output").first).to_be_attached()
            assert errors == [], errors
        finally:
            browser.close()
