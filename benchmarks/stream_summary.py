"""Summaries of a big Kineto trace in bounded memory (issue 25 items 1 and 2), same run ratios.

Writes a Kineto trace of ``--gb`` GB (default 0.5) to a temporary directory (deleted after):
the HTA df_index_resolver fixture's events (tests/data/kineto, a real PyTorch trace) repeated,
each copy shifted in time past the one before and with its correlation ids shifted, so every
copy's kernels link to their own launches. The generator holds one copy's templates (a few
hundred MB) and streams the copies out. Then, each in a fresh subprocess (peak RSS its own):

  - decode: the reader's piece decoding alone (fastjson pieces into chrome.Columns, each
    piece's columns dropped): the floor a pass over the file costs
  - stream: ``load_trace(path)`` with ``DYNPROF_NB_STREAM=1``, then ``w.summary()`` (ops,
    steps, kernels and the breakdown without the events frame)
  - memory (only below 2 GB, where it fits): the same with the events frame, for reference
    (``DYNPROF_NB_STREAM=0``, no cache)
  - first: the default load (issue 32: one streamed pass that also writes the events to the
    frame cache), ``w.summary()``, then ``w.events`` (from that entry)
  - reload: a new process on that cache: ``w.summary()``, then ``w.events``
  - baseline: the interpreter with dynprof_nb imported (peak RSS that is not the load's)
  - events: ``w.events`` out of core (Dask over Parquet partitions): time to write them, and
    ``len(ddf)``

Reported: seconds, peak RSS in MB and as a multiple of the file, and the stream / decode time
ratio (target: peak RSS <= 1x the file and <= 4 GB, time <= 1.3x decode).

Each subprocess runs ``--repeat`` times, interleaved; the minimum of each is reported.

Usage: .venv/bin/python benchmarks/stream_summary.py [--gb 0.5] [--gb 5 for the 5 GB run]
       [--repeat 3] [--no-events]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "tests/data/kineto/hta__df_index_resolver__df_index_resolver.json.gz"
_TS, _CORR, _STEP = "@@TS@@", "@@CORR@@", "@@STEP@@"
STEP = re.compile(r"^ProfilerStep#(\d+)$")

DECODE = r"""
import gc, os, resource, sys, time, json
def peak_mb():  # this process's own peak (ru_maxrss keeps the parent's across fork+exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
from dynprof_nb.traces.formats.chrome import pieces as fastjson, reader as chrome
t = time.perf_counter()
gc.disable()
n = 0
with open(sys.argv[1], "rb") as fh:
    top, pieces = fastjson.file_pieces(fh, os.fstat(fh.fileno()).st_size)
    for piece in pieces:
        acc = chrome.Columns()
        acc.add(piece)
        n += acc.n_rows
print(json.dumps({"seconds": time.perf_counter() - t, "rows": n,
                  "peak_mb": peak_mb()}))
"""

BASELINE = r"""
import resource, json, sys
def peak_mb():  # this process's own peak (ru_maxrss keeps the parent's across fork+exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
import dynprof_nb, pandas, pyarrow
peak = peak_mb()
print(json.dumps({"seconds": 0.0, "peak_mb": peak}))
"""

SUMMARY = r"""
import resource, sys, time, json, warnings
def peak_mb():  # this process's own peak (ru_maxrss keeps the parent's across fork+exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
warnings.simplefilter("ignore")
from dynprof_nb import load_trace
import pandas, pyarrow
t = time.perf_counter()
w = load_trace(sys.argv[1])
s = w.summary()
out = {"seconds": time.perf_counter() - t, "ops": len(w.ops), "steps": len(w.steps),
       "kernels": len(w.kernels), "streamed": w.loaded("events") is False}
out["peak_mb"] = peak_mb()
if sys.argv[2] == "events":
    t = time.perf_counter()
    ev = w.events
    out["events_seconds"] = time.perf_counter() - t
    out["events_type"] = type(ev).__module__ + "." + type(ev).__name__
    out["events_rows"] = int(len(ev))
    out["events_peak_mb"] = peak_mb()
