"""Fixtures of the control tests that drive the magics: one IPython shell with
``%load_ext dynprof_nb``, and its ``DynprofMagics`` detached from any job before each test and
its job closed after it."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "dynprof_nb")
    return shell


@pytest.fixture
def magics(ip: InteractiveShell):
    instance = ip.magics_manager.registry["DynprofMagics"]
    instance.job = None
    yield instance
    if instance.job is not None:
        instance.job.close()
    instance.job = None
