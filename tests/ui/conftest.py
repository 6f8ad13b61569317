"""Fixtures of the magic tests: one IPython shell with ``%load_ext dynprof_nb``, and its
``DynprofMagics`` detached from any job at the start of each test."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

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
