"""A many-rank window on one machine: N rank traces of M MB each loaded as one window, against
the same ranks loaded one by one (issue 25, item 5).

Generates N built-in-style rank windows (``rank{r}_start1_stop5/trace.json``) of about M MB each
into a temporary directory (removed at the end) from the repository's real Kineto trace (HTA's
df_index_resolver fixture, tests/data/kineto, 216k events / 54 MB): its events repeated with
their times shifted past the previous copy until the file reaches M MB, each rank's file its own
header (``distributedInfo.rank``) around the same event bytes. The generator holds one copy of
the source events and writes with a streaming copy, so it needs ~0.5 GB whatever N x M is.

Then, each in a fresh subprocess so its peak RSS is the loader's own:
  - one by one: ``load_trace(p).events`` for every rank file, timed each (their sum is the serial
    cost; the peak RSS is what one rank needs);
  - the window: ``load_window(root).events``, the N ranks as one frame (ranks parsed in forked
    workers, traces/parallel.py), peak RSS of the process and of its largest worker
    (``RUSAGE_CHILDREN``) and the bytes of the frame it returns.

Printed as ratios: window time / (sum of one-rank loads / cores) (1.0 = perfectly parallel),
peak RSS / the JSON bytes, peak RSS / the frame's bytes, and peak RSS per rank.

With ``--summaries`` (issue 32 item 2), the window's load asks for ``ops``, ``steps`` and
``kernels`` instead (each rank through its streamed first pass, which writes its events to the
frame cache, no rank's events frame built); printed: time, CPU, peak RSS (the process's and its
largest worker's), the rows, whether any rank's events were loaded; with ``--before DIR`` (a
checkout of the code before a change) the same window load runs on that code too, in the same
run, and the ratios this tree / that one are printed (``--repeat N``: N runs of each,
interleaved, the least of each kept). Every subprocess has a fresh, empty
frame cache (``DYNPROF_NB_CACHE``) of its own.

Usage: .venv/bin/python benchmarks/multirank_load.py [--ranks 32] [--mb 100] [--dir /tmp]
       [--summaries] [--before /path/to/old/checkout] [--repeat 3]
A quick run: --ranks 4 --mb 20.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "tests" / "data" / "kineto" / "hta__df_index_resolver__df_index_resolver.json.gz"  # noqa: E501

ONE_BY_ONE = r"""
import gc, json, resource, sys, time
from pathlib import Path
from dynprof_nb import load_trace
import dynprof_nb.traces.formats.chrome.reader, pandas  # imported before the baseline (current) RSS
base = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
times, cpus, rows = [], [], 0
for p in sorted(Path(sys.argv[1]).glob("*/trace.json")):
    t, c = time.perf_counter(), time.process_time()
    ev = load_trace(p).events
    times.append(time.perf_counter() - t)
    cpus.append(time.process_time() - c)
    rows += len(ev)
    frame = int(ev.memory_usage(deep=True).sum())
    del ev
    gc.collect()
