"""The CPU an idle rank's background threads cost, per second of wall time (issue 47).

Each case runs one rank in its own process: a Monitor joined to a job with nothing asked of
it, and the main thread either paused (no step comes: a loop waiting on data, an evaluation,
a hang) or stepping every 10 ms. The figure is the CPU time of every thread but the main one
over ``--seconds``, divided by the wall time: CPU-seconds per second, printed in ms/s, with
the heartbeat's and the stack recorder's threads apart. The CPU time is the scheduler's own
(``/proc/self/task/*/schedstat``, in nanoseconds), not ``stat``'s 10 ms ticks, which a thread
waking for microseconds escapes.

    python benchmarks/idle_rank_cpu.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def thread_cpu() -> dict[str, float]:
    """CPU seconds per thread name (the main thread left out), from /proc."""
    out: dict[str, float] = {}
    main = threading.main_thread().native_id
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == main:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                on_cpu_ns = int(f.read().split()[0])
        except OSError:
            continue
        name = names.get(int(tid), "other (not a Python thread)")
        out[name] = out.get(name, 0.0) + on_cpu_ns / 1e9
    return out


def one_rank(case: str, seconds: float) -> dict[str, float]:
    """Run in the child: one rank, ``case`` "paused" or "stepping", for ``seconds``."""
    import dynprof_nb
    from dynprof_nb.contract import segment

    job = f"bench-cpu-{os.getpid()}"
    control = dynprof_nb.attach(job, create=True)
    with tempfile.TemporaryDirectory() as out:
        monitor = dynprof_nb.Monitor(job=job, output_path=out, backend="builtin")
        time.sleep(1.0)  # past the start: threads up, the heartbeat settled
        before, t0 = thread_cpu(), time.monotonic()
        while time.monotonic() - t0 < seconds:
            if case == "stepping":
                time.sleep(0.01)
                monitor.step()
            else:
                time.sleep(0.1)
        after, wall = thread_cpu(), time.monotonic() - t0
        monitor.close()
    control.close()
    segment.unlink(job)
    return {k: (after.get(k, 0.0) - before.get(k, 0.0)) / wall for k in after}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--child", default="")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_rank(args.child, args.seconds)))
        return
    print(f"idle rank background CPU over {args.seconds:g} s (ms of CPU per second of wall)")
    for case in ("paused", "stepping"):
        run = [sys.executable, __file__, "--child", case, "--seconds", str(args.seconds)]
        per = json.loads(subprocess.run(run, check=True, capture_output=True).stdout)
        total = sum(per.values())
        parts = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in sorted(per.items()) if v)
        print(f"  {case:9s}: {total * 1e3:6.2f} ms/s  ({parts or 'nothing measurable'})")


if __name__ == "__main__":
    main()
