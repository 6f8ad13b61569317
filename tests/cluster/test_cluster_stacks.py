"""ClusterJob.stacks() and the named stall on 2 simulated nodes: a real 2-rank DDP job (gloo),
rank 0 on node0 and rank 1 on node1, rank 1 hanging before its backward pass until the test has
what it needs and releases it (it removes the file the rank waits on)."""

from __future__ import annotations

import re
import socket
import sys
import time
from pathlib import Path

import pytest
from jobutil import unique_job, wait_until
from nodes import REPO, SimCluster

import dynprof_nb
from dynprof_nb.control.stacks import DUMP_TIMEOUT_S, last_stacks_path

pytestmark = pytest.mark.timeout(300)
DDP_JOB = REPO / "tests" / "ddp_hang_job.py"
HANG_STEP = 8
# rank 1 hangs until the test removes its hold file (a timed sleep of 10 s once ran out in a
# CI-like run before the stall's stacks were kept); this is only the bound on a test that dies
# before releasing it
HANG_S = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main_thread(stacks, rank: int) -> list[str]:
    rows = stacks[(stacks["rank"] == rank) & (stacks.thread == "MainThread")]
    return list(rows.sort_values("depth").function)


def test_cluster_stacks_of_a_hung_ddp_job(tmp_path: Path):
    name = unique_job("clddp")
    port = free_port()
    hold = tmp_path / "rank1.hold"
    hold.touch()
    with SimCluster(tmp_path, nodes=2) as sim:
        procs = []
        for rank, node in enumerate(sim.nodes):
            procs.append(node.spawn(
                ["env", f"RANK={rank}", "LOCAL_RANK=0", "WORLD_SIZE=2",
                 "MASTER_ADDR=127.0.0.1", f"MASTER_PORT={port}", sys.executable, str(DDP_JOB),
                 "--job", name, "--out", str(node.out), "--steps", "20",
                 "--hang-step", str(HANG_STEP), "--hang-s", str(HANG_S), "--hold", str(hold)],
                f"{name}.rank{rank}.log"))
        job = dynprof_nb.attach(name, cluster=sim.client())
        try:
            def at_the_hang():
                st = job.status()
                live = st[st.alive.astype(bool)]
                return len(live) == 2 and (live.step == HANG_STEP - 1).all()

            wait_until(at_the_hang, 120, "both ranks at the hang")

            def both_in_place():  # rank 0 waits in backward's all-reduce, rank 1 in the hang
                t0 = time.monotonic()
                taken = job.stacks()
                assert time.monotonic() - t0 < DUMP_TIMEOUT_S + 1.0
                return ("backward" in main_thread(taken, 0)
                        and main_thread(taken, 1)[-1:] == ["rank1_sleeps"] and [taken])

            stacks = wait_until(both_in_place, 30, "rank 0 in backward, rank 1 hung")[0]
            assert stacks.silent == []
            assert dict(zip(stacks["rank"], stacks.node, strict=True)) == {0: "node0",
                                                                          1: "node1"}
            assert "backward" in main_thread(stacks, 0)
            assert main_thread(stacks, 1)[-1] == "rank1_sleeps"
            groups = [g["ranks"] for g in stacks.tree().groups if g["thread"] == "MainThread"]
            assert sorted(groups) == [[0], [1]]

            job.hang_after, job.hang_min_s = 20.0, 1.0

            def stalled():
                st = job.status()
                return st.error.str.contains(f"stalled since step {HANG_STEP - 1}").all()

            wait_until(stalled, 8, "the cluster stall to be named")

            def kept():  # taken by the agents when they name the stall: up to a beat later
                last = job.last_stacks
                return last is not None and main_thread(last, 1)[-1:] == ["rank1_sleeps"]

            wait_until(kept, 8, "the stall's stacks kept in job.last_stacks")
            hold.unlink()  # the test has what it needs: rank 1 goes on
            for proc in procs:  # training resumed after the hang and ran to its end
                assert proc.wait(timeout=90) == 0
            logs = [(node.dir / f"{name}.rank{r}.log").read_text()
                    for r, node in enumerate(sim.nodes)]
            sums = [re.search(r"done 20 checksum (\S+)", text) for text in logs]
            assert all(sums), logs
            assert sums[0].group(1) == sums[1].group(1)
        finally:
            hold.unlink(missing_ok=True)
            job.close()
            # the stall's stacks, kept by this controller (no segment of its own to go with:
            # the test removes them, else the module's leftover check fails it)
            last_stacks_path(f"@cluster.{name}").unlink(missing_ok=True)
