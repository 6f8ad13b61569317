"""Run HTA 0.5.0 (HolisticTraceAnalysis, in its own venv .venv/hta: ``make .venv/hta/.stamp``)
on one Kineto trace and hand its numbers back as JSON, for the oracle tests
(tests/analysis/test_hta_oracle.py). Nothing here is computed by dynprof_nb.

Run as ``.venv/hta/bin/python tests/hta_oracle.py TRACE [--include-last-step]``; prints one
JSON object: HTA's temporal breakdown, comm/comp overlap, kernel (type) breakdown, and from
HTA's own trace frame the per-step kernel counts and time and the NCCL message fields.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path

HTA_VERSION = "0.5.0"


def main(path: str, include_last: bool) -> dict:
    logging.disable(logging.WARNING)
    import hta
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis
    from hta.analyzers.communication_analysis import CommunicationAnalysis
    from hta.common.trace import Trace
    from hta.configs.parser_config import ParserConfig

    version = getattr(hta, "__version__", None)
    if version is None:
        from importlib.metadata import version as _v

        version = _v("HolisticTraceAnalysis")
    cfg = ParserConfig(ParserConfig.get_minimum_args())
    cfg.add_args(ParserConfig.ARGS_COMMUNICATION)
    # the communication group of each collective (HTA parses it, not in ARGS_COMMUNICATION)
    from hta.configs.parser_config import AVAILABLE_ARGS

    cfg.add_args([AVAILABLE_ARGS[f"nccl::process_group_{k}"] for k in ("name", "desc", "ranks")])
    with tempfile.TemporaryDirectory() as tmp:
        # HTA reads a directory; the file is the rank's only trace (rank 0 when it says none)
        dst = Path(tmp) / Path(path).name
        shutil.copy(path, dst)
        t = Trace(trace_files={0: str(dst)}, trace_dir=tmp, parser_config=cfg)
        t.load_traces(include_last_profiler_step=include_last, use_multiprocessing=False)
    out: dict = {"hta_version": version}
    df = t.get_trace(0)
    sym = t.symbol_table.get_sym_table()
    gpu = df[df["stream"].ne(-1)].copy()
    gpu["s_name"] = gpu["name"].map(lambda i: sym[i])
    gpu["s_cat"] = gpu["cat"].map(lambda i: sym[i])
    out["device_count"] = int(len(gpu))
    out["device_cats"] = {str(k): int(v) for k, v in gpu["s_cat"].value_counts().items()}
    if len(gpu):
        tb = BreakdownAnalysis.get_temporal_breakdown(t, visualize=False)
        out["temporal"] = {k: float(v) for k, v in tb.iloc[0].to_dict().items()}
        try:
            ov = CommunicationAnalysis.get_comm_comp_overlap(t, visualize=False)
            out["overlap_pctg"] = float(ov.iloc[0]["comp_comm_overlap_pctg"])
        except (ZeroDivisionError, IndexError, KeyError, ValueError):
            out["overlap_pctg"] = None
        types, names = BreakdownAnalysis.get_gpu_kernel_breakdown(
            t, visualize=False, duration_ratio=1.0, num_kernels=10**9,
            include_memory_kernels=True)
        out["kernel_types"] = {r["kernel_type"]: float(r["sum"]) for _, r in types.iterrows()}
        out["kernel_names"] = {
            f'{r["kernel_type"]}|{r["name"]}': {"sum": float(r["sum (us)"]),
                                                "max": float(r["max (us)"]),
                                                "min": float(r["min (us)"]),
                                                "mean": float(r["mean (us)"])}
            for _, r in names.iterrows()}
        # HTA's add_iteration fills GPU rows with stream > 0 only: stream 0 (ROCm's default
        # stream) is left without an iteration
        out["no_iteration"] = int(gpu["iteration"].isna().sum())
        out["stream0"] = int(gpu["stream"].eq(0).sum())
        per = gpu.groupby("iteration")["dur"].agg(["size", "sum"])
        out["steps"] = {str(int(i)): {"count": int(r["size"]), "dur": float(r["sum"])}
                        for i, r in per.iterrows()}
        cols = ["in_msg_nelems", "out_msg_nelems", "group_size", "msg_dtype", "collective_name"]
        if all(c in gpu for c in cols):
            nccl = gpu[gpu["s_name"].str.contains("nccl", case=False)
                       & gpu["in_msg_nelems"].gt(0)]
            out["collectives"] = [
                {"ts": int(r["ts"]), "dur": float(r["dur"]), "name": r["s_name"],
                 "collective": sym[r["collective_name"]] if isinstance(r["collective_name"], int)
                 else r["collective_name"],
                 "dtype": sym[r["msg_dtype"]] if isinstance(r["msg_dtype"], int)
                 else r["msg_dtype"],
                 "in": int(r["in_msg_nelems"]), "out": int(r["out_msg_nelems"]),
                 "group": int(r["group_size"]),
                 "pg": [_text(r.get(f"process_group_{k}"), sym) for k in ("name", "desc", "ranks")]}
                for _, r in nccl.iterrows()]
    return out


def _text(v, sym) -> str | None:
    """An arg HTA parsed as a string: a symbol id where it keeps strings in its table."""
    if v is None or (isinstance(v, float) and v != v):
        return None
    return sym[v] if isinstance(v, int) and not isinstance(v, bool) else str(v)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], "--include-last-step" in sys.argv[2:])))
