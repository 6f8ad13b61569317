"""One cluster per user: every server admits only its owner, checked at accept, before Dask
reads a byte.

Dask runs whatever a connected peer sends (``Client.run``, ``submit``, a worker's or a nanny's
own ``run`` handler), with the rights of the server's user, and its listener unpickles the
peer's first message (the handshake) before any handler runs. No check inside an agent, nor in
a handler, can then keep another user out. So the boundary is **who may connect at all**, and
this gate enforces it in the listener itself: importing this module (``dask scheduler
--preload dynprof_nb.cluster.gate``, ``--preload-nanny dynprof_nb.cluster.gate``; the agent's
worker imports it through ``--preload dynprof_nb.cluster.agent``) replaces Dask's ``tcp`` and
``tls`` comm backends in that process with gated ones, before the server listens:

* **mutual TLS, always**: a ``tcp://`` listener is served as ``tls://`` with the user's own CA
  and certificate (:mod:`dynprof_nb.cluster.tls`, made on first use), and a ``tls://`` one
  without certificates gets them too; outgoing ``tls://`` connections without a certificate
  present the user's. Plain TCP only with ``DYNPROF_NB_UNSAFE_PLAIN_TCP=1`` (or the Dask
  config ``dynprof_nb.unsafe-plain-tcp``), and then still uid-checked;
* **then, for each accepted connection, before the first read** (the TLS handshake is done by
  then, Dask's is not): a peer on this machine (its socket is in the kernel's table,
  ``/proc/net/tcp{,6}``) must be a live (ESTABLISHED, with an inode) socket of the server's
  uid: a closing socket, or one the kernel cannot name, is unknown and refused; a peer on
  another machine must present a certificate whose subject is the server's own;
  ``inproc://`` is the same process;
* **outgoing, from a process that serves a gated server**: ``tcp://`` is connected as mutual
  TLS too, trusting only the user's CA, and ``ws://``, ``wss://``, ``ucx://`` not at all: a
  scheduler another user started (named in a scheduler file it wrote) would otherwise have
  its handshake unpickled here; a peer that does not complete TLS within
  :data:`TLS_HANDSHAKE_S` is closed (a slowloris holds nothing);
* the HTTP servers listen on 127.0.0.1 only and serve ``/health`` (and a dashboard, if one
  was asked for), not Dask's ``/metrics``, logs and call stacks, unless
  ``DYNPROF_NB_UNSAFE_PUBLIC_HTTP=1``.

A refused peer is sent a handshake and one message saying why (what a ``Client`` raises) and
closed, without anything it sent being read; the server logs who was refused and why. An agent
acts only on a cluster whose scheduler runs this gate for the agent's own uid
(:func:`scheduler_refusal`), and stops its worker when a server of its own is open to others.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import os
import socket
import struct
from typing import Any

log = logging.getLogger("dynprof_nb")

GATE_HANDLER = "dynprof_nb_gate"
PROC_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
ESTABLISHED = "01"  # /proc/net/tcp's st column
SAY_WHY_S = 1.0  # at most this long telling a refused peer why
TLS_HANDSHAKE_S = 10.0  # a peer that has not completed TLS by then is closed
UNSAFE_PLAIN_TCP = "DYNPROF_NB_UNSAFE_PLAIN_TCP"
UNSAFE_PUBLIC_HTTP = "DYNPROF_NB_UNSAFE_PUBLIC_HTTP"
TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
              "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}  # fmt: skip


def _opted_in(env: str, key: str) -> bool:
    from dynprof_nb.cluster.access import opted_in

    return opted_in(env, key)


def unsafe_plain_tcp() -> bool:
    """Whether the person asked for plain-TCP servers (anyone who reaches them can try)."""
    return _opted_in(UNSAFE_PLAIN_TCP, "unsafe-plain-tcp")


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


def peer_rows(sock: socket.socket) -> list[tuple[str, int, int]]:
    """The kernel's rows for the other end of a TCP connection, if that end is on this
    machine (in this network namespace: local and remote addresses swapped):
    ``(state, uid, inode)`` each; empty for a peer elsewhere."""
    mine, peer = _normal(sock.getsockname()), _normal(sock.getpeername())
    rows = []
    for table in PROC_TABLES:
        try:
            with open(table) as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            try:
                if _proc_address(fields[1]) == peer and _proc_address(fields[2]) == mine:
                    rows.append((fields[3].upper(), int(fields[7]), int(fields[9])))
            except ValueError:
                continue
    return rows


def peer_uid(sock: socket.socket) -> int | None:
    """The uid owning the other end of a live TCP connection from this machine, or None
    (elsewhere, or not a live socket: a closing or closed one has uid 0 and inode 0 in the
    table, which says nothing about who opened it)."""
    live = {uid for state, uid, inode in peer_rows(sock) if state == ESTABLISHED and inode}
    return live.pop() if len(live) == 1 else None


def _subject(pairs: Any) -> frozenset[tuple[str, str]]:
    """A certificate subject as a set of (attribute, value), from ``getpeercert()``."""
    return frozenset((k, v) for rdn in pairs or () for k, v in rdn)


def own_subject(server: Any) -> frozenset[tuple[str, str]] | None:
    """The subject of the certificate this server presents: its ``Security``'s, else the
    user's own (what the gated listener fills in), else None."""
    security = getattr(server, "security", None)
    # distributed's Security names the certificate by role: the scheduler's, or a worker's
    kind = type(server).__name__
    own = {"Scheduler": "tls_scheduler_cert", "Nanny": "tls_worker_cert"}.get(
        kind, "tls_worker_cert"
    )
    pem = getattr(security, own, None) or getattr(security, "tls_cert", None)
    from dynprof_nb.cluster import tls

    if not pem:
        return tls.user_tls().subject()
    data = pem if "-----BEGIN" in pem else open(pem).read()  # noqa: SIM115 (PEM text or path)
    return tls.subject_of(data.encode())


