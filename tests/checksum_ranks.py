"""Rank processes that check every config they apply, for the load tests.

Each config a test writes carries a CRC of its own varying-length payload in ``prof_path``
(``x/<seq>/<crc>/<tag>``), so a torn read shows as a mismatch, and a sequence number, so a
rank can tell it went backwards or missed the last write (tagged ``final``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dynprof_nb
from dynprof_nb.contract import segment

RANK = textwrap.dedent("""
    import json, sys, time, zlib
    import dynprof_nb
    job, rank, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    steps, work_s = int(sys.argv[4]), float(sys.argv[5])
    m = dynprof_nb.Monitor(job=job, rank=rank, output_path=out, backend="builtin")
    seen = bad = backwards = 0
    last_seq, final, cfg = -1, False, None
    deadline = time.monotonic() + 200
    n = 0
    while (n < steps or not final) and time.monotonic() < deadline:
        end = time.perf_counter() + work_s  # a token of work per step
        while time.perf_counter() < end:
            pass
        m.step(); n += 1
        if m.config is not cfg:
            cfg = m.config
            if cfg.prof_path == "./":
                continue
            _, seq, crc, tag = cfg.prof_path.split("/")
            payload = ",".join(cfg.mstx_domain_include)
            bad += zlib.crc32(f"{seq}:{payload}".encode()) != int(crc)
            backwards += int(seq) < last_seq
            last_seq, final, seen = int(seq), tag == "final", seen + 1
    print(json.dumps({"rank": rank, "steps": n, "seen": seen, "bad": bad,
                      "backwards": backwards, "last": last_seq, "final": final,
                      "error": m.last_error}))
    m.close()
""")


@contextmanager
def running(job: str, ranks: int, out: Path, steps: int, work_s: float
                  ) -> Iterator[tuple[dynprof_nb.Job, list[subprocess.Popen]]]:
    """The job's controller and ``ranks`` processes that each step ``steps`` times and then
    until the final write; on exit the ranks still running are killed and the job removed."""
    control = dynprof_nb.attach(job, create=True)
    procs = [subprocess.Popen([sys.executable, "-c", RANK, job, str(r), str(out), str(steps),
                               str(work_s)], stdout=subprocess.PIPE, text=True)
             for r in range(ranks)]
    try:
        yield control, procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        control.close()
        segment.unlink(job)


def write(control: dynprof_nb.Job, seq: int, tag: str = "w") -> None:
    """Write config number ``seq`` with its checksum (``tag="final"`` for the last one)."""
    payload = [f"d{seq}-{i}" * (1 + (seq * 7 + i) % 11) for i in range(seq % 17)]
    crc = zlib.crc32(f"{seq}:{','.join(payload)}".encode())
    control.set(prof_path=f"x/{seq}/{crc}/{tag}", mstx_domain_include=payload)


def results(procs: list[subprocess.Popen], timeout: float) -> list[dict[str, Any]]:
    return [json.loads(p.communicate(timeout=timeout)[0]) for p in procs]


def check(found: list[dict[str, Any]], steps: int, last_seq: int) -> None:
    """No torn read, no going back, every rank on the final write, no report in its slot."""
    for r in found:
        assert r["steps"] >= steps
        assert r["bad"] == 0, f"rank {r['rank']} saw a torn config: {r}"
        assert r["backwards"] == 0, f"rank {r['rank']} saw the sequence go backwards: {r}"
        assert r["final"] and r["last"] == last_seq, f"rank {r['rank']} missed the last write: {r}"
        assert r["error"] == ""
