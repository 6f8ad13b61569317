"""The adversarial tester's attacks of issue 28, run as a real second uid (65534, nobody).

Each attack carries an ``os.system`` payload that writes a file into a directory only the
cluster's user can write: a pickle in Dask's handshake (finding 1, against the scheduler, a
worker and a nanny, over TLS and over the same ports in plain TCP), a ``run`` message to a
server's own handler (findings 1-2), a large handshake and a ``run`` sent over a socket closed
at once (finding 3, whose row in /proc/net/tcp reads uid 0, inode 0). After each, no file may
exist, every refusal the attacker could read says why, and the servers logged it. Without the
fixes each of these wrote the file (as root).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from jobutil import unique_job, wait_until
from nodes import SimCluster
from otheruser import OTHER_UID, attack

import dynprof_nb
from dynprof_nb.cluster import tls

pytestmark = pytest.mark.timeout(600)


def servers(sim: SimCluster) -> list[str]:
    """The scheduler, every worker and every nanny of ``sim``."""
    client = sim.client()
    info = client.scheduler_info()["workers"]
    return [sim.scheduler.address, *info, *(w["nanny"] for w in info.values() if w["nanny"])]


def as_plain(address: str) -> str:
    return "tcp://" + address.split("://", 1)[1]


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory):
    """The default: no certificate flags anywhere; a node with a gated nanny."""
    with SimCluster(tmp_path_factory.mktemp("gatedtls"), nodes=1, nanny=True) as sim:
        yield sim


@pytest.fixture(scope="module")
def plain_cluster(tmp_path_factory: pytest.TempPathFactory):
    """Plain TCP by the unsafe opt-in: only the gate's uid check stands in the way."""
    with SimCluster(tmp_path_factory.mktemp("gatedplain"), nodes=1, nanny=True,
                    plain=True) as sim:
        yield sim


def test_the_default_cluster_speaks_mutual_tls_without_flags(tls_cluster):
    """Scheduler, worker and nanny listen on tls:// with the user's own CA (made in a
    private directory); a client of the same user needs no flags; plain TCP on the same
    ports decodes nothing."""
    targets = servers(tls_cluster)
    assert len(targets) == 3 and all(t.startswith("tls://") for t in targets), targets
    directory = tls.user_tls().directory
    assert directory.stat().st_mode & 0o777 == 0o700 and directory.stat().st_uid == os.getuid()
    for name in tls.FILES:
        assert (directory / name).stat().st_mode & 0o777 == 0o600
    name = unique_job("noflags")
    job = dynprof_nb.attach(name, cluster=tls_cluster.scheduler.address)  # no security=
    try:
        assert job.client.scheduler.address.startswith("tls://")
        assert job.status().empty
    finally:
        job.close()


def test_a_second_user_without_the_certificate_decodes_nothing(tls_cluster):
    targets = servers(tls_cluster)
    seen, written = attack([*targets, *map(as_plain, targets)])
    assert seen["uid"] == OTHER_UID
    assert written == [], f"a payload ran on the cluster: {written} ({seen})"
    for key, text in seen.items():
        if key != "uid":  # no TLS handshake without the CA's certificate: nothing answered
            assert not text.startswith("answered"), f"{key}: {text}"


def test_a_second_user_with_a_copy_of_the_certificate_is_refused_at_accept(tls_cluster):
    """Defence in depth: with a stolen copy of the certificate the TLS handshake succeeds,
    and the gate refuses the connection before Dask's handshake is read (the kernel says the
    socket is uid 65534's), telling the attacker why."""
    targets = servers(tls_cluster)
    seen, written = attack(targets, certs=tls.user_tls().directory)
    assert written == [], f"a payload ran on the cluster: {written} ({seen})"
    for target in targets:
        for kind in ("handshake", "run"):
            text = seen[f"{kind} {target}"]
            assert "refused by the dynprof_nb gate" in text and "uid 65534" in text, text
            assert "this cluster belongs to uid 0" in text, text
    log = (tls_cluster.workdir / "scheduler.log").read_text()
    assert "dynprof_nb gate on Scheduler: refused" in log and "uid 65534" in log
    node_logs = (tls_cluster.nodes[0].dir / "worker.log").read_text()
    assert "dynprof_nb gate on Worker: refused" in node_logs, node_logs[-3000:]
    assert "dynprof_nb gate on Nanny: refused" in node_logs, node_logs[-3000:]