def refusal(comm: Any, uid: int, subject: frozenset[tuple[str, str]] | None) -> str | None:
    """Why a new connection is not the owner's (``uid``, certificate ``subject``), or None.
    Looks only at the socket and the TLS certificate, never at anything the peer sent."""
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
        rows = peer_rows(sock)
    except (OSError, ValueError) as exc:
        return f"{peer}: cannot tell who it is ({exc})"
    if rows or ipaddress.ip_address(host).is_loopback:  # a peer on this machine
        who = peer_uid(sock)
        if who == uid:
            return None
        if who is not None:
            return (
                f"{peer}: a connection from uid {who}; this cluster belongs to uid {uid} "
                "and admits only that user's processes"
            )
        states = sorted({TCP_STATES.get(s, s) for s, _, _ in rows}) or ["no row"]
        return (
            f"{peer}: a connection from this machine whose owner the kernel cannot name "
            f"(its socket: {', '.join(states)}; a closing or closed socket says nothing about "
            f"who opened it); this cluster admits only uid {uid}'s live connections"
        )
    if scheme != "tls":
        return f"{peer}: plain tcp:// from another machine; use TLS with the owner's certificate"
    got = _subject((getattr(comm, "extra_info", None) or {}).get("peercert", {}).get("subject"))
    if subject is not None and got == subject:
        return None
    return (
        f"{peer}: certificate subject {dict(got) or '(none)'} is not the cluster owner's "
        f"{dict(subject) if subject else '(the server does not know its own yet)'}"
    )


def _why(comm: Any, uid: int, subject: Any) -> str | None:
    try:
        return refusal(comm, uid, subject)
    except Exception as exc:  # never admit what could not be checked
        return f"{getattr(comm, 'peer_address', '?')}: the check failed ({exc!r})"


async def _turn_away(comm: Any, why: str, where: str) -> None:
    """Log, tell the peer why (a handshake, then the error a Client raises), close. Nothing
    the peer sent is read."""
    log.warning("dynprof_nb gate on %s: refused %s", where, why)
    try:
        await asyncio.wait_for(_say(comm, why), SAY_WHY_S)
    except Exception:
        pass
    comm.abort()


async def _say(comm: Any, why: str) -> None:
    await comm.write(comm.handshake_info())
    await comm.write([{"op": "stream-start", "error": f"refused by the dynprof_nb gate: {why}"}])


# -- the gated listeners and backends ------------------------------------------------------


def _gated_on_connection(listener: Any, on_connection: Any) -> Any:
    """``on_connection`` (Dask's handshake: write ours, read theirs) behind the check."""

    async def gated(comm: Any, handshake_overrides: Any = None) -> None:
        why = _why(comm, listener.dynprof_uid, listener.dynprof_subject)
        if why is not None:
            await _turn_away(comm, why, listener.dynprof_server)
            from distributed.comm.core import CommClosedError

            raise CommClosedError(f"refused by the dynprof_nb gate: {why}")
        await on_connection(comm, handshake_overrides)

    return gated


