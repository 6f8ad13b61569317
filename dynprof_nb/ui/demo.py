"""The main job: a small numpy MLP trained by two ranks, profiled from outside.

``python -m dynprof_nb.ui.demo train --job J --rank R`` is one training rank (what a user's script
looks like with dynprof_nb in it); ``dynprof demo`` starts two of them in the background,
asks for a ten-step window through the Job API, waits with a progress bar and shows what the
window holds. Nothing beyond numpy is needed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import dynprof_nb


class Allreduce:
    """Gradient averaging between the demo's rank processes through rank 0 over a Unix socket.

    Each call blocks until every rank has sent its array, as DDP's allreduce does, so the ranks
    stay in step: a window ``+5 +9`` closes after about ten steps on every rank. A rank that
    leaves (stopped, killed) ends the exchange for the others, who carry on alone rather than
    hang; nothing here raises into the training loop after the ranks have met.
    """

    def __init__(
        self, path: str, rank: int, world: int, timeout: float = 60.0, step_timeout: float = 600.0
    ):
        self.rank, self.world, self.path = rank, world, path
        self.peers: list[socket.socket] = []
        self.ended: str | None = None  # why the exchange ended, once it has
        try:
            self._meet(timeout)
        except OSError as exc:  # the others never came: train alone rather than not at all
            self.ended = f"the ranks did not meet at {path}: {exc}"
            self.close()
        for s in self.peers:
            s.settimeout(step_timeout)  # a rank paused this long (SIGSTOP, debugger) is gone

    def _meet(self, timeout: float) -> None:
        path, world = self.path, self.world
        deadline = time.monotonic() + timeout
        if self.rank == 0:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # left by an earlier run of this job that was killed
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(path)
            server.listen(world)
            server.settimeout(timeout)
            try:
                while len(self.peers) < world - 1:
                    conn, _ = server.accept()
                    self.peers.append(conn)
            finally:
                server.close()
                with contextlib.suppress(OSError):
                    os.unlink(path)
        else:
            while True:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect(path)
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    sock.close()
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"rank 0 did not listen within {timeout:.0f} s"
                        ) from None
                    time.sleep(0.05)  # rank 0 is still starting
            self.peers.append(sock)

    def __call__(self, arr: np.ndarray) -> np.ndarray:
        """The mean of ``arr`` over the ranks (``arr`` itself once the exchange has ended)."""
        if not self.peers:
            return arr
        arr = np.ascontiguousarray(arr)
        try:
            if self.rank == 0:
                total = arr.astype(np.float64)
                for conn in self.peers:
                    total += np.frombuffer(_recv_exact(conn, arr.nbytes), arr.dtype).reshape(
                        arr.shape
                    )
                out = (total / self.world).astype(arr.dtype)
                for conn in self.peers:
                    conn.sendall(out.tobytes())
                return out
            self.peers[0].sendall(arr.tobytes())
            return (
                np.frombuffer(_recv_exact(self.peers[0], arr.nbytes), arr.dtype)
                .reshape(arr.shape)
                .copy()
            )
        except OSError as exc:  # a rank left: the others go on alone
            self.ended = f"{type(exc).__name__}: {exc}"
            self.close()
            return arr

    def close(self) -> None:
        for s in self.peers:
            s.close()
        self.peers = []


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionResetError("a rank closed the connection")
        got += k
    return bytes(buf)


def rendezvous_path(job: str) -> str:
    """Where the ranks of demo job ``job`` meet (short: Unix socket paths are limited to ~100)."""
    digest = hashlib.sha1(job.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"dynprof-demo-{digest}.sock")


def _gradients(
    x: np.ndarray, y: np.ndarray, w1: np.ndarray, w2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One forward and backward pass of the demo's MLP (softmax cross-entropy), each phase in
    its own range, as a real model's would be: the gradients of ``w1`` and ``w2``."""
    batch = len(x)
    with dynprof_nb.range("forward"):
        with dynprof_nb.range("matmul"):
            h = x @ w1
        with dynprof_nb.range("relu"):
            a = np.maximum(h, 0)
        with dynprof_nb.range("matmul"):
            logits = a @ w2
    with dynprof_nb.range("loss"):
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(y)), y] -= 1
    with dynprof_nb.range("backward"):
        with dynprof_nb.range("matmul"):
            gw2 = a.T @ p / batch
            ga = p @ w2.T
        ga[h <= 0] = 0
        with dynprof_nb.range("matmul"):
            gw1 = x.T @ ga / batch
    return gw1, gw2


