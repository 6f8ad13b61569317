"""Fixtures of the UI tests: Debian's chromium for the timeline's page tests (the shell and
its magics, ``ip`` and ``magics``, are tests/conftest.py's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from timeline_page import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, one per test module."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "make test installs chromium with apt"
    pw = sync_playwright().start()
    b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    yield b
    b.close()
    pw.stop()