def gate_listener(listener: Any, subject: frozenset[tuple[str, str]] | None = None) -> Any:
    """Check every connection ``listener`` accepts from now on, before Dask's handshake."""
    if not getattr(listener, "dynprof_gated", False):
        listener.dynprof_uid = os.getuid()
        listener.dynprof_server = "this process"
        listener.dynprof_subject = subject
        listener.on_connection = _gated_on_connection(listener, listener.on_connection)
        listener.dynprof_gated = True
    elif subject is not None:
        listener.dynprof_subject = subject
    return listener


SERVING: list[str] = []  # the gated servers of this process (set by install())
_SAID: set[str] = set()


def _once(key: str, message: str, *args: Any) -> None:
    """Log ``message`` the first time ``key`` comes up (a worker retries a connect)."""
    if key not in _SAID:
        _SAID.add(key)
        log.warning(message, *args)


def _user_context(purpose: str) -> Any:
    from dynprof_nb.cluster import tls

    return _contexts(str(tls.tls_dir()), purpose)


@functools.lru_cache(maxsize=8)
def _contexts(_directory: str, purpose: str) -> Any:
    from dynprof_nb.cluster import tls

    sec = tls.user_tls().security()
    args = (
        sec.get_listen_args("scheduler")
        if purpose == "server"
        else sec.get_connection_args("client")
    )
    return args["ssl_context"]


def _backends() -> tuple[Any, Any]:
    from distributed.comm import tcp

    class GatedTCPConnector(tcp.TCPConnector):
        """Outgoing ``tcp://`` from a process that serves a gated server is mutual TLS too
        (its own servers speak nothing else): in plain text, whoever answers at that address
        (a scheduler another user started, named in a scheduler file it wrote) would be read
        as soon as Dask's handshake is, and its pickles run as this user."""

        async def connect(self, address: str, deserialize: bool = True, **args: Any) -> Any:
            if unsafe_plain_tcp() or not SERVING:
                return await super().connect(address, deserialize, **args)
            _once(
                f"upgrade {address}",
                "dynprof_nb gate: this process connects tcp://%s as mutual TLS (uid %d's "
                "certificates); a plain-TCP peer could send code to run here; %s=1 keeps "
                "plain TCP",
                address,
                os.getuid(),
                UNSAFE_PLAIN_TCP,
            )
            return await tls_backend.get_connector().connect(address, deserialize, **args)

    class GatedTLSConnector(tcp.TLSConnector):
        """Outgoing ``tls://`` without a certificate presents the user's own, and accepts
        only a server whose certificate the user's CA signed."""

        async def connect(self, address: str, deserialize: bool = True, **args: Any) -> Any:
            if args.get("ssl_context") is None:
                args["ssl_context"] = _user_context("client")
            try:
                return await super().connect(address, deserialize, **args)
            except Exception as exc:
                _once(
                    f"refused {address}",
                    "dynprof_nb gate: not connecting to %s: it did not complete mutual TLS "
                    "with uid %d's certificates (%s); a server another user started cannot "
                    "prove it is yours, and nothing it sends is read",
                    address,
                    os.getuid(),
                    exc,
                )
                raise

    class GatedTLSListener(tcp.TLSListener):
        """Dask's TLS listener, whose handshake waits for the peer without end: a peer that
        connects and never completes TLS (a slowloris) would hold its socket for good, and
        many of them every file descriptor. Here it gets :data:`TLS_HANDSHAKE_S`."""

        async def _prepare_stream(self, stream: Any, address: str) -> Any:
            try:
                return await asyncio.wait_for(
                    super()._prepare_stream(stream, address), TLS_HANDSHAKE_S
                )
            except asyncio.TimeoutError:
                log.warning(
                    "dynprof_nb gate on %s: refused %s: no TLS handshake within %.0f s",
                    getattr(self, "dynprof_server", "this process"),
                    address,
                    TLS_HANDSHAKE_S,
                )
                stream.close()
                return None

    class GatedTLSBackend(tcp.TLSBackend):
        _connector_class = GatedTLSConnector
        _listener_class = GatedTLSListener

        def get_listener(self, loc: str, handle_comm: Any, deserialize: Any, **args: Any) -> Any:
            subject = None
            if args.get("ssl_context") is None:
                from dynprof_nb.cluster import tls

                args["ssl_context"] = _user_context("server")
                subject = tls.user_tls().subject()
            listener = GatedTLSListener(loc, handle_comm, deserialize, **args)
            return gate_listener(listener, subject)

    class GatedTCPBackend(tcp.TCPBackend):
        """``tcp://`` listeners become mutual TLS unless plain TCP was asked for by name."""

        _connector_class = GatedTCPConnector

        def get_listener(self, loc: str, handle_comm: Any, deserialize: Any, **args: Any) -> Any:
            if unsafe_plain_tcp():
                log.warning(
                    "dynprof_nb gate: tcp://%s in plain text (%s is set): every user who can "
                    "reach this port may try to connect; only this machine's uid %d is "
                    "admitted, and nothing from other machines",
                    loc,
                    UNSAFE_PLAIN_TCP,
                    os.getuid(),
                )
                return gate_listener(tcp.TCPListener(loc, handle_comm, deserialize, **args))
            log.info(
                "dynprof_nb gate: tcp://%s is served as tls:// (mutual TLS with uid %d's "
                "certificates): plain TCP would let anyone who reaches it try to run code; "
                "%s=1 keeps plain TCP",
                loc,
                os.getuid(),
                UNSAFE_PLAIN_TCP,
            )
            args = {**args, "require_encryption": True}
            return tls_backend.get_listener(loc, handle_comm, deserialize, **args)

    tls_backend = GatedTLSBackend()
    return GatedTCPBackend(), tls_backend