def test_plain_tcp_opt_in_still_refuses_other_uids_and_closed_sockets(plain_cluster):
    """Findings 1 and 3 on plain TCP (the opt-in): the handshake pickle and the ``run`` on
    every server, and the send-and-close peer, twice per server; nothing runs."""
    targets = servers(plain_cluster)
    assert all(t.startswith("tcp://") for t in targets), targets
    seen, written = attack(targets)
    assert written == [], f"a payload ran on the cluster: {written} ({seen})"
    for target in targets:
        for kind in ("handshake", "run"):
            text = seen[f"{kind} {target}"]
            assert "refused by the dynprof_nb gate" in text and "uid 65534" in text, text
    log = (plain_cluster.workdir / "scheduler.log").read_text()
    assert log.count("dynprof_nb gate on Scheduler: refused") >= 4, log[-3000:]


def test_an_ungated_nanny_stops_its_worker(plain_cluster):
    """Finding 2: a worker whose nanny runs no gate. ``dask worker --preload ...`` imports
    the preload in the nanny's process too (so that nanny is gated at accept and answers
    the gate); the agent given through Dask's config (``distributed.worker.preload``) is not,
    and neither is the nanny. The agent then stops the worker and its nanny, saying why,
    instead of only refusing its own operations while the nanny stays open."""
    node = plain_cluster.nodes[0]
    cmd = ["/usr/bin/env", "DASK_DISTRIBUTED__WORKER__PRELOAD=['dynprof_nb.cluster.agent']",
           sys.executable, "-m", "dask", "worker", plain_cluster.scheduler.address,
           "--nanny", "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1",
           "--name", "ungated"]
    proc = node.spawn(cmd, "ungated-nanny.log")
    try:
        proc.wait(timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("the worker with an ungated nanny kept running: "
                    + (node.dir / "ungated-nanny.log").read_text()[-3000:])
    text = (node.dir / "ungated-nanny.log").read_text()
    assert "stopping this worker (and its nanny)" in text, text[-3000:]
    assert "runs no dynprof_nb gate" in text and "--no-nanny" in text
    client = plain_cluster.client()
    wait_until(lambda: all(w.get("name") != "ungated"
                           for w in client.scheduler_info()["workers"].values()), 60,
               "the stopped worker to leave the scheduler")


def test_the_old_recipe_with_a_nanny_gates_the_nanny(tls_cluster):
    """The recipe as the old docs printed it (a nanny, ``--preload`` only): its nanny's
    process imported the preload, so the nanny is mutual TLS and gated at accept, answers
    the gate, and the worker keeps running."""
    node = tls_cluster.nodes[0]
    proc = node.spawn([sys.executable, "-m", "dask", "worker", tls_cluster.scheduler.address,
                       "--preload", "dynprof_nb.cluster.agent", "--nthreads", "1",
                       "--no-dashboard", "--host", "127.0.0.1", "--name", "oldrecipe"],
                      "old-recipe.log")
    client = tls_cluster.client()

    def joined():
        return [w for w in client.scheduler_info()["workers"].values()
                if w.get("name") == "oldrecipe"]
    try:
        wait_until(lambda: joined(), 120, "the old recipe's worker to join")
        nanny = joined()[0]["nanny"]
        assert nanny and nanny.startswith("tls://")
        seen, written = attack([nanny], certs=tls.user_tls().directory)
        assert written == [] and "refused by the dynprof_nb gate" in seen[f"run {nanny}"]
        assert proc.poll() is None and joined(), (
            node.dir / "old-recipe.log").read_text()[-3000:]
    finally:
        from nodes import _kill_group

        _kill_group(proc)


def test_a_self_made_ca_with_the_owners_subject_gets_no_tls(tls_cluster, tmp_path):
    """A CA and certificate of the attacker's own making, with exactly the owner's subject
    (``CN=dynprof-<user>, O=dynprof_nb uid <uid>``): not signed by the owner's CA, so the TLS
    handshake fails on every server and nothing is decoded."""
    pems = tls._make_pems()  # the owner's subject, a fresh CA: what anyone can make
    for name, data in pems.items():
        (tmp_path / name).write_bytes(data)
    made = (tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem")
    from cryptography import x509

    forged = x509.load_pem_x509_certificate(made[1].read_bytes()).subject
    assert frozenset((a.oid._name, str(a.value)) for a in forged) == tls.user_tls().subject()
    targets = servers(tls_cluster)
    seen, written = attack(targets, certs=made)
    assert written == [], f"a payload ran on the cluster: {written} ({seen})"
    for key, text in seen.items():
        if key != "uid":
            assert not text.startswith("answered"), f"{key}: {text}"
