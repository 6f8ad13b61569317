"""How fast a ``job.set()`` reaches a training loop that steps every ~1 ms.

A real training process (a busy 1 ms step loop with ``Monitor.step()``) runs in the background;
this process writes ``job.set()`` N times at random moments and times each write until the
rank's slot reports the new generation applied. The reference is the loop's own step time,
measured in the same run: "applied at its next step" means latency <= about one step.
The original polls its file every 2 s, so its latency is up to 2 s plus a step.

    python benchmarks/propagation.py [--sets 300]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.contract.segment import S_APPLIED, S_STEP

TRAIN = textwrap.dedent("""
    import sys, time, dynprof_nb
    m = dynprof_nb.Monitor(job=sys.argv[1], rank=0, output_path=sys.argv[2], backend="builtin")
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < float(sys.argv[3]):
        end = time.perf_counter() + 0.001
        while time.perf_counter() < end:
            pass
        m.step()
    m.close()
""")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", type=int, default=300)
    args = parser.parse_args()
    job = f"bench-prop-{os.getpid()}"
    with tempfile.TemporaryDirectory() as out:
        control = dynprof_nb.attach(job, create=True)
        proc = subprocess.Popen([sys.executable, "-c", TRAIN, job, out, str(args.sets * 0.02 + 10)],
                                )
        while not control.live_slots():
            time.sleep(0.01)
        slot = control.live_slots()[0]
        seg = control.segment(create=True)
        words, base = seg.words, segment.slot_base(slot.index)
        latencies, calls = [], []
        t_begin, step_begin = time.perf_counter(), words[base + S_STEP]
        for i in range(args.sets):
            time.sleep(random.uniform(0.005, 0.02))
            t0 = time.perf_counter()
            gen = control.set(profile_memory=bool(i % 2))  # validates, then writes
            t1 = time.perf_counter()
            while words[base + S_APPLIED] < gen:
                time.sleep(0)
            t2 = time.perf_counter()
            latencies.append((t2 - t1) * 1e3)
            calls.append((t2 - t0) * 1e3)
        step_ms = (time.perf_counter() - t_begin) * 1e3 / max(1, words[base + S_STEP] - step_begin)
        proc.terminate()
        proc.wait()
        segment.unlink(job)
    latencies.sort()
    calls.sort()
    p50, p99 = _pct(latencies, 50), _pct(latencies, 99)
    print(f"config writes            : {len(latencies)}")
    print(f"step time (reference)    : {step_ms:.3f} ms, measured in this run")
    print(f"write-to-applied p50     : {p50:.3f} ms = {p50 / step_ms:.2f} steps")
    print(f"write-to-applied p99     : {p99:.3f} ms = {p99 / step_ms:.2f} steps")
    print(f"set() call to applied    : p50 {_pct(calls, 50):.3f} ms, p99 {_pct(calls, 99):.3f} ms "
          "(includes the controller's own validation)")
    print("original (2 s file poll) : up to 2000 ms + one step")


def _pct(values: list, q: float) -> float:
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


if __name__ == "__main__":
    main()
