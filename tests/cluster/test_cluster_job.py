"""A job on 4 simulated nodes x 2 ranks, driven through attach(job, cluster=client)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from jobutil import trace_steps, unique_job, wait_until

import dynprof_nb
from dynprof_nb.cluster.access import requester
from dynprof_nb.cluster.agent import call, command_variable
from dynprof_nb.contract.config import ConfigError
from dynprof_nb.control.base import JobError, WindowConflict
from dynprof_nb.control.status import STATUS_COLUMNS

pytestmark = pytest.mark.timeout(300)
RANKS = 8


def running(job, ranks=RANKS, nodes=4, timeout=90.0):
    """Wait (poll with a deadline) until ``ranks`` live ranks on ``nodes`` nodes step."""
    def ready():
        st = job.status()
        live = st[st.alive.astype(bool)]
        ok = len(live) == ranks and live.node.nunique() == nodes and (live.step > 0).all()
        return [st] if ok else None
    return wait_until(ready, timeout, f"{ranks} ranks of {job.name} on {nodes} nodes")[0]


@pytest.fixture
def job_on_nodes(cluster, request):
    name = unique_job("cl")
    shared = cluster.workdir / f"{name}-shared" if getattr(request, "param", "") else None
    cluster.start_ranks(name, per_node=2, step_ms=30, out=shared)
    client = cluster.client()
    job = dynprof_nb.attach(name, cluster=client)
    try:
        running(job)
        yield job
    finally:
        cluster.stop_ranks(name)
        job.close()


def manifests(frame) -> list[dict]:
    return [json.loads((Path(p) / "window.json").read_text()) for p in frame.path]


@pytest.mark.parametrize("job_on_nodes", ["", "shared"], indirect=True,
                         ids=["node-disks", "shared-fs"])
def test_same_step_window_on_all_ranks_loads_as_one(job_on_nodes, capfd):
    job = job_on_nodes
    st = job.status()
    assert list(st.columns) == STATUS_COLUMNS
    assert sorted(st.node.unique()) == ["node0", "node1", "node2", "node3"]
    assert sorted(st["rank"]) == list(range(RANKS))

    gen = job.start("+25", "+29")
    first, last = job.last_start["window"]
    assert last - first == 4 and job.last_start["ranks"] == RANKS
    assert job.generation == gen and job.config.start_step == first
    capfd.readouterr()
    done = job.wait(timeout=120)  # stderr is no terminal here: a few lines, as in a log
    assert (done.generation >= gen).all() and len(done) == RANKS
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(f"job {job.name}: window")]
    assert "\r" not in err and 1 <= len(lines) <= 12, err
    assert f" done {5 * RANKS}/{5 * RANKS} rank-steps in " in lines[-1], err

    frame = job.windows()
    frame = frame[(frame.start == first) & (frame.status == "complete")]
    assert sorted(frame["rank"]) == list(range(RANKS))
    assert all(frame.node == "node" + (frame["rank"] // 2).astype(str))  # read where written
    for m in manifests(frame):  # every rank recorded exactly the same steps
        assert (m["start_step"], m["stop_step"]) == (first, last)
    for path in frame.path:
        assert trace_steps(path) == list(range(first, last + 1))

    window = job.load()
    assert window.ranks == list(range(RANKS))
    assert (window.start_step, window.stop_step) == (first, last)
    assert window.nodes == {r: f"node{r // 2}" for r in range(RANKS)}
    steps = window.steps
    assert sorted(steps["rank"].unique()) == list(range(RANKS))
    assert (steps.groupby("rank").step.apply(list)
            .apply(lambda s: s == list(range(first, last + 1))).all())
    assert "work" in set(window.op_totals.name)
    assert len(window.ranks_view()) == RANKS
    assert "ranks" in str(window.summary())
    per_rank = window.events.groupby("rank").size().compute(scheduler=job.client)
    assert sorted(per_rank.index) == list(range(RANKS)) and (per_rank > 0).all()
    # SQL run on each node over its ranks' frames, the answers brought back and combined
    answers = window.sql("select count(*) as n from events")
    assert dict(zip(answers["rank"], answers["n"], strict=True)) == per_rank.to_dict()
    assert (answers["node"] == "node" + (answers["rank"] // 2).astype(str)).all()
    total = window.sql("select count(*) as n from events", then="select sum(n) as n from ranks")
    assert total["n"].tolist() == [per_rank.sum()]


def test_killed_worker_shows_dead_others_complete(cluster, job_on_nodes):
    job = job_on_nodes
    victim = cluster.nodes[3]
    gen = job.start("+10", "+60")  # about 1.5 s of recording at 30 ms a step
    first, last = job.last_start["window"]
    wait_until(lambda: (job.status().state == "recording").any(), 60, "a rank recording")
    victim.kill_worker()
    t0 = time.monotonic()
    try:
        def dead():
            st = job.status()
            gone = st[st.node == "node3"]
            ok = (len(gone) == 2 and (gone.state == "dead").all()
                  and not gone.alive.astype(bool).any())
            return [st] if ok else None
        st = wait_until(dead, 15, "node3's ranks shown dead")[0]
        assert time.monotonic() - t0 < 10
        others = st[st.node != "node3"]
        assert others.alive.astype(bool).all() and len(others) == 6
        done = job.wait(timeout=120, progress=False)  # the dead node is not waited for
        live = done[done.alive.astype(bool)]
        assert len(live) == 6 and (live.generation >= gen).all()
        frame = job.windows()
        frame = frame[(frame.start == first) & (frame.status == "complete")]
        assert sorted(frame["rank"]) == [0, 1, 2, 3, 4, 5]
        for m in manifests(frame):
            assert (m["start_step"], m["stop_step"]) == (first, last)
    finally:
        victim.start_worker()
        cluster.wait_workers(4)


def test_late_node_arms_the_current_window(cluster, job_on_nodes):
    job = job_on_nodes
    job.start("+300", "+305")  # about 9 s ahead: the late node has time to join
    first, last = job.last_start["window"]
    late = cluster.add_node()
    try:
        cluster.wait_workers(5)
        late.start_rank(job.name, 8)
        late.start_rank(job.name, 9)

        def armed():
            st = job.status()
            new = st[st["rank"].isin([8, 9])]
            ok = (len(new) == 2 and (new.state == "armed").all()
                  and (new.window == f"{first}-{last}").all())
            return [st] if ok else None
        st = wait_until(armed, 60, "the late node's ranks armed")[0]
        assert st.node.nunique() == 5
        assert (st[st.alive.astype(bool)].window == f"{first}-{last}").all()
        job.stop()
    finally:
        late.close()
        cluster.nodes.remove(late)


def test_two_notebooks_drive_one_job(cluster, job_on_nodes):
    a = job_on_nodes
    b = dynprof_nb.attach(a.name, cluster=cluster.client())
    try:
        running(b)
        gen = a.start("+10", "+12", profile_memory=True)
        assert b.generation == gen
        assert (b.config.start_step, b.config.profile_memory) == (a.last_start["window"][0], True)
        b.wait(timeout=120, progress=False)
        gen2 = b.set(with_stack=True)
        assert a.generation == gen2 == gen + 1 and a.config.with_stack
        assert a.config.profile_memory  # b's set kept a's keys
        st = a.wait(timeout=60, progress=False)
        assert (st.generation == gen2).all()
    finally:
        b.close()


def test_second_notebooks_window_while_the_first_records_is_refused(cluster, job_on_nodes):
    """Issue 20, item 6: B's start while A's window records is refused at once, naming A's
    window and its ranks; A's window is not cancelled by it (a cancelled start sends stop to
    every rank, which would end A's window) and goes on to complete on every rank."""
    a = job_on_nodes
    b = dynprof_nb.attach(a.name, cluster=cluster.client())
    try:
        running(b)
        a.start("+10", "+150")
        first, last = a.last_start["window"]
        wait_until(lambda: (b.status().state == "recording").sum() == RANKS, 90,
                   "every rank recording A's window")
        gen = a.generation
        for later in (("+5", "+9"), (last + 20, last + 25)):  # overlapping, or after it
            with pytest.raises(WindowConflict) as err:
                b.start(*later)
            text = str(err.value)
            assert f"conflicts with window {first}-{last}" in text and "recording now" in text
            assert "on node0" in text and "on node3" in text and f"step {last}" in text
            assert "stop()" in text and f"pid {os.getpid()}" in text
        assert a.generation == b.generation == gen
        assert (b.status().state == "recording").sum() == RANKS  # A's window goes on
        a.stop()
        a.wait(timeout=120, progress=False)
        frame = a.windows()
        assert len(frame[(frame.start == first) & (frame.status == "complete")]) == RANKS
    finally:
        b.close()


