"""Real profiler windows shipped with the package, to try dynprof_nb without a training job.

    >>> from dynprof_nb import samples
    >>> samples.list()                          # name, framework, what, files, licence
    >>> w = samples.load("ascend_text")          # = dynprof_nb.load_window(samples.path(...))
    >>> samples.path("kineto_gpu")               # a pathlib.Path inside the installed package

Sources and licences: ``README.md`` in this folder; each licence notice sits next to its data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from dynprof_nb.traces.window import TraceWindow

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Sample:
    name: str
    framework: str
    what: str
    relpath: str  # what load_window takes, relative to this folder
    licence: str

    @property
    def path(self) -> Path:
        return HERE / self.relpath


SAMPLES: dict[str, Sample] = {
    s.name: s
    for s in (
        Sample(
            "ascend_text",
            "torch_npu",
            "Ascend NPU window, rank 0 of 2, text export "
            "(trace_view.json, kernel_details.csv, operator and memory CSVs)",
            "ascend_text/rank0_ascend_pt",
            "Mulan PSL v2 (ascend_text/LICENSE.msinsight)",
        ),
        Sample(
            "ascend_db",
            "torch_npu",
            "Ascend NPU window, 2 ranks, db export (ascend_pytorch_profiler_N.db, analysis.db)",
            "ascend_db",
            "Mulan PSL v2 (ascend_db/LICENSE.msinsight)",
        ),
        Sample(
            "mindspore_cpu",
            "mindspore",
            "window written by MindSpore 2.7's own DynamicProfilerMonitor on CPU, steps 5-8",
            "mindspore_cpu/rank0_start5_stop8",
            "Apache-2.0",
        ),
        Sample(
            "pytorch_cpu",
            "pytorch",
            "PyTorch 2.13 CPU trace of a small CNN: 3 steps, shapes, memory",
            "pytorch_cpu/rank0.1795968823191922673.pt.trace.json",
            "Apache-2.0",
        ),
        Sample(
            "kineto_gpu",
            "pytorch",
            "Kineto trace of one A100 rank: 2 steps, 1,204 CUDA kernels incl. NCCL",
            "kineto_gpu/sampled_rank-0.json.gz",
            "MIT (kineto_gpu/LICENSE.hta)",
        ),
    )
}


def names() -> list[str]:
    """The samples' names."""
    return [*SAMPLES]


def path(name: str) -> Path:
    """Where sample ``name`` is: a window directory or a trace file, for ``load_window``."""
    try:
        sample = SAMPLES[name]
    except KeyError:
        raise KeyError(f"no sample named {name!r}; the samples are: {', '.join(SAMPLES)}") from None
    p = sample.path
    if not p.exists():
        raise FileNotFoundError(
            f"sample {name!r} is missing at {p}: this installation of "
            "dynprof_nb lacks its package data; reinstall it."
        )
    return p


def list() -> pd.DataFrame:  # noqa: A001 - samples.list() reads naturally
    """One row per sample: name, framework, what, path, licence."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "name": s.name,
                "framework": s.framework,
                "what": s.what,
                "path": str(s.path),
                "licence": s.licence,
            }
            for s in SAMPLES.values()
        ]
    )


def load(name: str, **kwargs: Any) -> TraceWindow:
    """``dynprof_nb.load_window(samples.path(name), **kwargs)``."""
    from dynprof_nb.traces import load_window

    return load_window(path(name), **kwargs)


__all__ = ["SAMPLES", "list", "load", "names", "path"]
