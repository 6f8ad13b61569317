"""A small MindSpore training job (CPU) profiled by dynprof_nb; run it in the background.

    # our Monitor, step() style or Model.train callback style
    python examples/train_mindspore.py --job ms-demo --style step &
    python examples/train_mindspore.py --job ms-demo --style callback &
    # an unmodified MindSpore job: their own DynamicProfilerMonitor, driven by a config file
    python examples/train_mindspore.py --monitor mindspore --cfg-path ./cfg &
    # the same script switched to dynprof_nb by one import line (the drop-in)
    python examples/train_mindspore.py --monitor dropin --cfg-path ./cfg &

From a notebook cell, start it with ``subprocess.Popen([...], start_new_session=True)`` (and
``stdout``/``stderr`` to a file): the stop button interrupts the kernel's whole process group,
and a job outside it keeps training. Then, from a notebook: ``dynprof_nb.attach("ms-demo")`` (our Monitor) or
``dynprof_nb.attach(cfg_path="./cfg")`` (file mode, either monitor class).
"""

from __future__ import annotations

import argparse
import signal
import time
from typing import Any

import numpy as np


def build(mode: str) -> tuple[Any, Any, Any]:
    """A two-layer MLP on synthetic data: (train_step cell, model, dataset)."""
    import mindspore as ms
    import mindspore.dataset as ds
    from mindspore import nn
    from mindspore.train import Model

    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(64, 128), nn.ReLU(), nn.Dense(128, 10)])
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 64)).astype(np.float32)
    y = rng.integers(0, 10, 512).astype(np.int32)
    data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(32)
    step_cell = nn.TrainOneStepCell(nn.WithLossCell(net, loss), opt)
    return step_cell, Model(net, loss_fn=loss, optimizer=opt), data


def make_monitor(kind: str, args: argparse.Namespace) -> Any:
    if kind == "dynprof":
        import dynprof_nb

        relay = {"cfg_path": args.cfg_path} if args.cfg_path else {}
        return dynprof_nb.Monitor(job=args.job, output_path=args.output, backend="mindspore",
                                  **relay)
    if kind == "mindspore":
        from mindspore.profiler import DynamicProfilerMonitor
    else:
        from dynprof_nb import DynamicProfilerMonitor  # the one line that switches
    return DynamicProfilerMonitor(cfg_path=args.cfg_path, output_path=args.output,
                                  poll_interval=args.poll_interval)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job", default="ms-demo", help="job name (our Monitor)")
    p.add_argument("--monitor", choices=("dynprof", "mindspore", "dropin"), default="dynprof")
    p.add_argument("--style", choices=("step", "callback"), default="step")
    p.add_argument("--mode", choices=("graph", "pynative"), default="pynative")
    p.add_argument("--steps", type=int, default=10**6)
    p.add_argument("--output", default="./dyn_profile_data")
    p.add_argument("--cfg-path", default=None, help="directory of profiler_config.json")
    p.add_argument("--poll-interval", type=int, default=1)
    p.add_argument("--step-sleep", type=float, default=0.0,
                   help="extra seconds per step (a heavier model's step time)")
    args = p.parse_args()
    if args.monitor != "dynprof" and not args.cfg_path:
        p.error("--monitor mindspore/dropin needs --cfg-path")

    step_cell, model, data = build(args.mode)
    monitor = make_monitor(args.monitor, args)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))

    if args.style == "step":
        batches = list(data.create_tuple_iterator())
        for n in range(args.steps):
            if stop["now"]:
                break
            step_cell(*batches[n % len(batches)])
            time.sleep(args.step_sleep)
            monitor.step()
        if hasattr(monitor, "close"):
            monitor.close()
        elif hasattr(monitor, "on_train_end"):
            monitor.on_train_end(None)
    else:
        from mindspore.train import Callback

        class StopOnSigterm(Callback):
            def step_end(self, run_context: Any) -> None:
                time.sleep(args.step_sleep)
                if stop["now"] or run_context.original_args().cur_step_num >= args.steps:
                    run_context.request_stop()

        epochs = max(1, -(-args.steps // data.get_dataset_size()))
        model.train(epochs, data, callbacks=[monitor, StopOnSigterm()], dataset_sink_mode=False)


if __name__ == "__main__":
    main()
