"""The README gets a person from install to insight in one screen, and what it says is true:
the install names extras that exist and says the package comes from a clone, the notebook
lines call methods that exist, and the links lead to files. The reference it used to hold lives
in docs/ (the site ``make docs`` builds): its sample example runs as written, from any
directory, and its magic reference names every subcommand."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"


def code_blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(), re.S)


def test_readme_fits_one_screen_and_goes_from_install_to_insight():
    text = README.read_text()
    # one screen: a terminal's 60 rows, or a laptop's browser window without scrolling
    assert len(text.splitlines()) <= 60, "the README is the short path; the rest goes to docs/"
    order = ['pip install -e ".[notebook]"', "dynprof_nb.Monitor(", "monitor.step()",
             "from dynprof_nb import DynamicProfilerMonitor", "%dynprof attach",
             "job.start(", "w = job.load()", "w.summary()", "w.timeline()", "w.advise()",
             "make demo", "make test", "make docs"]
    places = [text.find(s) for s in order]
    assert -1 not in places, [s for s, i in zip(order, places, strict=True) if i < 0]
    assert places == sorted(places), "install, script, notebook, then working on it"
    assert "not on PyPI" in text


def test_what_the_readme_leaves_out_is_on_the_docs_home_page():
    """The lines that moved out of the README (one-line start and wait, the magic's help, the
    form, a sample window, SQL, every how-to page) are on docs/index.md, the page its
    documentation line opens with the how-to pages."""
    home = (DOCS / "index.md").read_text()
    for moved in ("%dynprof start +10 +19 --wait", "%dynprof?", "%dynprof panel",
                  'samples.load("kineto_gpu")', "w.sql(", "open `site/index.html`"):
        assert moved in home, moved
    assert "](docs/index.md)" in README.read_text()
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    how_to = set(re.findall(r"\]\((\w[\w-]*\.md)\)", home.split("## How-to pages")[1]))
    reference = {"definitions.md", "architecture.md", "internals.md", "reliability.md",
                 "testing.md", "concepts.md"}  # linked above the how-to list, or the site's menu
    assert pages - reference <= how_to, sorted(pages - reference - how_to)


def test_readme_install_names_extras_pyproject_declares():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    named = re.findall(r'pip install -e "\.\[([^\]]*)\]"', README.read_text())
    assert len(named) >= 2  # the notebook install, and the one beside MindSpore
    for extra in named:
        assert set(extra.split(",")) <= set(extras), extra


def test_readme_notebook_lines_call_what_exists():
    """Every ``job.X`` and ``w.X`` of the README is a method of the handle / window it names,
    and ``%dynprof attach`` leaves ``job`` (tests/ui/test_magics.py types it)."""
    from dynprof_nb.control.job import Job
    from dynprof_nb.traces.window import TraceWindow

    (notebook,) = [b for b in code_blocks(README, "python") if "%dynprof attach" in b]
    for owner, cls in (("job", Job), ("w", TraceWindow)):
        names = set(re.findall(rf"\b{owner}\.(\w+)\(", notebook))
        assert names and all(hasattr(cls, n) for n in names), (owner, names)


def test_sample_windows_example_runs_anywhere(tmp_path):
    blocks = code_blocks(DOCS / "getting-started" / "traces.md", "python")
    (example,) = [b for b in blocks if "from dynprof_nb import samples" in b]
    code = example + "\nprint('ok', len(gpu.communication), len(npu.kernels))\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "ok 10 191"


def test_every_relative_link_in_the_docs_names_a_file_in_the_repository():
    """Screenshots and cross-references in README.md and docs/ are files of this clone (a
    broken image on the project page is the first thing a new user sees; mkdocs --strict checks
    the site's own links, this the README's too)."""
    broken = []
    for doc in [README, *sorted(DOCS.rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s#]+)", doc.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)} -> {target}")
    assert broken == []


def test_the_magic_reference_lists_every_subcommand():
    """The docs' "`%dynprof?` documents every subcommand (...)" names all of them: a new user
    reading it should not miss `cache`, `stacks` or `trigger`."""
    from dynprof_nb.ui.magics import HANDLERS

    text = " ".join((DOCS / "notebook.md").read_text().split())
    (listed,) = re.findall(r"`%dynprof\?` documents every subcommand \(`([^`]*)`\)", text)
    assert set(listed.replace(" ", "").split(",")) == set(HANDLERS)
