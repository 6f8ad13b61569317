"""A scheduler another user (uid 65534) starts, and a scheduler file it wrote: the victim's
worker, run as docs/cluster.md prints it, must not read a byte from it.

The fake scheduler sends every peer a Dask handshake carrying a pickle whose ``os.system``
payload writes a file. Without the gate on outgoing connections, a gated worker connected to a
``tcp://`` address in plain text and unpickled that handshake (as the victim). Now a process
that serves a gated server connects ``tcp://`` as mutual TLS with its user's certificates (the
attacker's plain server fails the TLS handshake), and a ``tls://`` server whose certificate is
not of the user's CA fails it too; the worker says so in its log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from jobutil import wait_until
from nodes import _kill_group, child_env
from otheruser import OTHER_GID, OTHER_UID, as_other_user

pytestmark = pytest.mark.timeout(300)
FAKE = Path(__file__).resolve().parent / "fake_scheduler.py"


@pytest.mark.parametrize(("scheme", "listen"), [("tcp", None), ("tls", None), ("ws", None),
                                                ("ws", "tls")])
def test_a_worker_refuses_a_scheduler_of_another_user(scheme, listen, tmp_path):
    """``listen``: the worker's own ``--protocol`` (else its scheduler's)."""
    markers = Path(tempfile.mkdtemp(prefix="dynprof-markers-"))  # root's, 0700
    shared = Path(tempfile.mkdtemp(prefix="dynprof-shared-"))  # the attacker's directory
    os.chown(shared, OTHER_UID, OTHER_GID)
    sched = shared / "scheduler.json"
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    fake = subprocess.Popen(
        as_other_user([sys.executable, str(FAKE), scheme, str(sched),
                       str(markers / "pwned.txt")], shared),
        env=dict(child_env(), HOME=str(shared)), cwd=str(shared), start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = tmp_path / "worker.log"
    worker = None
    try:
        assert "listening" in fake.stdout.readline()
        with open(log, "w") as fh:  # the documented worker command, this user, no flags
            worker = subprocess.Popen(
                [sys.executable, "-m", "dask", "worker", "--scheduler-file",
                 str(sched), "--preload", "dynprof_nb.cluster.agent", "--no-nanny",
                 "--nthreads", "1", "--death-timeout", "20",
                 *(["--protocol", listen] if listen else [])],
                env=child_env({"HOME": str(home)}), cwd=str(home), stdout=fh,
                stderr=subprocess.STDOUT, start_new_session=True)
        def decided():  # the worker says what it refused, ends, or the payload ran
            text = log.read_text()
            return ("not connecting to" in text or os.listdir(markers) or worker.poll() is not None
                    or (scheme == "ws" and not listen and "not listening on ws://" in text))

        wait_until(decided, 120, "the worker to refuse the scheduler")
        # a payload runs inside os.system, which the worker's SIGTERM handler waits for:
        # once the worker has ended, whatever it read has run (no guess at how long it takes)
        if worker.poll() is None:
            worker.terminate()
        worker.wait(timeout=60)
        text = log.read_text()
        assert os.listdir(markers) == [], f"the attacker's payload ran as this user: {text}"
        if scheme == "tcp":  # the recipes' servers speak TLS: so does the worker, to anyone
            assert "as mutual TLS (uid 0's certificates)" in text, text[-3000:]
        if scheme == "ws" and not listen:  # it would listen on ws:// too: it does not start
            assert "not listening on ws://" in text, text[-3000:]
        else:
            assert "not connecting to" in text and "nothing it sends is read" in text, text[-3000:]
    finally:
        _kill_group(worker)
        _kill_group(fake)
        subprocess.run(["rm", "-rf", str(markers), str(shared)], check=False)


@pytest.mark.parametrize("scheme", ["tcp", "ws"])
def test_attach_refuses_a_loopback_scheduler_of_another_user(scheme):
    """``attach(job, cluster="tcp://127.0.0.1:PORT")`` (loopback plain TCP, which
    ``check_transport`` lets through) connects as mutual TLS: the attacker's plain scheduler
    fails the TLS handshake and its handshake pickle is never read in this notebook; a
    loopback ``ws://`` is refused before connecting."""
    import dynprof_nb
    from dynprof_nb.control.base import JobError

    markers = Path(tempfile.mkdtemp(prefix="dynprof-markers-"))
    shared = Path(tempfile.mkdtemp(prefix="dynprof-shared-"))
    os.chown(shared, OTHER_UID, OTHER_GID)
    sched = shared / "scheduler.json"
    fake = subprocess.Popen(
        as_other_user([sys.executable, str(FAKE), scheme, str(sched),
                       str(markers / "pwned.txt")], shared),
        env=dict(child_env(), HOME=str(shared)), cwd=str(shared), start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = fake.stdout.readline()
        assert "listening" in line, line + fake.stdout.read()[-3000:]
        port = json.loads(line)["listening"].rsplit(":", 1)[1]
        address = f"{scheme}://127.0.0.1:{port}"
        with pytest.raises(JobError) as refused:
            dynprof_nb.attach("victim", cluster=address)
        time.sleep(1)
        assert os.listdir(markers) == [], f"the payload ran in the notebook: {refused.value}"
        text = str(refused.value)
        if scheme == "tcp":
            assert f"connected as tls://{address.split('://')[1]}" in text, text
            assert "Nothing it sent was read" in text, text
        else:
            assert "no dynprof_nb cluster serves ws://" in text, text
    finally:
        _kill_group(fake)
        subprocess.run(["rm", "-rf", str(markers), str(shared)], check=False)
