"""Speed of a .db window's kernels vs msprof-analyze 26.2.0 ``compute_op_sum``, same files.

Both end to end, each in a fresh subprocess (interpreter start and imports included):
  - dynprof_nb: ``load_window(folder).kernels`` (every rank's compute tasks and HCCL ops, exact
    ns, names resolved; then the per-rank OpType/TaskType table msprof-analyze writes)
  - msprof-analyze: ``msprof-analyze cluster -d <copy> -m compute_op_sum --export_type text``
    (on a fresh copy each time, since it writes cluster_analysis_output/ inside the folder)
on two windows: the real 2-rank db fixture (tests/data/ascend_real/db_level0, 187 tasks a rank)
and the same files scaled up (benchmarks/out/db_x<N>: the TASK and COMPUTE_TASK_INFO rows
repeated N times with shifted ids and times, like a longer run). msprof-analyze runs from
.venv/msprof (``make .venv/msprof/.stamp``) or DYNPROF_MSPROF_ANALYZE.

Each side runs byte-compiled, as installed (pip compiles msprof-analyze at install; this
checkout's dynprof_nb is compiled with compileall first, so PYTHONDONTWRITEBYTECODE=1 does not
make every run compile it again). Each size reports the best of ``--repeat`` runs per side, the
two sides interleaved so both see the same machine load, and the load average at the start.

Usage: .venv/bin/python benchmarks/load_db.py [--repeat 3] [--scale 500]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the readers are timed here, not the frame cache (benchmarks/cache_reload.py times that):
# this process and each one it starts read the trace files
os.environ["DYNPROF_NB_CACHE"] = "off"

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
SRC = REPO / "tests" / "data" / "ascend_real" / "db_level0"

OURS = r"""
import json, sys, time
t = time.perf_counter()
import dynprof_nb
from dynprof_nb.analysis.ranks import compute_ops
w = dynprof_nb.load_window(sys.argv[1])
k = w.kernels
t1 = time.perf_counter()
table = compute_ops(w)
print(json.dumps({"rows": len(k), "load_s": t1 - t, "table_s": time.perf_counter() - t1,
                  "count": int(table["count"].sum())}))
"""


def msprof_exe() -> Path:
    env = os.environ.get("DYNPROF_MSPROF_ANALYZE")
    exe = Path(env) if env else Path(sys.prefix) / "msprof" / "bin" / "msprof-analyze"
    if not exe.is_file():
        sys.exit(f"msprof-analyze not found at {exe}: run `make .venv/msprof/.stamp`")
    return exe


def scaled(copies: int) -> Path:
    """SRC with its compute tasks repeated ``copies`` times (ids and times shifted)."""
    dst = OUT / f"db_x{copies}"
    if dst.is_dir():
        return dst
    tmp = OUT / f"db_x{copies}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(SRC, tmp)
    for db in tmp.glob("*/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db"):
        con = sqlite3.connect(db)
        span, top = con.execute(
            "SELECT max(endNs) - min(startNs) + 1000, max(globalTaskId) + 1 FROM TASK"
        ).fetchone()
        con.executescript(f"""
            CREATE TEMP TABLE k(i INTEGER);
            WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {copies - 1})
            INSERT INTO k SELECT i FROM c;
            INSERT INTO TASK SELECT t.startNs + k.i * {span}, t.endNs + k.i * {span}, t.deviceId,
                t.connectionId, t.globalTaskId + k.i * {top}, t.globalPid, t.taskType, t.contextId,
                t.streamId, t.taskId, t.modelId
                FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId, k;
            INSERT INTO COMPUTE_TASK_INFO SELECT name, globalTaskId + k.i * {top}, blockDim,
                mixBlockDim, taskType, opType, inputFormats, inputDataTypes, inputShapes,
                outputFormats, outputDataTypes, outputShapes, attrInfo
                FROM COMPUTE_TASK_INFO, k WHERE globalTaskId < {top};
        """)
        con.commit()
        con.close()
    tmp.rename(dst)
    return dst


def timed(cmd: list[str], **kw) -> tuple[float, float, str]:
    """(wall s, CPU s of the process and the children it waited for, stdout). CPU time is the
    steadier measure on a shared machine: other load stretches wall time, not CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=True, **kw)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r.stdout


def run_ours(folder: Path) -> tuple[float, float, dict]:
    wall, cpu, out = timed(
        [sys.executable, "-c", OURS, str(folder)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,  # ``-c`` puts the working directory first on sys.path
    )
    return wall, cpu, json.loads(out.strip().splitlines()[-1])


def run_msprof(exe: Path, folder: Path) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        copy = Path(tmp) / folder.name
        shutil.copytree(folder, copy)
        wall, cpu, _ = timed(
            [str(exe), "cluster", "-d", str(copy), "-m", "compute_op_sum", "--export_type", "text"]
        )
        assert (copy / "cluster_analysis_output" / "ComputeOpSum" / "all_stats.csv").is_file()
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=int, default=500)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    exe = msprof_exe()
    compileall.compile_dir(REPO / "dynprof_nb", quiet=1)
    ratios = []
    for label, folder in (
        ("real 2-rank db (db_level0)", SRC),
        (f"scaled x{args.scale}", scaled(args.scale)),
    ):
        load = os.getloadavg()[0]
        run_ours(folder)  # warm the page cache
        ours, theirs, info = [], [], {}
        for _ in range(args.repeat):  # interleaved, so both see the same machine load
            wall, cpu, run = run_ours(folder)
            if not ours or wall < min(w for w, _ in ours):
                info = run
            ours.append((wall, cpu))
            theirs.append(run_msprof(exe, folder))
        o, m = min(w for w, _ in ours), min(w for w, _ in theirs)
        oc, mc = min(c for _, c in ours), min(c for _, c in theirs)
        ratios.append(f"{label} {m / o:.1f}x wall, {mc / oc:.1f}x CPU")
        print(f"{label}: {info['rows']} kernel rows over 2 ranks ({info['count']} compute tasks)")
        print(f"  load average {load:.2f} on {os.cpu_count()} cores; best of {args.repeat} runs")
        print(
            f"  dynprof_nb load_window(...).kernels + compute_ops, end to end: {o:.2f} s, "
            f"CPU {oc:.2f} s (in-process: load {info['load_s']:.2f} s, "
            f"table {info['table_s']:.3f} s)"
        )
        print(f"  msprof-analyze compute_op_sum, end to end: {m:.2f} s, CPU {mc:.2f} s")
        print(
            f"  ratio msprof-analyze / dynprof_nb: {m / o:.1f}x wall, {mc / oc:.1f}x CPU "
            "(target >= 5x)"
        )
    print("ratios: " + "; ".join(ratios))


if __name__ == "__main__":
    main()