def train(
    job: str,
    rank: int,
    steps: int,
    output: str,
    batch: int = 256,
    world: int = 1,
    rendezvous: str | None = None,
) -> None:
    """A two-layer MLP on synthetic data, with dynprof_nb ranges around its phases; with
    ``world`` > 1 the ranks average their gradients every step (and so keep in step)."""
    rng = np.random.default_rng(rank)
    w1 = rng.standard_normal((784, 512)).astype(np.float32) * 0.05
    w2 = rng.standard_normal((512, 10)).astype(np.float32) * 0.05
    x_all = rng.standard_normal((batch * 16, 784)).astype(np.float32)
    y_all = rng.integers(0, 10, batch * 16)
    stop = {"now": False}
    for sig in (signal.SIGTERM, signal.SIGINT):  # a kernel shutting down sends SIGINT
        signal.signal(sig, lambda *_: stop.update(now=True))
    allreduce = Allreduce(rendezvous or rendezvous_path(job), rank, world) if world > 1 else None
    with dynprof_nb.Monitor(job=job, rank=rank, output_path=output, backend="builtin") as monitor:
        for step in range(1, steps + 1):
            if stop["now"]:
                break
            with dynprof_nb.range("data"):
                i = (step * batch) % len(x_all)
                x, y = x_all[i : i + batch], y_all[i : i + batch]
            gw1, gw2 = _gradients(x, y, w1, w2)
            if allreduce is not None:
                with dynprof_nb.range("allreduce", category="communication"):
                    gw1, gw2 = allreduce(gw1), allreduce(gw2)  # waits for every rank, like DDP
                if allreduce.ended and not stop["now"]:
                    print(
                        f"demo rank {rank}: gradient exchange ended ({allreduce.ended}); "
                        "training on alone",
                        file=sys.stderr,
                    )
                    allreduce = None
            with dynprof_nb.range("sgd_update"):
                w1 -= 0.01 * gw1
                w2 -= 0.01 * gw2
            monitor.step()
    if allreduce is not None:
        allreduce.close()


def start_ranks(
    job: str, output: str, ranks: int = 2, steps: int = 100_000
) -> list[subprocess.Popen]:
    """The background training job: ``ranks`` processes of :func:`train`, in step through their
    gradient exchange, each in its own session so a Ctrl-C in the kernel never reaches them."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dynprof_nb.ui.demo",
                "train",
                "--job",
                job,
                "--rank",
                str(r),
                "--steps",
                str(steps),
                "--output",
                output,
                "--world",
                str(ranks),
            ],
            env={**env, "RANK": str(r), "WORLD_SIZE": str(ranks)},
            start_new_session=True,
        )
        for r in range(ranks)
    ]


def wait_for_ranks(job: dynprof_nb.Job, ranks: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(job.live_slots()) < ranks or min(s.step for s in job.live_slots()) < 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the demo's {ranks} ranks did not start within {timeout} s")
        time.sleep(0.1)


def run_demo(output: str = "./dyn_profile_data/demo") -> int:
    import pandas as pd

    job_name = f"demo-{os.getpid()}"
    output = str(Path(output).resolve())
    print(f"Starting a 2-rank numpy MLP job {job_name!r} in the background ...")
    procs = start_ranks(job_name, output)
    try:
        job = dynprof_nb.attach(job_name, create=True)
        wait_for_ranks(job, 2)
        print(job.status().to_string(index=False), "\n")
        job.start("+20", "+29", profile_memory=True)
        cfg = job.config
        print(f"Asked every rank for steps {cfg.start_step}..{cfg.stop_step} (ten steps).")
        status = job.wait(timeout=120)
        print(status.to_string(index=False), "\n")
        print(job.windows()[["rank", "start", "stop", "status", "path"]].to_string(index=False))
        window = job.load()
        pd.set_option("display.width", 160)
        print()
        print(window.summary())
        return 0
    finally:
        stop_ranks(procs)


def stop_ranks(procs: list[subprocess.Popen], timeout: float = 30.0) -> None:
    """End the background ranks cleanly (SIGTERM lets each close its Monitor), else kill."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m dynprof_nb.ui.demo")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="one training rank")
    t.add_argument("--job", required=True)
    t.add_argument("--rank", type=int, default=0)
    t.add_argument("--steps", type=int, default=100_000)
    t.add_argument("--output", default="./dyn_profile_data")
    t.add_argument(
        "--world",
        type=int,
        default=int(os.environ.get("WORLD_SIZE", "1")),
        help="number of ranks exchanging gradients (they meet through a Unix socket)",
    )
    t.add_argument("--rendezvous", default=None, help="socket path (default: from the job name)")
    sub.add_parser("run", help="the whole demo")
    args = parser.parse_args()
    if args.command == "train":
        train(
            args.job,
            args.rank,
            args.steps,
            args.output,
            world=args.world,
            rendezvous=args.rendezvous,
        )
    else:
        sys.exit(run_demo())


if __name__ == "__main__":
    main()
