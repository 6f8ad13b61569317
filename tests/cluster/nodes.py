"""Simulated nodes on one machine, for the cluster tests and benchmark.

Each :class:`SimNode` is its own Linux IPC and mount namespace with a private tmpfs on
``/dev/shm`` (``unshare --ipc --mount --fork``, then ``mount -t tmpfs``), so its job segments are
invisible to every other node, as on separate machines. Inside it run one ``dask worker
--preload dynprof_nb.cluster.agent`` and the node's training ranks, each entered with
``nsenter`` and each in its own session, so a test can SIGKILL one of them and teardown kills
every process group. Needs root (CAP_SYS_ADMIN), as CI has. Every server listens on 127.0.0.1.

    with SimCluster(tmp_path, nodes=4) as cluster:
        cluster.start_ranks("job", per_node=2)   # ranks 0,1 on node 0, 2,3 on node 1, ...
        client = cluster.client()
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from jobutil import wait_until

REPO = Path(__file__).resolve().parents[2]
TRAIN_LOOP = REPO / "tests" / "train_loop.py"


UNSAFE_PLAIN = {"DYNPROF_NB_UNSAFE_PLAIN_TCP": "1"}  # the opt-in into plain-TCP servers
LOOP_START_S = 300.0  # the bound on the shared IO loop's start: a fact waited for, not a guess

_loop: Any = None


def shared_loop() -> Any:
    """One running IO loop for every Dask client the tests make, started once.

    A ``Client`` made without a loop starts an IO loop thread of its own and gives it 10 s to
    run (``distributed.utils.LoopRunner``: a fixed ``Event.wait(timeout=10)``, then an
    ``assert``); under ``nice`` beside a heavy process the TLS fixture's client once lost that
    race. Given a loop that already runs, a client starts no thread and waits for nothing, so
    that cannot happen; this loop's own start is waited for as a fact, bounded only by
    :data:`LOOP_START_S`."""
    global _loop
    if _loop is not None:
        return _loop
    import asyncio
    import threading

    from tornado.ioloop import IOLoop

    ready, box = threading.Event(), {}

    async def running() -> None:
        box["loop"] = IOLoop.current()
        ready.set()

    def run() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.create_task(running())
        loop.run_forever()

    threading.Thread(target=run, name="tests' Dask IO loop", daemon=True).start()
    if not ready.wait(LOOP_START_S):
        raise RuntimeError(f"the tests' Dask IO loop did not run within {LOOP_START_S:.0f} s")
    _loop = box["loop"]
    return _loop


def dask_client(address: str, **kwargs: Any) -> Any:
    """A ``distributed.Client`` on :func:`shared_loop` (never the default client)."""
    from distributed import Client

    return Client(address, set_as_default=False, loop=shared_loop(), **kwargs)


def scheduler_address(path: Path) -> str | None:
    """The address in a dask scheduler file once it is written whole (the scheduler writes
    it in place: a reader can see it empty or cut short), else None."""
    try:
        return json.loads(path.read_text())["address"]
    except (OSError, ValueError, KeyError):
        return None


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Children import this checkout's dynprof_nb, single-threaded numerics."""
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{path}" if path else str(REPO),
                OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
                DASK_DISTRIBUTED__WORKER__DAEMON="False", **(extra or {}))


