"""One cluster per user: the scheduler and every worker admit only their owner's connections.

Dask runs whatever a connected peer sends (``Client.run``, ``submit``, a worker's own ``run``
handler), with the rights of the worker's user. No check inside an agent can then tell users
apart: a peer that may connect can read the agent user's files or drive its jobs with code of
its own. So the per-user boundary is **who may connect at all**, and this gate enforces it on
every server of the cluster (``dask scheduler --preload dynprof_nb.cluster.gate``; every agent
gates its own worker), for each connection before its first message is read:

* **from this machine** (the peer address is loopback, any scheme): the kernel's socket table
  (``/proc/net/tcp``, ``/proc/net/tcp6``) says which uid owns the peer's end of the
  connection; it must be the uid the server runs as. Nothing the peer sends can change it;
* **from another machine**: TLS only, with a certificate whose subject is the server's own
  certificate's subject (the owner's: "one CA, or one certificate subject, per user");
* ``inproc://``: the same process.

Anything else is closed at once, and the server logs who was refused and why. An agent acts
only on a cluster whose scheduler runs this gate for the agent's own uid
(:func:`scheduler_refusal`): one shared cluster for several users is refused, not trusted.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import socket
import struct
from typing import Any

log = logging.getLogger("dynprof_nb")

GATE_HANDLER = "dynprof_nb_gate"
PROC_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
SAY_WHY_S = 1.0  # at most this long telling a refused peer why


# -- who is on the other end ---------------------------------------------------------------


def _proc_address(text: str) -> tuple[str, int]:
    """``0100007F:1F90`` (a /proc/net/tcp address: 32-bit words in host order) as
    ``("127.0.0.1", 8080)``; IPv4-mapped IPv6 addresses come back as IPv4."""
    host, port = text.split(":")
    raw = b"".join(struct.pack("=I", int(host[i : i + 8], 16)) for i in range(0, len(host), 8))
    ip = ipaddress.ip_address(raw)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return str(ip), int(port, 16)


def _normal(address: tuple[Any, ...]) -> tuple[str, int]:
    ip = ipaddress.ip_address(address[0].split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return str(ip), int(address[1])


def peer_uid(sock: socket.socket) -> int | None:
    """The uid owning the other end of a TCP connection from this machine (its socket is in
    this network namespace's table, local and remote addresses swapped), or None."""
    mine, peer = _normal(sock.getsockname()), _normal(sock.getpeername())
    for table in PROC_TABLES:
        try:
            with open(table) as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 8:
                continue
            try:
                if _proc_address(fields[1]) == peer and _proc_address(fields[2]) == mine:
                    return int(fields[7])
            except ValueError:
                continue
    return None


def _subject(pairs: Any) -> frozenset[tuple[str, str]]:
    """A certificate subject as a set of (attribute, value), from ``getpeercert()``."""
    return frozenset((k, v) for rdn in pairs or () for k, v in rdn)


def own_subject(server: Any) -> frozenset[tuple[str, str]] | None:
    """The subject of the certificate this server presents (None without TLS)."""
    security = getattr(server, "security", None)
    # distributed's Security names the certificate by role: the scheduler's, or a worker's
    own = "tls_scheduler_cert" if type(server).__name__ == "Scheduler" else "tls_worker_cert"
    pem = getattr(security, own, None) or getattr(security, "tls_cert", None)
    if not pem:
        return None
    from cryptography import x509

    data = pem if "-----BEGIN" in pem else open(pem).read()  # noqa: SIM115 (PEM text or path)
    cert = x509.load_pem_x509_certificate(data.encode())
    return frozenset((a.oid._name, str(a.value)) for a in cert.subject)


def refusal(comm: Any, uid: int, subject: frozenset[tuple[str, str]] | None) -> str | None:
    """Why a new connection is not the owner's (``uid``, certificate ``subject``), or None."""
    peer = str(getattr(comm, "peer_address", ""))
    scheme = peer.partition("://")[0]
    if scheme == "inproc":
        return None
    stream = getattr(comm, "stream", None)
    sock = getattr(stream, "socket", None)
    if scheme not in ("tcp", "tls") or sock is None:
        return f"{peer}: a {scheme or 'unknown'}:// connection, which the gate cannot check"
    try:
        host = _normal(sock.getpeername())[0]
    except (OSError, ValueError) as exc:
        return f"{peer}: cannot tell who it is ({exc})"
    if ipaddress.ip_address(host).is_loopback:
        who = peer_uid(sock)
        if who == uid:
            return None
        return (
            f"{peer}: a connection from uid {who if who is not None else '(unknown)'}; "
            f"this cluster belongs to uid {uid} and admits only that user's processes"
        )
    if scheme != "tls":
        return f"{peer}: plain tcp:// from another machine; use TLS with the owner's certificate"
    got = _subject((getattr(comm, "extra_info", None) or {}).get("peercert", {}).get("subject"))
    if subject is not None and got == subject:
        return None
    return (
        f"{peer}: certificate subject {dict(got) or '(none)'} is not the cluster owner's "
        f"{dict(subject) if subject else '(the server has no certificate)'}"
    )


# -- the gate on a server ------------------------------------------------------------------


def install(server: Any) -> dict[str, Any]:
    """Gate ``server`` (a Scheduler, Worker or Nanny) once: every new connection is checked
    before its first message, connections already open are checked now. Returns the owner."""
    owner = getattr(server, "_dynprof_gate", None)
    if owner is not None:
        return owner
    uid, subject = os.getuid(), own_subject(server)
    owner = {"uid": uid, "subject": sorted(subject) if subject else None}
    handle = server._handle_comm  # resolved per connection by Server.handle_comm

    async def gated(comm: Any) -> None:
        why = _why(comm, uid, subject)
        if why is None:
            await handle(comm)
            return
        log.warning("dynprof_nb gate on %s: refused %s", type(server).__name__, why)
        try:  # say why (what a Client reads first), without reading anything the peer sent
            await asyncio.wait_for(
                comm.write(
                    [{"op": "stream-start", "error": f"refused by the dynprof_nb gate: {why}"}]
                ),
                SAY_WHY_S,
            )
        except Exception:
            pass
        comm.abort()

    server._handle_comm = gated
    server._dynprof_gate = owner
    server.handlers[GATE_HANDLER] = lambda: dict(owner)
    for comm in list(getattr(server, "_comms", {})):  # admitted before the gate was there
        _refuse(server, comm, uid, subject)
    log.info(
        "dynprof_nb gate on %s: admitting only uid %d%s",
        type(server).__name__,
        uid,
        f" and certificate subject {dict(subject)}" if subject else "",
    )
    return owner


def _why(comm: Any, uid: int, subject: Any) -> str | None:
    try:
        return refusal(comm, uid, subject)
    except Exception as exc:  # never admit what could not be checked
        return f"{getattr(comm, 'peer_address', '?')}: the check failed ({exc!r})"


def _refuse(server: Any, comm: Any, uid: int, subject: Any) -> bool:
    why = _why(comm, uid, subject)
    if why is None:
        return False
    log.warning("dynprof_nb gate on %s: refused %s", type(server).__name__, why)
    comm.abort()
    return True


def scheduler_refusal(gate: Any) -> str | None:
    """Why an agent (this process's uid) must not act on a cluster whose scheduler answered
    ``gate`` to :data:`GATE_HANDLER` (an exception: it runs no gate), or None."""
    uid = os.getuid()
    if isinstance(gate, dict) and gate.get("uid") == uid:
        return None
    if isinstance(gate, dict):
        return (
            f"this cluster's scheduler admits uid {gate.get('uid')}'s processes, not this "
            f"agent's (uid {uid}): one cluster per user (docs/cluster.md, 'Who may drive "
            "a job')."
        )
    return (
        "this cluster's scheduler runs no dynprof_nb gate, so anyone who can reach it can "
        "run code on every worker and drive every job: start it with `dask scheduler "
        "--preload dynprof_nb.cluster.gate` (LocalCluster(scheduler_kwargs={'preload': "
        "['dynprof_nb.cluster.gate']})); one cluster per user (docs/cluster.md, 'Who may "
        "drive a job')."
    )


def dask_setup(server: Any) -> None:
    """``dask scheduler --preload dynprof_nb.cluster.gate`` (or ``--preload-nanny``)."""
    install(server)
