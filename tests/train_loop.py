"""A controllable training loop for tests: real process, real Monitor, real segment.

    python tests/train_loop.py --job J --rank R --out DIR [--step-ms 2] [--steps N]
                               [--style step|callback] [--backend builtin]
                               [--slow-file PATH --slow-ms 60]

Each iteration sleeps ``--step-ms`` inside a ``dynprof_nb.range("work")`` and then reports the
step the way the chosen style does. On exit it prints ``steps=<n>`` so a test can tell the loop
kept running whatever happened to the profiler. SIGTERM ends the loop cleanly.
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import dynprof_nb


class RunContext:
    """What MindSpore's Model.train hands a callback: ``original_args().cur_step_num``."""

    def __init__(self) -> None:
        self.cur_step_num = 0

    def original_args(self) -> RunContext:
        return self


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--job", required=True)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--step-ms", type=float, default=2.0)
    p.add_argument("--steps", type=int, default=10**9)
    p.add_argument("--style", choices=("step", "callback"), default="step")
    p.add_argument("--backend", default="builtin")
    p.add_argument("--slow-file", default="",
                   help="once this file exists, --slow-steps steps take --slow-ms each (or the "
                        "ms the file holds); their first and last step numbers are then "
                        "written to FILE.done")
    p.add_argument("--slow-ms", type=float, default=60.0)
    p.add_argument("--slow-steps", type=int, default=20)
    p.add_argument("--hiccups", default="",
                   help="LO-HI:EVERY: single steps LO-HI x --step-ms long (random), one in about "
                        "EVERY steps, never two in a row (a noisy job)")
    p.add_argument("--hang-file", default="",
                   help="once this file exists, the loop blocks in its next step (a hang); "
                        "the last step it ended is written to FILE.at")
    p.add_argument("--exec-file", default="",
                   help="once this file exists, the process exec's `sleep 600`")
    p.add_argument("--torch", type=int, default=0, metavar="N",
                   help="each step also multiplies two NxN torch tensors (a torch job), then "
                        "sleeps what is left of --step-ms")
    p.add_argument("--clock-file", default="",
                   help="append 'step before_ns after_ns' per step: the loop's own clock read "
                        "just before and just after monitor.step()")
    args = p.parse_args()
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    monitor = dynprof_nb.Monitor(job=args.job, rank=args.rank, output_path=args.out,
                                 backend=args.backend)
    ctx = RunContext()
    done = 0
    import random

    rng = random.Random(args.rank)
    hiccup = None
    if args.hiccups:
        span, every = args.hiccups.split(":")
        lo, hi = (float(x) for x in span.split("-"))
        hiccup = (lo, hi, int(every))
    last_hiccup = -2
    slow_from = None
    work = _torch_work(args.torch) if args.torch else None
    clock = open(args.clock_file, "a", buffering=1) if args.clock_file else None
    for n in range(1, args.steps + 1):
        if stop["now"]:
            break
        if args.style == "callback":
            ctx.cur_step_num = n
            monitor.step_begin(ctx)
        if slow_from is None and args.slow_file and os.path.exists(args.slow_file):
            slow_from = n
            with open(args.slow_file) as fh:
                asked = fh.read().strip()
            if asked:  # the test's slow step (ms), from this rank's steps as the machine runs them
                args.slow_ms = float(asked)
        slow = slow_from is not None and n < slow_from + args.slow_steps
        if slow_from is not None and n == slow_from + args.slow_steps:
            with open(args.slow_file + ".done", "w") as fh:
                fh.write(f"{slow_from} {n - 1}")
        if args.hang_file and os.path.exists(args.hang_file):
            with open(args.hang_file + ".at", "w") as fh:
                fh.write(str(n - 1))
            while not stop["now"]:
                time.sleep(0.05)  # hung in step n (SIGTERM still ends the test's loop)
            break
        if args.exec_file and os.path.exists(args.exec_file):
            os.execvp("sleep", ["sleep", "600"])
        ms = args.slow_ms if slow else args.step_ms
        if hiccup and n - last_hiccup > 1 and rng.random() < 1 / hiccup[2]:
            ms, last_hiccup = args.step_ms * rng.uniform(hiccup[0], hiccup[1]), n
            with open(f"{args.out}.hiccups.{args.rank}", "a") as fh:
                fh.write(f"{n}\n")
        with dynprof_nb.range("work"):
            t0 = time.monotonic()
            if work is not None:
                work()
            time.sleep(max(0.0, ms / 1000 - (time.monotonic() - t0)))
        before = time.monotonic_ns()
        if args.style == "callback":
            monitor.step_end(ctx)
        else:
            monitor.step()
        if clock is not None:
            clock.write(f"{n} {before} {time.monotonic_ns()}\n")
        done = n
    if args.style == "callback":
        monitor.on_train_end(ctx)
    else:
        monitor.close()
    print(f"steps={done}", flush=True)


def _torch_work(n: int):
    """One step's torch compute: an NxN matmul (a real torch op the profiler records)."""
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(n, n), torch.randn(n, n)
    return lambda: torch.mm(a, b)


if __name__ == "__main__":
    main()