def _kill_group(proc: subprocess.Popen | None, sig: int = signal.SIGKILL) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class TLSFiles:
    """A CA certificate, a certificate and its key, as files (0600), for ``dask scheduler`` and
    ``dask worker`` ``--tls-ca-file/--tls-cert/--tls-key``. ``Security.temporary()`` makes one
    self-signed certificate that is its own CA, good for every role."""

    def __init__(self, directory: Path, security: Any = None) -> None:
        from distributed.security import Security

        self.security = security or Security.temporary()
        directory.mkdir(parents=True, exist_ok=True)
        self.ca, self.cert, self.key = (directory / n for n in ("ca.pem", "cert.pem", "key.pem"))
        for path, text in ((self.ca, self.security.tls_ca_file),
                           (self.cert, self.security.tls_client_cert),
                           (self.key, self.security.tls_client_key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:  # PEM text, or the path of a PEM file
                fh.write(text if "\n" in text else Path(text).read_text())

    def flags(self) -> list[str]:
        return ["--tls-ca-file", str(self.ca), "--tls-cert", str(self.cert),
                "--tls-key", str(self.key)]


class Scheduler:
    """``dask scheduler`` on 127.0.0.1, a free port, no dashboard: mutual TLS with the user's
    own certificates (the gate's default), with ``tls``'s, or plain TCP (``plain``: the
    unsafe opt-in)."""

    def __init__(self, workdir: Path, tls: TLSFiles | None = None, plain: bool = False,
                 gated: bool = True) -> None:
        """``gated=False``: without ``--preload dynprof_nb.cluster.gate`` (what agents refuse)."""
        self.file = workdir / "scheduler.json"
        self.log = open(workdir / "scheduler.log", "w")  # noqa: SIM115
        tls_flags = ["--protocol", "tls", *tls.flags()] if tls else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--no-show", "--scheduler-file", str(self.file),
             *(["--preload", "dynprof_nb.cluster.gate"] if gated else []), *tls_flags],
            stdout=self.log, stderr=subprocess.STDOUT,
            env=child_env(UNSAFE_PLAIN if plain else None), start_new_session=True)
        def up() -> str | None:
            if self.proc.poll() is not None:
                raise RuntimeError("dask scheduler did not start: "
                                   + (workdir / "scheduler.log").read_text()[-2000:])
            return scheduler_address(self.file)

        self.address = wait_until(up, 60, "the dask scheduler's file")

    def close(self) -> None:
        _kill_group(self.proc, signal.SIGTERM)
        _kill_group(self.proc)
        self.log.close()