print(json.dumps({"times": times, "cpus": cpus, "rows": rows, "frame_bytes": frame,
                  "base_mb": base,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

WINDOW = r"""
import json, resource, sys, time
from dynprof_nb import load_window
import dynprof_nb.traces.formats.chrome.reader, pandas
base = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
t, c = time.perf_counter(), time.process_time()
w = load_window(sys.argv[1])
ev = w.events
dt, cpu = time.perf_counter() - t, time.process_time() - c
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
held = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
per_rank = sum(int(c.events.memory_usage(deep=True).sum()) for c in w.children)
print(json.dumps({"seconds": dt, "cpu": cpu + kids.ru_utime + kids.ru_stime, "rows": len(ev),
                  "frame_bytes": int(ev.memory_usage(deep=True).sum()), "base_mb": base,
                  "held_mb": held, "rank_frames_bytes": per_rank,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "child_peak_mb": kids.ru_maxrss / 1024}))
"""

SUMMARIES = r"""
import json, resource, sys, time
from dynprof_nb import load_window
import dynprof_nb.traces.formats.chrome.reader, pandas
base = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
t, c = time.perf_counter(), time.process_time()
w = load_window(sys.argv[1])
rows = {k: len(w.frame(k)) for k in ("ops", "steps", "kernels")}
dt, cpu = time.perf_counter() - t, time.process_time() - c
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"seconds": dt, "cpu": cpu + kids.ru_utime + kids.ru_stime, "rows": rows,
                  "events_loaded": any(c.loaded("events") for c in w.children),
                  "base_mb": base,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "child_peak_mb": kids.ru_maxrss / 1024}))
"""


BURN = r"""
import json, os, sys, time
def burn(n):
    s = 0
    for i in range(n):
        s += i * i
n, procs = int(sys.argv[1]), int(sys.argv[2])
t = time.perf_counter()
burn(n * procs)
serial = time.perf_counter() - t
t = time.perf_counter()
pids = []
for _ in range(procs - 1):
    pid = os.fork()
    if pid == 0:
        burn(n)
        os._exit(0)
    pids.append(pid)
burn(n)
for pid in pids:
    os.waitpid(pid, 0)
print(json.dumps({"speedup": serial / (time.perf_counter() - t)}))
"""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def generate(root: Path, ranks: int, mb: float) -> int:
    """Write ``ranks`` rank windows of about ``mb`` MB under ``root``; return the total bytes."""
    with gzip.open(SRC, "rt") as fh:
        doc = json.load(fh)
    events = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    ends = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(ends) - min(ts) + 1000.0  # each copy starts 1 ms after the previous one ends
    target = int(mb * 1e6)
    body = root / "events.part"
    size, copy = 0, 0
    with open(body, "w") as out:
        while size < target:
            shift = copy * span
            for e in events:
                if shift and isinstance(e.get("ts"), (int, float)):
                    e = {**e, "ts": e["ts"] + shift}
                s = ("," if size else "") + json.dumps(e, separators=(",", ":"))
                out.write(s)
                size += len(s)
                if size >= target:
                    break
            copy += 1
    del events
    total = 0
    for r in range(ranks):
        head = {**doc, "distributedInfo": {**doc.get("distributedInfo", {}), "rank": r,
                                           "world_size": ranks}}
        d = root / f"rank{r}_start1_stop5"
        d.mkdir()
        with open(d / "trace.json", "wb") as out, open(body, "rb") as src:
            out.write(json.dumps(head)[:-1].encode() + b', "traceEvents": [')
            shutil.copyfileobj(src, out, 1 << 20)
            out.write(b"]}")
        total += (d / "trace.json").stat().st_size
    body.unlink()
    return total


def run(code: str, *args: str, tree: Path = HERE.parent) -> dict:
    """``code`` in a fresh interpreter on the code of ``tree``, with a fresh frame cache."""
    with tempfile.TemporaryDirectory(prefix="dynprof_nb-cache-") as cache:
        env = {**os.environ, "PYTHONPATH": str(tree), "DYNPROF_NB_CACHE": cache}
        r = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            cwd=tree,
            timeout=3600,
            env=env,
        )
    if r.returncode != 0:
        raise SystemExit(f"benchmark subprocess failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--ranks", type=int, default=32, help="rank files in the window")
    ap.add_argument("--mb", type=float, default=100.0, help="size of each rank's trace, MB")
    ap.add_argument("--dir", default=None, help="where to generate them (default: the temp dir)")
    ap.add_argument("--summaries", action="store_true", help="ask for ops, steps and kernels")
    ap.add_argument("--before", type=Path, help="with --summaries: a checkout to compare with")
    ap.add_argument("--repeat", type=int, default=1, help="with --summaries: runs of each")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dynprof_nb-multirank-", dir=args.dir))
    if args.summaries:
        try:
            generate(root, args.ranks, args.mb)
            summaries(root, args.before, args.repeat)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    try:
        total = generate(root, args.ranks, args.mb)
        one = run(ONE_BY_ONE, str(root))
        win = run(WINDOW, str(root))
        # what the machine gives two or more processes right now (other jobs share the cores):
        # a pure-Python loop, serial and split over as many processes as the loader forks
        burn = run(BURN, str(5_000_000), str(_cores()))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    cores = _cores()
    serial, serial_cpu = sum(one["times"]), sum(one["cpus"])
    json_mb = total / 2**20
    frame_mb = win["frame_bytes"] / 2**20
    peak = win["peak_mb"]
    tree = peak + win["child_peak_mb"]  # the parent and its largest worker, at worst together
    per = total / args.ranks / 1e6
    print(f"{args.ranks} ranks x {per:.0f} MB = {json_mb:.0f} MiB of JSON, {win['rows']} rows "
          f"({one['rows']} one by one), {cores} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"one by one: sum {serial:.2f} s wall, {serial_cpu:.2f} s CPU (per rank "
          f"{min(one['times']):.2f}-{max(one['times']):.2f} s); peak RSS {one['peak_mb']:.0f} MiB "
          f"({one['base_mb']:.0f} after imports); one rank's frame "
          f"{one['frame_bytes'] / 2**20:.0f} MiB")
    print(f"window    : {win['seconds']:.2f} s wall, {win['cpu']:.2f} s CPU (with its workers); "
          f"peak RSS {peak:.0f} MiB ({win['base_mb']:.0f} after imports; largest worker "
          f"{win['child_peak_mb']:.0f} MiB); frame {frame_mb:.0f} MiB")
    print(f"time / (sum of one-rank loads / cores): {win['seconds'] / (serial / cores):.2f} wall "
          f"(1.0 = perfectly parallel; {serial / win['seconds']:.2f}x faster than one by one); "
          f"CPU window / one by one {win['cpu'] / serial_cpu:.2f} (the cost of one window)")
    print(f"the machine now: {cores} processes run a CPU loop {burn['speedup']:.2f}x faster than "
          f"one (ideal {cores}); the window reached "
          f"{serial / win['seconds'] / burn['speedup']:.2f} of that")
    print(f"held after the load {win['held_mb']:.0f} MiB = the ranks' own frames "
          f"{win['rank_frames_bytes'] / 2**20:.0f} MiB (kept for rank_window()) + the window's "
          f"frame {frame_mb:.0f} MiB + imports")
    print(f"peak RSS / JSON {peak / json_mb:.2f} (with the largest worker {tree / json_mb:.2f}); "
          f"peak RSS / frame {peak / frame_mb:.2f}; peak RSS above imports per rank "
          f"{(peak - win['base_mb']) / args.ranks:.0f} MiB (one rank alone "
          f"{one['peak_mb'] - one['base_mb']:.0f} MiB)")


#: what a summaries run reports as the least of its repeats
MIN_OF = ("seconds", "cpu", "peak_mb", "child_peak_mb")


def summaries(root: Path, before: Path | None, repeat: int = 1) -> None:
    """ops, steps and kernels of the window at ``root``, with this tree's code and with
    ``before``'s, each in a fresh process (``repeat`` times, the least of each kept), and the
    ratios."""
    trees = {"after": HERE.parent} | ({"before": before} if before else {})
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(repeat):  # interleaved, so a busy spell on a shared machine hits both
        for name, tree in trees.items():
            runs[name].append(run(SUMMARIES, str(root), tree=tree))
    got = {n: {**rs[0], **{k: min(r[k] for r in rs) for k in MIN_OF}} for n, rs in runs.items()}
    for name, r in got.items():
        print(
            f"{name:6}: {r['seconds']:.2f} s wall, {r['cpu']:.2f} s CPU (with its workers); "
            f"peak RSS {r['peak_mb']:.0f} MiB ({r['base_mb']:.0f} after imports; largest "
            f"worker {r['child_peak_mb']:.0f} MiB); rows {r['rows']}; a rank's events "
            f"loaded: {r['events_loaded']}"
        )
    if before:
        a, b = got["after"], got["before"]
        print(
            f"after / before: time {a['seconds'] / b['seconds']:.2f}, CPU "
            f"{a['cpu'] / b['cpu']:.2f}, peak RSS {a['peak_mb'] / b['peak_mb']:.2f} (above "
            f"imports {(a['peak_mb'] - a['base_mb']) / (b['peak_mb'] - b['base_mb']):.2f}; "
            f"with the largest worker, at worst both at once, {_tree_peak(a) / _tree_peak(b):.2f})"
        )


def _tree_peak(r: dict) -> float:
    """Peak RSS of a run's process and its largest worker, as if they peaked together."""
    return r["peak_mb"] + r["child_peak_mb"]


if __name__ == "__main__":
    main()
