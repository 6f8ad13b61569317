"""Run HTA 0.5.0's critical_path_analysis (in .venv/hta) on one Kineto trace and print, as one
JSON line, the path (its nodes' count, each edge: start and end µs, weight, type, bound_by) and
HTA's summary by bound_by, for tests/analysis/test_critical_path_oracle.py. Nothing here is
dynprof_nb's.

``.venv/hta/bin/python tests/hta_critical_path_oracle.py TRACE ANNOTATION INSTANCE [TRACE ...]``
(one line: a list, one entry per trace, so HTA is imported once)

HTA 0.5.0 was written for pandas 2: under pandas 3 (copy-on-write) its chained
``df.col.fillna(..., inplace=True)`` do nothing, and its CUDA event-sync edges are lost. The
Makefile pins ``pandas<3`` in .venv/hta for that reason; this script refuses pandas 3.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path


def main(path: str, annotation: str, instance: int) -> dict:
    logging.disable(logging.WARNING)
    import pandas as pd

    if int(pd.__version__.split(".")[0]) >= 3:
        raise SystemExit(f"HTA 0.5.0 needs pandas < 3 (found {pd.__version__}): see the docstring")
    from hta.analyzers.critical_path_analysis import CriticalPathAnalysis
    from hta.common.trace import Trace
    from hta.configs.parser_config import ParserConfig

    cfg = ParserConfig(ParserConfig.get_default_args())  # with the sync args (wait_on_stream)
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / Path(path).name  # the rank's only trace (rank 0)
        shutil.copy(path, dst)
        t = Trace(trace_files={0: str(dst)}, trace_dir=tmp, parser_config=cfg)
        t.load_traces(use_multiprocessing=False)
    g, ok = CriticalPathAnalysis.critical_path_analysis(t, 0, annotation, instance)
    b = g.get_critical_path_breakdown()
    edges = []
    for u, v in zip(g.critical_path_nodes[:-1], g.critical_path_nodes[1:], strict=True):
        e = g.edges[u, v]["object"]
        edges.append({"start": float(g.node_list[u].ts), "end": float(g.node_list[v].ts),
                      "weight": float(g.edges[u, v]["weight"]), "type": e.type.value})
    return {
        "ok": bool(ok),
        "nodes": len(g.critical_path_nodes),
        "edges": edges,
        "bound_by": {str(k): float(x) for k, x in b.groupby("bound_by").duration.sum().items()},
    }


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps([main(a[i], a[i + 1], int(a[i + 2])) for i in range(0, len(a), 3)]))
