"""MindSpore 2.7's own DynamicProfilerMonitor examples, run with their monitor or the drop-in.

Both of MindSpore's documented call styles, one after the other in one process (MindSpore's
import is slow):

* ``step``: the example of ``DynamicProfilerMonitor.step()``'s docstring (and of MindSpore's
  ST test ``test_dynamic_step_profiler``): 15 iterations of ``model.train(1, data)`` with
  ``dp.step()`` after each; the file asks for steps 2..5 and is edited to 6..7 after step 6
  has run, right before its ``dp.step()``. The drop-in applies the edit in that
  ``dp.step()`` and records 7..8 into ``rank0_start6_stop7`` (file mode's rule for a window
  that has begun). MindSpore's own monitor sees it a poll later, during step 7, and records
  8..9 there; had it seen it during step 6, its CPU profiler would have lost both windows,
  the first one's last step overlapping the second's start;
* ``callback``: the class docstring's example: ``model.train(..., callbacks=[dp])`` with the
  window in the file before training starts.

    python ms_documented_example.py --monitor mindspore|dropin --root DIR [--settle S] [--repeat N]

writes DIR/step/{cfg,prof} and DIR/callback/{cfg,prof} (DIR/STYLE/run<i>/... with
``--repeat``). The only line that differs between the two monitors is the import, as for a
user. MindSpore's own monitor reads the file every ``poll_interval`` seconds (1 at least) in a
helper process, so after each write the script waits ``--settle`` seconds (``SETTLE_S``)
before the next step: on the Ascend machines of the example a step is that long anyway.
``--settle 0`` runs it as MindSpore's ST test does, with no pause: the drop-in needs none.

The network, data and file follow the docstring examples of MindSpore 2.7.0's
``mindspore/profiler/dynamic_profiler.py`` (Copyright Huawei Technologies Co., Ltd,
Apache-2.0), with ``activities`` CPU only and an absolute ``prof_path``.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import time
from pathlib import Path

import numpy as np

POLL_S = 1
SETTLE_S = 2.0
STEP_NUM = 15
CALLBACK_WINDOW = (3, 5)

# the docstring's file, with CPU only (this machine has no NPU)
DOC_CFG = {
    "start_step": 2, "stop_step": 5, "aic_metrics": "AiCoreNone", "profiler_level": "Level0",
    "analyse_mode": 0, "activities": ["CPU"], "export_type": ["text"], "profile_memory": False,
    "mstx": False, "parallel_strategy": False, "with_stack": False, "data_simplification": True,
    "l2_cache": False, "analyse": True, "record_shapes": False, "prof_path": "./data",
    "mstx_domain_include": [], "mstx_domain_exclude": [], "host_sys": [], "sys_io": False,
    "sys_interconnection": False,
}


def monitor_class(kind: str) -> type:
    if kind == "mindspore":
        from mindspore.profiler import DynamicProfilerMonitor
    else:
        from dynprof_nb import DynamicProfilerMonitor  # the one line that switches
    return DynamicProfilerMonitor


def write_cfg(cfg_dir: Path, prof: Path, window: tuple[int, int]) -> None:
    cfg_dir.mkdir(parents=True, exist_ok=True)
    data = dict(DOC_CFG, start_step=window[0], stop_step=window[1], prof_path=str(prof))
    (cfg_dir / "profiler_config.json").write_text(json.dumps(data, indent=4))


def change_cfg_json(json_path: Path) -> None:
    """The docstring's edit: the same file, now asking for steps 6..7."""
    data = json.loads(json_path.read_text(encoding="utf-8"))
    data["start_step"], data["stop_step"] = 6, 7
    json_path.write_text(json.dumps(data, ensure_ascii=False, indent=4), encoding="utf-8")


def build() -> tuple[object, object, object]:
    import mindspore as ms
    from mindspore import nn

    class Net(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Dense(2, 2)

        def construct(self, x):  # noqa: ANN001, ANN201 (MindSpore's signature)
            return self.fc(x)

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)
    return Net(), nn, ms


def dataset(n: int):  # noqa: ANN201
    import mindspore.dataset as ds

    def generator_net():  # noqa: ANN202
        for _ in range(n):
            yield np.ones([2, 2]).astype(np.float32), np.ones([2]).astype(np.int32)

    return ds.GeneratorDataset(generator_net, ["data", "label"])


def model(net, nn, ms):  # noqa: ANN001, ANN201
    optimizer = nn.Momentum(net.trainable_params(), 1, 0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True)
    return ms.train.Model(net, loss, optimizer)


def close(dp: object) -> None:
    """End a monitor as the end of training does (MindSpore's atexit hook does the same)."""
    if hasattr(dp, "close"):
        dp.close()
    else:
        dp._clean_resource()


def step_style(cls: type, root: Path, settle_s: float = SETTLE_S) -> None:
    cfg, prof = root / "cfg", root / "prof"
    write_cfg(cfg, prof, (2, 5))
    dp = cls(cfg_path=str(cfg), output_path=str(root / "unused"), poll_interval=POLL_S)
    time.sleep(settle_s)
    net, nn, ms = build()
    for i in range(STEP_NUM):
        model(net, nn, ms).train(1, dataset(2))
        if i == 5:
            change_cfg_json(cfg / "profiler_config.json")
        dp.step()
        if i == 5:
            time.sleep(settle_s)  # MindSpore's monitor: the edit reaches it during step 7
    close(dp)


def callback_style(cls: type, root: Path, settle_s: float = SETTLE_S) -> None:
    cfg, prof = root / "cfg", root / "prof"
    write_cfg(cfg, prof, CALLBACK_WINDOW)
    dp = cls(cfg_path=str(cfg), output_path=str(root / "unused"), poll_interval=POLL_S)
    time.sleep(settle_s)
    net, nn, ms = build()
    model(net, nn, ms).train(1, dataset(8), callbacks=[dp], dataset_sink_mode=False)
    close(dp)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--monitor", choices=("mindspore", "dropin"), required=True)
    p.add_argument("--root", type=Path, required=True)
    p.add_argument("--styles", default="step,callback")
    p.add_argument("--settle", type=float, default=SETTLE_S,
                   help="seconds to wait after each write (0: none, as MindSpore's ST test)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run each style this many times, into DIR/STYLE/run<i>")
    args = p.parse_args()
    os.environ.setdefault("GLOG_v", "3")
    # a test that gives up on this script first asks it (and MindSpore's workers it forks,
    # which inherit the handler) where every thread is
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    cls = monitor_class(args.monitor)
    for style in args.styles.split(","):
        run = {"step": step_style, "callback": callback_style}[style]
        for i in range(args.repeat):
            where = args.root / style / f"run{i}" if args.repeat > 1 else args.root / style
            t0 = time.monotonic()
            run(cls, where, args.settle)
            if args.repeat > 1:
                print(f"done {style} run{i} in {time.monotonic() - t0:.1f} s", flush=True)
        print(f"done {style}", flush=True)


if __name__ == "__main__":
    main()