def _local_http(start_http_server: Any) -> Any:
    """Dask's HTTP servers on 127.0.0.1 only, serving ``/health`` and what a dashboard asked
    for (``--dashboard``) but not Dask's other routes (``/metrics``, ``/info``: logs and call
    stacks, ``/json``), which every user of this machine could read."""

    @functools.wraps(start_http_server)
    def local(self: Any, routes: Any, dashboard_address: Any, default_port: int = 0, **kw: Any):
        if not _opted_in(UNSAFE_PUBLIC_HTTP, "unsafe-public-http"):
            from distributed.utils import clean_dashboard_address

            ports = [a["port"] for a in clean_dashboard_address(dashboard_address or default_port)]
            dashboard_address = ",".join(f"127.0.0.1:{p}" for p in ports)
            routes = [r for r in routes if str(r[0]).rstrip("/").endswith("/health")]
        return start_http_server(self, routes, dashboard_address, default_port, **kw)

    local.dynprof_local = True
    return local


CHECKABLE = ("tcp", "tls", "inproc")


def _checkable_only(listen: Any) -> Any:
    """Dask's ``listen`` for the schemes the gate can check (tcp, tls, inproc): a ws://,
    wss:// or ucx:// server would admit peers the gate cannot name, so it is not started."""

    @functools.wraps(listen)
    def checked(addr: str, handle_comm: Any, deserialize: bool = True, **kwargs: Any) -> Any:
        scheme = addr.partition("://")[0] if "://" in addr else "tcp"
        if scheme not in CHECKABLE and not unsafe_plain_tcp():
            raise ValueError(
                f"dynprof_nb gate: not listening on {addr}: the gate cannot tell who is on "
                f"the other end of a {scheme}:// connection; use tls:// (the default) or "
                "tcp://, which it serves as mutual TLS"
            )
        return listen(addr, handle_comm, deserialize, **kwargs)

    checked.dynprof_checked = True
    return checked


class _UncheckedBackend:
    """A ws://, wss:// or ucx:// backend in a process that serves a gated server: it does not
    connect (whoever answers there, another user's server among them, cannot be checked, and
    its handshake would be unpickled here); listening is :func:`_checkable_only`'s."""

    dynprof_refusing = True

    def __init__(self, scheme: str, backend: Any) -> None:
        self.scheme, self.backend = scheme, backend

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def get_connector(self) -> Any:
        connector, scheme = self.backend.get_connector(), self.scheme

        class Refusing:
            async def connect(self, address: str, deserialize: bool = True, **args: Any) -> Any:
                if SERVING and not unsafe_plain_tcp():
                    why = (
                        f"dynprof_nb gate: not connecting to {scheme}://{address}: the gate "
                        f"cannot check who answers a {scheme}:// connection, and a server "
                        "another user started would be read as this user; nothing it sends is "
                        "read (use tls://)"
                    )
                    _once(f"refused {scheme}://{address}", "%s", why)
                    raise OSError(why)
                return await connector.connect(address, deserialize, **args)

        return Refusing()


def register() -> None:
    """Gate every Dask server this process starts from now on (idempotent)."""
    import distributed.core
    from distributed.comm import registry
    from distributed.node import ServerNode

    if not getattr(distributed.core.listen, "dynprof_checked", False):  # Server.listen's
        distributed.core.listen = _checkable_only(distributed.core.listen)
    if not getattr(distributed.core.Server.listen, "dynprof_installing", False):
        distributed.core.Server.listen = _installing(distributed.core.Server.listen)
    if not getattr(registry.backends.get("tcp"), "dynprof_gated", False):
        tcp_backend, tls_backend = _backends()
        tcp_backend.dynprof_gated = tls_backend.dynprof_gated = True
        registry.backends["tcp"], registry.backends["tls"] = tcp_backend, tls_backend
    for scheme in ("ws", "wss", "ucx"):
        backend = registry.backends.get(scheme)
        if backend is not None and not getattr(backend, "dynprof_refusing", False):
            registry.backends[scheme] = _UncheckedBackend(scheme, backend)
    if not getattr(ServerNode.start_http_server, "dynprof_local", False):
        ServerNode.start_http_server = _local_http(ServerNode.start_http_server)


