"""ClusterJob.hang_report() on 2 simulated nodes: the real 4-rank gloo job of
``tests/fr_hang_job.py`` (ranks 0-1 on node0, 2-3 on node1), rank 3 sleeping before its pair's
all-reduce; each node's agent collects its ranks' Flight Recorder dumps."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest
from jobutil import main_threads, unique_job, wait_until
from nodes import REPO, SimCluster

import dynprof_nb
from dynprof_nb.flight_recorder.analysis import culprits

pytestmark = pytest.mark.timeout(300)
FR_JOB = REPO / "tests" / "fr_hang_job.py"
HANG_STEP = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cluster_hang_report_names_the_hung_rank_across_nodes(tmp_path: Path):
    name = unique_job("clfr")
    port = free_port()
    with SimCluster(tmp_path, nodes=2) as sim:
        procs = []
        for rank in range(4):
            node = sim.nodes[rank // 2]
            procs.append(node.spawn(
                ["env", f"RANK={rank}", f"LOCAL_RANK={rank % 2}", "WORLD_SIZE=4",
                 "MASTER_ADDR=127.0.0.1", f"MASTER_PORT={port}", sys.executable, str(FR_JOB),
                 "--job", name, "--out", str(node.out), "--steps", "8",
                 "--hang-step", str(HANG_STEP), "--hang-s", "60"], f"{name}.rank{rank}.log"))
        job = dynprof_nb.attach(name, cluster=sim.client())
        try:
            def at_the_hang():
                st = job.status()
                live = st[st.alive.astype(bool)]
                return len(live) == 4 and (live.step == HANG_STEP - 1).all()

            wait_until(at_the_hang, 180, "the four ranks at the hang")

            def inside():  # where the stacks show them, not a guess at how long it takes
                main = main_threads(job.stacks())
                return (all("all_reduce" in main.get(r, []) for r in range(3))
                        and main.get(3, [])[-1:] == ["rank3_sleeps"] and main)

            wait_until(inside, 60, "ranks 0-2 inside their all-reduces, rank 3 in its sleep")
            t0 = time.monotonic()
            report = job.hang_report()
            assert time.monotonic() - t0 < 10.0
            assert sorted(report.dumps) == [0, 1, 2, 3], report.notes
            assert culprits(report.analysis) == [3]
            text = str(report)
            assert ("rank 3 never called all_reduce #5 (PG 2 PAIR_B); its main thread is in "
                    "rank3_sleeps") in text, text
        finally:
            job.close()
            for proc in procs:
                proc.kill()
