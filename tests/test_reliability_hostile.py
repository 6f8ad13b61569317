"""Reliability matrix, hostile files (issue 20): each file of the generated corpus
(tests/data/hostile/make_corpus.py: databases, compressed and plain JSON, whitespace, nesting,
sparse files, symlinks) is loaded in its own worker process under an address-space cap, and
ends in a loaded window or a TraceFormatError that says what is wrong, in time and memory
bounded by ratios to a real trace loaded the same way in the same run, with nothing written
beside it. See docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from testdata import REPO, fixtures_dir

sys.path.insert(0, str(fixtures_dir() / "hostile"))
import make_corpus  # noqa: E402

pytestmark = pytest.mark.timeout(600)

AS_CAP = 4 << 30  # the worker's address space; a reader that needs more dies of MemoryError
REFERENCE = fixtures_dir() / "kineto" / "hta__df_index_resolver__df_index_resolver.json.gz"
TIME_RATIO = 3.0  # a hostile file may take at most this many times the reference load's CPU
RSS_RATIO = 3.0  # and this many times its peak RSS (a gzip at its 50x limit: ~2x)
LINEAR_SLACK = 2.5  # 4x the whitespace: at most 4 x this x the time (quadratic would be 16x)

WORKER = r"""
import json, os, resource, sys, time, warnings
cap = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
warnings.simplefilter("ignore")
import dynprof_nb
from dynprof_nb import TraceFormatError
path = sys.argv[1]
def cpu_s():
    return sum(getattr(resource.getrusage(who), f) for f in ("ru_utime", "ru_stime")
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
t, cpu0 = time.perf_counter(), cpu_s()
try:
    w = dynprof_nb.load_window(path) if os.path.isdir(path) else dynprof_nb.load_trace(path)
    out = {"outcome": "load", "rows": len(w.events), "steps": len(w.steps)}
except TraceFormatError as exc:
    out = {"outcome": "error", "message": str(exc)}
except BaseException as exc:
    out = {"outcome": "crash", "message": f"{type(exc).__name__}: {exc}"[:3000]}
out["wall_s"] = time.perf_counter() - t
# the CPU the load used (this process's threads and the workers it forked and waited for): a
# ratio of wall times taken minutes apart measures the machine's load as much as the parser
out["seconds"] = cpu_s() - cpu0
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def _load(path: Path, env: dict | None = None) -> dict:
    r = subprocess.run([sys.executable, "-c", WORKER, str(path), str(AS_CAP)],
                       capture_output=True, text=True, timeout=300, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    assert r.returncode == 0, f"{path}: the worker died ({r.returncode}): {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _tree(root: Path) -> dict:
    """Every entry under ``root`` with its size and mtime (symlinks as themselves)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, Path, dict]:
    root = tmp_path_factory.mktemp("hostile")
    cases, wal_ref = make_corpus.make(root)
    return cases, wal_ref, _load(REFERENCE)


def test_every_hostile_file_loads_or_is_refused_within_bounds(corpus: tuple):
    cases, _, ref = corpus
    assert ref["outcome"] == "load" and ref["rows"] > 100_000, ref
    results, bad = {}, []
    for case in cases:
        root = case.path if case.path.is_dir() else case.path.parent
        before = _tree(root)
        got = results[case.name] = _load(case.path, case.env)
        msg = got.get("message", "")
        if got["outcome"] == "crash":
            bad.append(f"{case.name}: not a TraceFormatError: {msg}")
        elif case.expect != "either" and got["outcome"] != case.expect:
            bad.append(f"{case.name}: expected {case.expect}, got {got}")
        elif got["outcome"] == "error":
            if case.match and not __import__("re").search(case.match, msg):
                bad.append(f"{case.name}: message does not say {case.match!r}: {msg}")
            if str(case.path) not in msg and str(case.path.resolve()) not in msg:
                bad.append(f"{case.name}: message does not name the file: {msg}")
            if len(msg) > 3000:
                bad.append(f"{case.name}: a {len(msg)}-character message")
        if case.secret and case.secret in msg:
            bad.append(f"{case.name}: quotes a file outside the window: {msg}")
        if got["seconds"] > TIME_RATIO * ref["seconds"]:
            bad.append(f"{case.name}: {got['seconds']:.2f} CPU s, over {TIME_RATIO}x the "
                       f"reference load's ({ref['seconds']:.2f} s)")
        if got["peak_mb"] > RSS_RATIO * ref["peak_mb"]:
            bad.append(f"{case.name}: peak RSS {got['peak_mb']:.0f} MiB, over {RSS_RATIO}x the "
                       f"reference load's {ref['peak_mb']:.0f} MiB")
        if _tree(root) != before:
            bad.append(f"{case.name}: something was written beside it: "
                       f"{sorted(set(_tree(root)) ^ set(before))}")
    assert not bad, "\n".join(bad)
    for where in ("lead", "between", "tail", "gap_before"):  # parsing linear in whitespace
        small, big = results[f"ws_{where}_8"], results[f"ws_{where}_32"]
        floor = ref["seconds"] / 50  # below this a load is timer noise
        assert big["seconds"] <= 4 * LINEAR_SLACK * max(small["seconds"], floor), (where, results)


def test_wal_database_reads_its_committed_content(corpus: tuple):
    """The -wal holds a committed delete of half the TASK rows: the load reads it (as the same
    database checkpointed does), where immutable=1 alone read the old rows and said nothing."""
    cases, wal_ref, _ = corpus
    wal = next(c for c in cases if c.name == "db_wal").path
    stale = sqlite3.connect(f"file:{wal}?immutable=1", uri=True)
    fresh = sqlite3.connect(f"file:{wal_ref}?immutable=1", uri=True)
    n_stale = stale.execute("SELECT count(*) FROM TASK").fetchone()[0]
    n_fresh = fresh.execute("SELECT count(*) FROM TASK").fetchone()[0]
    assert n_fresh < n_stale  # the case is what it says
    import dynprof_nb

    before = _tree(wal.parent)
    a, b = dynprof_nb.load_trace(wal), dynprof_nb.load_trace(wal_ref)
    pd.testing.assert_frame_equal(a.events, b.events)
    pd.testing.assert_frame_equal(a.kernels, b.kernels)
    assert _tree(wal.parent) == before  # no -shm, no checkpoint into the file
