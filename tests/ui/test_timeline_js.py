"""The timeline front-end's own tests (tests/ui/timeline_js/*.test.mjs), run by Node's built-in
test runner (no npm: ``make test`` installs Debian's nodejs where there is no ``node``): its
layout, hit-testing, search stepping, summary levels and decoding, partly on a real window's
traits written here. And the one module anywidget loads (:func:`timeline_view.front_end`)
parses and exports ``render``."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from dynprof_nb import samples
from dynprof_nb.analysis import timeline_view

HERE = Path(__file__).resolve().parent / "timeline_js"
NODE = shutil.which("node")


@pytest.fixture(scope="module")
def node() -> str:
    assert NODE, "no `node`: make test installs Debian's nodejs (the Makefile's /usr/bin/node)"
    out = subprocess.run([NODE, "--version"], capture_output=True, text=True, check=True)
    major = int(re.match(r"v(\d+)", out.stdout).group(1))
    assert major >= 18, f"node {out.stdout.strip()}: node --test needs Node 18 or later"
    return NODE


@pytest.fixture(scope="module")
def real_traits(tmp_path_factory) -> Path:
    """A real window's traits (the kineto_gpu sample: 6 lanes, ~4,800 events, all held), and
    the events the kernel's index finds in a few ranges, as JSON for real.test.mjs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        view = samples.load("kineto_gpu").plot_timeline(interactive=True)
    lo, hi = view.full
    rng = np.random.default_rng(45)
    ranges = [[lo, hi]]
    for width in (1e-3, 1e-2, 0.1):
        a = float(rng.uniform(lo, hi - width * (hi - lo)))
        ranges.append([a, a + width * (hi - lo)])
    out = tmp_path_factory.mktemp("timeline_js") / "kineto_gpu.json"
    found = [[a, b, sorted(int(i) for i in view.index.visible(a, b))] for a, b in ranges]
    assert all(ids for _, _, ids in found), "every range holds events"
    data = {
        "summary": base64.b64encode(view.summary).decode("ascii"),
        "summary_info": view.summary_info,
        "rows": view.rows,
        "row_height": view.row_height,
        "lanes": view.lanes,
        "full": view.full,
        "ranges": found,
    }
    out.write_text(json.dumps(data))
    return out


def test_the_front_ends_unit_tests_pass_under_node(node, real_traits):
    files = sorted(str(p) for p in HERE.glob("*.test.mjs"))
    assert len(files) >= 5
    env = {"PATH": "/usr/bin:/bin", "DYNPROF_TIMELINE_FIXTURE": str(real_traits)}
    out = subprocess.run([node, "--test", "--test-reporter=tap", *files], capture_output=True,
                         text=True, timeout=120, env=env, cwd=HERE)
    report = out.stdout + out.stderr
    assert out.returncode == 0, report
    counts = dict(re.findall(r"^# (tests|pass|fail|skipped|todo|cancelled) (\d+)$", report, re.M))
    assert int(counts["tests"]) >= 30, report
    assert counts["pass"] == counts["tests"], report
    assert counts["fail"] == counts["skipped"] == counts["todo"] == counts["cancelled"] == "0"


def test_the_joined_module_parses_and_exports_render(node, tmp_path):
    bundle = tmp_path / "timeline.mjs"
    bundle.write_text(timeline_view.front_end(), encoding="utf-8")
    # a name declared in two modules, or an import left in, fails the parse
    subprocess.run([node, "--check", str(bundle)], check=True, timeout=60)
    code = f"import('{bundle.as_uri()}').then((m) => console.log(typeof m.default.render))"
    out = subprocess.run([node, "-e", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "function", out.stderr


def test_the_join_refuses_an_import_of_a_name_not_exported(tmp_path, monkeypatch):
    for name in timeline_view.FRONT_END_MODULES:
        shutil.copy(timeline_view.FRONT_END / f"{name}.mjs", tmp_path)
    text = (tmp_path / "input.mjs").read_text()
    (tmp_path / "input.mjs").write_text(
        text.replace('import { arrowEnds } from "./draw.mjs";',
                     'import { arrowEnds, nothing } from "./draw.mjs";')
    )
    monkeypatch.setattr(timeline_view, "FRONT_END", tmp_path)
    with pytest.raises(ImportError, match=r"input.mjs imports \['arrowEnds', 'nothing'\]"):
        timeline_view.front_end()
