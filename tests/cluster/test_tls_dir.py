"""The per-user CA and certificate (dynprof_nb.cluster.tls): made once, private, checked."""

from __future__ import annotations

import os
import ssl

import pytest

from dynprof_nb.cluster import tls


def test_made_once_private_and_usable(tmp_path, monkeypatch):
    monkeypatch.setenv(tls.ENV_DIR, str(tmp_path / "a" / "tls"))
    first = tls.user_tls()
    assert first.directory.stat().st_mode & 0o777 == 0o700
    for name in tls.FILES:
        st = (first.directory / name).stat()
        assert st.st_mode & 0o777 == 0o600 and st.st_uid == os.getuid()
    pem = first.cert.read_bytes()
    assert tls.user_tls().cert.read_bytes() == pem  # not made again
    ctx = first.security().get_listen_args("scheduler")["ssl_context"]
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED
    assert ("commonName", f"dynprof-{tls.user_name(os.getuid())}") in first.subject()


def test_a_directory_that_is_not_private_and_yours_is_refused(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv(tls.ENV_DIR, str(tmp_path / "link"))
    with pytest.raises(tls.TLSDirError, match="symlink"):
        tls.user_tls()
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)  # planted by another user (the tests run as root)
    monkeypatch.setenv(tls.ENV_DIR, str(theirs))
    with pytest.raises(tls.TLSDirError, match="belongs to uid 65534"):
        tls.user_tls()
    mine = tmp_path / "mine"
    monkeypatch.setenv(tls.ENV_DIR, str(mine))
    tls.user_tls()
    os.chmod(mine / "key.pem", 0o644)
    with pytest.raises(tls.TLSDirError, match="not a private"):
        tls.user_tls()


def test_a_directory_under_one_another_user_controls_is_refused(tmp_path, monkeypatch):
    """``$DYNPROF_NB_TLS_DIR`` under a directory another user owns (or anyone may write):
    its owner could swap the key directory (a symlink race) and pick the CA this user trusts.
    Refused before anything is made there; the sticky /tmp itself is fine."""
    for mode, owner in ((0o755, 65534), (0o777, 0)):
        parent = tmp_path / f"parent-{owner}-{mode:o}"
        parent.mkdir()
        os.chmod(parent, mode)
        os.chown(parent, owner, owner)
        monkeypatch.setenv(tls.ENV_DIR, str(parent / "tls"))
        with pytest.raises(tls.TLSDirError, match=f"{parent} above it belongs to uid {owner}"):
            tls.user_tls()
        assert not (parent / "tls").exists()
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    monkeypatch.setenv(tls.ENV_DIR, str(sticky / "tls"))
    assert tls.user_tls().directory == sticky / "tls"
