"""Reliability matrix, hostile names (issue 42): each trace of tests/data/hostile/make_names.py
is loaded, summarised, advised on and drawn as an interactive timeline in its own worker
process under an address-space cap, and everything shown of it is text: no markup of its own
in any HTML, no raw control or bidirectional character in anything the timeline sends, no two
lanes alike. Its time and peak RSS are bounded by ratios to its benign twin (the same shape
with plain names) run the same way in the same test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testdata import REPO, fixtures_dir

sys.path.insert(0, str(fixtures_dir() / "hostile"))
import make_names  # noqa: E402

pytestmark = pytest.mark.timeout(600)

AS_CAP = 3 << 30  # the worker's address space: a renderer that needs more dies of MemoryError
TIME_RATIO = 3.0  # a hostile trace may take at most this many times its benign twin's CPU
RSS_RATIO = 1.5  # and this much of its peak RSS
FLOOR_S = 1.0  # below this a difference is interpreter noise

WORKER = r"""
import json, re, resource, sys, time, warnings
cap = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
warnings.simplefilter("ignore")
import dynprof_nb
from dynprof_nb import safetext
from dynprof_nb.analysis.timeline_view import TimelineView
hidden = re.compile(f"[{safetext._CONTROL}{safetext._BIDI}]")
def strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from strings(k); yield from strings(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from strings(x)
def cpu_s():
    return sum(getattr(resource.getrusage(who), f) for f in ("ru_utime", "ru_stime")
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
t, cpu0 = time.perf_counter(), cpu_s()
out = {"bad": []}
try:
    w = dynprof_nb.load_trace(sys.argv[1])
    html = w.summary()._repr_html_() + w.advise()._repr_html_()
    view = w.plot_timeline(interactive=True)
    view.selected = 1
    view.query = "n1"
    view.span = list(view.full)
    traits = TimelineView.class_own_traits(sync=lambda v: bool(v))
    sent = [s for n in traits if n != "query" for s in strings(getattr(view, n))
            if not s.startswith("n1")]
    out["bad"] += [f"raw {m!r} in the HTML" for m in ("<img", "<script", "<svg", "<iframe",
                                                       "\u202e") if m in html]
    out["bad"] += [f"timeline sends {s[:80]!r}" for s in sent if hidden.search(s)][:5]
    labels = [lane["label"] for lane in view.lanes]
    if len(set(labels)) != len(labels):
        out["bad"].append(f"lanes alike: {labels}")
    out["outcome"] = "shown"
except BaseException as exc:
    out["outcome"] = f"{type(exc).__name__}: {exc}"[:2000]
out["wall_s"] = time.perf_counter() - t
# the CPU the load used (this process's threads and the workers it forked and waited for): a
# ratio of wall times taken minutes apart measures the machine's load as much as the parser
out["seconds"] = cpu_s() - cpu0
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def _show(path: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", WORKER, str(path), str(AS_CAP)],
                       capture_output=True, text=True, timeout=300, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, f"{path}: the worker died ({r.returncode}): {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["names_hostile", "names_many"])
def test_hostile_names_are_shown_as_text_within_bounds(name: str, tmp_path: Path):
    cases = {c.name: c for c in make_names.make(tmp_path)}
    benign = _show(cases[name.replace("hostile", "benign") if "hostile" in name
                         else f"{name}_benign"].path)
    got = _show(cases[name].path)
    assert benign["outcome"] == "shown", benign
    assert got["outcome"] == "shown", got
    assert got["bad"] == [], got["bad"]
    assert got["seconds"] <= TIME_RATIO * max(benign["seconds"], FLOOR_S), (got, benign)
    assert got["peak_mb"] <= RSS_RATIO * benign["peak_mb"], (got, benign)
