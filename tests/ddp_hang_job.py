"""A real 2-rank PyTorch DDP job (gloo) in which rank 1 stalls before its backward pass.

At step ``--hang-step`` rank 1 sleeps ``--hang-s`` seconds in :func:`rank1_sleeps` before
``loss.backward()`` (with ``--hold FILE``: until the test removes FILE, at most ``--hang-s``,
so the hang lasts exactly as long as the test needs it and no timing can end it first), while
rank 0 enters its backward pass and waits in DDP's all-reduce for rank 1's gradients.
Afterwards both go on to ``--steps`` and print a checksum of their parameters (DDP keeps them
identical: training resumed normally). Run with torchrun, or as two processes with RANK,
WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT set.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import dynprof_nb


def rank1_sleeps(seconds: float, hold: str = "") -> None:
    """The hang: ``seconds`` long, or (``hold``) until that file is gone, ``seconds`` at most."""
    if not hold:
        time.sleep(seconds)
        return
    deadline = time.monotonic() + seconds
    while os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--hang-step", type=int, default=10)
    parser.add_argument("--hang-s", type=float, default=8.0)
    parser.add_argument("--step-s", type=float, default=0.03)
    parser.add_argument("--hold", default="",
                        help="rank 1 hangs until this file is removed (--hang-s at most)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = dynprof_nb.Monitor(job=args.job, output_path=args.out)
    gen = torch.Generator().manual_seed(rank)
    for step in range(1, args.steps + 1):
        x = torch.randn(8, 16, generator=gen)
        loss = model(x).pow(2).mean()
        if rank == 1 and step == args.hang_step:
            rank1_sleeps(args.hang_s, args.hold)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(args.step_s)
        monitor.step()
    monitor.close()
    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    # one write per line: two ranks share the pipe, and print()'s separate "\n" write let
    # their lines run together
    sys.stdout.write(f"rank {rank} done {monitor.step_count} checksum {checksum:.12f}\n")
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
