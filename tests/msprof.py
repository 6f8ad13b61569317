"""msprof-analyze 26.2.0, the oracle of the NPU tests: where it is, running it on a window
folder, and reading the step trace its default cluster mode writes.

It lives in its own venv (``.venv/msprof``, installed by ``make test``); set
DYNPROF_MSPROF_ANALYZE to use another install. It writes ``cluster_analysis_output/`` inside the
folder it reads, so tests run it on a copy.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from functools import cache
from pathlib import Path

import pandas as pd

VERSION = "26.2.0"


@cache
def executable() -> Path:
    """The msprof-analyze script, checked (once) to be version :data:`VERSION`."""
    env = os.environ.get("DYNPROF_MSPROF_ANALYZE")
    exe = Path(env) if env else Path(sys.prefix) / "msprof" / "bin" / "msprof-analyze"
    assert exe.is_file(), (
        f"msprof-analyze {VERSION} not found at {exe}: run `make test` (it "
        "installs it into .venv/msprof) or set DYNPROF_MSPROF_ANALYZE"
    )
    ver = subprocess.run(
        [str(exe.parent / "python"), "-c",
         "import importlib.metadata as m; print(m.version('msprof-analyze'))"],
        capture_output=True, text=True,
    )
    assert ver.stdout.strip() == VERSION, ver
    return exe


def run(root: Path, recipe: str | None = None) -> str:
    """``msprof-analyze cluster -d ROOT`` with ``recipe`` (text export), or its default cluster
    mode; its output, after asserting it succeeded."""
    args = [str(executable()), "cluster", "-d", str(root)]
    if recipe:
        args += ["-m", recipe, "--export_type", "text"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (recipe, r.stdout[-2000:], r.stderr[-2000:])
    return r.stdout + r.stderr


def cluster_step_trace(root: Path) -> pd.DataFrame:
    """ClusterStepTraceTime, which the default cluster mode writes (and cluster_time_summary
    reads)."""
    con = sqlite3.connect(root / "cluster_analysis_output" / "cluster_analysis.db")
    try:
        return pd.read_sql_query("SELECT * FROM ClusterStepTraceTime", con)
    finally:
        con.close()
