"""Hostile Flight Recorder dumps (issue 42): each case of tests/data/hostile/flight_recorder
is read in its own child process under an address-space limit and a deadline, and ends in
the reader's own TraceFormatError (naming the file and the field) or in the right answer.

One harness process imports the reader once, then forks a child per case; the child caps its
address space at what it holds then plus the case's build budget plus :data:`SLACK`, reads
(``read_dumps``, or ``load`` with the frame, groups and analysis shown as text and HTML) and
writes what happened to a pipe; the harness waits on that pipe for at most
:data:`DEADLINE_S` and kills a child that has not answered.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dynprof_nb.flight_recorder.reader import DEFAULT_MAX_BUILD, read_dump

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "hostile" / "flight_recorder"
sys.path.insert(0, str(CORPUS))
import make_fr_corpus  # noqa: E402

DEADLINE_S = 60  # per dump, on a loaded 2-core machine (the slowest: ~5 s of CPU)
SLACK = 512 << 20  # address space beyond the build budget: the file's bytes, Python's arenas

pytestmark = pytest.mark.timeout(1200)

HARNESS = r"""
import json, os, resource, select, signal, sys, time, warnings
warnings.simplefilter("ignore")
from dynprof_nb.traces.errors import TraceFormatError
from dynprof_nb.flight_recorder import analyse, load
from dynprof_nb.flight_recorder.reader import read_dumps

def vm(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) << 10

def read(path, mode):
    if mode == "read":
        dumps = read_dumps([path])
        return {"entries": sum(len(d.entries) for d in dumps), "ranks": [d.rank for d in dumps],
                "groups": {n: len(g["ranks"]) for d in dumps for n, g in d.pg_config.items()}}
    fr = load([path])
    a = analyse(fr)
    shown = repr(fr) + fr.to_html() + repr(fr.pg_config) + repr(fr.pg_status) + a.verdict
    return {"entries": len(fr), "ranks": fr.ranks, "shown": len(shown),
            "groups": {g.pg_id: len(g.ranks) for g in fr.pg_config.itertuples()}}

def child(case, fd):
    os.environ.update(case["env"])
    start_rss = vm("VmRSS")
    cap = vm("VmSize") + case["extra"]
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    t = time.perf_counter()
    try:
        out = {"outcome": "load", **read(case["path"], case["mode"])}
    except TraceFormatError as exc:
        out = {"outcome": "error", "message": str(exc)}
    except BaseException as exc:
        out = {"outcome": "crash", "message": f"{type(exc).__name__}: {exc}"[:3000]}
    out["seconds"] = time.perf_counter() - t
    out["grew_mb"] = (vm("VmHWM") - start_rss) / 2**20
    os.write(fd, json.dumps(out).encode())
    os._exit(0)

results = {}
for case in json.loads(sys.stdin.read()):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(case, w)
    os.close(w)
    ready, _, _ = select.select([r], [], [], case["deadline"])
    if not ready:
        os.kill(pid, signal.SIGKILL)
        results[case["name"]] = {"outcome": "timeout"}
    else:
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
        results[case["name"]] = json.loads(data) if data else {"outcome": "died"}
    os.close(r)
    os.waitpid(pid, 0)
