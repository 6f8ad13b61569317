"""Idle ``Monitor.step()`` alone vs. with 32 other ranks on the segment and a writer, one run.

Reliability matrix row "32 ranks ... idle cost per step unchanged" (docs/reliability.md). The
hot path reads one word of the shared header; the question is whether 32 other ranks writing
their slots (own cache lines) and a controller rewriting the config every few ms make that
read, or the step around it, any slower. Both phases run in this process, on one Monitor:

* ``alone``: no other process uses the segment;
* ``loaded``: ``--ranks`` processes step the same job flat out (like tests/test_reliability_load)
  and a controller process calls ``Job.set`` every ``--writer-ms``;
* ``alone`` again, to see the machine's drift.

A figure is the median of batches of ``--batch`` steps (so the few steps that apply a new
config, and the batches the scheduler preempts on an oversubscribed machine, do not decide
it); the steps that applied a config are counted apart. Target: loaded/alone <= 1.5.

    python benchmarks/contention.py [--ranks 32] [--seconds 8] [--writer-ms 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import dynprof_nb
from dynprof_nb.contract import segment

OTHER_RANK = textwrap.dedent("""
    import sys, time
    import dynprof_nb
    m = dynprof_nb.Monitor(job=sys.argv[1], rank=int(sys.argv[2]), output_path=sys.argv[3],
                           backend="builtin")
    end = time.monotonic() + float(sys.argv[4])
    while time.monotonic() < end:
        for _ in range(1000):
            t = time.perf_counter() + 5e-6
            while time.perf_counter() < t:
                pass
            m.step()
    m.close()
""")

WRITER = textwrap.dedent("""
    import sys, time
    import dynprof_nb
    job = dynprof_nb.attach(sys.argv[1], create=False)
    end, every, n = time.monotonic() + float(sys.argv[2]), float(sys.argv[3]) / 1000, 0
    while time.monotonic() < end:
        n += 1
        job.set(prof_path=f"w/{n}", mstx_domain_include=[f"d{n}"] * (n % 7))
        time.sleep(every)
    print(n)
""")


def measure(monitor: dynprof_nb.Monitor, seconds: float, batch: int) -> tuple[float, int, int]:
    """(median ns per step over batches, steps, configs applied) for ``seconds``."""
    clock = time.perf_counter_ns
    per_step: list[float] = []
    steps = 0
    applied = monitor._state.applied
    changes = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = clock()
        for _ in range(batch):
            monitor.step()
        per_step.append((clock() - t0) / batch)
        steps += batch
        if monitor._state.applied != applied:
            changes += 1
            applied = monitor._state.applied
    return statistics.median(per_step), steps, changes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--writer-ms", type=float, default=3.0)
    parser.add_argument("--batch", type=int, default=2000)
    args = parser.parse_args()
    job = f"bench-contention-{os.getpid()}"
    with tempfile.TemporaryDirectory() as out:
        control = dynprof_nb.attach(job, create=True)
        monitor = dynprof_nb.Monitor(job=job, rank=0, output_path=out, backend="builtin")
        measure(monitor, 1.0, args.batch)  # warm up
        alone, _, _ = measure(monitor, args.seconds / 2, args.batch)

        life = args.seconds + 60
        others = [subprocess.Popen([sys.executable, "-c", OTHER_RANK, job, str(r), out,
                                    str(life)]) for r in range(1, args.ranks + 1)]
        try:
            deadline = time.monotonic() + 60
            while len(control.live_slots()) < args.ranks + 1:
                if time.monotonic() > deadline:
                    raise SystemExit("the other ranks did not attach within 60 s")
                time.sleep(0.05)
            writer = subprocess.Popen([sys.executable, "-c", WRITER, job, str(args.seconds),
                                       str(args.writer_ms)], stdout=subprocess.PIPE, text=True)
            loaded, steps, changes = measure(monitor, args.seconds, args.batch)
            writes = int(writer.communicate(timeout=60)[0])
        finally:
            for p in others:
                p.terminate()
            for p in others:
                p.wait()
        again, _, _ = measure(monitor, args.seconds / 2, args.batch)
        monitor.close()
        control.close()
        segment.unlink(job)
    base = min(alone, again)
    print(f"idle step, alone              : {alone:6.1f} ns  (again after: {again:6.1f} ns)")
    print(f"idle step, {args.ranks} ranks + writer  : {loaded:6.1f} ns  over {steps} steps, "
          f"{writes} writes, {changes} batches applied a new config")
    print(f"ratio loaded / alone          : {loaded / base:5.2f}x   (target <= 1.5x)")


if __name__ == "__main__":
    main()
