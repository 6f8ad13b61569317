"""The upstream private names the cluster's gate cannot do without, pinned.

Each is read in one named function (or one override) of the package, which says why; the
layout test (tests/test_layout.py, ``ALLOWED_REACHES``) lets no other module reach one. Here
each is checked on the versions installed, after checking that those are the ones
pyproject.toml declares: a rename upstream fails here, loudly, not in a user's cluster.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import socket
import threading
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

from dynprof_nb.cluster import gate, tls

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def declared(package: str) -> Requirement:
    """``package``'s requirement in pyproject.toml's cluster extra."""
    text = PYPROJECT.read_text()
    extra = re.search(r"^cluster = \[(.*)\]\s*$", text, re.M)  # one line
    assert extra, "pyproject.toml has no cluster extra"
    for spec in re.findall(r'"([^"]+)"', extra.group(1)):
        req = Requirement(spec)
        if req.name == package:
            return req
    raise AssertionError(f"pyproject.toml's cluster extra does not declare {package}")


def test_the_installed_versions_are_the_declared_ones():
    for package in ("distributed", "cryptography"):
        req = declared(package)
        assert req.specifier.contains(version(package), prereleases=True), (package, req)


def test_a_dask_server_keeps_its_open_comms_in_a_dict():
    """``gate.open_comms`` reads ``Server._comms`` (no public call lists a server's
    connections): it is there, a dict, and the gate reads it without complaint."""
    from distributed.core import Server

    async def main() -> list:
        server = Server({})
        assert isinstance(server._comms, dict), type(server).__mro__
        return gate.open_comms(server)

    assert asyncio.run(main()) == []


def test_dasks_tls_listener_still_has_the_handshake_hook_the_gate_times():
    """``GatedTLSListener`` bounds the TLS handshake by overriding
    ``TLSListener._prepare_stream(stream, address)`` (Dask has no setting for it)."""
    from distributed.comm import tcp

    hook = tcp.TLSListener._prepare_stream
    assert inspect.iscoroutinefunction(hook)
    assert list(inspect.signature(hook).parameters) == ["self", "stream", "address"]


def test_cryptographys_attribute_names_are_the_ones_ssl_gives_a_peer(tmp_path, monkeypatch):
    """``tls.openssl_attribute_name`` reads ``ObjectIdentifier._name``: what it names a real
    certificate's subject equals what ``ssl.getpeercert()`` says of it over a real handshake,
    the two sides the gate compares."""
    monkeypatch.setenv(tls.ENV_DIR, str(tmp_path / "tls"))
    mine = tls.user_tls()
    server_ctx = mine.security().get_listen_args("scheduler")["ssl_context"]
    client_ctx = mine.security().get_connection_args("client")["ssl_context"]
    client_ctx.check_hostname = False
    listener = socket.create_server(("127.0.0.1", 0))
    peer_subject: list = []

    def serve() -> None:
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls_conn:
            peer_subject.append(tls_conn.getpeercert()["subject"])

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with socket.create_connection(listener.getsockname(), timeout=10) as raw, \
                client_ctx.wrap_socket(raw) as conn:
            conn.getpeercert()
    finally:
        thread.join(10)
        listener.close()
    assert peer_subject, "no TLS handshake"
    assert gate._subject(peer_subject[0]) == tls.subject_of(mine.cert.read_bytes())
    assert ("commonName", f"dynprof-{tls.user_name(os.getuid())}") in mine.subject()