# -- the gate on a server ------------------------------------------------------------------


class ServerGate:
    """The gate of one server, kept where Dask keeps a server's handlers: its :meth:`answer`
    is ``server.handlers[GATE_HANDLER]`` (a documented hook), which tells a peer the owner
    (uid, certificate subject); and it holds the subject the server's later listeners check,
    so nothing is set on the server."""

    def __init__(self, uid: int, subject: frozenset[tuple[str, str]] | None) -> None:
        self.subject = subject
        self.owner: dict[str, Any] = {"uid": uid, "subject": sorted(subject) if subject else None}

    def answer(self) -> dict[str, Any]:
        """What :data:`GATE_HANDLER` answers: the owner."""
        return {k: v for k, v in self.owner.items() if k != "exposed"}

    @staticmethod
    def of(server: Any) -> ServerGate | None:
        """The gate installed on ``server``, if one is."""
        gate = getattr(server.handlers.get(GATE_HANDLER), "__self__", None)
        return gate if isinstance(gate, ServerGate) else None


def open_comms(server: Any) -> list[Any]:
    """The connections ``server`` has open (admitted before the gate was there, when an agent
    is started in a running worker). The one read of a Dask private here: a server keeps them
    only in ``Server._comms``, and no public call lists them. If Dask renames it the gate
    refuses to install (it cannot vouch for those connections) rather than pass over them;
    tests/cluster/test_upstream_privates.py pins it against the distributed pyproject.toml
    declares."""
    from distributed.core import Server

    if isinstance(server, Server) and not isinstance(getattr(server, "_comms", None), dict):
        raise RuntimeError(
            "dynprof_nb gate: this version of distributed keeps a server's open connections "
            "somewhere the gate does not know (Server._comms is gone), so it cannot check "
            "them; use a distributed that pyproject.toml declares"
        )
    return list(getattr(server, "_comms", {}))


def install(server: Any) -> dict[str, Any]:
    """Gate ``server`` (a Scheduler, Worker or Nanny): its listeners check every new
    connection before the handshake (listeners made before :func:`register` are gated now),
    and, the first time, connections already open are checked and the server answers
    :data:`GATE_HANDLER`. Called again (each ``listen`` does), it gates the new listeners.
    Returns the owner, with ``exposed``: why a listener of this server is open to others
    (one without mutual TLS, made before the gate), if one is."""
    gate = ServerGate.of(server)
    uid = os.getuid()
    if gate is None:
        SERVING.append(type(server).__name__)
        gate = ServerGate(uid, own_subject(server))
        server.handlers[GATE_HANDLER] = gate.answer
        subject = gate.subject
        for comm in open_comms(server):  # admitted before the gate was there
            why = _why(comm, uid, subject)
            if why is not None:
                log.warning("dynprof_nb gate on %s: refused %s", type(server).__name__, why)
                comm.abort()
        log.info(
            "dynprof_nb gate on %s: admitting only uid %d%s",
            type(server).__name__,
            uid,
            f" and certificate subject {dict(subject)}" if subject else "",
        )
    exposed = []
    for listener in getattr(server, "listeners", ()):
        gate_listener(listener, gate.subject).dynprof_server = type(server).__name__
        address = str(getattr(listener, "contact_address", ""))
        scheme = address.partition("://")[0]
        if scheme not in ("tls", "inproc") and not unsafe_plain_tcp():
            exposed.append(
                f"{type(server).__name__} at {address} listens without mutual TLS (started "
                "before the gate)"
            )
    gate.owner["exposed"] = exposed
    return gate.owner


def _installing(listen: Any) -> Any:
    """``Server.listen`` that gates the server once it listens (every server of a gated
    process answers :data:`GATE_HANDLER`: a nanny too, whose process ``dask worker`` made
    import the agent's preload)."""

    @functools.wraps(listen)
    async def listening(self: Any, *args: Any, **kwargs: Any) -> None:
        await listen(self, *args, **kwargs)
        install(self)

    listening.dynprof_installing = True
    return listening


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


register()  # at import: a preload is imported before its server listens
