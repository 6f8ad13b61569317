"""What mutual TLS costs a connection: a gated scheduler served as mutual TLS with the user's
own certificates (the default) against one in plain TCP (``DYNPROF_NB_UNSAFE_PLAIN_TCP=1``),
both ``dask scheduler --preload dynprof_nb.cluster.gate`` on 127.0.0.1, measured from this
process, interleaved (one TLS, one plain, ...):

* a comm: Dask's ``connect()`` (TCP, the TLS handshake, the gate's check, Dask's handshake)
  then close;
* a ``Client``: ``Client(address)`` until connected, then close (what ``attach`` pays once).

    python benchmarks/tls_connect.py [--comms 200] [--clients 10]

On shared cores read the ratios (medians, same run), not the times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def start_scheduler(workdir: Path, plain: bool) -> tuple[subprocess.Popen, str]:
    file = workdir / ("plain.json" if plain else "tls.json")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if plain:
        env["DYNPROF_NB_UNSAFE_PLAIN_TCP"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
         "--no-dashboard", "--scheduler-file", str(file), "--preload",
         "dynprof_nb.cluster.gate"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while not file.exists() or not file.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the scheduler did not start")
        time.sleep(0.05)
    time.sleep(0.1)
    return proc, json.loads(file.read_text())["address"]


async def comm_ms(address: str, args: dict) -> float:
    from distributed.comm import connect

    t0 = time.perf_counter()
    comm = await connect(address, **args)
    dt = time.perf_counter() - t0
    await comm.close()
    return dt * 1e3


def client_ms(address: str, security: object) -> float:
    from distributed import Client

    t0 = time.perf_counter()
    client = Client(address, security=security, set_as_default=False, timeout=30)
    dt = time.perf_counter() - t0
    client.close()
    return dt * 1e3


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 2), "min_ms": round(min(values), 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--comms", type=int, default=200)
    p.add_argument("--clients", type=int, default=10)
    args = p.parse_args()
    from dynprof_nb.cluster import tls

    sec = tls.security()
    tls_args = sec.get_connection_args("client")
    with tempfile.TemporaryDirectory() as work:
        procs = []
        try:
            tls_proc, tls_addr = start_scheduler(Path(work), plain=False)
            procs.append(tls_proc)
            plain_proc, plain_addr = start_scheduler(Path(work), plain=True)
            procs.append(plain_proc)
            assert tls_addr.startswith("tls://") and plain_addr.startswith("tcp://")
            res: dict[str, list[float]] = {"comm_tls": [], "comm_plain": [], "client_tls": [],
                                           "client_plain": []}

            async def comms() -> None:
                for _ in range(5):  # warm both
                    await comm_ms(tls_addr, tls_args)
                    await comm_ms(plain_addr, {})
                for _ in range(args.comms):
                    res["comm_tls"].append(await comm_ms(tls_addr, tls_args))
                    res["comm_plain"].append(await comm_ms(plain_addr, {}))

            asyncio.run(comms())
            client_ms(tls_addr, sec), client_ms(plain_addr, None)
            for _ in range(args.clients):
                res["client_tls"].append(client_ms(tls_addr, sec))
                res["client_plain"].append(client_ms(plain_addr, None))
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(30)
    out = {k: summary(v) for k, v in res.items()}
    out["comm_ratio_p50"] = round(out["comm_tls"]["p50_ms"] / out["comm_plain"]["p50_ms"], 2)
    out["client_ratio_p50"] = round(
        out["client_tls"]["p50_ms"] / out["client_plain"]["p50_ms"], 2)
    out["loadavg"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
