"""Run HTA 0.5.0 (in .venv/hta) on one Kineto trace and print, as one JSON line, its
get_idle_time_breakdown (per stream and idle category) and get_cuda_kernel_launch_stats (per
correlation), for tests/analysis/test_advise_hta_oracle.py. Nothing here is dynprof_nb's.

``.venv/hta/bin/python tests/hta_advise_oracle.py TRACE`` (or ``--stragglers DIR``: HTA's
get_potential_stragglers on the rank traces of DIR).
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path


def main(path: str) -> dict:
    logging.disable(logging.WARNING)
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis
    from hta.analyzers.cuda_kernel_analysis import CudaKernelAnalysis
    from hta.common.trace import Trace
    from hta.configs.parser_config import ParserConfig

    cfg = ParserConfig(ParserConfig.get_minimum_args())
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / Path(path).name  # the rank's only trace (rank 0)
        shutil.copy(path, dst)
        t = Trace(trace_files={0: str(dst)}, trace_dir=tmp, parser_config=cfg)
        t.load_traces(use_multiprocessing=False)
    out: dict = {}
    try:  # HTA's default consecutive_kernel_delay (trace_analysis.py): 30
        idle, _ = BreakdownAnalysis.get_idle_time_breakdown(t, 30, visualize=False)
        out["idle"] = [
            {"stream": int(r.stream), "category": str(r.idle_category),
             "time": float(r.idle_time), "ratio": float(r.idle_time_ratio)}
            for r in idle.itertuples(index=False)
        ]
    except (ValueError, KeyError, IndexError) as e:
        out["idle_error"] = repr(e)
    launch = CudaKernelAnalysis.cuda_kernel_launch_stats(t, visualize=False)
    df = next(iter(launch.values())) if launch else None
    out["launch"] = [] if df is None else [
        {"correlation": int(r.correlation), "cpu": float(r.cpu_duration),
         "gpu": float(r.gpu_duration), "delay": float(r.launch_delay)}
        for r in df.itertuples(index=False)
    ]
    return out




def stragglers(directory: str) -> dict:
    """HTA's get_potential_stragglers on every ``rank{r}.*.json.gz`` of ``directory``, and the
    metric it ranks them by (its normalized start time of the probe NCCL kernel)."""
    import re

    logging.disable(logging.WARNING)
    from hta.analyzers.straggler import _compute_normalized_start_time_of_significant_comm_kernels
    from hta.analyzers.straggler_analysis import StragglerAnalysis
    from hta.common.trace import Trace
    from hta.configs.parser_config import ParserConfig

    files = {int(re.match(r"rank(\d+)\.", p.name).group(1)): str(p)
             for p in Path(directory).glob("rank*.json.gz")}
    t = Trace(trace_files=files, trace_dir=directory,
              parser_config=ParserConfig(ParserConfig.get_minimum_args()))
    t.load_traces(use_multiprocessing=False)
    out = {"stragglers": [int(r) for r in StragglerAnalysis.get_potential_stragglers(t)]}
    ranks = list(t.get_all_traces())
    import pandas as pd

    df = pd.concat([t.get_trace(r) for r in ranks], keys=ranks, names=["rank", "idx"])
    df = df.reset_index()
    steps = StragglerAnalysis.get_profiler_steps(t)
    metric, name = _compute_normalized_start_time_of_significant_comm_kernels(
        df[df["iteration"].isin(steps)], t.symbol_table)
    out["metric"] = [{"rank": int(r.rank), "step": int(r.iteration), name: float(getattr(r, name))}
                     for r in metric.itertuples(index=False)]
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--stragglers":
        print(json.dumps(stragglers(sys.argv[2])))
    else:
        print(json.dumps(main(sys.argv[1])))
