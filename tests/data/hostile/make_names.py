"""Hostile names and values (issue 42): script in every string field, bidirectional overrides
and control characters in event and process names, process names that read the same once cut.

What a notebook shows of them must be text: no markup of theirs in any HTML the package
renders, no raw control or bidirectional character in a timeline label or tooltip, and no two
lanes that read the same. ``python tests/data/hostile/make_names.py OUT`` writes them; tests
import :func:`make` (tests/test_reliability_hostile_names.py, tests/ui/test_hostile_html.py).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

# each sets window.__pwned* if a page ever runs it
SCRIPTS = (
    '<img src=x onerror="window.__pwned=1">',
    "<script>window.__pwned2=1</script>",
    "'\"><svg onload=window.__pwned3=1>",
    "<iframe srcdoc=\"<script>parent.__pwned4=1</script>\"></iframe>",
)
# what a name must not hide: right-to-left override, isolates, marks, C0 and C1 controls
HIDDEN = ("\u202e", "\u2066", "\u2069", "\u200f", "\u200e", "\u202a", "\x1b", "\x07", "\x85",
          "\x9b", "\u2028")
BIDI_NAME = "aten::add\u202egnp.exe"  # reads as "aten::addexe.png" where drawn as it is
PREFIX = "python3 /very/long/shared/path/to/the/same/launcher/"  # 52 characters alike


def payload(i: int) -> str:
    """The i-th hostile string: a script, with a hidden character in it."""
    return f"{SCRIPTS[i % len(SCRIPTS)]}{HIDDEN[i % len(HIDDEN)]}n{i}"


@dataclass
class Case:
    name: str
    path: Path
    kind: str  # "trace" (load_trace) or "config" (ProfilerConfig.load)
    events: int = 0


def trace(out: Path, name: str = "names_hostile", steps: int = 4, per_step: int = 24,
          processes: int = 3, benign: bool = False) -> Case:
    """A Kineto-like trace (PyTorch's categories, so every analysis runs) whose every string
    is hostile: event names, categories, args keys and values, process and thread names (the
    processes alike for their first 52 characters, different in the middle, then alike
    again), communication group names and descriptions. ``benign``: the same shape with plain
    names (the reference a hostile file's time and memory are bounded by)."""
    # the benign twin: plain names as long as the hostile ones (the same bytes to read)
    p = (lambda i: f"name{i}".ljust(len(payload(i)), "x")) if benign else payload
    ev: list[dict] = []
    base = 1_700_000_000_000_000
    for k in range(processes):
        pid = 100 + k
        proc = f"{PREFIX}{p(k)}{k}/same/tail/of/the/name" if k else \
            f"{PREFIX}main/same/tail/of/the/name"
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                   "args": {"name": proc}})
        for t in (1, 2):
            ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": t,
                       "args": {"name": f"thread {p(t)} of a long shared thread name"}})
    i = 0
    for s in range(1, steps + 1):
        t0 = base + s * 10_000
        for k in range(processes):
            pid = 100 + k
            ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}",
                       "pid": pid, "tid": 1, "ts": t0, "dur": 9_000})
            for j in range(per_step):
                i += 1
                nm = (BIDI_NAME if not benign else "aten::add_gnp.exe") if j == 0 else p(i)
                ev.append({"ph": "X", "cat": "cpu_op" if j % 3 else p(i), "name": nm,
                           "pid": pid, "tid": 1 + j % 2,
                           "ts": t0 + 10 + j * 300, "dur": 250,
                           "args": {p(i): p(i + 1), "External id": i}})
            ev.append({"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce" + p(s),
                       "pid": pid, "tid": 7, "ts": t0 + 8_000,
                       "dur": 500, "args": {"Process Group Name": p(k),
                                            "Process Group Description": p(k + 1),
                                            "Process Group Ranks": "[0]"}})
    path = out / f"{name}.json"
    path.write_text(json.dumps({"traceEvents": ev, "schemaVersion": 1,
                                "deviceProperties": [], "displayTimeUnit": "ms"}))
    return Case(name, path, "trace", len(ev))


def config(out: Path) -> Case:
    """A profiler_config.json whose every string value is a script (the issue's
    ``prof_path``), and a list of them."""
    d = out / "config_hostile"
    d.mkdir(parents=True, exist_ok=True)
    path = d / "profiler_config.json"
    path.write_text(json.dumps({"prof_path": "<img src=x onerror=window.__pwned5=1>",
                                "start_step": 2, "stop_step": 3,
                                "activities": ["CPU"]}))
    return Case("config_hostile", path, "config")


def make(out: Path) -> list[Case]:
    """Write the cases into ``out``: the hostile trace and its benign twin, a many-names trace
    (80,000 distinct hostile names) and its twin, and the config."""
    out.mkdir(parents=True, exist_ok=True)
    return [trace(out), trace(out, "names_benign", benign=True),
            trace(out, "names_many", steps=50, per_step=400, processes=4),
            trace(out, "names_many_benign", steps=50, per_step=400, processes=4, benign=True),
            config(out)]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_names.py OUT_DIR")
    for c in make(Path(sys.argv[1])):
        print(f"{c.name:22s} {c.kind:6s} {c.path}")