print(json.dumps(results))
"""


def _budget(case: make_fr_corpus.Case) -> int:
    raw = case.env.get("DYNPROF_NB_FR_MAX_BUILD", "")
    return int(raw[:-1]) << 20 if raw.endswith("M") else DEFAULT_MAX_BUILD


def _run(cases: list[make_fr_corpus.Case], paths: dict[str, Path]) -> dict[str, dict]:
    spec = [{"name": c.name, "path": str(paths[c.name]), "mode": c.mode, "env": c.env,
             "extra": _budget(c) + SLACK, "deadline": DEADLINE_S} for c in cases]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", HARNESS], input=json.dumps(spec), text=True,
                       capture_output=True, env=env, cwd=REPO,
                       timeout=DEADLINE_S * len(cases) + 120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check(cases: list[make_fr_corpus.Case], paths: dict[str, Path]) -> dict[str, dict]:
    results = _run(cases, paths)
    bad = []
    for c in cases:
        got = results[c.name]
        msg = got.get("message", "")
        if got["outcome"] != c.expect:
            bad.append(f"{c.name}: expected {c.expect}, got {got}")
        elif c.expect == "error":
            if not re.search(c.match, msg):
                bad.append(f"{c.name}: the message does not say {c.match!r}: {msg}")
            if str(paths[c.name]) not in msg:
                bad.append(f"{c.name}: the message does not name the file: {msg}")
            if c.where and c.where not in msg:
                bad.append(f"{c.name}: the message does not name {c.where}: {msg}")
            if len(msg) > 3000:
                bad.append(f"{c.name}: a {len(msg)}-character message")
    assert not bad, "\n".join(bad)
    return results


def test_the_kept_small_dumps_are_what_the_generator_writes():
    for c in make_fr_corpus.small_cases():
        assert len(c.data) <= make_fr_corpus.SMALL, c.name
        assert (CORPUS / c.name).read_bytes() == c.data, f"{c.name}: regenerate the corpus"


def test_small_hostile_dumps_are_refused_or_read_within_time_and_memory():
    cases = make_fr_corpus.small_cases()
    results = _check(cases, {c.name: CORPUS / c.name for c in cases})
    assert results["long_binput_4g"]["ranks"] == [0]
    shared = results["ranks_shared_100"]
    assert shared["ranks"] == [100] and shared["groups"] == {str(i): 4000 for i in range(100)}


def test_large_hostile_dumps_are_refused_or_read_within_time_and_memory(tmp_path):
    cases = make_fr_corpus.large_cases()
    paths = make_fr_corpus.write(tmp_path, cases)
    results = _check(cases, paths)
    assert results["shared_ranks_500"]["groups"] == {str(i): 1 for i in range(500)}
    assert len(results["groups_3000_missing"]["groups"]) == 3000
    # the 4.9 GB: now refused once what is built passes the default budget
    assert results["empty_sets_20mb"]["grew_mb"] < (DEFAULT_MAX_BUILD + SLACK) / 2**20


def test_a_rank_list_shared_by_many_groups_is_parsed_once(tmp_path):
    ranks = "[" + ", ".join(map(str, range(1000))) + "]"
    value = {"entries": [], "pg_config": {str(i): {"name": str(i), "desc": "g", "ranks": ranks}
                                          for i in range(50)}}
    (tmp_path / "_dump_7").write_bytes(pickle.dumps(value))
    groups = read_dump(tmp_path / "_dump_7").pg_config
    lists = {id(g["ranks"]) for g in groups.values()}
    assert len(groups) == 50 and len(lists) == 1  # one parse, one list, for all 50
    assert groups["3"]["ranks"] == list(range(1000))


def test_damaged_real_dumps_load_or_raise_the_readers_error(tmp_path):
    """Real dumps (pickle and JSON) with bytes changed, cut, repeated or replaced by opcodes:
    each is read, shown and analysed, or refused with a TraceFormatError; nothing else."""
    import random

    from dynprof_nb.flight_recorder import analyse, load
    from dynprof_nb.traces.errors import TraceFormatError

    real = REPO / "tests" / "data" / "flight_recorder" / "gloo_hang"
    sources = [p.read_bytes() for p in sorted(real.glob("_dump_*")) + sorted(real.glob("json/*"))]
    rng = random.Random(42)
    outcomes, crashes = {"read": 0, "refused": 0}, []
    for i in range(300):
        data = bytearray(rng.choice(sources))
        for _ in range(rng.randint(1, 4)):
            at, how = rng.randrange(len(data)), rng.random()
            if how < 0.4:
                data[at] = rng.randrange(256)
            elif how < 0.6:
                del data[at : at + rng.randint(1, 20)]
            elif how < 0.8:
                data[at:at] = data[rng.randrange(len(data)) :][: rng.randint(1, 30)]
            else:  # an opcode that shares, nests or fills
                data[at : at + 1] = bytes([rng.choice(b"(]}ehqa0129\x94\x8f\x85\x86")])
        path = tmp_path / f"_dump_{i % 4}"
        path.write_bytes(bytes(data))
        try:
            fr = load([path])
            repr(fr), fr.to_html(), analyse(fr).verdict
            outcomes["read"] += 1
        except TraceFormatError as exc:
            assert str(path) in str(exc)
            outcomes["refused"] += 1
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            crashes.append(f"{type(exc).__name__}: {exc} ({bytes(data)[:60]!r}...)")
    assert not crashes, "\n".join(crashes[:10])
    assert outcomes["read"] > 10 and outcomes["refused"] > 100, outcomes