print(json.dumps(out))
"""


def _templates() -> tuple[list, list[float], list[int | None], list[int | None], dict]:
    """Each event's JSON text cut around its ts and its correlation, with their values (and
    a step marker's step number, which each copy shifts too)."""
    doc = json.loads(gzip.decompress(SRC.read_bytes()))
    parts, ts, corr, step = [], [], [], []
    for e in doc.pop("traceEvents"):
        ts.append(e.get("ts"))
        a = e.get("args")
        c = a.get("correlation") if isinstance(a, dict) else None
        corr.append(c if isinstance(c, int) else None)
        m = STEP.match(str(e.get("name", "")))
        step.append(int(m.group(1)) if m else None)
        if m:
            e["name"] = "ProfilerStep#" + _STEP
        if "ts" in e:
            e["ts"] = _TS
        if corr[-1] is not None:
            e["args"] = dict(a, correlation=_CORR)
        text = json.dumps(e, separators=(",", ":"))
        head, _, rest = text.partition(f'"{_TS}"') if "ts" in e else ("", "", text)
        mid, _, tail = rest.partition(f'"{_CORR}"') if corr[-1] is not None else (rest, "", "")
        parts.append((head.encode(), mid.encode(), tail.encode()))
    return parts, ts, corr, step, doc


def generate(path: Path, size: int) -> int:
    """Write a Kineto trace of about ``size`` bytes; returns the number of copies."""
    parts, ts, corr, step, doc = _templates()
    times = [t for t in ts if isinstance(t, int | float)]
    span = int(max(times) - min(times)) + 1_000_000  # µs, and a second between copies
    corr_step = max(c for c in corr if c is not None) + 1
    n_steps = max(s for s in step if s is not None) + 1
    head = json.dumps({k: v for k, v in doc.items()}, separators=(",", ":"))[:-1]
    copies = 0
    with open(path, "wb") as out:
        out.write(head.encode() + b',"traceEvents":[')
        first = True
        while out.tell() < size:
            shift, cshift = copies * span, copies * corr_step
            chunk = []
            for (h, m, t), tv, cv, sv in zip(parts, ts, corr, step, strict=True):
                if not h:  # no ts: metadata; written once, with the first copy
                    if copies == 0:
                        chunk.append(m + t)
                    continue
                if sv is not None:
                    h = h.replace(_STEP.encode(), str(sv + copies * n_steps).encode())
                text = h + repr(tv + shift).encode() + m
                if cv is not None:
                    text += str(cv + cshift).encode() + t
                chunk.append(text)
            out.write((b"" if first else b",") + b",".join(chunk))
            first = False
            copies += 1
        out.write(b"]}")
    return copies


