"""Fixtures of the UI tests: one IPython shell with ``%load_ext dynprof_nb``, its
``DynprofMagics`` detached from any job at the start of each test, and Debian's chromium for
the timeline's page tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from timeline_page import CHROMIUM, CHROMIUM_ARGS

from dynprof_nb.ui.magics import DynprofMagics


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "dynprof_nb")
    return shell


@pytest.fixture
def magics(ip: InteractiveShell) -> DynprofMagics:
    instance = ip.magics_manager.registry["DynprofMagics"]
    instance.job = None
    return instance


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
