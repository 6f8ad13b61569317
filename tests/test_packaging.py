"""The wheel carries the sample windows: built for real, unpacked outside the repository, and
used from there (nothing read from the source tree)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "dynprof_nb" / "samples"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src")  # a clean copy: no build/ left over, none left behind
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "dynprof_nb", src / "dynprof_nb",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(src)],
                   check=True, timeout=300, capture_output=True)
    (whl,) = out.glob("dynprof_nb-*.whl")
    return whl


def test_every_sample_file_and_licence_is_in_the_wheel(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {p.relative_to(REPO).as_posix() for p in SAMPLES.rglob("*")
              if p.is_file() and "__pycache__" not in p.parts}
    assert wanted - names == set()
    for notice in ("ascend_text/LICENSE.msinsight", "ascend_db/LICENSE.msinsight",
                   "kineto_gpu/LICENSE.hta", "README.md"):
        assert f"dynprof_nb/samples/{notice}" in names
    size = sum(i.file_size for i in zipfile.ZipFile(wheel).infolist()
               if "/samples/" in i.filename)
    assert size < 6_000_000, f"samples grew to {size / 1e6:.1f} MB installed; keep them small"


def test_installed_samples_load_away_from_the_repository(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import dynprof_nb, pathlib, sqlite3\n"
        "from dynprof_nb import samples\n"
        f"where = pathlib.Path(dynprof_nb.__file__)\n"
        f"assert where.is_relative_to({str(site)!r}), where\n"
        "print(len(samples.list()))\n"
        "for name in samples.names():\n"
        "    assert samples.path(name).exists(), name\n"
        "for name in ('ascend_text', 'mindspore_cpu', 'pytorch_cpu', 'kineto_gpu'):\n"
        "    w = samples.load(name)\n"
        "    print(name, w.framework, len(w.events) > 0)\n"
        "db = next(samples.path('ascend_db').glob('rank0_ascend_pt/*/*_0.db'))\n"
        "con = sqlite3.connect(f'file:{db}?immutable=1', uri=True)\n"
        "print('db tables', con.execute('select count(*) from sqlite_master').fetchone()[0] > 5)\n"
        "print(dynprof_nb.samples.path('kineto_gpu').name)\n"
    )
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n") == [
        "5", "ascend_text torch_npu True", "mindspore_cpu mindspore True",
        "pytorch_cpu pytorch True", "kineto_gpu chrome True", "db tables True",
        "sampled_rank-0.json.gz", ""]


def test_unknown_sample_names_the_ones_there_are():
    from dynprof_nb import samples

    with pytest.raises(KeyError, match="ascend_text, ascend_db"):
        samples.path("ascend")


def test_the_interactive_timelines_front_end_is_in_the_wheel(wheel):
    """The widget's JS modules and CSS are files in timeline_js/ beside its module: without
    them in the wheel, an installed dynprof_nb shows no interactive timeline (and nothing is
    fetched from the web)."""
    from dynprof_nb.analysis.timeline_view import FRONT_END_MODULES

    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = [f"{m}.mjs" for m in FRONT_END_MODULES] + ["timeline.css", "PROTOCOL.md"]
    for f in wanted:
        assert f"dynprof_nb/analysis/timeline_js/{f}" in names
    shipped = {p.name for p in (REPO / "dynprof_nb/analysis/timeline_js").iterdir()}
    assert shipped <= set(wanted), "a front-end file the wheel does not ship (pyproject.toml)"
