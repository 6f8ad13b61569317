"""Ascend trace_view.json loading speed and memory vs naive json + pandas and the decode floor.

Builds benchmarks/out/ascend_trace_view.json: a real torch_npu rank's trace_view.json
(tests/data/ascend_real/text_level0/rank0_ascend_pt/..., a bare array with "ts" as strings of
microseconds with nanosecond digits) repeated with shifted timestamps until it is about --mb MB
(85 MB: 47 copies, 394k events). Then, each in a fresh subprocess so peak RSS is the loader's own,
interleaved and best of --repeat:
  - ours : ``dynprof_nb.load_trace(path).events``
  - naive: ``json.load`` + ``pd.DataFrame`` (what a user would write)
  - floor: a typed ``msgspec`` decode of the same bytes (the fields of the events frame)
and checks that every complete event's ts_ns equals the exact value of its text. Then windows of
2 and 4 such ranks (``rankN_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json``, hard links to the
same file): ``load_window(root).events`` against one rank's ``load_trace`` in the same run, and
against N separate one-rank processes started together (the floor: what N ranks cost on the
cores this shared machine has free), after a line calibrating how many cores are free.

Then the same three loaders on two files made the way a file nobody tuned for looks (the first
one is the very rank repeated; these mix the real files' event kinds in their own proportions):
  - ``ascend_with_stack``: the events of both real torch_npu ranks (text_level0 rank0 and rank1:
    python functions, cpu ops, enqueue/dequeue, device tasks, flows, counters) with a real
    ``Call stack`` (many frames joined by ``;\r\n``, taken round-robin from the ones the ranks
    recorded) on every ``cpu_op`` event, as ``with_stack=True`` writes them, and the metadata
    written once, not once per copy;
  - ``mindspore``: MindSpore 2.7.0's own trace_view.json (tests/data/mindspore_cpu), where
    ``ts`` *and* ``dur`` are decimal strings (``"dur": "5.919"``), metadata written once.
Each is scaled to --mb by repeating its events with shifted times. The floor's ``dur`` accepts a
string as well as a number (a typed decode of what the file holds).

Usage: .venv/bin/python benchmarks/load_ascend.py [--repeat 3] [--mb 85] [--ranks 2 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

# the readers are timed here, not the frame cache (benchmarks/cache_reload.py times that):
# this process and each one it starts read the trace files
os.environ["DYNPROF_NB_CACHE"] = "off"

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
DATA = HERE.parent / "tests" / "data"
RANK = DATA / "ascend_real" / "text_level0" / "rank{}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
SRC = RANK.parent.parent / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
MINDSPORE = next((DATA / "mindspore_cpu").glob("*/*/ASCEND_PROFILER_OUTPUT/trace_view.json"))

PRELUDE = r"""
import json, resource, sys, time
def done(t0, c0, **kw):
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    kw.update(seconds=time.perf_counter() - t0, cpu=time.process_time() - c0,
              peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              children_cpu=kids.ru_utime + kids.ru_stime, children_peak_mb=kids.ru_maxrss / 1024)
    print(json.dumps(kw))
"""

OURS = PRELUDE + r"""
from dynprof_nb import load_trace
t0, c0 = time.perf_counter(), time.process_time()
ev = load_trace(sys.argv[1]).events
dt = (time.perf_counter() - t0, time.process_time() - c0)
x = ev[ev["ph"] == "X"]
exact = None
if len(sys.argv) > 2:  # exactness: every complete event's ts_ns against its text
    raw = json.load(open(sys.argv[1]))
    want = []
    for e in raw:
        if e.get("ph") == "X":
            w, _, f = e["ts"].partition(".")
            want.append(int(w) * 1000 + int((f + "000")[:3]))
    exact = str(x["ts_ns"].dtype) == "int64" and x["ts_ns"].tolist() == want