def run(code: str, path: Path, *args: str, env: dict | None = None) -> dict:
    res = subprocess.run(
        [sys.executable, "-c", code, str(path), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(HERE.parent), **(env or {})},
        check=False,
    )
    if res.returncode:
        return {"error": res.stderr[-2000:]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def best(runs: list[dict]) -> dict:
    """The minimum of each number over the runs (an error if any run failed)."""
    bad = [r for r in runs if "error" in r]
    if bad:
        return bad[0]
    out = dict(runs[0])
    for k, v in out.items():
        if isinstance(v, float):
            out[k] = min(r[k] for r in runs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=0.5, help="trace size in GB (e.g. 5)")
    ap.add_argument("--dir", default=None, help="where to write it (default: a temp dir)")
    ap.add_argument("--no-events", action="store_true", help="skip the out-of-core events")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each, interleaved")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dynprof_stream_", dir=args.dir))
    try:
        path = tmp / "big.pt.trace.json"
        copies = generate(path, int(args.gb * 1e9))
        size = path.stat().st_size
        mb = size / 2**20
        print(f"trace: {size / 1e9:.2f} GB ({copies} copies of {SRC.name})", flush=True)
        cache = {"DYNPROF_NB_CACHE": str(tmp / "cache")}
        first_cache = {"DYNPROF_NB_CACHE": str(tmp / "first")}
        runs: dict[str, list[dict]] = {}

        def once(name: str, code: str, *a: str, env: dict | None = None) -> None:
            runs.setdefault(name, []).append(run(code, path, *a, env=env))
            print(name, runs[name][-1], flush=True)

        for _ in range(args.repeat):
            once("baseline", BASELINE)
            once("decode", DECODE)
            shutil.rmtree(tmp / "cache", ignore_errors=True)  # each run a first load
            once(
                "stream",
                SUMMARY,
                "-" if args.no_events else "events",
                env={"DYNPROF_NB_STREAM": "1", "DYNPROF_NB_OUT_OF_CORE": "1", **cache},
            )
            if size < 2e9:
                once(
                    "memory",
                    SUMMARY,
                    "-",
                    env={"DYNPROF_NB_STREAM": "0", "DYNPROF_NB_CACHE": "off"},
                )
                shutil.rmtree(tmp / "whole", ignore_errors=True)
                once(  # the whole parse as a user gets it: writing the frame cache too
                    "memory_cached",
                    SUMMARY,
                    "-",
                    env={"DYNPROF_NB_STREAM": "0", "DYNPROF_NB_CACHE": str(tmp / "whole")},
                )
                shutil.rmtree(tmp / "first", ignore_errors=True)
                once("first", SUMMARY, "events", env=first_cache)
                once("reload", SUMMARY, "events", env=first_cache)
        results = {k: best(v) for k, v in runs.items()}
        d, s = results["decode"], results["stream"]
        base = results["baseline"].get("peak_mb", 0.0)
        if "error" not in d and "error" not in s:
            print(
                f"\nstream summary: {s['seconds']:.1f} s = {s['seconds'] / d['seconds']:.2f}x "
                f"decode ({d['seconds']:.1f} s); peak RSS {s['peak_mb']:.0f} MB = "
                f"{s['peak_mb'] / mb:.2f}x the file (decode alone: {d['peak_mb']:.0f} MB)"
            )
            if "events_seconds" in s:
                print(
                    f"events out of core: {s['events_type']} of {s['events_rows']} rows in "
                    f"{s['events_seconds']:.1f} s, peak RSS {s['events_peak_mb']:.0f} MB = "
                    f"{s['events_peak_mb'] / mb:.2f}x the file"
                )
        m = results.get("memory")
        if m and "error" not in m:
            print(
                f"in memory (for reference): {m['seconds']:.1f} s, peak RSS "
                f"{m['peak_mb']:.0f} MB = {m['peak_mb'] / mb:.2f}x the file"
            )
        mc = results.get("memory_cached")
        if mc and "error" not in mc:
            print(
                f"in memory, writing the cache (as before issue 32 by default): "
                f"{mc['seconds']:.2f} s, peak RSS {mc['peak_mb']:.0f} MB"
            )
        f, r = results.get("first"), results.get("reload")
        if m and f and r and not any("error" in x for x in (m, f, r)):
            print(
                f"default first load + summary: {f['seconds']:.2f} s = "
                f"{f['seconds'] / m['seconds']:.2f}x in memory"
                + (f" ({f['seconds'] / mc['seconds']:.2f}x writing the cache), " if mc else ", ")
                + f"{f['seconds'] / d['seconds']:.2f}x decode; peak RSS {f['peak_mb']:.0f} MB = "
                f"{f['peak_mb'] / mb:.2f}x the file ({(f['peak_mb'] - base) / mb:.2f}x above "
                f"the {base:.0f} MB interpreter); in memory "
                f"{(m['peak_mb'] - base) / mb:.2f}x above it\n"
                f"  then events from the cache: {f['events_seconds']:.2f} s, peak RSS "
                f"{f['events_peak_mb']:.0f} MB\n"
                f"reload + summary: {r['seconds']:.3f} s, events {r['events_seconds']:.3f} s "
                f"(peak RSS {r['events_peak_mb']:.0f} MB)"
            )
        print(json.dumps({"file_mb": mb, **results}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