class SimNode:
    """One simulated node: a namespace holder, its dask worker and its training ranks."""

    def __init__(self, index: int, scheduler: str, workdir: Path, name: str | None = None,
                 nanny: bool = False, tls: TLSFiles | None = None, plain: bool = False,
                 own_cache: bool = False) -> None:
        """``own_cache``: the node's processes keep their frame cache in the node's directory,
        as separate machines do (else they share the machine's, or none as the tests do)."""
        self.index = index
        self.plain = plain
        self.scheduler = scheduler
        self.tls = tls
        self.name = name
        self.nanny = nanny
        self.dir = workdir / f"node{index}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.out = self.dir / "prof"  # the node's own disk
        self.env = dict(UNSAFE_PLAIN if plain else {})
        if own_cache:
            self.env["DYNPROF_NB_CACHE"] = str(self.dir / "cache")
        self.holder = subprocess.Popen(
            ["unshare", "--ipc", "--mount", "--fork", "sh", "-c",
             "mount -t tmpfs -o mode=1777 tmpfs /dev/shm && echo ready && exec sleep 1000000"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        line = self.holder.stdout.readline().strip()
        if line != "ready":
            self.close()
            raise RuntimeError(f"cannot make simulated node {index} (needs root: unshare and "
                               f"mount): {line} {self.holder.stdout.read()[:500]}")
        self.worker: subprocess.Popen | None = None
        self.ranks: dict[tuple[str, int], subprocess.Popen] = {}
        self._procs: list[subprocess.Popen] = []  # everything spawned here, killed by close()
        self._logs: list[Any] = []

    def spawn(self, cmd: list[str], log: str) -> subprocess.Popen:
        """Run ``cmd`` inside this node's namespaces, in its own session (plain TCP opted
        into on a ``plain`` node)."""
        fh = open(self.dir / log, "a")  # noqa: SIM115
        self._logs.append(fh)
        proc = subprocess.Popen(
            ["nsenter", "-t", str(self.holder.pid), "--ipc", "--mount", "--", *cmd],
            stdout=fh, stderr=subprocess.STDOUT, env=child_env(self.env), start_new_session=True)
        self._procs.append(proc)
        return proc

    def start_worker(self) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "dask", "worker", self.scheduler, "--preload",
               "dynprof_nb.cluster.agent", "--death-timeout", "10", "--nthreads", "1",
               "--no-dashboard", "--host", "127.0.0.1",
               *(["--nanny", "--preload-nanny", "dynprof_nb.cluster.gate"] if self.nanny
                 else ["--no-nanny"])]
        if self.name:
            cmd += ["--name", self.name]
        if self.tls:
            cmd += self.tls.flags()
        self.worker = self.spawn(cmd, "worker.log")
        return self.worker

    def start_rank(self, job: str, rank: int, step_ms: float = 30.0,
                   out: Path | None = None, extra: list[str] | None = None) -> subprocess.Popen:
        """``extra``: more train_loop.py options (e.g. ``--slow-file``)."""
        proc = self.spawn([sys.executable, str(TRAIN_LOOP), "--job", job, "--rank", str(rank),
                           "--out", str(out or self.out), "--step-ms", str(step_ms),
                           *(extra or [])], f"{job}.rank{rank}.log")
        self.ranks[job, rank] = proc
        return proc

    def kill_worker(self) -> None:
        _kill_group(self.worker)

    def stop_ranks(self, job: str | None = None) -> None:
        chosen = [k for k in self.ranks if job is None or k[0] == job]
        for key in chosen:
            _kill_group(self.ranks[key], signal.SIGTERM)
        for key in chosen:
            _kill_group(self.ranks.pop(key))

    def close(self) -> None:
        """Ranks get SIGTERM (they close their Monitor), then every process group spawned on
        this node is killed, the holder last: a process outlives its namespace's holder."""
        self.stop_ranks()
        _kill_group(self.worker, signal.SIGTERM)
        for proc in self._procs:
            _kill_group(proc)
        _kill_group(self.holder)
        for fh in self._logs:
            fh.close()


class SimCluster:
    """A scheduler and ``nodes`` simulated nodes (workers started, not yet ranks)."""

    def __init__(self, workdir: Path, nodes: int = 4, names: bool = True,
                 nanny: bool = False, tls: TLSFiles | Any = None, plain: bool = False,
                 gated: bool = True, own_cache: bool = False) -> None:
        """Mutual TLS with the user's own certificates (no flags: what the gate does), or
        ``tls``: with these certificate files or a ``Security`` (e.g.
        ``Security.temporary()``) whose certificates are written to files first, or
        ``plain``: plain TCP, the unsafe opt-in (still uid-checked by the gate).
        ``own_cache``: each node's frame cache in its own directory (see :class:`SimNode`)."""
        self.plain = plain
        self.own_cache = own_cache
        self.workdir = Path(workdir)
        self.nodes: list[SimNode] = []
        self._clients: list[Any] = []
        self.names = names
        self.nanny = nanny
        if tls is not None and not isinstance(tls, TLSFiles):  # a Security: write its files
            tls = TLSFiles(self.workdir / "certs", tls)
        self.tls = tls
        self.scheduler = Scheduler(self.workdir, tls, plain, gated)
        try:
            for _ in range(nodes):
                self.add_node()
            self.wait_workers(nodes)
        except BaseException:
            self.close()
            raise

    def add_node(self) -> SimNode:
        i = len(self.nodes)
        node = SimNode(i, self.scheduler.address, self.workdir,
                       name=f"node{i}" if self.names else None, nanny=self.nanny,
                       tls=self.tls, plain=self.plain, own_cache=self.own_cache)
        self.nodes.append(node)
        node.start_worker()
        return node

    def client(self) -> Any:
        client = dask_client(self.scheduler.address, timeout=30, security=self.security())
        self._clients.append(client)
        return client

    def security(self) -> Any:
        """What a client of this cluster presents: its certificates, or the user's own."""
        if self.tls:
            return self.tls.security
        if self.plain:
            return None
        from dynprof_nb.cluster.tls import security

        return security()

    def wait_workers(self, n: int, timeout: float = 120.0) -> None:
        client = self.client()
        try:
            client.wait_for_workers(n, timeout=timeout)
        except Exception as exc:
            logs = "\n".join((node.dir / "worker.log").read_text()[-1500:]
                             for node in self.nodes if (node.dir / "worker.log").exists())
            raise RuntimeError(f"{n} workers did not join: {exc}\n{logs}") from None
        finally:
            client.close()
            self._clients.remove(client)

    def start_ranks(self, job: str, per_node: int = 2, step_ms: float = 30.0,
                    nodes: list[SimNode] | None = None, out: Path | None = None) -> None:
        """Ranks ``index * per_node + j`` on each node; windows go to each node's own
        directory, or all to ``out`` (a filesystem every node shares)."""
        for node in nodes or self.nodes:
            for j in range(per_node):
                node.start_rank(job, node.index * per_node + j, step_ms, out=out)

    def stop_ranks(self, job: str | None = None) -> None:
        for node in self.nodes:
            node.stop_ranks(job)

    def close(self) -> None:
        for client in self._clients:
            try:
                client.close(timeout=5)
            except Exception:
                pass
        for node in self.nodes:
            node.close()
        self.scheduler.close()

    def __enter__(self) -> SimCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
