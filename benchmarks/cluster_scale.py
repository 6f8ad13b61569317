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
Each cell is wall / CPU of every process (the notebook, workers, scheduler) / the notebook's
CPU alone: the second counts the workers' and scheduler's background work (status pushes,
beats) over the operation's wall time too, which at hundreds of ranks on 2 cores dominates a
short notebook-side operation such as ``summary()``.

    python benchmarks/cluster_scale.py                # 8 (2x4), 64 (4x16), 256 (8x32)
    python benchmarks/cluster_scale.py --ranks 1024   # 32 nodes x 32 ranks (a quiet machine)
    python benchmarks/cluster_scale.py --sizes 8 64   # any sizes from the table below
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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


def cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) of this process and of ``pids`` (workers, scheduler)."""
    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


class Timer:
    """Wall and CPU time of each operation: the CPU of the notebook, the workers and the
    scheduler together is the work done, which a loaded machine stretches far less than the
    wall time (the growth column reads it)."""

    def __init__(self, row: dict[str, Any], pids: list[int]) -> None:
        self.row, self.pids = row, pids

    def __call__(self, name: str, fn: Any, reps: int = 1) -> Any:
        best = None
        for _ in range(reps):
            c0, n0, t0 = cpu_s(self.pids), time.process_time(), time.perf_counter()
            value = fn()
            wall, cpu = time.perf_counter() - t0, cpu_s(self.pids) - c0
            if best is None or wall < best[0]:
                best = (wall, cpu, time.process_time() - n0)
        self.row[name], self.row[name + "_cpu"], self.row[name + "_nb"] = best
        return value


def one_size(nodes: int, per_node: int) -> dict[str, Any]:
    """Run one size; every figure in seconds, ``rss_mb`` the notebook's peak."""
    from nodes import SimCluster, dask_client

    import dynprof_nb

    total = nodes * per_node
    job_name = "scale"
    work = Path(tempfile.mkdtemp(prefix="dynprof-scale-"))
    row: dict[str, Any] = {"ranks": total, "shape": f"{nodes}x{per_node}"}
    with SimCluster(work, nodes=nodes, own_cache=True) as sim:
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
            pids = [n.worker.pid for n in sim.nodes] + [sim.scheduler.proc.pid]
            timed = Timer(row, pids)
            job = timed("attach", lambda: dynprof_nb.attach(job_name, cluster=client))
            deadline = time.monotonic() + 300 + total
            while True:
                frame = job.status()
                if len(frame) >= total and frame["alive"].all() and (frame.step > 2).all():
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"only {int(frame['alive'].sum())} of {total} ranks up")
                time.sleep(0.5)
            timed("status", job.status, reps=5)
            timed("status_pull", lambda: job._agents.run("status", {"job": job_name}), reps=3)
            st = timed("step_times", job.step_times)
            assert st["rank"].nunique() == total, f"step_times saw {st['rank'].nunique()} ranks"
            timed("start", lambda: job.start("+2", "+4"))
            timed("wait", lambda: job.wait(timeout=120 + total, progress=False))
            window = timed("load", job.load)
            assert sorted(window.ranks) == list(range(total)), "the window lacks ranks"
            assert (window.start_step, window.stop_step) != (None, None), "not one window"
            timed("summary", window.summary)
            stacks = timed("stacks", lambda: job.stacks())
            seen = stacks["rank"].nunique() if len(stacks) else 0
            assert seen == total, f"stacks of {seen} of {total} ranks"
            timed("load_warm", job.load)
            job.close()
        finally:
            client.close()
    shutil.rmtree(work, ignore_errors=True)
    row["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


COLUMNS = [
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
]


def table(rows: list[dict[str, Any]]) -> str:
    """Wall / CPU seconds per operation and size, then each size's growth in CPU (the work)."""
    head = "| ranks (nodes x ranks) | " + " | ".join(COLUMNS) + " | notebook peak RSS |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for i, r in enumerate(rows):
        cells = [f"{r[c]:.3f} / {r[c + '_cpu']:.2f} / {r[c + '_nb']:.2f}" for c in COLUMNS]
        lines.append(
            f"| {r['ranks']} ({r['shape']}) | " + " | ".join(cells) + f" | {r['rss_mb']:.0f} MB |"
        )
        if i:
            prev = rows[i - 1]
            k = r["ranks"] / prev["ranks"]
            growth = [
                f"{r[c + '_cpu'] / max(prev[c + '_cpu'], 1e-3):.1f}x / "
                f"{r[c + '_nb'] / max(prev[c + '_nb'], 1e-3):.1f}x"
                for c in COLUMNS
            ]
            lines.append(
                f"| CPU growth, {k:.0f}x ranks | "
                + " | ".join(growth)
                + f" | {r['rss_mb'] / prev['rss_mb']:.2f}x |"
            )
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
