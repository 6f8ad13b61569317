"""A real 2-rank PyTorch DDP job (gloo, CPU) that records two windows with a real profiler
backend -- a baseline and, after a fault is injected, a faulty one -- for the fault suite
(tests/analysis/test_fault_suite.py).

Steps ``1..--steps``; the baseline window is steps ``--base`` (``A-B``), the fault is on from
step ``--fault-from`` and the second window is steps ``--window``. Each rank writes its own
window folders (``rank{R}_start{A}_stop{B}``, with ``window.json``) under ``--out``, the same
files a Monitor's window has, through the same backend calls (start, step, stop, save, publish).

Faults (``--fault``; ``--on`` the rank that has it, where it is one rank's):

- ``compute``: the rank multiplies two extra matrices each step, in a ``dynprof_nb.range``
  named ``extra_compute`` (a ``record_function`` on the torch backend), ``--ms`` ms per step;
- ``loader``: the rank's data loader sleeps ``--ms`` ms per batch (a ``DataLoader`` whose
  dataset stalls: the profiler records the loader's ``__next__``);
- ``comm``: every rank all-reduces an extra large tensor each step (heavier communication on
  both ranks);
- ``gc``: the rank calls ``gc.collect()`` ``--n`` times per step (a GC storm: each full
  collection walks every object of the process, hundreds of ms with torch loaded);
- ``sync``: the rank reads a tensor back to Python (``.item()``) after each of ``--n`` small
  ops per step (host sync points);
- ``none``: nothing changes (the two windows differ by noise only).

``--busy-base N`` (rank 0): N CPU burners (processes spinning in Python) run through the
baseline window only -- started before its first step, killed after its last -- so the baseline
runs on a busier machine than the window (the "baseline ran busier" rule of ``w.explain()``).

Every rank's step has work of its own besides the fault: ``--work`` matrix products (a fixed
count, not a time: a preempted rank takes longer, as a real one does). Without it a step is
1-8 ms of gloo latency and OS scheduling (bimodal at the scheduler's tick), and two 6-step
windows a few steps apart differ by more than any noise estimate from 6 steps can bound: the
"none" case then measured the machine, not the product.

Run as two processes with RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT set.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import dynprof_nb
from dynprof_nb.contract import window_dirs
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.training.backends import make_backend


class Batches(torch.utils.data.IterableDataset):
    """Endless random batches; ``stall`` (a dict) makes each one wait ``stall['s']`` first."""

    def __init__(self, rank: int, stall: dict[str, float]) -> None:
        self.rank, self.stall = rank, stall

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.rank)
        while True:
            if self.stall["s"]:
                time.sleep(self.stall["s"])
            yield torch.randn(16, 64, generator=gen)


class Window:
    """One window of this rank, recorded by a backend as a Monitor records it."""

    def __init__(self, backend: str, root: Path, job: str, rank: int, start: int, stop: int):
        cfg = ProfilerConfig().update(start_step=start, stop_step=stop)
        self.tmp = window_dirs.create_window_dir(root, rank, start, stop)
        self.manifest = window_dirs.new_manifest(
            job=job, rank=rank, start=start, stop=stop, backend=backend, config=cfg.to_dict())
        window_dirs.write_manifest(self.tmp, self.manifest)
        self.rec = make_backend(backend)
        self.rec.start(self.tmp, cfg, start, {"job": job, "rank": rank, "world_size": 2})
        self.stop_step = stop

    def step(self, n: int) -> bool:
        """Step ``n`` ended; True once the window is written."""
        self.rec.step(n)
        if n < self.stop_step:
            return False
        self.rec.stop()
        self.rec.save()
        window_dirs.publish(self.tmp, dict(self.manifest, status="complete",
                                           ended_at=time.time()))
        return True


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--job", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--backend", default="torch")
    p.add_argument("--fault", default="none",
                   choices=("none", "compute", "loader", "comm", "gc", "sync"))
    p.add_argument("--on", type=int, default=1, help="the rank with the fault")
    p.add_argument("--ms", type=float, default=40.0)
    p.add_argument("--n", type=int, default=20)
    p.add_argument("--work", type=int, default=200, help="matrix products per step, every rank")
    p.add_argument("--base", default="4-9")
    p.add_argument("--fault-from", type=int, default=11)
    p.add_argument("--window", default="12-17")
    p.add_argument("--busy-base", type=int, default=0, help="CPU burners through the baseline")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    stall = {"s": 0.0}
    loader = iter(torch.utils.data.DataLoader(Batches(rank, stall), batch_size=None))
    a, b = torch.randn(192, 192), torch.randn(192, 192)
    big = torch.zeros(1 << 20)
    heap: list = []
    base = [int(x) for x in args.base.split("-")]
    fault = [int(x) for x in args.window.split("-")]
    root = Path(args.out)
    last = fault[1]
    win = None
    mine = args.fault in ("none", "comm") or rank == args.on
    burners: list[subprocess.Popen] = []
    for step in range(1, last + 1):
        if step == base[0] and rank == 0:
            burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                       for _ in range(args.busy_base)]
        if step == base[1] + 1:
            for proc in burners:
                proc.kill()
                proc.wait()
        if step in (base[0], fault[0]):
            lo, hi = base if step == base[0] else fault
            win = Window(args.backend, root, args.job, rank, lo, hi)
        on = step >= args.fault_from and mine
        stall["s"] = args.ms / 1000 if on and args.fault == "loader" else 0.0
        x = next(loader)
        loss = model(x).pow(2).mean()
        for _ in range(args.work):  # the step's own work (module docstring)
            torch.mm(a, b)
        if on and args.fault == "compute":
            with dynprof_nb.range("extra_compute"):  # record_function on the torch backend
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < args.ms / 1000:
                    torch.mm(a, b)
        if on and args.fault == "sync":
            for _ in range(args.n):
                float((x * 2).sum().item())
        opt.zero_grad()
        loss.backward()
        if on and args.fault == "comm":
            for _ in range(args.n):
                dist.all_reduce(big)
        if on and args.fault == "gc":
            heap = heap or [[i] for i in range(20_000)]  # garbage's neighbours, made once
            for _ in range(args.n):
                gc.collect()
        opt.step()
        if win is not None and win.step(step):
            win = None
    del heap
    sys.stdout.write(f"rank {rank} done\n")
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
