"""The real background training job the notebook front-end tests drive: the demo's two-rank
numpy MLP (``dynprof_nb.ui.demo.start_ranks``), on a real job segment."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.ui.demo import start_ranks, stop_ranks, wait_for_ranks


@contextmanager
def demo_job(out: Path, ranks: int = 2, prefix: str = "nb") -> Iterator[dynprof_nb.Job]:
    """Start the demo's ranks in the background, attach, and clean everything up afterwards."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    procs = start_ranks(name, str(out), ranks=ranks)
    job = dynprof_nb.attach(name, create=True)
    try:
        wait_for_ranks(job, ranks, timeout=60)
        yield job
    finally:
        stop_ranks(procs)
        job.close()
        segment.unlink(name)
