"""What the environment matrix is about, in one venv: a pyarrow that does not import turns the
frame cache and out-of-core frames off (said once, loads go on); a library's own failure is
named as the library's, not as a damaged file; SQLite's value limit holds without
``Connection.setlimit`` (Python 3.10); ``dynprof doctor`` says all of it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pandas as pd
import pytest

from dynprof_nb import optional, samples
from dynprof_nb.traces.errors import LibraryError, TraceFormatError, library_fault
from dynprof_nb.traces.formats.common import sqlite as dbfile

REPO = Path(__file__).resolve().parents[1]


def _run(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
        timeout=180, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO), **env})


def test_a_pyarrow_that_cannot_import_turns_the_cache_off_said_once(tmp_path: Path) -> None:
    # a pyarrow package that raises on import, as pyarrow 26 does under numpy 1.26
    fake = tmp_path / "site" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "raise ImportError('pyarrow requires NumPy 2.0 or newer, found 1.26.4')\n")
    out = _run("""
        import warnings
        warnings.simplefilter("always")
        from dynprof_nb import samples
        from dynprof_nb.traces import cache
        for _ in range(2):
            for name in ("pytorch_cpu", "ascend_db"):
                w = samples.load(name)
                assert len(w.ops), name
        print("stored", cache.counts["stored"])
        """, tmp_path, DYNPROF_NB_CACHE=str(tmp_path / "cache"),
        PYTHONPATH=f"{tmp_path / 'site'}{os.pathsep}{REPO}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["stored", "0"]
    said = [line for line in out.stderr.splitlines() if "OptionalPartWarning" in line]
    assert len(said) == 1, out.stderr
    assert "frame cache is off" in said[0] and "NumPy 2.0" in said[0]
    assert "pip install" in said[0] and "'pyarrow>=14,<26'" in said[0]


def test_an_optional_part_off_is_off_for_the_out_of_core_frames_too(monkeypatch) -> None:
    from dynprof_nb.traces.formats.chrome import out_of_core as ooc

    optional._forget()
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow: ImportError
    monkeypatch.setenv("DYNPROF_NB_OUT_OF_CORE", "1")
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            assert not ooc.wanted([samples.path("pytorch_cpu")])
            assert not ooc.wanted([samples.path("pytorch_cpu")])
        lines = [str(w.message) for w in said]
        assert len(lines) == 1 and "out-of-core frames is off" in lines[0], lines
    finally:
        optional._forget()


def test_a_library_keyword_error_is_the_librarys_not_the_files(monkeypatch) -> None:
    # pandas 2.0's from_codes: no validate= (the issue's "the file is damaged")
    real = pd.Categorical.from_codes

    def from_codes(codes, categories=None, ordered=None, dtype=None):
        return real(codes, categories=categories, ordered=ordered, dtype=dtype)

    from_codes.__qualname__ = "Categorical.from_codes"
    monkeypatch.setattr(pd.Categorical, "from_codes", from_codes)
    monkeypatch.setattr("dynprof_nb.compat.PANDAS", (2, 2))
    for name in ("pytorch_cpu", "ascend_text"):
        with pytest.raises(LibraryError) as info:
            samples.load(name).ops  # noqa: B018
        text = str(info.value)
        assert f"pandas {pd.__version__}" in text and "not the file" in text, text
        assert "damaged" not in text and "dynprof doctor" in text
        assert not isinstance(info.value, TraceFormatError)


@pytest.mark.parametrize("exc, lib", [
    (ImportError("no pyarrow", name="pyarrow.parquet"), "pyarrow"),
    (AttributeError("'sqlite3.Connection' object has no attribute 'setlimit'",
                    name="setlimit", obj=sqlite3.connect(":memory:")), "sqlite3"),
    (AttributeError("module 'numpy' has no attribute 'trapz'", name="trapz",
                    obj=__import__("numpy")), "numpy"),
    (TypeError("Categorical.from_codes() got an unexpected keyword argument 'validate'"),
     "pandas"),
])
def test_library_faults_are_named(exc: BaseException, lib: str) -> None:
    assert (library_fault(exc) or "").split()[0] == lib


@pytest.mark.parametrize("exc", [
    AttributeError("'str' object has no attribute 'get'", name="get", obj="x"),
    AttributeError("'NoneType' object has no attribute 'get'", name="get", obj=None),
    TypeError("unhashable type: 'list'"),
    TypeError("'<' not supported between instances of 'str' and 'int'"),
])
def test_content_errors_stay_the_files(exc: BaseException) -> None:
    assert library_fault(exc) is None


def _long_value_db(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (v TEXT)")
    con.execute("INSERT INTO t VALUES (?)", ("y" * 5000,))
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("way", ["setlimit", "sqlite3_limit"])
def test_the_value_limit_holds_with_and_without_setlimit(tmp_path: Path, way: str) -> None:
    con = sqlite3.connect(_long_value_db(tmp_path / "t.db"))
    if way == "setlimit" and hasattr(con, "setlimit"):
        dbfile.set_length_limit(con, 1000)
    elif sys.version_info[:2] == (3, 10):
        dbfile._limit_310(con, 1000)
    else:  # the 3.10 path's C call, on this interpreter's handle layout: only 3.10's is known
        with pytest.raises(RuntimeError, match="CPython 3.10"):
            dbfile._limit_310(con, 1000)
        return
    with pytest.raises(sqlite3.DataError, match="too big"):
        con.execute("SELECT v FROM t").fetchone()


def test_doctor_in_a_log_is_one_fact_a_line_and_html_in_a_notebook() -> None:
    import dynprof_nb

    report = dynprof_nb.doctor()
    lines = report.text(tty=False).splitlines()
    assert all(": " in line for line in lines)
    keys = [line.split(": ", 1)[0] for line in lines]
    for key in ("python", "platform", "pandas", "numpy", "pyarrow", "frame cache",
                "/dev/shm", "cache dir", "mindspore"):
        assert key in keys, key
    assert "<table" in report._repr_html_()
    cli = subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", "doctor"], text=True,
                         capture_output=True, timeout=120, check=True).stdout
    assert cli.splitlines()[0] == lines[0]


def test_a_notebook_without_widgets_waits_with_lines(monkeypatch) -> None:
    import io

    from dynprof_nb.control.progress import Progress

    optional._forget()
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    out = io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            p = Progress("window 5-8", mode="notebook", stream=out)
            p.update(1, 4, "recording")
            p.close("written")
        lines = out.getvalue().splitlines()
        assert lines[0].startswith("window 5-8: recording") and "written" in lines[-1], lines
        assert [str(w.message).count("notebook widgets is off") for w in said] == [1]
    finally:
        optional._forget()
