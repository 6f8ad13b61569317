"""How the cluster layer's costs grow with ranks: S simulated nodes x R ranks, one notebook.

Every simulated node is the cluster tests' (tests/cluster/nodes.py: its own IPC + mount
namespace, a private ``/dev/shm``, one ``dask worker --preload dynprof_nb.cluster.agent``; needs
root). On each node ONE process imports what a rank needs and forks its R ranks
(copy-on-write), each a built-in-backend ``Monitor`` stepping about once a second: cheap enough
for hundreds of ranks on 2 cores. This process is the notebook; for each size it times

* attach, ``status()``, ``step_times()``;
* ``start("+k", "+k+2")`` until every rank confirmed, then ``wait()`` for the common window
  (every rank must record the same steps, or the run fails);
* ``load()`` and ``summary()`` of that window (reduced on the nodes) and ``stacks()``;

and the notebook process's peak RSS. Each size runs in a child process of its own, so the peak
is that size's. One table; the last column of each size is its growth over the previous size,
per 4x (or whatever factor) ranks: read the ratios, not the absolute times (2 shared cores).

    python benchmarks/cluster_scale.py                # 8 (2x4), 64 (4x16), 256 (8x32)
    python benchmarks/cluster_scale.py --ranks 1024   # 32 nodes x 32 ranks (a quiet machine)
    python benchmarks/cluster_scale.py --sizes 8 64   # any sizes from the table below
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [
    str(HERE.parent / "tests" / "cluster"),
    str(HERE.parent / "tests"),
]  # nodes, jobutil

SHAPES = {
    8: (2, 4),
    32: (4, 8),
    64: (4, 16),
    128: (8, 16),
    256: (8, 32),
    1024: (32, 32),
}  # ranks -> (nodes, per node)
STEP_S = 1.0
OPS = ("attach", "status", "step_times", "start", "wait", "load", "summary", "stacks")


def node_main(job: str, first: int, count: int, out: str, step_s: float) -> None:
    """One simulated node's ranks: import once, then fork ``count`` ranks that share it."""
    import dynprof_nb  # noqa: F401  (imported before the fork: pages shared copy-on-write)

    children = []
    for rank in range(first, first + count):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                rank_main(job, rank, out, step_s)
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    signal.signal(signal.SIGTERM, lambda *_: None)  # the group's SIGTERM stops the ranks
    for pid in children:
        while True:
            try:
                os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break


def rank_main(job: str, rank: int, out: str, step_s: float) -> None:
    """One rank: a few ranges and a sleep per step, until SIGTERM closes its Monitor."""
    import dynprof_nb

    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    with dynprof_nb.Monitor(job=job, rank=rank, output_path=out, backend="builtin") as mon:
        while not stop["now"]:
            for i in range(8):
                with dynprof_nb.range(f"op{i}"):
                    pass
            time.sleep(step_s)
            mon.step()


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def one_size(nodes: int, per_node: int) -> dict[str, Any]:
    """Run one size; every figure in seconds, ``rss_mb`` the notebook's peak."""
    from nodes import SimCluster, dask_client

    import dynprof_nb

    total = nodes * per_node
    job_name = "scale"
    work = Path(tempfile.mkdtemp(prefix="dynprof-scale-"))
    row: dict[str, Any] = {"ranks": total, "shape": f"{nodes}x{per_node}"}
    with SimCluster(work, nodes=nodes) as sim:
        for node in sim.nodes:
            proc = node.spawn(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--node-proc",
                    job_name,
                    str(node.index * per_node),
                    str(per_node),
                    str(node.out),
                    str(STEP_S),
                ],
                "ranks.log",
            )
            node.ranks[job_name, node.index] = proc
        client = dask_client(sim.scheduler.address, timeout=60, security=sim.security())
        try:
            row["attach"], job = timed(lambda: dynprof_nb.attach(job_name, cluster=client))
            deadline = time.monotonic() + 300 + total
            while True:
                frame = job.status()
                if len(frame) >= total and frame["alive"].all() and (frame.step > 2).all():
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"only {int(frame['alive'].sum())} of {total} ranks up")
                time.sleep(0.5)
            row["status"] = min(timed(job.status)[0] for _ in range(5))
            row["status_pull"] = min(
                timed(lambda: job._agents.run("status", {"job": job_name}))[0] for _ in range(3)
            )
            row["step_times"], st = timed(job.step_times)
            assert st["rank"].nunique() == total, f"step_times saw {st['rank'].nunique()} ranks"
            row["start"], _ = timed(lambda: job.start("+2", "+4"))
            row["wait"], done = timed(lambda: job.wait(timeout=120 + total, progress=False))
            row["load"], window = timed(job.load)
            assert sorted(window.ranks) == list(range(total)), "the window lacks ranks"
            assert (window.start_step, window.stop_step) != (None, None), "not one window"
            row["summary"], _ = timed(window.summary)
            row["stacks"], stacks = timed(lambda: job.stacks())
            seen = stacks["rank"].nunique() if len(stacks) else 0
            assert seen == total, f"stacks of {seen} of {total} ranks"
            row["load_warm"], _ = timed(job.load)
            job.close()
        finally:
            client.close()
    row["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def table(rows: list[dict[str, Any]]) -> str:
    cols = [
        "attach",
        "status",
        "status_pull",
        "step_times",
        "start",
        "wait",
        "load",
        "load_warm",
        "summary",
        "stacks",
        "rss_mb",
    ]
    head = "| ranks (nodes x ranks) | " + " | ".join(cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 1)]
    for i, r in enumerate(rows):
        cells = [f"{r[c]:.1f} MB" if c == "rss_mb" else f"{r[c]:.3f} s" for c in cols]
        lines.append(f"| {r['ranks']} ({r['shape']}) | " + " | ".join(cells) + " |")
        if i:
            prev = rows[i - 1]
            k = r["ranks"] / prev["ranks"]
            growth = [f"{r[c] / max(prev[c], 1e-9):.1f}x" for c in cols]
            lines.append(f"| growth for {k:.0f}x ranks | " + " | ".join(growth) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="*", choices=sorted(SHAPES), default=[8, 64, 256])
    p.add_argument("--ranks", type=int, choices=[1024], help="also run 1,024 ranks (32 x 32)")
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument(
        "--one", nargs=2, type=int, metavar=("NODES", "PER_NODE"), help=argparse.SUPPRESS
    )
    p.add_argument("--node-proc", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.node_proc:
        job, first, count, out, step_s = args.node_proc
        node_main(job, int(first), int(count), out, float(step_s))
        return
    if args.one:
        print("ROW " + json.dumps(one_size(*args.one)), flush=True)
        return
    sizes = sorted(set(args.sizes) | ({args.ranks} if args.ranks else set()))
    rows = []
    for size in sizes:
        nodes, per_node = SHAPES[size]
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--one", str(nodes), str(per_node)],
            capture_output=True,
            text=True,
            check=False,
        )
        found = [ln[4:] for ln in out.stdout.splitlines() if ln.startswith("ROW ")]
        if out.returncode or not found:
            sys.exit(f"{size} ranks failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        rows.append(json.loads(found[-1]))
        print(f"{size} ranks done", file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
