"""Trace loading speed and memory vs Holistic Trace Analysis 0.5.0 and the msgspec decode
floor, on the same file, same run.

Builds benchmarks/out/df_index_resolver_x2.json (two copies of the HTA df_index_resolver
fixture's events, tests/data/kineto: ~94 MB, 432k events), then times, each in a fresh
subprocess so peak RSS is the loader's own:
  - dynprof_nb: ``load_trace(path).events``
  - HTA 0.5.0: ``hta.common.trace_parser.parse_trace_dataframe(path, ParserConfig())``
  - floor: a typed ``msgspec`` decode of the same bytes (the fields of the events frame)
HTA is run from the project venv if importable, else from benchmarks/out/hta-venv (created and
populated with ``pip install HolisticTraceAnalysis==0.5.0`` on first use) so the project venv
does not get HTA's Jupyter dependencies. Also times two ranks loaded serially vs in parallel.

Usage: .venv/bin/python benchmarks/load_trace.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

# the readers are timed here, not the frame cache (benchmarks/cache_reload.py times that):
# this process and each one it starts read the trace files
os.environ["DYNPROF_NB_CACHE"] = "off"

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
SRC = HERE.parent / "tests" / "data" / "kineto" / "hta__df_index_resolver__df_index_resolver.json.gz"
BIG = OUT / "df_index_resolver_x2.json"

OURS = r"""
import resource, sys, time, json
from dynprof_nb import load_trace
# the Chrome reader is imported at its first use (issue 32): before the clock, as it was when
# load_trace imported it, so the time is the read's
import dynprof_nb.traces.formats.chrome.reader, dynprof_nb.traces.formats.derived.steps
t, c = time.perf_counter(), time.process_time()
ev = load_trace(sys.argv[1]).events
dt, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"seconds": dt, "cpu": cpu, "rows": len(ev), "x": int((ev["ph"] == "X").sum()),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

FLOOR = r"""
import resource, sys, time, json
import msgspec
class Event(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float | None = None
    dur: float | None = None
class Trace(msgspec.Struct):
    traceEvents: list[Event] = []
t, c = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as fh:
    events = msgspec.json.decode(fh.read(), type=Trace).traceEvents
dt, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"seconds": dt, "cpu": cpu, "rows": len(events),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

HTA = r"""
import logging, resource, sys, time, json
logging.disable(logging.WARNING)
from hta.common.trace_parser import parse_trace_dataframe
from hta.configs.parser_config import ParserConfig
t = time.perf_counter()
meta, df, symbols = parse_trace_dataframe(sys.argv[1], ParserConfig())
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "rows": len(df),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

PARALLEL = r"""
import json, sys, time
from pathlib import Path
from dynprof_nb import load_trace, load_window
root = Path(sys.argv[1])
t = time.perf_counter()
n1 = sum(len(load_trace(p).events) for p in sorted(root.glob("*/trace.json")))
serial = time.perf_counter() - t
t = time.perf_counter()
n2 = len(load_window(root).events)
parallel = time.perf_counter() - t
print(json.dumps({"serial": serial, "parallel": parallel, "rows": [n1, n2]}))
"""


def build() -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    if not BIG.exists():
        with gzip.open(SRC, "rt") as fh:
            doc = json.load(fh)
        doc["traceEvents"] = doc["traceEvents"] + doc["traceEvents"]
        tmp = BIG.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(doc, fh)
        tmp.replace(BIG)
    return BIG


def hta_python() -> str:
    probe = subprocess.run([sys.executable, "-c", "import hta"], capture_output=True)
    if probe.returncode == 0:
        return sys.executable
    made = HERE.parent / ".venv" / "hta" / "bin" / "python"  # `make .venv/hta/.stamp`
    if made.exists():
        return str(made)
    env = OUT / "hta-venv"
    py = env / "bin" / "python"
    if not py.exists() or subprocess.run([str(py), "-c", "import hta"],
                                         capture_output=True).returncode != 0:
        print("installing HolisticTraceAnalysis==0.5.0 into", env, flush=True)
        venv.create(env, with_pip=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "HolisticTraceAnalysis==0.5.0"], check=True)
    return str(py)


def run(python: str, code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    r = subprocess.run([python, "-c", code, *args], capture_output=True, text=True,
                       cwd=HERE.parent, timeout=900, env=env)
    if r.returncode != 0:
        raise SystemExit(f"benchmark subprocess failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def parallel_dir() -> Path:
    """Two ranks' built-in-style windows, each a full copy of the 216k-event trace."""
    root = OUT / "two_ranks"
    if not root.exists():
        with gzip.open(SRC, "rb") as fh:
            data = fh.read()
        for r in range(2):
            d = root / f"rank{r}_start1_stop5"
            d.mkdir(parents=True)
            (d / "trace.json").write_bytes(data)
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each loader; best time is used")
    args = ap.parse_args()
    path = build()
    size_mb = path.stat().st_size / 2**20
    hpy = hta_python()
    ours, hta, floor = [], [], []
    for _ in range(args.repeat):  # interleaved so machine noise hits all alike
        ours.append(run(sys.executable, OURS, str(path)))
        hta.append(run(hpy, HTA, str(path)))
        floor.append(run(sys.executable, FLOOR, str(path)))
    best_o = min(ours, key=lambda r: r["seconds"])
    best_h = min(hta, key=lambda r: r["seconds"])
    peak_o = max(r["peak_mb"] for r in ours)
    print(f"file: {path} ({size_mb:.1f} MiB, {best_o['x']} complete events, {best_o['rows']} rows)")
    print(f"dynprof_nb load_trace().events : {best_o['seconds']:.2f} s  (runs: "
          + ", ".join(f"{r['seconds']:.2f}" for r in ours) + f")  peak RSS {peak_o:.0f} MiB "
          f"= {peak_o / size_mb:.2f}x file")
    print(f"HTA 0.5.0 parse_trace_dataframe: {best_h['seconds']:.2f} s  (runs: "
          + ", ".join(f"{r['seconds']:.2f}" for r in hta) + f")  peak RSS {max(r['peak_mb'] for r in hta):.0f} MiB")
    best_f = min(floor, key=lambda r: r["seconds"])
    print(f"floor: typed msgspec decode     : {best_f['seconds']:.2f} s  (runs: "
          + ", ".join(f"{r['seconds']:.2f}" for r in floor) + f")  peak RSS {max(r['peak_mb'] for r in floor):.0f} MiB")
    ratio = best_h["seconds"] / best_o["seconds"]
    to_floor = best_o["seconds"] / best_f["seconds"]
    print(f"speed-up vs HTA: {ratio:.1f}x (target >= 10x); ours / floor {to_floor:.2f}x (target <= 2x; "
          f"cpu {best_o['cpu'] / best_f['cpu']:.2f}x); peak RSS/file {peak_o / size_mb:.2f} (target <= 2.5)")
    par = run(sys.executable, PARALLEL, str(parallel_dir()))
    print(f"two ranks ({os.cpu_count()} cores): serial {par['serial']:.2f} s, load_window parallel "
          f"{par['parallel']:.2f} s ({par['serial'] / par['parallel']:.2f}x), rows {par['rows']}")
    ok = ratio >= 10 and to_floor <= 2 and peak_o / size_mb <= 2.5
    if shutil.which("true") and not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
