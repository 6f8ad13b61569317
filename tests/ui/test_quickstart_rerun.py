"""Running the quickstart's setup cell a second time (people do) replaces the ranks it started
instead of adding two more under the same rank numbers. The cell's own source, run twice in one
namespace as the kernel would, with real demo ranks."""

from __future__ import annotations

import json
import os
from pathlib import Path

from jobutil import unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.ui.demo import stop_ranks, wait_for_ranks

REPO = Path(__file__).resolve().parents[2]


def _setup_cell() -> str:
    cells = json.loads((REPO / "notebooks" / "quickstart.ipynb").read_text())["cells"]
    return next("".join(c["source"]) for c in cells
                if c["cell_type"] == "code" and "start_ranks(" in "".join(c["source"]))


def test_running_the_setup_cell_twice_keeps_two_ranks(tmp_path, monkeypatch):
    name = unique_job("qsrerun")
    monkeypatch.setenv("DYNPROF_JOB", name)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    source = _setup_cell()
    job = None
    first: list = []
    try:
        exec(compile(source, "setup-cell", "exec"), namespace)  # noqa: S102 - the notebook's
        first = list(namespace["procs"])
        job = dynprof_nb.attach(name, create=True)  # the notebook's next cells: attach, start
        wait_for_ranks(job, 2, timeout=60)
        job.start("+100000", "+100009")
        exec(compile(source, "setup-cell", "exec"), namespace)  # noqa: S102 - run it again
        assert all(p.poll() is not None for p in first), "the first ranks still run"
        second = namespace["procs"]
        pids = {p.pid for p in second}
        wait_until(lambda: {s.pid for s in job.live_slots()} == pids, timeout=60,
                   what="only the second cell run's two ranks live")
        assert sorted(s.rank for s in job.live_slots()) == [0, 1]
    finally:
        stop_ranks(first + list(namespace.get("procs", [])))
        if job is not None:
            job.close()
        segment.unlink(name)
        assert os.environ.get("DYNPROF_JOB") == name
