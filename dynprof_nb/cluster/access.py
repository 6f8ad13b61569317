"""Who may drive a job on a cluster, and over what (no Dask import at module level).

Dask's model is that whoever can reach the scheduler can run code on every worker. So:

* **transport**: :func:`check_transport` refuses, before any connection is made, a plain
  ``tcp://`` (or ``ws://``, ``ucx://``) scheduler on an address that is not loopback unless
  the caller opts in (``allow_insecure=True``, ``--insecure``), and then warns naming the risk;
  ``tls://`` uses Dask's own ``distributed.security.Security`` (certificates from files, from the
  Dask config, or ``Security.temporary()``);
* **users**: every operation carries the requesting user (:func:`requester`, the client
  process's uid and name) and an agent acts only for the user it runs as
  (:func:`refusal`), as a job's segment on one machine is its owner's alone.

The uid a client sends is what that client says, and any peer that may connect can run code
on the workers, so it only keeps mistakes apart. The boundary between users is who may connect
at all: one cluster per user, each server admitting only its owner
(:mod:`dynprof_nb.cluster.gate`), and agents that refuse a cluster without that gate.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import pwd
import warnings
from typing import Any

log = logging.getLogger("dynprof_nb")

PLAIN_SCHEMES = ("tcp", "ws", "ucx")
TLS_SCHEMES = ("tls", "wss")
LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


class InsecureClusterError(ValueError):
    """A plain-text scheduler address off this machine, without the opt-in."""


class InsecureClusterWarning(UserWarning):
    """A plain-text scheduler address off this machine, used because the caller opted in."""


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def requester() -> dict[str, Any]:
    """The user this process runs as: what every operation sent to an agent carries."""
    uid = os.getuid()
    return {"uid": uid, "name": user_name(uid)}


def refusal(user: Any, op: str, job: str | None, node: str) -> str | None:
    """Why this agent (running as this process's uid) refuses ``user``'s operation, or None."""
    mine = os.getuid()
    if (
        not isinstance(user, dict)
        or not isinstance(user.get("uid"), int)
        or isinstance(user.get("uid"), bool)
    ):
        return (
            f"node {node}: refused {op!r}: the request does not say which user sends it "
            "(an older dynprof_nb client?). Use the same dynprof_nb version everywhere."
        )
    if user["uid"] == mine:
        return None
    what = f"job {job!r}" if job else "its jobs"
    return (
        f"node {node}: refused {op!r} on {what}: this agent runs as uid {mine} "
        f"({user_name(mine)}) and acts only on that user's jobs; the request came from uid "
        f"{user['uid']} ({user.get('name', '?')}). Each user drives their own jobs with "
        "their own workers (see docs/cluster.md, 'Who may drive a job')."
    )


def _scheme_host(address: str) -> tuple[str, str]:
    address = address.strip()
    scheme, _, rest = address.rpartition("://")
    scheme = scheme.lower() or "tcp"  # Dask's default protocol
    if rest.startswith("["):  # [::1]:8786
        host = rest[1:].split("]", 1)[0]
    elif rest.count(":") > 1:  # a bare IPv6 address without a port
        host = rest
    else:
        host = rest.split(":", 1)[0]
    return scheme, host.split("/", 1)[0]


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or ``localhost``: never leaves this machine. Names are not resolved."""
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def insecure_message(address: str) -> str:
    return (
        f"{address} is a plain-text scheduler address off this machine: anyone who can "
        "reach that scheduler can run code on every worker, start windows on every rank "
        "and read every trace, and every command and trace summary crosses the network "
        "unencrypted. Use a tls:// scheduler with certificates (attach(..., "
        "security=Security(...)), docs/cluster.md), or pass allow_insecure=True "
        "(--insecure) if this network is yours alone."
    )


def opted_in(env: str, key: str) -> bool:
    """Whether the person set ``env`` (``1``/``true``/``yes``) or the Dask config
    ``dynprof_nb.<key>``: the unsafe opt-ins, whose names say they are unsafe."""
    if os.environ.get(env, "").strip().lower() in ("1", "true", "yes"):
        return True
    try:
        import dask

        return bool(dask.config.get(f"dynprof_nb.{key}", False))
    except Exception:
        return False


def plain_tcp_opted_in() -> bool:
    """``DYNPROF_NB_UNSAFE_PLAIN_TCP=1`` (or the Dask config ``dynprof_nb.unsafe-plain-tcp``):
    the person asked for plain-TCP clusters."""
    return opted_in("DYNPROF_NB_UNSAFE_PLAIN_TCP", "unsafe-plain-tcp")


def check_transport(address: str, allow_insecure: bool = False) -> str:
    """``address`` if it may be used; raises :class:`InsecureClusterError` (nothing is sent
    anywhere) for a plain-text non-loopback address without ``allow_insecure``."""
    scheme, host = _scheme_host(address)
    if scheme in TLS_SCHEMES or scheme == "inproc":
        return address
    if scheme in PLAIN_SCHEMES and is_loopback(host):
        return address
    message = insecure_message(address)
    if not allow_insecure:
        raise InsecureClusterError(message)
    warnings.warn(message, InsecureClusterWarning, stacklevel=3)
    log.warning("dynprof_nb: %s", message)
    return address


def client_security(security: Any) -> Any:
    """A worker's ``Security`` for the client role: ``dask worker --tls-cert`` sets only the
    worker's certificate, and an agent's own client (to read a job's current command) must
    present one too."""
    from distributed.security import Security

    if (
        security is None
        or getattr(security, "tls_client_cert", None)
        or not getattr(security, "tls_worker_cert", None)
    ):
        return security
    return Security(
        require_encryption=True,
        tls_ca_file=security.tls_ca_file,
        tls_client_cert=security.tls_worker_cert,
        tls_client_key=security.tls_worker_key,
        tls_min_version=security.tls_min_version,
    )


def add_transport_flags(parser: Any) -> None:
    """``--insecure`` and Dask's ``--tls-ca-file/--tls-cert/--tls-key`` on a CLI parser."""
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow a plain tcp:// scheduler off this machine (anyone who can "
        "reach it can drive the job and run code on every worker)",
    )
    parser.add_argument(
        "--tls-ca-file",
        default=None,
        metavar="FILE",
        help="the cluster's CA certificate (with a tls:// scheduler)",
    )
    parser.add_argument(
        "--tls-cert",
        default=None,
        metavar="FILE",
        help="this client's certificate (signed by that CA)",
    )
    parser.add_argument(
        "--tls-key", default=None, metavar="FILE", help="this client's private key (keep it 0600)"
    )


def security_from_args(args: Any) -> Any:
    """A ``Security`` from the ``--tls-*`` flags, or None (then Dask's config applies)."""
    files = (
        getattr(args, "tls_ca_file", None),
        getattr(args, "tls_cert", None),
        getattr(args, "tls_key", None),
    )
    if not any(files):
        return None
    if not all(files):
        raise ValueError(
            "--tls-ca-file, --tls-cert and --tls-key go together (the cluster's "
            "CA and this client's certificate and key)."
        )
    from distributed.security import Security

    return Security(
        require_encryption=True,
        tls_ca_file=files[0],
        tls_client_cert=files[1],
        tls_client_key=files[2],
    )
