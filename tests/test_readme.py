"""The README's sample-window example runs as written, from any directory (it reads only the
package's own sample data)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_samples_example_runs_anywhere(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    (example,) = [b for b in blocks if "from dynprof_nb import samples" in b]
    code = example + "\nprint('ok', len(gpu.communication), len(npu.kernels))\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "ok 10 191"


def test_every_relative_link_in_the_docs_names_a_file_in_the_repository():
    """Screenshots and cross-references in README.md and docs/ are files of this clone (a
    broken image on the project page is the first thing a new user sees)."""
    broken = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s#]+)", doc.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)} -> {target}")
    assert broken == []


def test_readme_lists_every_magic_subcommand():
    """The README's "`%dynprof?` documents every subcommand (...)" names all of them: a new
    user reading it should not miss `cache`, `stacks` or `trigger`."""
    from dynprof_nb.ui.magics import HANDLERS

    text = " ".join((REPO / "README.md").read_text().split())
    (listed,) = re.findall(r"`%dynprof\?` documents every subcommand \(`([^`]*)`\)", text)
    assert set(listed.replace(" ", "").split(",")) == set(HANDLERS)
