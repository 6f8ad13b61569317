"""Who may drive a job on a cluster, and over what (issue 13), on simulated nodes.

A TLS cluster (``Security.temporary()`` certificates written to files for ``dask scheduler`` and
``dask worker --tls-*``, all on 127.0.0.1) drives a job end to end; a client without the
cluster's certificate is refused; a plain ``tcp://`` address off this machine is refused before
any connection; a second user (a real unprivileged uid, ``setpriv``) cannot start, stop or load
the first user's job (the gate: one cluster per user, issue 20); a crafted window path is
refused. See docs/reliability.md, row 12.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from jobutil import unique_job, wait_until
from nodes import SimCluster, TLSFiles, child_env, dask_client
from otheruser import OTHER_GID, OTHER_UID, as_other_user, run_as_other_user

import dynprof_nb
from dynprof_nb.cluster.access import InsecureClusterWarning, requester
from dynprof_nb.cluster.agent import command_variable
from dynprof_nb.cluster.reduce import node_frame, node_reductions, rank_reductions
from dynprof_nb.control.base import JobError

pytestmark = pytest.mark.timeout(900)  # a loaded 2-core machine; every wait inside is bounded

RANKS = 4


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory):
    if os.geteuid() != 0:
        pytest.fail("the cluster security tests need root (simulated nodes, a second uid)")
    workdir = tmp_path_factory.mktemp("tlscluster")
    tls = TLSFiles(workdir / "certs")
    with SimCluster(workdir, nodes=2, tls=tls) as sim:
        yield sim


@pytest.fixture(scope="module")
def tls_job(tls_cluster):
    """A job of 2 ranks on each of the 2 nodes, one complete window, attached over TLS."""
    name = unique_job("tls")
    tls_cluster.start_ranks(name, per_node=2, step_ms=30)
    client = tls_cluster.client()
    assert client.scheduler.address.startswith("tls://")
    job = dynprof_nb.attach(name, cluster=client)
    try:
        wait_until(lambda: len(job.live_ranks()) == RANKS and (job.status().step > 0).all(),
                   120, f"{RANKS} ranks over TLS")
        yield job
    finally:
        tls_cluster.stop_ranks(name)
        job.close()


def test_tls_cluster_end_to_end_through_attach(tls_cluster, tls_job):
    job = tls_job
    st = job.status()
    assert sorted(st["rank"]) == list(range(RANKS)) and st.node.nunique() == 2
    gen = job.start("+15", "+18")
    first, last = job.last_start["window"]
    done = job.wait(timeout=150, progress=False)
    assert (done.generation >= gen).all()
    frame = job.windows()
    frame = frame[(frame.start == first) & (frame.status == "complete")]
    assert sorted(frame["rank"]) == list(range(RANKS))
    window = job.load()
    assert (window.start_step, window.stop_step) == (first, last)
    assert sorted(window.steps["rank"].unique()) == list(range(RANKS))
    # the same job through an address and a Security object (certificate files)
    from distributed.security import Security

    tls = tls_cluster.tls
    sec = Security(require_encryption=True, tls_ca_file=str(tls.ca),
                   tls_client_cert=str(tls.cert), tls_client_key=str(tls.key))
    other = dynprof_nb.attach(job.name, cluster=tls_cluster.scheduler.address, security=sec)
    try:
        assert other.generation == job.generation
        assert wait_until(lambda: len(other.live_ranks()) == RANKS, 60, "ranks via address")
    finally:
        other.close()


def test_client_without_the_certificate_is_refused(tls_cluster):
    from distributed.security import Security

    addr = tls_cluster.scheduler.address
    stranger = Security.temporary()  # a valid certificate, but not signed by the cluster's CA
    with pytest.raises(JobError, match="cannot reach the Dask scheduler"):
        dynprof_nb.attach("anyjob", cluster=addr, security=stranger)
    with pytest.raises(JobError, match="cannot reach the Dask scheduler"):
        dynprof_nb.attach("anyjob", cluster=addr)  # no certificate at all
    plain = "tcp://" + addr.split("://", 1)[1]  # the same port, without TLS
    with pytest.raises((OSError, TimeoutError)):
        dask_client(plain, timeout=5)
    with pytest.raises((OSError, TimeoutError)):
        dask_client(addr, security=stranger, timeout=5)


def test_cli_drives_the_tls_cluster_with_certificate_files(tls_cluster, tls_job):
    tls, addr = tls_cluster.tls, tls_cluster.scheduler.address

    def cli(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", "status",
                               tls_job.name, "--cluster", addr, *flags], env=child_env(),
                              capture_output=True, text=True, timeout=180)
    ok = cli("--tls-ca-file", str(tls.ca), "--tls-cert", str(tls.cert), "--tls-key", str(tls.key))
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert f"{RANKS} live rank(s) on 2 node(s)" in ok.stdout
    refused = cli()
    assert refused.returncode == 2 and "cannot reach the Dask scheduler" in refused.stderr
    half = cli("--tls-ca-file", str(tls.ca))
    assert half.returncode == 2 and "go together" in half.stderr


def test_magic_attaches_over_tls_with_certificate_files(tls_cluster, tls_job):
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    from dynprof_nb.cluster.controller import ClusterJob

    tls, addr = tls_cluster.tls, tls_cluster.scheduler.address
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "dynprof_nb")
    job = ip.run_line_magic("dynprof", f"attach {tls_job.name} --cluster {addr} --tls-ca-file "
                            f"{tls.ca} --tls-cert {tls.cert} --tls-key {tls.key}")
    try:
        assert isinstance(job, ClusterJob) and job.client.scheduler.address.startswith("tls")
        assert wait_until(lambda: len(job.live_ranks()) == RANKS, 60, "ranks via the magic")
    finally:
        job.close()
    with pytest.raises(UsageError, match="anyone who can reach that scheduler"):
        ip.run_line_magic("dynprof", "attach llama --cluster tcp://192.0.2.7:8786")


def test_plain_tcp_off_this_machine_is_refused_before_connecting(monkeypatch):
    """No connection is attempted: ``socket.create_connection`` and ``socket.socket.connect``
    fail the test if anything tries (the address is documentation-only, 192.0.2.0/24)."""
    def no_connect(*args, **kwargs):
        raise AssertionError(f"a connection was attempted: {args}")

    monkeypatch.setattr(socket, "create_connection", no_connect)
    monkeypatch.setattr(socket.socket, "connect", no_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", no_connect)
    for addr in ("tcp://192.0.2.7:8786", "192.0.2.7:8786", "ws://node7.example:8786"):
        with pytest.raises(JobError) as err:
            dynprof_nb.attach("llama", cluster=addr)
        text = str(err.value)
        assert "anyone who can reach that scheduler can run code on every worker" in text
        assert "start windows on every rank and read every trace" in text
        assert "allow_insecure=True" in text
    from dynprof_nb.cluster.access import check_transport

    for ok in ("tcp://127.0.0.1:8786", "tcp://localhost:1", "tcp://[::1]:2", "tls://192.0.2.7:1"):
        assert check_transport(ok) == ok
    with pytest.warns(InsecureClusterWarning, match="run code on every worker"):
        assert check_transport("tcp://192.0.2.7:8786", allow_insecure=True)
    from dynprof_nb.ui.cli import main

    assert main(["status", "llama", "--cluster", "tcp://192.0.2.7:8786"]) == 2


# -- a second user -----------------------------------------------------------------------------

OTHER_USER_CODE = """
    import asyncio, json, os, pickle, sys
    from distributed import Client
    from distributed.comm import connect
    from distributed.security import Security
    from dynprof_nb.cluster.agent import call

    addr, certs, name, worker, replay = sys.argv[1:6]
    sec = Security(require_encryption=True, tls_ca_file=certs + "/ca.pem",
                   tls_client_cert=certs + "/cert.pem",
                   tls_client_key=certs + "/key.pem") if certs else None
    root = {"uid": 0, "name": "root"}  # the forged identity
    forged = {"job": name, "action": "stop", "config": {}, "seq": 99, "user": root}
    out = {"uid": os.getuid()}
    try:
        client = Client(addr, security=sec, timeout=30, set_as_default=False)
    except Exception as exc:
        out["client"] = f"{type(exc).__name__}: {exc}"
    else:  # were it let in: the crafted payload through the agent's own entry point
        out["client"] = "CONNECTED"
        try:
            out["client_run"] = repr(client.run(call, "apply", forged))
        except Exception as exc:
            out["client_run"] = f"{type(exc).__name__}: {exc}"
        client.close()

    async def raw(target, msg):
        args = sec.get_connection_args("client") if sec else {}
        try:
            comm = await connect(target, timeout=30, **args)
        except Exception as exc:
            return f"connect failed: {type(exc).__name__}: {exc}"
        try:
            await comm.write(msg)
            return "answered: " + repr(await asyncio.wait_for(comm.read(), 30))[:600]
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            comm.abort()

    run = {"function": pickle.dumps(call), "args": pickle.dumps(("apply", forged))}
    out["worker_run"] = asyncio.run(raw(worker, {"op": "run", **run, "wait": True}))
    out["scheduler_broadcast"] = asyncio.run(raw(addr, {"op": "broadcast",
                                                        "msg": {"op": "run", **run}}))
    out["replay"] = asyncio.run(raw(addr, json.loads(replay)))
    print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def plain_cluster(tmp_path_factory: pytest.TempPathFactory):
    """One simulated node on a plain loopback ``tcp://`` scheduler (the unsafe opt-in,
    ``DYNPROF_NB_UNSAFE_PLAIN_TCP=1``): reachable by every local user, so only the gate's
    uid check keeps a second one out."""
    with SimCluster(tmp_path_factory.mktemp("plaincluster"), nodes=1, plain=True) as sim:
        yield sim


