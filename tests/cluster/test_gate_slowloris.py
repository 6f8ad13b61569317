"""A second user (uid 65534) who connects to a gated server and never completes TLS (a
slowloris), many times at once, or sends garbage: the owner still connects meanwhile, and the
server closes every such socket (Dask's own TLS listener waited for the handshake for good)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from jobutil import wait_until
from nodes import _kill_group, child_env, dask_client
from otheruser import OTHER_GID, OTHER_UID, as_other_user

pytestmark = pytest.mark.timeout(300)

SLOWLORIS = textwrap.dedent("""
    import json, socket, sys, time
    host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    silent = [socket.create_connection((host, port), timeout=5) for _ in range(n)]
    noisy = socket.create_connection((host, port), timeout=5)
    noisy.sendall(b"\\x16\\x03\\x01\\xff\\xff" + b"garbage" * 100_000)  # a huge first record
    print("open", flush=True)
    closed, end = set(), time.monotonic() + 90
    while len(closed) < n and time.monotonic() < end:
        for i, s in enumerate(silent):
            if i in closed:
                continue
            s.settimeout(0.05)
            try:
                if s.recv(1) == b"":
                    closed.add(i)
            except socket.timeout:
                pass
            except OSError:
                closed.add(i)
    print(json.dumps({"closed": len(closed), "of": n}), flush=True)
""")


def test_a_slowloris_is_closed_and_blocks_no_one(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    sched = home / "scheduler.json"
    env = child_env({"HOME": str(home)})
    server = subprocess.Popen(
        [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
         "--no-dashboard", "--scheduler-file", str(sched), "--preload",
         "dynprof_nb.cluster.gate"], env=env, cwd=str(home), start_new_session=True,
        stdout=(tmp_path / "scheduler.log").open("w"), stderr=subprocess.STDOUT)
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, OTHER_UID, OTHER_GID)
    attacker = None
    try:
        wait_until(lambda: sched.exists() and sched.read_text().strip(), 120, "the scheduler")
        address = json.loads(sched.read_text())["address"]
        assert address.startswith("tls://")
        host, port = address.split("://", 1)[1].rsplit(":", 1)
        attacker = subprocess.Popen(
            as_other_user([sys.executable, "-c", SLOWLORIS, host, port, "200"], other),
            env=dict(child_env(), HOME=str(other)), cwd=str(other), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert attacker.stdout.readline().strip() == "open", attacker.stderr.read()[-3000:]
        from dynprof_nb.cluster import tls

        monkeypatch.setenv("HOME", str(home))  # the owner's certificates (the scheduler's)
        monkeypatch.delenv(tls.ENV_DIR, raising=False)
        # not blocked by the 201 sockets
        with dask_client(address, security=tls.security(), timeout=60) as client:
            assert client.scheduler_info()["type"] == "Scheduler"
        out, err = attacker.communicate(timeout=150)
        seen = json.loads(out.strip().splitlines()[-1])
        assert seen == {"closed": 200, "of": 200}, (seen, err[-2000:])
        log = (tmp_path / "scheduler.log").read_text()
        assert "no TLS handshake within" in log, log[-3000:]
    finally:
        _kill_group(attacker)
        _kill_group(server)
