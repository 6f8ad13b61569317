"""One cluster of simulated nodes for the module's tests (see nodes.py)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nodes import SimCluster  # noqa: E402


def _can_simulate() -> str:
    if os.geteuid() != 0:
        return "simulated nodes need root (unshare --ipc --mount and mount -t tmpfs)"
    missing = [t for t in ("unshare", "nsenter") if shutil.which(t) is None]
    return f"missing {missing}" if missing else ""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    why = _can_simulate()
    if why:  # CI runs as root; a developer's laptop may not: say why, loudly
        pytest.fail(f"cannot run the cluster tests here: {why}")
    with SimCluster(tmp_path_factory.mktemp("cluster"), nodes=4) as sim:
        yield sim
