"""Step times are every step's own, at any step length, against the loop's own clock.

A loop reads ``time.monotonic_ns()`` just before and just after each ``monitor.step()``;
``job.step_times()`` must give one row per step whose duration is that loop's, within 2% (of
the span the two readings leave open: a preemption between a read and the step widens it), at
1 to 100 ms steps.
Both clocks are read in this process, so machine load moves both alike.
"""

from __future__ import annotations

import time

import pytest
from jobutil import unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment

# (step length in ms, steps run at it): ~4 s in all
LENGTHS = [(1, 150), (4, 60), (9, 40), (13, 40), (19, 30), (25, 30), (100, 12)]


@pytest.fixture
def job(tmp_path):
    name = unique_job("exact")
    control = dynprof_nb.attach(name, create=True)
    monitor = dynprof_nb.Monitor(job=name, rank=0, output_path=tmp_path, backend="builtin")
    yield control, monitor
    monitor.close()
    control.close()
    segment.unlink(name)


def _run(monitor: dynprof_nb.Monitor, ms: float, n: int, around: dict | None = None) -> dict:
    """``n`` steps of about ``ms`` each; the loop's own end time of each step (read right
    after ``step()``), and in ``around`` the clock just before and just after each call: the
    step's true end lies between the two, whatever the scheduler did between the reads."""
    ends = {}
    for _ in range(n):
        time.sleep(ms / 1000)
        before = time.monotonic_ns()
        monitor.step()
        ends[monitor.step_count] = after = time.monotonic_ns()
        if around is not None:
            around[monitor.step_count] = (before, after)
    return ends


def _error(duration_ns: float, around: dict, s: int) -> float:
    """How far a recorded duration is outside what the loop's clock allows for step ``s``
    (from within the previous call's bracket to within this one's), relative to the step."""
    (b0, a0), (b1, a1) = around[s - 1], around[s]
    lo, hi, nominal = b1 - a0, a1 - b0, a1 - a0
    return max(lo - duration_ns, duration_ns - hi, 0) / nominal


def test_every_step_is_its_own_row_within_2_percent_at_each_length(job) -> None:
    control, monitor = job
    _run(monitor, 5, 5)  # the first step is counted from Monitor() (an "interval")
    report = []
    for ms, n in LENGTHS:
        around: dict[int, tuple[int, int]] = {}
        ends = _run(monitor, ms, n, around)
        last = max(ends)
        wait_until(lambda last=last: (control.step_times(last=250).step >= last).any(),
                   timeout=10, what=f"step {last} in the ring")
        rows = control.step_times(last=250).set_index("step")
        steps = sorted(ends)[1:]  # each one's duration needs the previous end too
        missing = [s for s in steps if s not in rows.index]
        assert not missing, (ms, missing[:10])
        assert (rows.loc[steps, "kind"] == "step").all(), rows.loc[steps].to_string()
        errors = [_error(rows.loc[s, "duration_s"] * 1e9, around, s) for s in steps]
        worst = max(errors)
        report.append((ms, len(steps), round(worst * 100, 3)))
        assert worst < 0.02, (ms, worst, report)
        # step_s: the median of the recent steps, as the loop measured them
        recent = sorted(ends[s] - ends[s - 1] for s in steps[-9:])
        step_s = control.status().step_s.iloc[0]
        assert step_s == pytest.approx(recent[4] / 1e9, rel=0.02), (ms, step_s, recent)
    print("length ms, steps, worst error %:", report)


def test_steps_too_fast_to_time_are_a_stated_aggregate(job) -> None:
    """Under half a millisecond a step is not timed (the idle bound): a heartbeat's entry is
    the mean of the steps it saw end, kind "interval", and that mean is the loop's."""
    control, monitor = job
    # a Monitor starts timed, and the heartbeat's first look at a loop this fast untimes it
    # (a beat can come late on a loaded machine)
    t0 = time.monotonic_ns()
    while monitor._state.exact_from is not None and time.monotonic_ns() - t0 < 20e9:
        monitor.step()
    t0 = time.monotonic_ns()
    first = monitor.step_count
    while time.monotonic_ns() - t0 < 0.3e9:
        monitor.step()
    mean_ns = (time.monotonic_ns() - t0) / (monitor.step_count - first)
    assert monitor._state.exact_from is None, "a loop this fast runs the untimed step()"
    assert type(monitor).step is dynprof_nb.Monitor.step
    wait_until(lambda: len(control.step_times(last=250)) > 3, timeout=10, what="entries")
    rows = control.step_times(last=250)
    fast = rows[rows.step > first + 1000]
    assert len(fast) and (fast.kind == "interval").all(), rows.to_string()
    assert fast.duration_s.median() * 1e9 < 5 * mean_ns + 1000