@pytest.fixture(scope="module")
def plain_job(plain_cluster):
    name = unique_job("plain")
    plain_cluster.start_ranks(name, per_node=1, step_ms=30)
    job = dynprof_nb.attach(name, cluster=plain_cluster.client())
    try:
        wait_until(lambda: len(job.live_ranks()) == 1, 120, "1 rank over loopback tcp")
        yield job
    finally:
        plain_cluster.stop_ranks(name)
        job.close()


@pytest.mark.parametrize("transport", ["tls", "plain"])
def test_second_user_cannot_drive_the_first_users_job(transport, request):
    """uid 65534 (nobody), with its own copy of the cluster's certificate over TLS, or on the
    plain loopback scheduler every local user can reach: the gate on the scheduler and on the
    worker closes each of its connections before reading a byte, whatever it would send (its
    Client, the agent's ``call`` with ``user={"uid": 0}``, a raw ``run`` on the worker's own
    port, a ``broadcast`` through the scheduler, a replay of root's command ``Variable``), and
    tells it why. Root's job is untouched."""
    sim = request.getfixturevalue(f"{transport}_cluster")
    job = request.getfixturevalue(f"{transport}_job")
    gen, ranks = job.generation, len(job.live_ranks())
    job.start("+500", "+502")  # a window armed, that a forged stop would cancel
    wait_until(lambda: (job.status().state == "armed").sum() == ranks, 90, "armed")
    gen = job.generation
    worker = next(iter(job.client.scheduler_info()["workers"]))
    replay = {"op": "variable_set", "name": command_variable(job.name), "key": None,
              "data": dict(job._agents.command(), seq=gen + 1, action="stop")}
    home = Path(tempfile.mkdtemp(prefix="dynprof-other-user-"))  # pytest's tmp is 0700
    try:
        certs = ""
        if transport == "tls":
            certs = str(home / "certs")  # the other user's own copy of the certificate
            shutil.copytree(sim.tls.ca.parent, certs)
        for p in [home, *home.rglob("*")]:
            os.chown(p, OTHER_UID, OTHER_GID)
        out = run_as_other_user(OTHER_USER_CODE, [sim.scheduler.address, certs, job.name,
                                                  worker, json.dumps(replay)], home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert out["uid"] == OTHER_UID
    assert out["client"] != "CONNECTED", out
    for key in ("client", "worker_run", "scheduler_broadcast", "replay"):
        text = out[key]
        assert "refused by the dynprof_nb gate" in text and "uid 65534" in text, f"{key}: {text}"
        assert "this cluster belongs to uid 0" in text, f"{key}: {text}"
    # root's job is untouched: same generation, its window still armed on every rank
    assert job.generation == gen
    st = job.status()
    assert len(st) == ranks and st.alive.astype(bool).all() and (st.generation == gen).all()
    assert (st.state == "armed").all(), st.to_string()
    log = (sim.workdir / "scheduler.log").read_text()
    assert "dynprof_nb gate on Scheduler: refused" in log and "uid 65534" in log
    job.stop()


def test_agents_refuse_a_scheduler_without_the_gate(tmp_path):
    """One shared cluster for several users is refused, not trusted: an agent on a scheduler
    that admits anyone (``dask scheduler`` without the preload, in a process that never
    imported the gate) says so, and attach raises with what to do; the gated one attaches
    (a scheduler in this process: every server of a gated process is gated)."""
    from distributed import Client, LocalCluster

    name = unique_job("gate")
    with SimCluster(tmp_path, nodes=1, plain=True, gated=False) as sim:
        with pytest.raises(JobError, match="runs no dynprof_nb gate") as err:
            dynprof_nb.attach(name, cluster=sim.client())
        assert "--preload dynprof_nb.cluster.gate" in str(err.value)
    local = {"n_workers": 1, "processes": False, "protocol": "tcp://", "host": "127.0.0.1",
             "dashboard_address": None}  # every server on 127.0.0.1
    with LocalCluster(**local, scheduler_kwargs={"preload": ["dynprof_nb.cluster.gate"]}) as cl, \
            Client(cl, set_as_default=False) as client:
        assert client.scheduler.address.startswith("tls://")  # tcp:// is served as mutual TLS
        job = dynprof_nb.attach(name, cluster=client)
        assert job.status().empty and job.generation == 0
        job.close()


def test_gate_rules_without_a_cluster():
    """The pieces: the kernel's owner of a loopback peer; certificate subjects off-machine."""
    from types import SimpleNamespace

    from dynprof_nb.cluster.gate import peer_rows, peer_uid, refusal

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    peer = socket.create_connection(server.getsockname())
    conn, _ = server.accept()
    try:
        assert peer_uid(conn) == os.getuid() and peer_uid(peer) == os.getuid()
        comm = SimpleNamespace(peer_address="tcp://127.0.0.1:1", stream=SimpleNamespace(
            socket=conn), extra_info={})
        assert refusal(comm, os.getuid(), None) is None
        assert "a connection from uid 0; this cluster belongs to uid 65534" in \
            refusal(comm, OTHER_UID, None)
        # a peer that closed at once (issue 28, finding 3): its row is FIN_WAIT2 with uid 0
        # and inode 0, which names no one; it must not read as root's
        peer.close()
        wait_until(lambda: all(state != "01" for state, _, _ in peer_rows(conn)), 10,
                   "the closed peer's row to leave ESTABLISHED")
        assert peer_uid(conn) is None
        closed = refusal(comm, os.getuid(), None)
        assert closed and "whose owner the kernel cannot name" in closed, closed
    finally:
        for s in (peer, conn, server):
            s.close()

    class OffMachine:  # what a socket from another machine reports (only its addresses)
        def getpeername(self):
            return ("192.0.2.7", 40000)

        def getsockname(self):
            return ("192.0.2.1", 8786)

    mine = frozenset({("commonName", "dynprof-alice")})

    def off(scheme, subject):
        cert = {"subject": tuple(((k, v),) for k, v in subject)}
        return refusal(SimpleNamespace(peer_address=f"{scheme}://192.0.2.7:40000",
                                       stream=SimpleNamespace(socket=OffMachine()),
                                       extra_info={"peercert": cert}), 0, mine)

    assert off("tls", mine) is None
    assert "not the cluster owner's" in off("tls", {("commonName", "dynprof-bob")})
    assert "plain tcp:// from another machine" in off("tcp", mine)
    assert refusal(SimpleNamespace(peer_address="inproc://x/1/2"), 0, mine) is None
    assert "cannot check" in refusal(SimpleNamespace(peer_address="ws://1.2.3.4:5"), 0, mine)


def test_crafted_window_paths_are_refused(tls_cluster, tls_job):
    job = tls_job
    client = job.client
    if not (job.windows().status == "complete").any():
        job.start("+10", "+12")
        job.wait(timeout=150, progress=False)
    job.windows()
    good = job._last_windows[job._last_windows.status == "complete"].iloc[0]
    worker, rank = good.addr, int(good["rank"])
    root = str(Path(good.path).parent)

    def read(path):
        return client.submit(rank_reductions, job.name, path, rank, requester(),
                             workers=[worker], allow_other_workers=False,
                             pure=False).result(timeout=120)

    def read_many(paths):  # what load() sends: one task per node, every path checked
        return client.submit(node_reductions, job.name, [(p, rank) for p in paths],
                             requester(), workers=[worker], allow_other_workers=False,
                             pure=False).result(timeout=120)

    assert read(good.path)["rank"] == rank  # the real one loads
    link = Path(root) / (Path(good.path).name + "-etc")
    link.symlink_to("/etc")
    try:
        for bad in ("../../etc", "/etc", f"{root}/../../../etc", root, str(link),
                    good.path + "/../../../etc", good.path + "/"):
            with pytest.raises(Exception, match="not a window of job"):
                read(bad)
            with pytest.raises(Exception, match="not a window of job"):  # one bad: none read
                read_many([good.path, bad])
            with pytest.raises(JobError, match="not one of job"):
                job.load(bad)
    finally:
        link.unlink()
    # a symlink inside a listed window that leads out of the roots
    inner = Path(good.path) / "peek.json"
    inner.symlink_to("/etc/passwd")
    try:
        with pytest.raises(Exception, match="symlink out of the job's output roots"):
            read(good.path)
        with pytest.raises(Exception, match="symlink out of the job's output roots"):
            read_many([good.path])
    finally:
        inner.unlink()
    with pytest.raises(Exception, match="frame '__class__'"):  # no attribute by name
        client.submit(node_frame, job.name, "__class__", [(good.path, rank)], "n", requester(),
                      workers=[worker], pure=False).result(timeout=60)


def test_restarted_agent_reads_the_current_command_over_tls(tls_cluster, tls_job):
    """An agent's own client (reading the job's command ``Variable``) must present a
    certificate too: ``dask worker --tls-cert`` gives the worker one for the worker role only.
    A restarted agent that could not read it would show its ranks at generation 0."""
    job = tls_job
    gen = job.set(with_stack=not job.config.with_stack)
    job.wait(timeout=120, progress=False)
    node = tls_cluster.nodes[1]
    node.kill_worker()
    node.start_worker()
    tls_cluster.wait_workers(2)

    def caught_up():
        st = job.status()
        mine = st[st.node == "node1"]
        return (len(mine) == 2 and mine.alive.astype(bool).all()
                and (mine.generation == gen).all())
    wait_until(caught_up, 120, "node1's restarted agent back on the current generation")


def test_the_controller_ships_only_calls_into_the_fixed_operations():
    """Statically, over dynprof_nb/cluster and the UIs: every ``Client.run``/``submit`` sends
    the agent's ``call`` (one of OPERATIONS) or a read task of reduce.py, nothing else (no
    lambda, no ``run_on_scheduler``), and the only plugin is the agent."""
    import ast

    from dynprof_nb.cluster.operations import OPERATIONS

    # node_sql: a read task like node_frame (the query runs as the agent's user, who is the
    # requester: the gate admits only the cluster's owner), its answer the only thing shipped
    shipped, allowed = [], {"call", "rank_reductions", "node_reductions", "node_frame",
                            "node_sql", "AgentPlugin"}
    package = Path(dynprof_nb.__file__).parent
    for path in [*(package / "cluster").glob("*.py"), *(package / "ui").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("run", "submit", "run_on_scheduler", "register_plugin",
                                       "map", "register_worker_plugin"):
                if "client" not in ast.unparse(node.func.value):  # Series.map, Thread.run
                    continue
                first = node.args[0] if node.args else None
                name = first.id if isinstance(first, ast.Name) else (
                    first.func.id if isinstance(first, ast.Call)
                    and isinstance(first.func, ast.Name) else ast.dump(first) if first else "")
                shipped.append((path.name, node.func.attr, name))
        if path.name == "cluster_window.py":  # its submit ships the task _per_node is given
            per_node = [n.args[0] for n in ast.walk(ast.parse(path.read_text()))
                        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr == "_per_node"]
            assert per_node, "cluster_window.py no longer calls _per_node: update this scan"
            shipped = [s for s in shipped if s != (path.name, "submit", "task")]
            shipped += [(path.name, "submit", getattr(a, "id", ast.dump(a))) for a in per_node]
    assert shipped, "the scan found no Dask call: is it still looking at the right files?"
    bad = [s for s in shipped if s[2] not in allowed or s[1] == "run_on_scheduler"]
    assert not bad, f"code shipped to the workers beyond the fixed operations: {bad}"
    assert set(OPERATIONS) == {"hello", "apply", "status", "windows", "trigger", "step_times",
                               "stacks", "flight_recorder"}


def test_access_rules_without_a_cluster(tmp_path):
    """The pieces on their own: whose request, which addresses, the agent's client certificate."""
    from distributed.security import Security

    from dynprof_nb.cluster.access import check_transport, client_security, refusal
    from dynprof_nb.cluster.node import node_key
    from dynprof_nb.cluster.operations import NodeOperations, NotYourJob, OperationError

    assert refusal(requester(), "apply", "j", "n0") is None
    assert "does not say which user" in refusal(None, "apply", "j", "n0")
    assert "does not say which user" in refusal({"uid": True}, "apply", "j", "n0")
    other = refusal({"uid": OTHER_UID, "name": "nobody"}, "apply", "j", "n0")
    assert f"uid {os.getuid()}" in other and "uid 65534 (nobody)" in other
    ops = NodeOperations("n0", node_key())
    with pytest.raises(NotYourJob, match="refused 'status' on job 'j'"):
        ops.call("status", {"job": "j", "user": {"uid": OTHER_UID, "name": "nobody"}})
    with pytest.raises(OperationError, match="does not say which user"):
        ops.call("status", {"job": "j"})
    hello = ops.call("hello", {"user": {"uid": OTHER_UID, "name": "nobody"}})
    assert hello["foreign"] and "jobs" not in hello  # whose agent, and nothing more
    assert "jobs" in ops.call("hello", {"user": requester()})
    for bad in ("tcp://10.0.0.1:8786", "10.0.0.1:8786", "tcp://[2001:db8::1]:8786",
                "tcp://head-node:8786", "ucx://10.0.0.1:1", "tcp://127.0.0.1.evil.example:1"):
        with pytest.raises(ValueError, match="plain-text scheduler address off this machine"):
            check_transport(bad)
    tls = TLSFiles(tmp_path / "certs")
    worker = Security(tls_ca_file=str(tls.ca), tls_worker_cert=str(tls.cert),
                      tls_worker_key=str(tls.key))  # what `dask worker --tls-*` builds
    derived = client_security(worker)
    assert derived.tls_client_cert == str(tls.cert) and derived.require_encryption
    assert client_security(tls.security) is tls.security  # already has a client certificate
    assert client_security(None) is None


def test_second_users_worker_cannot_join_the_first_users_cluster(tls_cluster, tls_job):
    """One cluster per user: uid 65534 starting an agent of its own (a worker as itself, with
    a copy of the certificate) on root's scheduler is refused by the gate, so it neither sees
    root's job nor takes a share of root's commands; root's job is untouched."""
    from nodes import _kill_group

    job = tls_job
    gen, pids = job.generation, set(job.status().pid)
    node = tls_cluster.nodes[1]
    log = tls_cluster.workdir / "scheduler.log"
    refused_before = log.read_text().count("a connection from uid 65534")
    home = Path(tempfile.mkdtemp(prefix="dynprof-other-user-"))
    proc = None
    try:
        certs, scratch = home / "certs", home / "scratch"
        shutil.copytree(tls_cluster.tls.ca.parent, certs)
        scratch.mkdir()
        for p in [home, scratch, certs, *certs.iterdir()]:
            os.chown(p, OTHER_UID, OTHER_GID)
        tls = ["--tls-ca-file", str(certs / "ca.pem"), "--tls-cert", str(certs / "cert.pem"),
               "--tls-key", str(certs / "key.pem")]
        proc = node.spawn(as_other_user(
            ["/usr/bin/env", f"HOME={home}", sys.executable, "-m", "dask", "worker",
             tls_cluster.scheduler.address, "--preload", "dynprof_nb.cluster.agent",
             "--death-timeout", "10", "--nthreads", "1", "--no-dashboard", "--host",
             "127.0.0.1", "--no-nanny", "--name", "node1-nobody", "--local-directory",
             str(scratch), *tls], home), "worker-nobody.log")
        wait_until(lambda: log.read_text().count("a connection from uid 65534")
                   > refused_before, 120, "the gate to refuse uid 65534's worker")
        assert len(job.client.scheduler_info()["workers"]) == 2
        st = job.status()
        assert job.generation == gen and set(st.pid) == pids and len(st) == RANKS
        assert "node1-nobody" not in set(st.node)
    finally:
        _kill_group(proc)
        shutil.rmtree(home, ignore_errors=True)
