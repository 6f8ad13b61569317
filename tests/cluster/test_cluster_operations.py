"""The agent's fixed surface on this machine's own segment (no Dask needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from jobutil import running_ranks, unique_job, wait_until

from dynprof_nb.cluster.access import requester
from dynprof_nb.cluster.node import ElectionLock, node_key, node_name
from dynprof_nb.cluster.operations import OPERATIONS, NodeOperations, OperationError
from dynprof_nb.contract import segment
from dynprof_nb.contract.config import ConfigError, ProfilerConfig

ME = requester()


def test_only_the_listed_operations_with_plain_payloads():
    ops = NodeOperations("n0", node_key())
    with pytest.raises(OperationError, match="unknown operation"):
        ops.call("exec", {"code": "print(1)"})
    with pytest.raises(OperationError, match="payload must be a dict"):
        ops.call("status", ["job"])  # type: ignore[arg-type]
    assert set(OPERATIONS) == {"hello", "apply", "status", "windows", "trigger", "step_times",
                               "stacks", "flight_recorder"}
    with pytest.raises(OperationError, match="action"):
        ops.call("apply", {"job": "x", "action": "rm", "config": {}, "seq": 1, "user": ME})


def test_apply_validates_as_a_job_does_and_maps_the_cluster_seq(tmp_path):
    job = unique_job("ops")
    ops = NodeOperations("n0", node_key())
    try:
        bad = ProfilerConfig().to_dict() | {"start_step": 5, "stop_step": 2}
        with pytest.raises(ConfigError):
            ops.call("apply", {"job": job, "action": "start", "config": bad, "seq": 7,
                               "user": ME})
        with running_ranks(job, tmp_path, ranks=2, step_ms=5) as (local, _):
            cfg = ProfilerConfig().update(start_step=10**6, stop_step=10**6 + 1).to_dict()
            answer = ops.call("apply", {"job": job, "action": "start", "config": cfg,
                                        "seq": 7, "arm_wait_s": 5, "user": ME})
            assert answer["node"] == "n0" and len(answer["ranks"]) == 2
            assert all(r["applied"] and r["state"] == "armed" for r in answer["ranks"])
            rows = wait_until(lambda: ops.call("status", {"job": job, "user": ME})["rows"],
                              10, "rows")
            assert {r["generation"] for r in rows} == {7}  # the cluster's seq, not the segment's
            with pytest.raises(OperationError, match="not a window"):
                ops.window_path(job, "../../etc", ME)
            with pytest.raises(OperationError, match="not a window"):
                ops.window_path(job, str(tmp_path), ME)
    finally:
        ops.close()
        if job in segment.list_jobs():
            segment.unlink(job)


def test_one_acting_agent_per_shm(tmp_path):
    first, second = ElectionLock(str(tmp_path)), ElectionLock(str(tmp_path))
    assert first.try_acquire() and not second.try_acquire()
    first.release()  # the holder stopped: the standby takes over, on a fresh file
    assert second.try_acquire()
    third = ElectionLock(str(tmp_path))
    assert not third.try_acquire()  # still one acting agent after the hand-over
    second.release()
    third.release()
    assert list(tmp_path.iterdir()) == []  # a node keeps nothing once its agents stop


def test_a_killed_agent_hands_over_and_its_lock_file_is_reused(tmp_path):
    held = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from dynprof_nb.cluster.node import ElectionLock; "
        f"assert ElectionLock({str(tmp_path)!r}).try_acquire(); print('held', flush=True); "
        "time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert held.stdout.readline().strip() == "held"
        standby = ElectionLock(str(tmp_path))
        assert not standby.try_acquire()
    finally:
        held.kill()  # SIGKILL: no release, the file stays and the kernel drops the lock
        held.wait()
    assert standby.try_acquire()
    standby.release()
    assert list(tmp_path.iterdir()) == []


def test_node_names(monkeypatch):
    monkeypatch.delenv("DYNPROF_NODE", raising=False)
    assert node_name("trainer-07") == "trainer-07"
    assert node_name("tcp://10.0.0.7:4242") == node_name(3) == node_name(None)
    monkeypatch.setenv("DYNPROF_NODE", "rack2-n5")
    assert node_name("tcp://x:1") == "rack2-n5"
