"""The main job: a small numpy MLP trained by two ranks, profiled from outside.

``python -m dynprof_nb.ui.demo train --job J --rank R`` is one training rank (what a user's script
looks like with dynprof_nb in it); ``dynprof demo`` starts two of them in the background,
asks for a ten-step window through the Job API, waits with a progress bar and shows what the
window holds. Nothing beyond numpy is needed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import dynprof_nb


def train(job: str, rank: int, steps: int, output: str, batch: int = 256) -> None:
    """A two-layer MLP on synthetic data, with dynprof_nb ranges around its phases."""
    rng = np.random.default_rng(rank)
    w1 = rng.standard_normal((784, 512)).astype(np.float32) * 0.05
    w2 = rng.standard_normal((512, 10)).astype(np.float32) * 0.05
    x_all = rng.standard_normal((batch * 16, 784)).astype(np.float32)
    y_all = rng.integers(0, 10, batch * 16)
    stop = {"now": False}
    for sig in (signal.SIGTERM, signal.SIGINT):  # a kernel shutting down sends SIGINT
        signal.signal(sig, lambda *_: stop.update(now=True))
    with dynprof_nb.Monitor(job=job, rank=rank, output_path=output, backend="builtin") as monitor:
        for step in range(1, steps + 1):
            if stop["now"]:
                break
            with dynprof_nb.range("data"):
                i = (step * batch) % len(x_all)
                x, y = x_all[i:i + batch], y_all[i:i + batch]
            with dynprof_nb.range("forward"):
                with dynprof_nb.range("matmul"):
                    h = x @ w1
                with dynprof_nb.range("relu"):
                    a = np.maximum(h, 0)
                with dynprof_nb.range("matmul"):
                    logits = a @ w2
            with dynprof_nb.range("loss"):
                p = np.exp(logits - logits.max(1, keepdims=True))
                p /= p.sum(1, keepdims=True)
                p[np.arange(len(y)), y] -= 1
            with dynprof_nb.range("backward"):
                with dynprof_nb.range("matmul"):
                    gw2 = a.T @ p / batch
                    ga = p @ w2.T
                ga[h <= 0] = 0
                with dynprof_nb.range("matmul"):
                    gw1 = x.T @ ga / batch
            with dynprof_nb.range("allreduce", category="communication"):
                time.sleep(0.001 * (1 + rank))  # stands in for the gradient exchange
            with dynprof_nb.range("sgd_update"):
                w1 -= 0.01 * gw1
                w2 -= 0.01 * gw2
            monitor.step()


def start_ranks(job: str, output: str, ranks: int = 2, steps: int = 100_000) -> list[subprocess.Popen]:
    """The background training job: ``ranks`` processes of :func:`train`."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return [
        subprocess.Popen(
            [sys.executable, "-m", "dynprof_nb.ui.demo", "train", "--job", job, "--rank", str(r),
             "--steps", str(steps), "--output", output],
            env={**env, "RANK": str(r), "WORLD_SIZE": str(ranks)}, start_new_session=True,
        )
        for r in range(ranks)
    ]


def wait_for_ranks(job: dynprof_nb.Job, ranks: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(job.live_slots()) < ranks or min(s.step for s in job.live_slots()) < 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the demo's {ranks} ranks did not start within {timeout} s")
        time.sleep(0.1)


def run_demo(output: str = "./dyn_profile_data/demo") -> int:
    import pandas as pd

    job_name = f"demo-{os.getpid()}"
    output = str(Path(output).resolve())
    print(f"Starting a 2-rank numpy MLP job {job_name!r} in the background ...")
    procs = start_ranks(job_name, output)
    try:
        job = dynprof_nb.attach(job_name, create=True)
        wait_for_ranks(job, 2)
        print(job.status().to_string(index=False), "\n")
        job.start("+20", "+29", profile_memory=True)
        cfg = job.config
        print(f"Asked every rank for steps {cfg.start_step}..{cfg.stop_step} (ten steps).")
        status = job.wait(timeout=120)
        print(status.to_string(index=False), "\n")
        print(job.windows()[["rank", "start", "stop", "status", "path"]].to_string(index=False))
        window = job.load()
        pd.set_option("display.width", 160)
        print()
        print(window.summary())
        return 0
    finally:
        stop_ranks(procs)


def stop_ranks(procs: list[subprocess.Popen], timeout: float = 30.0) -> None:
    """End the background ranks cleanly (SIGTERM lets each close its Monitor), else kill."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m dynprof_nb.ui.demo")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="one training rank")
    t.add_argument("--job", required=True)
    t.add_argument("--rank", type=int, default=0)
    t.add_argument("--steps", type=int, default=100_000)
    t.add_argument("--output", default="./dyn_profile_data")
    sub.add_parser("run", help="the whole demo")
    args = parser.parse_args()
    if args.command == "train":
        train(args.job, args.rank, args.steps, args.output)
    else:
        sys.exit(run_demo())


if __name__ == "__main__":
    main()
