"""A training loop that is all BLAS (numpy matmuls on OpenBLAS's threads) with a window in
the middle: tests/training/test_saves.py runs it to show a window's save never hangs it."""

import sys
import time

import numpy as np

import dynprof_nb

job, out, window = sys.argv[1], sys.argv[2], sys.argv[3] == "window"
if window:
    dynprof_nb.attach(job, create=True).start(5, 8)
x = np.random.default_rng(0).random((512, 512), dtype=np.float32)
t0 = time.monotonic()
with dynprof_nb.Monitor(job=job, output_path=out, backend="builtin") as monitor:
    for _ in range(120):
        for _ in range(3):
            x = (x @ x) / 512
        monitor.step()
print(f"{time.monotonic() - t0:.3f}", monitor.last_window)
