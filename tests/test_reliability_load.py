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

import time

import checksum_ranks
import pytest
from jobutil import unique_job, wait_until

pytestmark = pytest.mark.timeout(240)

RANKS = 32
STEPS = 100_000


def test_32_ranks_100k_steps_under_constant_writes(tmp_path):
    job = unique_job("load")
    seq = 0
    with checksum_ranks.running(job, RANKS, tmp_path, STEPS, work_s=5e-6) as (
            control, procs):
        wait_until(lambda: len(control.live_slots()) == RANKS, timeout=90,
                   what="all ranks attached")
        start_gen = control.generation
        # write every ~3 ms until every rank has done its steps, then the final write
        while True:
            checksum_ranks.write(control, seq)
            seq += 1
            time.sleep(0.003)
            if seq % 50 == 0 and all(s.step >= STEPS for s in control.live_slots()):
                break
        checksum_ranks.write(control, seq, "final")
        writes = control.generation - start_gen
        results = checksum_ranks.results(procs, timeout=120)
    assert writes == seq + 1  # each write got its own generation: none lost in the segment
    checksum_ranks.check(results, STEPS, last_seq=seq)
    # the writes really raced the steps: every rank saw many different configs mid-run
    assert seq >= 100 and min(r["seen"] for r in results) > 20
    print(f"\n{RANKS} ranks x {STEPS} steps, {seq + 1} writes, "
          f"{sum(r['seen'] for r in results)} config changes applied")

