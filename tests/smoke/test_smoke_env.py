"""The smoke set each environment of the matrix runs (``make test``: ``.venv/matrix/*``, see the
Makefile): what a user of that environment does first. Every bundled sample loads and
summarises (through the frame cache where pyarrow imports, with it off and said once where
not), a real job's window is started, waited for and loaded, the magics and the quickstart
notebook run in an IPython shell, and ``dynprof doctor`` reports. Lean on purpose: the whole
suite runs in the main venv."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import pandas as pd
import pytest
from demojob import demo_job

import dynprof_nb
from dynprof_nb import optional, samples
from dynprof_nb.traces import cache

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, no_process_outlives_its_module: None):
    # asks for the leftover-process check by name, so that it is torn down after the job in
    # every pytest this matrix runs: pytest 8.0 (py310-lowest) tore the autouse one down first
    # and found the job's ranks still running
    with demo_job(tmp_path_factory.mktemp("smoke"), prefix="smoke") as j:
        yield j


def test_every_sample_loads_and_summarises_twice(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DYNPROF_NB_CACHE", str(tmp_path / "cache"))
    optional._forget()
    cache_on = optional.state("frame cache").on
    before = dict(cache.counts)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for _ in range(2):  # the second load reads the cache's frames where it is on
            for name in samples.names():
                w = samples.load(name)
                assert len(w.ops) and len(w.events), name
                text = str(w.summary())
                assert text.strip(), name
    off = [str(w.message) for w in said if issubclass(w.category, optional.OptionalPartWarning)]
    # what Python shows a user by default (not DeprecationWarning): a library's warning in
    # their notebook (numpy 1.24.0's "invalid value encountered in cast") is ours to avoid
    noise = [f"{w.category.__name__}: {w.message}" for w in said
             if issubclass(w.category, (RuntimeWarning, FutureWarning))]
    assert not noise, noise
    if cache_on:
        assert not off
        assert cache.counts["hits"] > before["hits"]
    else:  # said once, in one line, why and how to turn it on; loads uncached
        assert len(off) == 1 and "\n" not in off[0], off
        assert "frame cache is off" in off[0] and "pip install" in off[0]
        assert cache.counts["stored"] == before["stored"]


def test_sql_answers_where_duckdb_imports_and_says_how_to_install_it_where_not(
    tmp_path: Path, monkeypatch
) -> None:
    """``w.sql`` over a sample, through the frame cache where pyarrow imports; in an
    environment without DuckDB (the matrix installs no extras), one ImportError naming the
    install command, never a bare ModuleNotFoundError."""
    monkeypatch.setenv("DYNPROF_NB_CACHE", str(tmp_path / "cache"))
    optional._forget()
    for _ in range(2):  # the second load's tables are the cache's Parquet where it is on
        w = samples.load("kineto_gpu")
        if not optional.state("SQL").on:
            with pytest.raises(ImportError, match=r"pip install 'dynprof_nb\[sql\]'"):
                w.sql("select count(*) from events")
            return
        got = w.sql("select count(*) as n, sum(dur_ns) as ns from events where ph = 'X'")
        ev = w.events[w.events["ph"] == "X"]
        assert got["n"].tolist() == [len(ev)]
        assert int(got["ns"].iloc[0]) == int(ev["dur_ns"].sum())


def test_a_job_window_is_started_waited_for_and_loaded(job: dynprof_nb.Job) -> None:
    job.start("+30", "+32")  # far enough ahead for a rank stalled on a loaded 2-core box
    first, last = job.config.start_step, job.config.stop_step
    job.wait(timeout=120, progress=False)
    w = job.load()
    assert (w.start_step, w.stop_step) == (first, last)
    assert len(w.ops) and len(w.steps)
    assert str(w.summary()).strip()


def test_the_magics_run_in_a_kernel(job: dynprof_nb.Job) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "dynprof_nb")
    ip.run_line_magic("dynprof", f"attach {job.name}")
    status = ip.run_line_magic("dynprof", "status")
    assert isinstance(status, pd.DataFrame) and len(status) == 2
    ip.run_line_magic("dynprof", "start +30 +31")
    ip.run_line_magic("dynprof", "wait")
    w = ip.run_line_magic("dynprof", "load")
    assert len(w.ops)
    ip.run_line_magic("dynprof", "summary")


def test_the_quickstart_notebook_runs_in_an_ipython_shell(tmp_path: Path, monkeypatch) -> None:
    """Every code cell of notebooks/quickstart.ipynb, in order, in an IPython shell (what a
    kernel runs them in: the magics, the plots, the panel), and the cells nbval checks print
    what the notebook shows."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DYNPROF_JOB", f"smoke-nb-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = json.loads((REPO / "notebooks" / "quickstart.ipynb").read_text())
    ip = InteractiveShell.instance()
    for cell in (c for c in nb["cells"] if c["cell_type"] == "code"):
        source = "".join(cell["source"])
        with capture_output() as out:
            result = ip.run_cell(source, store_history=True)
        assert result.success, f"{source}\n{out.stdout}\n{result.error_in_exec!r}"
        if "NBVAL_CHECK_OUTPUT" in source:
            shown = "".join(
                "".join(o["text"]) for o in cell["outputs"] if o.get("name") == "stdout"
            )
            assert out.stdout == shown, source


def test_doctor_reports_this_environment() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dynprof_nb.ui.cli", "doctor"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert f"python: {sys.version.split()[0]}" in out
    for lib in ("numpy", "pandas", "pyarrow", "ipython"):
        assert f"{lib}: " in out, out
    assert "frame cache: " in out and "/dev/shm: " in out
