"""A training loop that dies mid-window, for tests/training/test_saves.py.

    python crash_loop.py JOB OUT HOW   (HOW: raise | exit | sigterm | sigint | normal)

It asks for window 3-1000000, records steps, and once step 120 is done dies as HOW says:
``raise`` lets a RuntimeError escape, ``exit`` calls sys.exit(3), ``sigterm`` / ``sigint``
wait for the test to send the signal (the process prints ``ready``). The Monitor is never
closed by the script.
"""

from __future__ import annotations

import sys
import time

import dynprof_nb

job, out, how = sys.argv[1:4]
control = dynprof_nb.attach(job, create=True)
control.start(3, 1_000_000)
monitor = dynprof_nb.Monitor(job=job, rank=0, output_path=out, backend="builtin")
for _ in range(120):
    with dynprof_nb.range("work"):
        pass
    monitor.step()
if how == "raise":
    raise RuntimeError("the loss is nan")
if how == "exit":
    sys.exit(3)
print("ready", flush=True)
while True:  # killed by the test's signal, stepping all the while
    with dynprof_nb.range("work"):
        time.sleep(0.001)
    monitor.step()