print(json.dumps({"seconds": dt[0], "cpu": dt[1], "rows": len(ev), "x": len(x), "exact": exact,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

NAIVE = PRELUDE + r"""
import pandas as pd
t0, c0 = time.perf_counter(), time.process_time()
with open(sys.argv[1]) as fh:
    df = pd.DataFrame(json.load(fh))
done(t0, c0, rows=len(df))
"""

FLOOR = PRELUDE + r"""
import msgspec
class Event(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: str | float | None = None
    dur: float | str | None = None
t0, c0 = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as fh:
    events = msgspec.json.decode(fh.read(), type=list[Event])
done(t0, c0, rows=len(events))
"""

GANG = PRELUDE + r"""
from dynprof_nb import load_trace
print("ready", flush=True)
sys.stdin.readline()  # every member starts its parse together
t0, c0 = time.perf_counter(), time.process_time()
ev = load_trace(sys.argv[1]).events
done(t0, c0, rows=len(ev))
"""

WINDOW = PRELUDE + r"""
from dynprof_nb import load_window
t0, c0 = time.perf_counter(), time.process_time()
ev = load_window(sys.argv[1]).events
done(t0, c0, rows=len(ev), ranks=int(ev["rank"].nunique()))
"""


CALIBRATE = r"""
import json, time
from concurrent.futures import ProcessPoolExecutor
def busy(_):
    c = time.process_time()
    while time.process_time() - c < 0.5:
        pass
t = time.perf_counter()
with ProcessPoolExecutor(2) as pool:
    list(pool.map(busy, range(2)))
print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def ns(text: str) -> int:
    whole, _, frac = text.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def build(mb: float) -> Path:
    """The rank's events repeated, each copy shifted past the previous one, until >= mb MB."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"ascend_trace_view_{mb:g}mb.json"
    if path.exists():
        return path
    events = json.loads(SRC.read_bytes())
    stamps = [ns(e["ts"]) for e in events if isinstance(e.get("ts"), str)]
    span = max(stamps) - min(stamps) + 1000
    copies = max(1, round(mb * 1e6 / SRC.stat().st_size))
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        fh.write("[")
        for k in range(copies):
            for i, e in enumerate(events):
                if isinstance(e.get("ts"), str):
                    v = ns(e["ts"]) + k * span
                    e = {**e, "ts": f"{v // 1000}.{v % 1000:03d}"}
                fh.write(("" if k == 0 and i == 0 else ", ") + json.dumps(e))
        fh.write("]")
    tmp.replace(path)
    return path


def _ascend_with_stack() -> list[dict]:
    """Both real ranks' events, a real call stack on every cpu_op (see the module docstring)."""
    events = [e for r in (0, 1) for e in json.loads((Path(str(RANK).format(r)) / "trace_view.json")
                                                    .read_bytes())]
    stacks = [e["args"]["Call stack"] for e in events
              if isinstance(e.get("args"), dict) and "Call stack" in e["args"]]
    out = []
    for e in events:
        if e.get("cat") == "cpu_op" and "Call stack" not in e.get("args", {}):
            e = {**e, "args": {**e["args"], "Call stack": stacks[len(out) % len(stacks)]}}
        out.append(e)
    return out


REALISTIC = {
    "ascend_with_stack": _ascend_with_stack,
    "mindspore": lambda: json.loads(MINDSPORE.read_bytes()),
}


def build_realistic(kind: str, mb: float) -> Path:
    """REALISTIC[kind]'s events repeated with shifted times until about mb MB; metadata once."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{kind}_trace_view_{mb:g}mb.json"
    if path.exists():
        return path
    events = REALISTIC[kind]()
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    stamps = [ns(e["ts"]) for e in timed if isinstance(e.get("ts"), str)]
    span = max(stamps) - min(stamps) + 1000
    texts = [json.dumps(e) for e in timed]
    copies = max(1, round(mb * 1e6 / sum(len(t) + 2 for t in texts)))
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        fh.write("[" + "".join(json.dumps(e) + ", " for e in meta))
        for k in range(copies):
            for i, e in enumerate(timed):
                if isinstance(e.get("ts"), str):
                    v = ns(e["ts"]) + k * span
                    e = {**e, "ts": f"{v // 1000}.{v % 1000:03d}"}
                fh.write(("" if k == 0 and i == 0 else ", ") + json.dumps(e))
        fh.write("]")
    tmp.replace(path)
    return path


def window(path: Path, ranks: int) -> Path:
    root = OUT / f"ascend_window_{ranks}ranks"
    for r in range(ranks):
        d = root / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        d.mkdir(parents=True, exist_ok=True)
        f = d / "trace_view.json"
        if not f.exists():
            os.link(path, f)
    return root


def run(code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       cwd=HERE.parent, timeout=1200, env=env)
    if r.returncode != 0:
        raise SystemExit(f"benchmark subprocess failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def gang(path: Path, n: int) -> dict:
    """n separate processes loading one rank each, started together: what n ranks on this
    machine's free cores cost with no window around them (the floor for a window of n)."""
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    procs = [subprocess.Popen([sys.executable, "-c", GANG, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=HERE.parent, env=env)
             for _ in range(n)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [json.loads(p.communicate(timeout=1200)[0].strip().splitlines()[-1])
                for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return {"seconds": max(o["seconds"] for o in outs), "cpu": sum(o["cpu"] for o in outs),
            "peak_mb": max(o["peak_mb"] for o in outs)}


def best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["seconds"])


def line(label: str, runs: list[dict], size_mb: float) -> None:
    b = best(runs)
    peak = max(r["peak_mb"] for r in runs)
    print(f"  {label:<34} {b['seconds']:6.2f} s  cpu {b['cpu']:5.2f} s  (runs: "
          + ", ".join(f"{r['seconds']:.2f}" for r in runs)
          + f")  peak RSS {peak:5.0f} MiB = {peak / size_mb:.2f}x file")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each loader; best is used")
    ap.add_argument("--mb", type=float, default=85.0, help="size of the built trace in MB")
    ap.add_argument("--ranks", type=int, nargs="*", default=[2, 4], help="window sizes")
    args = ap.parse_args()
    path = build(args.mb)
    size_mb = path.stat().st_size / 2**20
    exact = run(OURS, str(path), "exact")["exact"]  # its own run: the check reads the JSON
    ours, naive, floor = [], [], []
    for _ in range(args.repeat):  # interleaved so machine noise hits all alike
        ours.append(run(OURS, str(path)))
        naive.append(run(NAIVE, str(path)))
        floor.append(run(FLOOR, str(path)))
    o, n, f = best(ours), best(naive), best(floor)
    print(f"file: {path} ({size_mb:.1f} MiB, {n['rows']} events, {o['x']} complete, "
          f"{os.cpu_count()} cores)")
    line("dynprof_nb load_trace().events", ours, size_mb)
    line("naive json.load + pd.DataFrame", naive, size_mb)
    line("floor: typed msgspec decode", floor, size_mb)
    peak = max(r["peak_mb"] for r in ours)
    print(f"  ts_ns exact int64 for every complete event: {exact}")
    print(f"  ours vs naive: {n['seconds'] / o['seconds']:.1f}x faster (target >= 3x); "
          f"ours / floor: {o['seconds'] / f['seconds']:.2f}x (target <= 2x); "
          f"cpu ours / floor {o['cpu'] / f['cpu']:.2f}x; "
          f"peak RSS / file {peak / size_mb:.2f} (target <= 3)")
    for kind in REALISTIC:
        compare(build_realistic(kind, args.mb), args.repeat)
    cal = min(run(CALIBRATE)["seconds"] for _ in range(max(1, args.repeat)))
    load = os.getloadavg()
    print(f"free cores: two processes of 0.5 s CPU each take {cal:.2f} s here (0.5 s when two "
          f"cores are free): about {min(2.0, 1.0 / cal):.1f} of 2 free; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {_cores()} cores")
    ratios = []
    for ranks in args.ranks:
        root = window(path, ranks)
        win, one, sep = [], [], []
        for _ in range(args.repeat):  # interleaved, best of each
            win.append(run(WINDOW, str(root)))
            one.append(run(OURS, str(path)))
            sep.append(gang(path, ranks))
        w, s, g = best(win), best(one), best(sep)
        per_core = ranks / _cores()
        ratios.append(f"{ranks} ranks {w['seconds'] / s['seconds']:.2f}x")
        print(f"window of {ranks} ranks ({root}, {w['rows']} rows, {w['ranks']} ranks): "
              f"load_window().events {w['seconds']:.2f} s vs one rank {s['seconds']:.2f} s "
              f"= {w['seconds'] / s['seconds']:.2f}x one rank ({per_core:.1f} ranks per core; "
              f"runs: " + ", ".join(f"{r['seconds']:.2f}" for r in win) + "); "
              f"{ranks} separate one-rank processes at once {g['seconds']:.2f} s "
              f"= {g['seconds'] / s['seconds']:.2f}x one rank, window / them "
              f"{w['seconds'] / g['seconds']:.2f}x; "
              f"parent peak RSS {max(r['peak_mb'] for r in win):.0f} MiB "
              f"= {max(r['peak_mb'] for r in win) / size_mb:.2f}x one file, "
              f"workers' {max(r['children_peak_mb'] for r in win):.0f} MiB each at most; cpu: "
              f"parent {w['cpu']:.2f} s, workers {w['children_cpu']:.2f} s in all, one rank "
              f"alone {s['cpu']:.2f} s")
    if ratios:
        print("window / one rank (best runs): " + ", ".join(ratios)
              + f"; load average now {os.getloadavg()[0]:.2f}")


def compare(path: Path, repeat: int) -> None:
    """Ours, naive and the floor on one more file, interleaved, best of ``repeat``."""
    size_mb = path.stat().st_size / 2**20
    ours, naive, floor = [], [], []
    for _ in range(repeat):
        ours.append(run(OURS, str(path)))
        naive.append(run(NAIVE, str(path)))
        floor.append(run(FLOOR, str(path)))
    o, n, f = best(ours), best(naive), best(floor)
    print(f"file: {path} ({size_mb:.1f} MiB, {n['rows']} events, {o['x']} complete)")
    line("dynprof_nb load_trace().events", ours, size_mb)
    line("naive json.load + pd.DataFrame", naive, size_mb)
    line("floor: typed msgspec decode", floor, size_mb)
    print(f"  {path.stem}: ours vs naive {n['seconds'] / o['seconds']:.1f}x faster (target >= 3x); "
          f"ours / floor {o['seconds'] / f['seconds']:.2f}x (target <= 2x); "
          f"cpu ours / floor {o['cpu'] / f['cpu']:.2f}x")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


if __name__ == "__main__":
    main()