def test_bad_input_refused_before_anything_is_sent(cluster, job_on_nodes):
    job = job_on_nodes
    client = job.client

    def sent():
        answers = client.run(call, "status", {"job": job.name, "user": requester()})
        return sorted(a["segment_generation"] for a in answers.values() if "rows" in a)

    before = sent()
    gen = job.generation
    for bad in [lambda: job.start("+x", "+5"), lambda: job.start(0, 5),
                lambda: job.start("+10", "+5"), lambda: job.start(30, 20),
                lambda: job.start("+5", "+9", no_such_key=1),
                lambda: job.set(profile_memory="maybe"), lambda: job.set(ranks="x")]:
        with pytest.raises(ConfigError):
            bad()
    for bad_attach in [lambda: dynprof_nb.attach("bad name!", cluster=client),
                       lambda: dynprof_nb.attach(job.name, cluster=""),
                       lambda: dynprof_nb.attach(job.name, cluster=client, cfg_path="/tmp")]:
        with pytest.raises(JobError):
            bad_attach()
    assert sent() == before and job.generation == gen
    with pytest.raises(dynprof_nb.JobError, match="already begun on every rank"):
        job.start(1, 3)  # absolute and passed on every rank: refused as on one machine
    assert sent() == before and job.generation == gen
    var = client.run_on_scheduler(lambda dask_scheduler: list(
        dask_scheduler.extensions["variables"].variables))
    assert command_variable(job.name) not in var  # no command was ever published


