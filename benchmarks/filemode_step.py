"""Idle ``step()`` in file mode against the shared-memory one and MindSpore 2.7's own.

One process, the calls interleaved (one burst of each in turn, best of ``--repeat``), so the
machine's load hits all alike; the ratios are the result, the nanoseconds are this machine's:

* an empty method call (the reference);
* ``Monitor(job=...).step()``: the shared-memory step (one word compared);
* ``Monitor(cfg_path=...).step()`` and the drop-in's ``DynamicProfilerMonitor.step()``: file
  mode, which also ``fstat``s ``profiler_config.json`` so an edit made before a ``step()`` is
  applied by that ``step()``;
* MindSpore 2.7's ``DynamicProfilerMonitor.step()`` on the same idle file (with
  ``--mindspore``, in the MindSpore venv: ``.venv/ms/bin/python``), which re-reads and
  re-parses its shared-memory copy of the file every step and sees an edit up to its 2 s
  poll later.

    python benchmarks/filemode_step.py [--calls 200000] [--repeat 7] [--mindspore]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's dynprof_nb (the MindSpore venv has none)

import dynprof_nb  # noqa: E402
from dynprof_nb.contract import segment  # noqa: E402
from dynprof_nb.training.dropin import job_name_for  # noqa: E402


class Empty:
    def step(self) -> None:
        pass


def idle_file(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "profiler_config.json").write_text(
        json.dumps({"start_step": -1, "stop_step": -1, "activities": ["CPU"]}, indent=4)
    )
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--mindspore", action="store_true", help="also MindSpore 2.7's own")
    args = parser.parse_args()
    pid = os.getpid()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subjects = {
            "empty method call": Empty(),
            "shared-memory Monitor.step": dynprof_nb.Monitor(
                job=f"bench-shm-{pid}", output_path=root / "out", backend="builtin"
            ),
            "file-mode Monitor(cfg_path).step": dynprof_nb.Monitor(
                job=f"bench-file-{pid}",
                output_path=root / "out",
                backend="builtin",
                cfg_path=idle_file(root / "cfg1"),
            ),
            "drop-in DynamicProfilerMonitor.step": dynprof_nb.DynamicProfilerMonitor(
                cfg_path=idle_file(root / "cfg2"), output_path=root / "out", backend="builtin"
            ),
        }
        if args.mindspore:
            from mindspore.profiler import DynamicProfilerMonitor

            subjects["MindSpore 2.7 DynamicProfilerMonitor.step"] = DynamicProfilerMonitor(
                cfg_path=str(idle_file(root / "cfg3")), output_path=str(root / "ms")
            )
        best = dict.fromkeys(subjects, float("inf"))
        for _ in range(args.repeat):
            for name, obj in subjects.items():
                calls = args.calls // 20 if name.startswith("MindSpore") else args.calls
                took = timeit.timeit("obj.step()", globals={"obj": obj}, number=calls)
                best[name] = min(best[name], took / calls * 1e9)
        for obj in subjects.values():
            close = getattr(obj, "close", None) or getattr(obj, "_clean_resource", None)
            if close is not None:
                close()
        for job in (f"bench-shm-{pid}", f"bench-file-{pid}", job_name_for(root / "cfg2")):
            segment.unlink(job)
    empty = best["empty method call"]
    print(f"load average: {os.getloadavg()[0]:.2f}")
    for name, ns in best.items():
        print(f"{name:42s}: {ns:9.1f} ns   {ns / empty:7.1f}x the empty call")
    print(json.dumps({k: round(v, 1) for k, v in best.items()}))


if __name__ == "__main__":
    main()
