"""Binder for real: a fresh environment built from ``binder/requirements.txt`` exactly as
repo2docker builds it (``pip install -r binder/requirements.txt`` from the repository root, the
package installed, not editable) runs every notebook under nbval, from a copy of the repository
with nothing beside it. And the README's badge points at the repository pyproject names.

The venv reuses pip's cache (and this machine's pip config: its local torch CPU wheel), so a
second run installs without downloading; about 2-4 minutes on 2 cores, most of it the notebooks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# what a clone holds: everything but local state (a clone has none of these)
NOT_IN_A_CLONE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                        "__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache",
                                        ".ipynb_checkpoints", "dyn_profile_data", "artifacts",
                                        "out")


def test_readme_badge_points_at_the_repository_pyproject_names():
    urls = re.search(r"^\[project\.urls\]\n(.*?)^\[", (REPO / "pyproject.toml").read_text(),
                     re.M | re.S).group(1)  # (tomllib is 3.11+; the package supports 3.10)
    url = re.search(r'^Repository = "(.*)"$', urls, re.M).group(1)
    owner_name = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+)", url).group(1)
    readme = (REPO / "README.md").read_text()
    badges = re.findall(r"https://mybinder\.org/v2/gh/([\w.-]+/[\w.-]+)/(\w+)\?labpath=([\w%.]+)",
                        readme)
    assert badges, "no Binder badge in README.md"
    for repo, _branch, labpath in badges:
        assert repo == owner_name, f"README's Binder badge points at {repo}, pyproject at {url}"
        assert (REPO / labpath.replace("%2F", "/")).is_file(), labpath
    assert "OWNER" not in readme


def test_binder_requirements_install_the_package_and_torch():
    lines = [ln.split("#")[0].strip() for ln in
             (REPO / "binder" / "requirements.txt").read_text().splitlines()]
    reqs = [ln for ln in lines if ln]
    assert "." in reqs  # the repository itself, with its dependencies and sample data
    assert any(r.startswith("torch") for r in reqs)  # notebooks/pytorch.ipynb
    assert (REPO / "binder" / "runtime.txt").read_text().strip() == "python-3.11"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_fresh_binder_environment_runs_every_notebook(tmp_path):
    clone = tmp_path / "dynprof_nb"
    shutil.copytree(REPO, clone, ignore=NOT_IN_A_CLONE, symlinks=False)
    assert not (tmp_path / "shared").exists()
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["HOME"] = os.environ.get("HOME", str(tmp_path))  # pip's cache lives there

    def run(*cmd: str, timeout: float, cwd: Path = clone) -> subprocess.CompletedProcess:
        out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                             timeout=timeout)
        assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stdout[-4000:]}\n" \
                                    f"{out.stderr[-4000:]}"
        return out

    # what repo2docker does with binder/requirements.txt, from the repository root
    run(py, "-m", "pip", "install", "-q", "-r", "binder/requirements.txt", timeout=1200)
    where = run(py, "-c", "import dynprof_nb, torch; print(dynprof_nb.__file__)",
                timeout=120, cwd=tmp_path).stdout.strip()  # not the clone's source tree
    assert where.startswith(str(venv)), f"not the installed package: {where}"
    # the Jupyter side Binder's image brings (nbval runs the notebooks through a kernel)
    run(py, "-m", "pip", "install", "-q", "nbval", "pytest", timeout=600)
    result = run(py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                 "--nbval-current-env", "--nbval-sanitize-with", "notebooks/sanitize.cfg",
                 "notebooks", timeout=1200)
    notebooks = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 4 and " passed" in result.stdout and "failed" not in result.stdout
