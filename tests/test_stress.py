"""16 reader ranks x 100k steps while a writer changes the config 1,000 times.

Every config written carries its own checksum (over a payload of varying length), so a torn
read would show up as a config whose checksum does not match. Every rank must end on the last
config written (no lost update) and never see the sequence go backwards.
"""

from __future__ import annotations

import time

import checksum_ranks
from jobutil import unique_job, wait_until

READERS = 16
STEPS = 100_000
WRITES = 1_000


def test_no_torn_config_and_no_lost_update(tmp_path):
    job = unique_job("stress")
    with checksum_ranks.running(job, READERS, tmp_path, STEPS, work_s=10e-6) as (
            control, procs):
        wait_until(lambda: len(control.live_slots()) == READERS, timeout=60,
                   what="all readers attached")
        for seq in range(WRITES):
            checksum_ranks.write(control, seq, "final" if seq == WRITES - 1 else "w")
            time.sleep(0.001)
        results = checksum_ranks.results(procs, timeout=240)
    checksum_ranks.check(results, STEPS, last_seq=WRITES - 1)
    assert all(r["seen"] >= 1 for r in results)
    # the readers really did see many different configs while stepping
    assert sum(r["seen"] for r in results) > READERS * 10
