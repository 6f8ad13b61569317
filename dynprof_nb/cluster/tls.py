"""Mutual TLS with no flags: a per-user CA and certificate, made once, in a private directory.

A plain-TCP Dask server lets anyone who reaches its port run code as its user, and even a
gate that checks peers first cannot stop a peer on another machine from being what it says.
So every gated server (:mod:`dynprof_nb.cluster.gate`) speaks mutual TLS, and the certificates
it needs are made automatically, the first time any of the user's processes asks:

* a CA (``ca.pem``, ``ca.key``) and one certificate for every role (``cert.pem``,
  ``key.pem``, subject ``CN=dynprof-<user>,O=dynprof_nb uid <uid>``), signed by that CA;
* in ``$DYNPROF_NB_TLS_DIR``, else ``~/.dynprof/tls``: a directory the user owns, mode 0700,
  no symlink on the way from ``~/.dynprof``, files 0600 owned by the user (checked each time;
  anything else is refused with what to fix). On a cluster whose nodes mount the same home,
  every node finds the same CA, so a SLURM job needs no flags either.

Only processes of the same user can read the keys; a peer without a certificate signed by
this CA fails the TLS handshake, before a byte of Dask's protocol is read.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynprof_nb.cluster.access import user_name

ENV_DIR = "DYNPROF_NB_TLS_DIR"
DAYS = 3650
FILES = ("ca.pem", "ca.key", "cert.pem", "key.pem")


class TLSDirError(RuntimeError):
    """The certificate directory is not the user's own private directory."""


@dataclass(frozen=True)
class UserTLS:
    """The files of one user's CA and certificate (paths, all 0600 in a 0700 directory)."""

    directory: Path
    ca: Path
    cert: Path
    key: Path

    def security(self) -> Any:
        """A ``distributed.security.Security`` presenting this user's certificate in every
        role (client, scheduler, worker) and trusting only this user's CA."""
        from distributed.security import Security

        paths = {"tls_ca_file": str(self.ca)}
        for role in ("client", "scheduler", "worker"):
            paths[f"tls_{role}_cert"] = str(self.cert)
            paths[f"tls_{role}_key"] = str(self.key)
        return Security(require_encryption=True, **paths)

    def subject(self) -> frozenset[tuple[str, str]]:
        """The certificate's subject, as the gate compares it (attribute name, value)."""
        return subject_of(self.cert.read_bytes())


def subject_of(pem: bytes) -> frozenset[tuple[str, str]]:
    """A PEM certificate's subject as the gate compares it: (attribute name, value) pairs,
    named as ``ssl.getpeercert()`` names a peer's (OpenSSL's long names: ``commonName``)."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(pem)
    return frozenset((openssl_attribute_name(a.oid), str(a.value)) for a in cert.subject)


def openssl_attribute_name(oid: Any) -> str:
    """OpenSSL's long name of a subject attribute's OID (``commonName``), the name
    ``ssl.getpeercert()`` gives a peer's attribute, which the gate compares with its own.

    The one read of a private upstream name here: cryptography names an OID that way only as
    ``ObjectIdentifier._name`` (its public ``rfc4514_attribute_name`` is ``CN``, which ssl
    does not give). tests/cluster/test_upstream_privates.py pins it against the cryptography
    pyproject.toml declares, so a rename upstream fails there, not in the gate."""
    return str(oid._name)


def tls_dir() -> Path:
    """Where this user's certificates live (not checked nor made: :func:`user_tls` does)."""
    configured = os.environ.get(ENV_DIR)
    return Path(configured) if configured else Path.home() / ".dynprof" / "tls"


def _private_dir(path: Path, make: bool) -> None:
    """``path`` is a directory (no symlink), owned by this user, mode 0700; made if absent."""
    uid = os.getuid()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not make:
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise TLSDirError(f"{path} is not a directory (a symlink?): refusing to keep keys there")
    if st.st_uid != uid:
        raise TLSDirError(
            f"{path} belongs to uid {st.st_uid}, not to you (uid {uid}): someone else could "
            f"read or replace your cluster keys; remove it, or set {ENV_DIR}"
        )
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)  # ours: make it private (files inside are checked one by one)


def _safe_ancestors(path: Path) -> None:
    """Every directory above ``path`` is the user's or root's, and no one else can rename
    entries in it (not group/other-writable, or sticky like ``/tmp``): otherwise its owner
    could swap the key directory for one of theirs (a symlink, between a check and a use)
    and choose which CA this user trusts."""
    uid = os.getuid()
    for parent in path.absolute().parents:
        try:
            st = os.stat(parent)
        except OSError:
            continue  # not made yet: made below by this user
        open_to_others = st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX
        if st.st_uid not in (uid, 0) or open_to_others:
            raise TLSDirError(
                f"{path}: the directory {parent} above it belongs to uid {st.st_uid} with mode "
                f"{stat.S_IMODE(st.st_mode):#o}, so another user could replace your cluster "
                f"keys' directory; refusing to use it: set {ENV_DIR} to a directory under one "
                "only you (or root) can change"
            )


def _check_file(path: Path) -> None:
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise TLSDirError(
            f"{path}: not a private (0600) file of yours: refusing to use it as a cluster "
            f"key or certificate; remove the directory {path.parent} to make new ones"
        )


def user_tls() -> UserTLS:
    """This user's CA and certificate, made on first use (several processes at once: an
    ``flock`` makes one of them write, atomically)."""
    directory = tls_dir()
    _safe_ancestors(directory)
    try:
        if os.environ.get(ENV_DIR) is None:
            _private_dir(directory.parent, make=True)  # ~/.dynprof
        else:
            directory.parent.mkdir(parents=True, exist_ok=True)
        _private_dir(directory, make=True)
    except OSError as exc:
        raise TLSDirError(
            f"cannot make the private directory {directory} for this user's cluster "
            f"certificates ({exc}): set {ENV_DIR} to a directory of yours"
        ) from None
    paths = {name: directory / name for name in FILES}
    if not all(p.exists() for p in paths.values()):
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not all(p.exists() for p in paths.values()):
                _write_all(directory, _make_pems())
        finally:
            os.close(fd)
    for path in paths.values():
        _check_file(path)
    return UserTLS(directory, paths["ca.pem"], paths["cert.pem"], paths["key.pem"])


def _write_all(directory: Path, pems: dict[str, bytes]) -> None:
    """Each file written 0600 under a temporary name, then renamed into place."""
    for name, data in pems.items():
        tmp = directory / f".{name}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, directory / name)


def _make_pems() -> dict[str, bytes]:
    """A CA and a certificate it signs (EC P-256: made in milliseconds), valid for both
    ends of a connection (Dask checks the CA, not host names)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    uid = os.getuid()
    user = user_name(uid)
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    later = now + datetime.timedelta(days=DAYS)

    def name(cn: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.COMMON_NAME, cn),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, f"dynprof_nb uid {uid}"),
            ]
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name(f"dynprof-ca-{user}")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(f"dynprof-{user}"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def private(k: Any) -> bytes:
        return k.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    pem = serialization.Encoding.PEM
    return {
        "ca.key": private(ca_key),
        "key.pem": private(key),
        "ca.pem": ca.public_bytes(pem),
        "cert.pem": cert.public_bytes(pem),
    }


def security() -> Any:
    """This user's mutual-TLS ``Security`` (certificates made on first use): what
    ``attach(cluster="tls://...")`` uses when given none, and what to pass to your own
    ``Client(address, security=dynprof_nb.cluster.tls.security())``."""
    return user_tls().security()
