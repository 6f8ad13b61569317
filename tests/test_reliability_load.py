"""Reliability matrix, load: 32 ranks on one segment, 100k steps each, while a controller changes
the config every few milliseconds for the whole run. See docs/reliability.md.

This is ``test_stress.py`` (16 ranks, a fixed 1,000 writes) at twice the ranks and with writes
that never stop until every rank is done, so reads race writes from the first step to the last.
Every config written carries a checksum of its own varying-length payload: a torn read shows
as a mismatch. The last write is marked ``final``; each rank must end on it (no lost update)
and never see the sequence go backwards. The idle-step cost under this load is measured by
``benchmarks/contention.py`` (a ratio in one run), not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import zlib

import pytest
from jobutil import unique_job, wait_until

import dynprof_nb
from dynprof_nb import segment

pytestmark = pytest.mark.timeout(240)

RANKS = 32
STEPS = 100_000

RANK = textwrap.dedent("""
    import json, sys, time, zlib
    import dynprof_nb
    job, rank, out, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    m = dynprof_nb.Monitor(job=job, rank=rank, output_path=out, backend="builtin")
    seen = bad = backwards = 0
    last_seq, final, cfg = -1, False, None
    deadline = time.monotonic() + 200
    n = 0
    while (n < steps or not final) and time.monotonic() < deadline:
        end = time.perf_counter() + 5e-6  # a token of work per step
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


def _write(control: dynprof_nb.Job, seq: int, tag: str = "w") -> None:
    payload = [f"d{seq}-{i}" * (1 + (seq * 7 + i) % 11) for i in range(seq % 17)]
    crc = zlib.crc32(f"{seq}:{','.join(payload)}".encode())
    control.set(prof_path=f"x/{seq}/{crc}/{tag}", mstx_domain_include=payload)


def test_32_ranks_100k_steps_under_constant_writes(tmp_path):
    job = unique_job("load")
    control = dynprof_nb.attach(job)
    procs = [subprocess.Popen([sys.executable, "-c", RANK, job, str(r), str(tmp_path),
                               str(STEPS)], stdout=subprocess.PIPE, text=True)
             for r in range(RANKS)]
    seq = 0
    try:
        wait_until(lambda: len(control.live_slots()) == RANKS, timeout=90,
                   what="all ranks attached")
        start_gen = control.generation
        # write every ~3 ms until every rank has done its steps, then the final write
        while True:
            _write(control, seq)
            seq += 1
            time.sleep(0.003)
            if seq % 50 == 0 and all(s.step >= STEPS for s in control.live_slots()):
                break
        _write(control, seq, "final")
        writes = control.generation - start_gen
        results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        control.close()
        segment.unlink(job)
    assert writes == seq + 1  # each write got its own generation: none lost in the segment
    for r in results:
        assert r["steps"] >= STEPS
        assert r["bad"] == 0, f"rank {r['rank']} saw a torn config: {r}"
        assert r["backwards"] == 0, f"rank {r['rank']} saw the sequence go backwards: {r}"
        assert r["final"] and r["last"] == seq, f"rank {r['rank']} missed the last write: {r}"
        assert r["error"] == ""
    # the writes really raced the steps: every rank saw many different configs mid-run
    assert seq > 100 and min(r["seen"] for r in results) > 20
    print(f"\n{RANKS} ranks x {STEPS} steps, {seq + 1} writes, "
          f"{sum(r['seen'] for r in results)} config changes applied")

