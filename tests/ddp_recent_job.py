"""A real 2-rank PyTorch DDP job (gloo, CPU) under a Monitor with the torch backend, for the
recent-steps record (tests/training/test_recent_ddp.py).

Each step is ``forward`` (a ``dynprof_nb.range``: the model's forward and ``--work`` matrix
products), ``backward`` (a range: DDP's all-reduce of the gradients, where a rank waits for a
slower one) and the optimizer. Once ``--slow-file`` exists, rank ``--slow-rank`` spends
``--slow-ms`` more in its forward for ``--slow-steps`` steps (``<file>.done`` then holds the
first and last slow step): the other rank waits for it in its backward pass, so both ranks'
steps are slow, and only the slow rank's forward grew. ``--flight-recorder`` turns torch's
Flight Recorder on (the record then holds each collective's enter); ``--unmarked`` leaves the
forward out of every range. Run as two processes with RANK,
WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT set; SIGTERM ends it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import dynprof_nb


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--job", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", type=int, default=30, help="matrix products per forward")
    p.add_argument("--slow-file", required=True)
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--slow-ms", type=float, default=80.0)
    p.add_argument("--slow-steps", type=int, default=5)
    p.add_argument("--flight-recorder", action="store_true",
                   help="Monitor(flight_recorder=True): the record holds the collectives")
    p.add_argument("--unmarked", action="store_true",
                   help="no range around the forward: the slow rank's delay is in no range")
    args = p.parse_args()
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    gen = torch.Generator().manual_seed(rank)
    monitor = dynprof_nb.Monitor(job=args.job, output_path=args.out, backend="torch",
                                 flight_recorder=args.flight_recorder)
    slow_from = None
    n = 0
    while not stop["now"]:
        n += 1
        if slow_from is None and os.path.exists(args.slow_file):
            slow_from = n
        slow = rank == args.slow_rank and slow_from is not None and n < slow_from + args.slow_steps
        if rank == args.slow_rank and slow_from is not None and n == slow_from + args.slow_steps:
            with open(args.slow_file + ".done", "w") as fh:
                fh.write(f"{slow_from} {n - 1}")
        x = torch.randn(16, 64, generator=gen)
        with contextlib.nullcontext() if args.unmarked else dynprof_nb.range("forward"):
            loss = model(x).pow(2).mean()
            for _ in range(args.work):
                torch.mm(a, b)
            if slow:
                time.sleep(args.slow_ms / 1000)
        opt.zero_grad()
        with dynprof_nb.range("backward"):
            loss.backward()
        opt.step()
        monitor.step()
    monitor.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
