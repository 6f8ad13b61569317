"""docs/cluster.md's recipes, run as printed, are safe as written (issue 28, deliverable 2).

Every ``bash`` block of docs/cluster.md that starts a ``dask scheduler`` is parsed out of the
markdown and its commands run exactly as printed (``srun OPTIONS`` and a trailing ``&`` taken
off, the training ranks replaced by tests/train_loop.py; a block of ``openssl`` commands before
it is run first), in a fresh ``$HOME`` (so the per-user CA is made by the commands themselves).
Then: the servers speak TLS, no nanny runs, every other port they listen on is an HTTP server on
127.0.0.1 that serves only ``/health``, this user attaches with no flags, and uid 65534's
attacks (with and without a copy of the certificate) run nothing.

The SLURM recipe's scheduler binds its default port on all interfaces (as printed), and every
server a test starts must listen on 127.0.0.1 only: so each recipe runs, with everything that
talks to it (the training loop, the attacker, the attach check), in a private network namespace
(``unshare --net``, its loopback up), whose only interface is that loopback; the test re-runs
itself in it, and the namespace goes away with that run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from jobutil import unique_job, wait_until
from nodes import REPO, TRAIN_LOOP, _kill_group, child_env, dask_client, scheduler_address
from otheruser import attack

import dynprof_nb

pytestmark = pytest.mark.timeout(600)
DOC = REPO / "docs" / "cluster.md"
IN_NETNS = "DYNPROF_NB_TEST_PRIVATE_NETNS"  # set for the run inside the private namespace


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def logical_lines(block: str) -> list[str]:
    """Continuations joined, comments dropped (``#SBATCH`` too)."""
    joined = block.replace("\\\n", " ")
    lines = []
    for line in joined.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def recipes() -> list[tuple[str, list[str], list[str], list[str]]]:
    """(name, commands run once first (the openssl block before), assignments, dask
    commands)."""
    blocks = bash_blocks(DOC.read_text())
    found = []
    for i, block in enumerate(blocks):
        if "dask scheduler" not in block:
            continue
        once, setup, commands = [], [], []
        if i and "openssl" in blocks[i - 1]:
            once = logical_lines(blocks[i - 1])
        for line in logical_lines(block):
            command = re.sub(r"^srun\s.*?\s(?=dask\s)", "", line).removesuffix("&").strip()
            if command.startswith("dask "):
                commands.append(command)
            elif re.match(r"^[A-Z_]+=", line):
                setup.append(line)
        found.append((f"block{i}", once, setup, commands))
    return found


RECIPES = recipes()


def test_the_recipes_were_found():
    """The parse found the recipes (the one-node agents, SLURM, SLURM with own certificates),
    each a scheduler and a worker, none with a nanny."""
    assert len(RECIPES) == 3, RECIPES
    for _, _, _, commands in RECIPES:
        assert [c.split()[1] for c in commands] == ["scheduler", "worker"], commands
        assert "--no-nanny" in commands[1]


def http_status(port: int, path: str) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def listening(pids: list[int]) -> list[tuple[str, int]]:
    out = []
    for pid in pids:
        try:
            procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for proc in procs:
            try:
                out += [(c.laddr.ip, c.laddr.port) for c in proc.net_connections("inet")
                        if c.status == psutil.CONN_LISTEN]
            except psutil.NoSuchProcess:
                continue
    return out


def interfaces() -> list[str]:
    """This network namespace's interfaces (netlink: per namespace, unlike /sys)."""
    import socket

    return sorted(name for _, name in socket.if_nameindex())


def rerun_in_private_netns(nodeid: str) -> None:
    """This one test, run again by pytest in a fresh network namespace with only ``lo`` (up):
    "all interfaces" there is that loopback, and nothing in it is reachable from outside."""
    tool = [shutil.which("unshare"), shutil.which("ip")]
    if os.geteuid() != 0 or None in tool:  # CI runs as root; say why loudly elsewhere
        pytest.fail(f"a private network namespace needs root, unshare and ip ({tool})")
    inner = subprocess.run(
        [tool[0], "--net", "--", "sh", "-c", f'{tool[1]} link set lo up && exec "$0" "$@"',
         sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", nodeid],
        env=dict(os.environ, **{IN_NETNS: "1"}), cwd=str(REPO), capture_output=True,
        text=True, timeout=580)
    assert inner.returncode == 0, (inner.stdout + inner.stderr)[-6000:]
    assert re.search(r"^1 passed", inner.stdout, re.M), inner.stdout[-3000:]


@pytest.mark.parametrize("recipe", RECIPES, ids=[r[0] for r in RECIPES])
def test_a_recipe_run_as_printed_is_safe(recipe, tmp_path, monkeypatch, request):
    if os.environ.get(IN_NETNS) != "1":
        rerun_in_private_netns(request.node.nodeid)
        return
    assert interfaces() == ["lo"], interfaces()  # nothing the recipe binds is reachable
    _, once, setup, commands = recipe
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = child_env({"HOME": str(home), "USER": "root", "SLURM_JOB_ID": "4242",
                     "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    env.pop("DYNPROF_NB_TLS_DIR", None)
    if once:
        subprocess.run(["bash", "-c", "set -e; cd ~; " + "; ".join(once)], env=env, check=True,
                       capture_output=True, cwd=str(home))
    preamble = "".join(f"{line}; " for line in setup)
    procs: list[subprocess.Popen] = []
    logs = [tmp_path / f"{c.split()[1]}.log" for c in commands]
    name = unique_job("recipe")
    file = Path(subprocess.check_output(["bash", "-c", f"cd ~; {preamble}echo $SCHED"],
                                        env=env, text=True).strip())
    try:
        for command, log in zip(commands, logs, strict=True):
            with open(log, "w") as fh:
                procs.append(subprocess.Popen(
                    ["bash", "-c", f"set -e; cd ~; {preamble}exec {command}"], env=env,
                    stdout=fh, stderr=subprocess.STDOUT, cwd=str(home),
                    start_new_session=True))
            if command.startswith("dask scheduler"):
                wait_until(lambda: scheduler_address(file), 120, "the scheduler file")
        address = json.loads(file.read_text())["address"]
        assert address.startswith("tls://"), address
        rank = subprocess.Popen([sys.executable, str(TRAIN_LOOP), "--job", name, "--rank", "0",
                                 "--out", str(tmp_path / "prof"), "--step-ms", "30"],
                                env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        procs.append(rank)
        monkeypatch.setenv("HOME", str(home))  # this user's certificates: the recipe's
        from distributed.security import Security

        from dynprof_nb.cluster import tls

        own = [home / ".dynprof" / "site-tls" / f for f in ("ca.pem", "me.pem", "me.key")]
        sec = Security(require_encryption=True, tls_ca_file=str(own[0]),
                       tls_client_cert=str(own[1]), tls_client_key=str(own[2])
                       ) if own[0].exists() else tls.security()
        with dask_client(address, security=sec, timeout=30) as client:
            client.wait_for_workers(1, timeout=120)
        if own[0].exists():  # the recipe with certificates of one's own
            job = dynprof_nb.attach(name, cluster=dask_client(address, security=sec,
                                                              timeout=30))
            certs = tuple(own)
        else:
            job = dynprof_nb.attach(name, cluster=address)  # no flags
            certs = home / ".dynprof" / "tls"
        try:
            wait_until(lambda: len(job.live_ranks()) == 1, 120, "the rank through the recipe")
            workers = job.client.scheduler_info()["workers"]
            assert len(workers) == 1 and not any(w["nanny"] for w in workers.values())
            targets = [address, *workers]
            comm_ports = {int(t.rsplit(":", 1)[1]) for t in targets}
            sockets = listening([p.pid for p in procs[:2]])
            for ip, port in sockets:
                assert port in comm_ports or ip in ("127.0.0.1", "::1"), (ip, port)
            http = {port for ip, port in sockets if port not in comm_ports}
            assert len(http) >= 2, sockets  # the scheduler's and the worker's
            for port in http:  # /health only: no metrics, logs nor call stacks to read
                assert http_status(port, "/health") == 200
                for path in ("/metrics", "/info/main/workers.html", "/json/identity.json"):
                    assert http_status(port, path) == 404, (port, path)
            targets += [f"tls://[::1]:{port}" for ip, port in sockets  # the IPv6 side too
                        if ip == "::" and port in comm_ports]
            for copy in (None, certs):
                seen, written = attack([*targets, *("tcp://" + t.split("://", 1)[1]
                                                    for t in targets)], copy)
                assert written == [], f"a payload ran: {written} ({seen})"
                if copy is not None:
                    for target in targets:
                        text = seen[f"run {target}"]
                        assert "refused by the dynprof_nb gate" in text, text
                        assert "uid 65534" in text, text
            assert job.status().alive.astype(bool).all()
        finally:
            job.close()
    finally:
        for proc in reversed(procs):
            _kill_group(proc, signal.SIGTERM)
            _kill_group(proc)
    text = logs[0].read_text()
    assert "dynprof_nb gate on Scheduler: refused" in text, text[-3000:]
