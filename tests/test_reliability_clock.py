"""Reliability matrix, clocks: a rank whose wall clock is stepped by an hour mid-run (NTP, an
operator, a VM resumed) under Debian's libfaketime. Rates, heartbeats and waits are on the
monotonic clock, so the rank's published step rate, the status's heartbeat ages and a window
asked ``+200`` steps ahead stay what they are on the real clock. See docs/reliability.md.

libfaketime is told to leave ``CLOCK_MONOTONIC`` alone (a real clock step does not move it
either). Its ``clock_nanosleep`` then fails with EINVAL, so the training loop here does a
step of work that reads no clock instead of sleeping; it rereads its clock file every second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from jobutil import finish, trace_steps, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment

pytestmark = pytest.mark.timeout(180)

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

RANK = textwrap.dedent("""
    import sys, time, dynprof_nb
    m = dynprof_nb.Monitor(job=sys.argv[1], rank=0, output_path=sys.argv[2], backend="builtin")
    print(f"wall={time.time():.0f}", flush=True)
    while True:
        for _ in range(20000):  # a step of work that reads no clock
            pass
        m.step()
        if m.step_count % 100 == 0:
            print(f"wall={time.time():.0f}", flush=True)
""")


@pytest.fixture(autouse=True)
def _no_faketime_files_left():
    """libfaketime keeps a shared-memory clock per process (/dev/shm/faketime_shm_<pid> and
    its semaphore) and removes it at a clean exit only: a rank these tests end with a signal
    left both behind. Whatever of them a test made is removed after it."""
    shm = Path("/dev/shm")
    before = set(shm.glob("*faketime_s*"))
    yield
    for left in set(shm.glob("*faketime_s*")) - before:
        left.unlink(missing_ok=True)


def _rank_under_faketime(job: str, out: Path, clock: Path) -> subprocess.Popen:
    assert os.path.exists(LIBFAKETIME), "libfaketime is missing: apt-get install faketime"
    env = {**os.environ, "LD_PRELOAD": LIBFAKETIME, "FAKETIME_TIMESTAMP_FILE": str(clock),
           "FAKETIME_CACHE_DURATION": "1", "DONT_FAKE_MONOTONIC": "1",
           "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    return subprocess.Popen([sys.executable, "-c", RANK, job, str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _rates(control: dynprof_nb.Job, seconds: float = 1.0) -> tuple[float, float]:
    """(steps per second as this process sees them on the real clock, the mean of the rates
    the rank published meanwhile)."""
    first, t0 = control.live_slots()[0].step, time.monotonic()
    published = []
    while time.monotonic() - t0 < seconds:
        time.sleep(0.1)
        published.append(control.live_slots()[0].rate_milli / 1000)
    true = (control.live_slots()[0].step - first) / (time.monotonic() - t0)
    return true, sum(published) / len(published)


@pytest.mark.parametrize("jump", ["-1h", "+1h"])
def test_a_rank_whose_wall_clock_jumps_keeps_true_rates_and_windows(tmp_path, jump):
    job = unique_job("clock")
    clock = tmp_path / "faketime"
    clock.write_text("+0\n")
    control = dynprof_nb.attach(job, create=True)
    rank = _rank_under_faketime(job, tmp_path / "out", clock)
    started = time.monotonic()
    try:
        wait_until(lambda: control.live_slots() and control.live_slots()[0].step > 200,
                   what="the rank stepping", proc=rank)
        before = float(rank.stdout.readline().split("=")[1])
        clock.write_text(f"{jump}\n")
        wall = None
        while wall is None or abs(wall - before) < 1800:  # the rank's clock has jumped
            wall = float(rank.stdout.readline().split("=")[1])
        true_rate, published = _rates(control)
        # the bug published 1e10 steps/s; a shared machine's noise is well within 10x
        assert true_rate / 10 < published < true_rate * 10, (published, true_rate)
        age = control.status().iloc[0]["heartbeat_age_s"]
        assert 0 <= age <= time.monotonic() - started, control.status()
        now = control.live_slots()[0].step
        control.start("+200", "+210")
        first, last = control.config.start_step, control.config.stop_step
        # +200 from where the rank is: at most a few seconds of steps beyond it
        assert now + 200 <= first <= now + 200 + 5 * true_rate, (now, first, true_rate)
        control.wait(timeout=120, progress=False)
        found = control.windows()
        assert list(found.status) == ["complete"], control.status()
        assert trace_steps(found.path.iloc[0]) == list(range(first, last + 1))
    finally:
        finish(rank)
        control.close()
        segment.unlink(job)
