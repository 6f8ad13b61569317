"""16 reader ranks x 100k steps while a writer changes the config 1,000 times.

Every config written carries its own checksum (over a payload of varying length), so a torn
read would show up as a config whose checksum does not match. Every rank must end on the last
config written (no lost update) and never see the sequence go backwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import zlib

from jobutil import unique_job, wait_until

import dynprof_nb
from dynprof_nb import segment

READERS = 16
STEPS = 100_000
WRITES = 1_000

READER = textwrap.dedent("""
    import json, sys, time, zlib
    import dynprof_nb
    job, rank, out, steps, writes = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    m = dynprof_nb.Monitor(job=job, rank=rank, output_path=out, backend="builtin")
    seen, bad, backwards, last_seq, cfg = 0, 0, 0, -1, None

    def check():
        global seen, bad, backwards, last_seq, cfg
        cfg = m.config
        if cfg.prof_path == "./":
            return
        _, seq, crc = cfg.prof_path.split("/")
        payload = ",".join(cfg.mstx_domain_include)
        if zlib.crc32(f"{seq}:{payload}".encode()) != int(crc):
            bad += 1
        if int(seq) < last_seq:
            backwards += 1
        last_seq = int(seq); seen += 1

    deadline = time.monotonic() + 120
    n = 0
    while n < steps or (last_seq < writes - 1 and time.monotonic() < deadline):
        end = time.perf_counter() + 10e-6
        while time.perf_counter() < end:
            pass
        m.step(); n += 1
        if m.config is not cfg:
            check()
    print(json.dumps({"rank": rank, "steps": n, "seen": seen, "bad": bad,
                      "backwards": backwards, "last": last_seq, "error": m.last_error}))
    m.close()
""")


def test_no_torn_config_and_no_lost_update(tmp_path):
    job = unique_job("stress")
    control = dynprof_nb.attach(job)
    procs = [subprocess.Popen([sys.executable, "-c", READER, job, str(r), str(tmp_path),
                               str(STEPS), str(WRITES)], stdout=subprocess.PIPE, text=True)
             for r in range(READERS)]
    try:
        wait_until(lambda: len(control.live_slots()) == READERS, timeout=60,
                   what="all readers attached")
        for seq in range(WRITES):
            payload = [f"d{seq}-{i}" * (1 + (seq * 7 + i) % 11) for i in range(seq % 17)]
            crc = zlib.crc32(f"{seq}:{','.join(payload)}".encode())
            control.set(prof_path=f"x/{seq}/{crc}", mstx_domain_include=payload)
            time.sleep(0.001)
        results = [json.loads(p.communicate(timeout=240)[0]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        control.close()
        segment.unlink(job)
    for r in results:
        assert r["steps"] >= STEPS
        assert r["bad"] == 0, f"rank {r['rank']} saw a torn config"
        assert r["backwards"] == 0, f"rank {r['rank']} saw the sequence go backwards"
        assert r["last"] == WRITES - 1, f"rank {r['rank']} missed the last update: {r}"
        assert r["seen"] >= 1 and r["error"] == ""
    # the readers really did see many different configs while stepping
    assert sum(r["seen"] for r in results) > READERS * 10
