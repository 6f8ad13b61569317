"""Run HTA 0.5.0 (in .venv/hta) on one Kineto trace and print, as one JSON line, its
get_idle_time_breakdown (per stream and idle category) and get_cuda_kernel_launch_stats (per
correlation), for tests/analysis/test_advise_hta_oracle.py. Nothing here is dynprof_nb's.

``.venv/hta/bin/python tests/hta_advise_oracle.py TRACE``
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


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