def test_second_worker_on_a_node_stands_by(cluster):
    node = cluster.nodes[0]
    extra = node.spawn([*node_worker_cmd(cluster, node), "--name", "node0-extra"], "extra.log")
    try:
        cluster.wait_workers(5)
        client = cluster.client()
        answers = client.run(call, "hello", {})
        acting = [a for a in answers.values() if not a.get("standby")]
        standby = [a for a in answers.values() if a.get("standby")]
        assert len(standby) == 1 and len(acting) == 4
        assert len({a["key"] for a in acting}) == 4  # one acting agent per node
    finally:
        extra.kill()
        extra.wait(10)


def node_worker_cmd(cluster, node) -> list[str]:
    import sys

    return [sys.executable, "-m", "dask", "worker", cluster.scheduler.address, "--preload",
            "dynprof_nb.cluster.agent", "--death-timeout", "10", "--nthreads", "1",
            "--no-dashboard", "--host", "127.0.0.1", "--no-nanny"]


def test_window_not_armed_everywhere_is_cancelled_everywhere(cluster, job_on_nodes):
    import os
    import signal

    job = job_on_nodes
    stalled = cluster.nodes[3].ranks[job.name, 7]
    gen = job.generation
    os.kill(stalled.pid, signal.SIGSTOP)  # alive, but it will not read the command in time
    try:
        with pytest.raises(JobError, match=r"cancelled on every rank.*rank 7 on node3"):
            job.start("+10", "+14")
        assert not job.config.has_window and job.generation == gen + 2  # start, then stop

        def cancelled():
            st = job.status()
            others = st[st["rank"] != 7]
            return (len(others) == 7 and (others.generation == gen + 2).all()
                    and (others.state == "idle").all())
        wait_until(cancelled, 30, "every other rank back to idle")
    finally:
        os.kill(stalled.pid, signal.SIGCONT)
    assert job.last_start["armed"] is False
    first, last = job.last_start["window"]
    st = job.wait(timeout=60, progress=False)
    assert (st.generation == gen + 2).all()
    frame = job.windows()  # cancelled before it began: no rank recorded it
    assert not ((frame.start == first) & (frame.stop == last)).any()


def test_stop_ends_a_cluster_window_on_every_rank_at_one_step(job_on_nodes):
    """Stop of a window being recorded on 8 ranks of 4 nodes: one window, every rank's
    directory with the same steps (the nodes' ranks read the stop at different steps)."""
    job = job_on_nodes
    job.start("+10", "+100000")

    def recording():
        st = job.status()
        live = st[st.alive.astype(bool)]
        return [st] if len(live) == RANKS and (live.state == "recording").all() else None

    wait_until(recording, 120, "every rank recording")
    job.stop()
    job.wait(timeout=120, progress=False)
    frame = job.windows()
    assert len(frame) == RANKS and (frame.status == "complete").all(), frame.to_string()
    assert len(set(zip(frame.start, frame.stop, strict=True))) == 1, frame[["rank", "stop"]]


def test_ranks_whose_segment_is_gone_stop_showing_alive_and_come_back(cluster):
    """A job's segment removed from a node while its ranks cannot answer (stopped here, so
    none republishes it): the agent no longer lists the job there, and used to leave the
    controller with the last rows it pushed, ``alive``, for as long as the node beat. Now the
    controller shows them dead, saying the segment is gone; once the ranks run again they
    republish it (training never noticed) and show alive again."""
    node = cluster.nodes[1]
    name = unique_job("gone")
    cluster.start_ranks(name, per_node=2, step_ms=30, nodes=[node])
    job = dynprof_nb.attach(name, cluster=cluster.client())
    stopped = False
    try:
        running(job, ranks=2, nodes=1)
        for proc in node.ranks.values():
            os.killpg(proc.pid, signal.SIGSTOP)
        stopped = True
        remover = node.spawn([sys.executable, "-c", "import sys; from dynprof_nb.contract "
                              "import segment; segment.unlink(sys.argv[1])", name], "unlink.log")
        assert remover.wait(60) == 0, (node.dir / "unlink.log").read_text()[-2000:]

        def shown_gone():
            st = job.status()
            ok = len(st) == 2 and not st.alive.astype(bool).any() and (st.state == "dead").all()
            return [st] if ok else None
        st = wait_until(shown_gone, 30, f"{name}'s ranks shown dead once its segment is gone")[0]
        assert all("segment on node" in e and "is gone" in e for e in st.error), st.to_string()

        for proc in node.ranks.values():
            os.killpg(proc.pid, signal.SIGCONT)
        stopped = False
        before = dict(zip(st["rank"], st.step, strict=True))
        back = wait_until(lambda: [s] if len(s := job.status()) == 2 and s.alive.astype(bool).all()
                          and all(s.step > s["rank"].map(before)) else None, 60,
                          f"{name}'s ranks alive and stepping again in a republished segment")[0]
        assert (back.error.fillna("") == "").all(), back.to_string()
    finally:
        if stopped:
            for proc in node.ranks.values():
                os.killpg(proc.pid, signal.SIGCONT)
        cluster.stop_ranks(name)
        job.close()
