"""A small PyTorch training job profiled by dynprof_nb: run it in the background, then profile
it from a notebook (or ``dynprof start JOB +5 +9``).

    python examples/train_torch.py --job torch-demo --steps 100000 &

or from a notebook cell, in a session of its own so that the stop button (which interrupts the
kernel's whole process group) never reaches it, with its output in a file, not in the cells:

    >>> log = open("train_torch.log", "a")
    >>> proc = subprocess.Popen([sys.executable, "examples/train_torch.py", "--job", "torch-demo"],
    ...                         stdout=log, stderr=log, start_new_session=True)

    >>> job = dynprof_nb.attach("torch-demo")
    >>> job.start("+5", "+9", record_shapes=True); job.wait()
    >>> job.load().ops.head()

The only dynprof_nb lines are the ``Monitor`` and ``monitor.step()`` (and optional ranges).
"""

from __future__ import annotations

import argparse
import signal

import torch
from torch import nn

import dynprof_nb


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10),
    )


def train(job: str, steps: int, output: str, backend: str = "torch", batch: int = 32) -> int:
    """Train on synthetic MNIST-shaped data; returns the number of steps run."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x_all = torch.randn(batch * 8, 1, 28, 28)
    y_all = torch.randint(0, 10, (batch * 8,))
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    done = 0
    with dynprof_nb.Monitor(job=job, output_path=output, backend=backend) as monitor:
        for step in range(1, steps + 1):
            if stop["now"]:
                break
            i = (step * batch) % len(x_all)
            x, y = x_all[i:i + batch], y_all[i:i + batch]
            with dynprof_nb.range("forward"):
                loss = loss_fn(model(x), y)
            with dynprof_nb.range("backward"):
                opt.zero_grad()
                loss.backward()
            opt.step()
            monitor.step()
            done = step
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", default="torch-demo", help="job name to attach to")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--output", default="./dyn_profile_data",
                        help="window root (the config's prof_path wins)")
    parser.add_argument("--backend", default="torch", help="torch (default), auto or builtin")
    args = parser.parse_args()
    train(args.job, args.steps, args.output, args.backend)


if __name__ == "__main__":
    main()
