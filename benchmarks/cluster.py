"""One notebook, N simulated nodes x R ranks: command latency, status, and window analysis.

Every node is its own IPC + mount namespace with a private ``/dev/shm`` (tests/cluster/nodes.py,
needs root), running ``dask worker --preload dynprof_nb.cluster.agent`` and R training ranks
that each open ``--ranges`` ranges per step. This process is the notebook. It reports:

* ``start()`` until every live rank has *confirmed* it armed the window (probe, send, wait for the
  ranks to read it, all answers back): the real "same step everywhere" cost;
* ``set()`` until the notebook's pushed table shows every rank applied it (adds the agents'
  push interval, ``DYNPROF_AGENT_BEAT_S``, 0.25 s by default);
* status: ``status()`` (reads the pushed table) against a pull from every node (``Client.run``);
* summarising one window of every rank: ``job.load().summary()`` (reduced on the nodes, only
  results travel) against loading every rank's trace into this process
  (``load_window(paths).summary()``): time and this process's peak allocations (tracemalloc),
  as a ratio in the same run.

    python benchmarks/cluster.py [--nodes 16] [--ranks 2] [--reps 20] [--steps 40] [--tls | --plain]

On 2 shared cores every process is CPU-starved: read the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "cluster"))


def rank_main(job: str, rank: int, out: str, step_ms: float, ranges: int) -> None:
    """One training rank: ``ranges`` short ranges and a sleep per step, until SIGTERM."""
    import signal

    import dynprof_nb

    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    with dynprof_nb.Monitor(job=job, rank=rank, output_path=out, backend="builtin") as mon:
        while not stop["now"]:
            t0 = time.perf_counter()
            for i in range(ranges):
                with dynprof_nb.range(f"op{i % 16}"):
                    pass
            time.sleep(max(0.0, step_ms / 1000 - (time.perf_counter() - t0)))
            mon.step()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary_ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(pct(values, 0.5) * 1000, 1),
            "p99_ms": round(pct(values, 0.99) * 1000, 1), "n": len(values)}


def measure(fn) -> tuple[float, int, object]:
    tracemalloc.start()
    t0 = time.perf_counter()
    value = fn()
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, peak, value


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--ranks", type=int, default=2, help="ranks per node")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--step-ms", type=float, default=50.0)
    p.add_argument("--ranges", type=int, default=200, help="ranges per step (trace size)")
    p.add_argument("--steps", type=int, default=40, help="steps in the analysed window")
    p.add_argument("--tls", action="store_true",
                   help="TLS everywhere (Security.temporary() certificates as files)")
    p.add_argument("--plain", action="store_true",
                   help="plain TCP (the unsafe opt-in); the default is mutual TLS with the "
                   "user's own certificates")
    p.add_argument("--rank-proc", nargs=5, metavar=("JOB", "RANK", "OUT", "STEP_MS", "RANGES"))
    args = p.parse_args()
    if args.rank_proc:
        job, rank, out, step_ms, ranges = args.rank_proc
        rank_main(job, int(rank), out, float(step_ms), int(ranges))
        return

    from distributed import Client
    from nodes import SimCluster

    import dynprof_nb
    from dynprof_nb.cluster.access import requester
    from dynprof_nb.cluster.agent import call
    from dynprof_nb.traces import load_window

    total = args.nodes * args.ranks
    work = Path(tempfile.mkdtemp(prefix="dynprof-cluster-bench-"))
    t_start = time.perf_counter()
    tls = None
    if args.tls:
        from distributed.security import Security

        tls = Security.temporary()
    with SimCluster(work, nodes=args.nodes, tls=tls, plain=args.plain) as sim:
        job_name = "bench"
        for node in sim.nodes:
            for j in range(args.ranks):
                rank = node.index * args.ranks + j
                node.ranks[job_name, rank] = node.spawn(
                    [sys.executable, str(Path(__file__).resolve()), "--rank-proc", job_name,
                     str(rank), str(node.out), str(args.step_ms), str(args.ranges)],
                    f"rank{rank}.log")
        client = Client(sim.scheduler.address, set_as_default=False, timeout=30,
                        security=sim.security())
        job = dynprof_nb.attach(job_name, cluster=client)
        deadline = time.monotonic() + 300
        while len(job.live_ranks()) < total or (job.status().step <= 0).any():
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(job.live_ranks())} of {total} ranks came up")
            time.sleep(0.2)
        up_s = time.perf_counter() - t_start

        pull, pushed = [], []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            client.run(call, "status", {"job": job_name, "user": requester()})
            pull.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            job.status()
            pushed.append(time.perf_counter() - t0)

        armed, margins = [], []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            job.start("+1", "+2")  # moved out to the measured margin
            armed.append(time.perf_counter() - t0)
            margins.append(job.last_start["margin_steps"])
            job.stop()

        applied = []
        for i in range(args.reps):
            t0 = time.perf_counter()
            gen = job.set(with_stack=bool(i % 2 == 0))
            ok = job.feed.wait_for(
                lambda g=gen: sum(r["alive"] and r["generation"] >= g
                                  for r in job.feed.rows(job_name)) >= total, 60)
            if ok:
                applied.append(time.perf_counter() - t0)

        job.set(with_stack=False)
        job.start("+1", f"+{args.steps}")
        job.wait(timeout=600, progress=False)
        sim.stop_ranks(job_name)  # the analysis below competes with nothing of ours
        t_cluster, m_cluster, window = measure(lambda: job.load())
        t_csum, m_csum, _ = measure(lambda: window.summary())
        paths = [window.paths[r] for r in window.ranks]
        t_local, m_local, _ = measure(lambda: load_window(paths).summary())
        events = sum(r["events"] for r in window._reduced)
        client.close()
    result = {
        "nodes": args.nodes, "ranks_per_node": args.ranks, "ranks": total, "tls": args.tls,
        "plain": args.plain,
        "cluster_up_s": round(up_s, 1),
        "status_pushed_table": summary_ms(pushed), "status_pull_every_node": summary_ms(pull),
        "start_confirmed_armed_every_rank": summary_ms(armed),
        "start_margin_steps": {"min": min(margins), "max": max(margins),
                               "median": statistics.median(margins)},
        "set_to_applied_every_rank_seen_in_notebook": summary_ms(applied),
        "window": {"steps": args.steps, "events_all_ranks": int(events)},
        "summary_on_nodes": {"s": round(t_cluster + t_csum, 3),
                             "notebook_peak_mb": round(max(m_cluster, m_csum) / 2**20, 2)},
        "summary_in_notebook": {"s": round(t_local, 3),
                                "notebook_peak_mb": round(m_local / 2**20, 2)},
    }
    result["ratio_notebook_over_nodes"] = {
        "time": round(t_local / max(1e-9, t_cluster + t_csum), 2),
        "memory": round(m_local / max(1, max(m_cluster, m_csum)), 1)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
