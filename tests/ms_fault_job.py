"""A real 2-rank MindSpore data-parallel job (CPU, MindSpore's own collectives) that records two
windows with the MindSpore backend -- a baseline and, after a fault is injected, a faulty one --
for the fault suite (tests/analysis/test_fault_suite.py).

Launched by MindSpore's own launcher, ``msrun --worker_num=2 --local_worker_num=2 ...`` (a
scheduler and two workers; ``mindspore.communication.init()`` builds the cluster and its CPU
collective library, ``mccl``). Each worker trains the same small MLP in PyNative mode on its own
data and all-reduces its gradients each step (``nn.DistributedGradReducer``: MindSpore's
``AllReduce`` operator, recorded by its profiler), so the two ranks' steps end together as in
any synchronous job. The windows are written as ``ddp_fault_job.py`` writes them: the backend's
start, step, stop, save and the window folder's publish, the files a Monitor's window has.

Faults (``--fault``, on rank ``--on``, from step ``--fault-from``):

- ``compute``: the rank multiplies two extra matrices each step for ``--ms`` ms, in a
  ``dynprof_nb.range`` named ``extra_compute``;
- ``gc``: the rank calls ``gc.collect()`` ``--n`` times per step (a GC storm);
- ``none``: nothing changes.

Every rank's step has ``--work`` matrix products of its own besides the fault (a count, not a
time), as in ``ddp_fault_job.py``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

import numpy as np

from dynprof_nb import range as dynprof_range
from dynprof_nb.contract import window_dirs
from dynprof_nb.contract.config import ProfilerConfig


class Window:
    """One window of this rank, recorded by the MindSpore backend as a Monitor records it."""

    def __init__(self, root: Path, job: str, rank: int, start: int, stop: int) -> None:
        from dynprof_nb.training.backends.mindspore import MindSporeBackend

        cfg = ProfilerConfig().update(start_step=start, stop_step=stop, activities=["CPU"])
        self.tmp = window_dirs.create_window_dir(root, rank, start, stop)
        self.manifest = window_dirs.new_manifest(
            job=job, rank=rank, start=start, stop=stop, backend="mindspore",
            config=cfg.to_dict())
        window_dirs.write_manifest(self.tmp, self.manifest)
        self.rec = MindSporeBackend()
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
    p.add_argument("--fault", default="none", choices=("none", "compute", "gc"))
    p.add_argument("--on", type=int, default=1, help="the rank with the fault")
    p.add_argument("--ms", type=float, default=60.0)
    p.add_argument("--n", type=int, default=1)
    p.add_argument("--work", type=int, default=4, help="matrix products per step, every rank")
    p.add_argument("--base", default="4-9")
    p.add_argument("--fault-from", type=int, default=11)
    p.add_argument("--window", default="12-17")
    args = p.parse_args()

    import mindspore as ms
    from mindspore import nn, ops
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    init()
    rank = get_rank()
    assert get_group_size() == 2, get_group_size()
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(64, 256), nn.ReLU(), nn.Dense(256, 10)])
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.SGD(net.trainable_params(), learning_rate=0.01)
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)
    reducer = nn.DistributedGradReducer(opt.parameters, mean=True, degree=2)
    rng = np.random.default_rng(rank)
    a = ms.Tensor(rng.standard_normal((384, 384)).astype(np.float32))
    b = ms.Tensor(rng.standard_normal((384, 384)).astype(np.float32))
    heap: list = []
    base = [int(x) for x in args.base.split("-")]
    fault = [int(x) for x in args.window.split("-")]
    root = Path(args.out)
    win = None
    for step in range(1, fault[1] + 1):
        if step in (base[0], fault[0]):
            lo, hi = base if step == base[0] else fault
            win = Window(root, args.job, rank, lo, hi)
        on = step >= args.fault_from and (args.fault == "none" or rank == args.on)
        x = ms.Tensor(rng.standard_normal((32, 64)).astype(np.float32))
        y = ms.Tensor(rng.integers(0, 10, 32).astype(np.int32))
        loss, grads = grad_fn(x, y)
        for _ in range(args.work):  # the step's own work (module docstring)
            ops.matmul(a, b)
        if on and args.fault == "compute":
            with dynprof_range("extra_compute"):
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < args.ms / 1000:
                    ops.matmul(a, b).asnumpy()
        if on and args.fault == "gc":
            heap = heap or [[i] for i in range(20_000)]
            for _ in range(args.n):
                gc.collect()
        opt(reducer(grads))
        loss.asnumpy()  # the step ends when its work has run (PyNative runs ops async)
        if win is not None and win.step(step):
            win = None
    del heap
    sys.stdout.write(f"rank {rank} done\n")
    sys.stdout.flush()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
