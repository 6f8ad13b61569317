"""The trigger on one node: detection latency and what the heartbeat's step-time ring costs.

    python benchmarks/trigger.py [--ranks 4] [--step-ms 10] [--slow-ms 60] [--runs 3]

Latency: real rank processes (tests/train_loop.py) at ``--step-ms``; the trigger is armed; one
rank slows to ``--slow-ms``. Reported per run: the slow rank's steps from its first slow step to
the window's first step (the fast ranks run on meanwhile: the window must start after all of
them), and milliseconds from the end of the first slow step (the rank's ring) to the moment
every rank recorded (the window's started_at on the last rank). Ring cost: one heartbeat's
work (a counter read, an entry, three medians) timed in-process, as a share of the 20 ms
heartbeat; it runs on the heartbeat thread, never in step().
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from jobutil import finish, spawn_rank, steps_at, wait_until  # noqa: E402

import dynprof_nb  # noqa: E402
from dynprof_nb.contract import segment  # noqa: E402
from dynprof_nb.contract.slot import claim_slot  # noqa: E402
from dynprof_nb.training.steptimes import StepClock  # noqa: E402


def ring_cost_us() -> float:
    seg = segment.Segment.open(f"bench-ring-{os.getpid()}")
    try:
        clock = StepClock(seg.words, claim_slot(seg, 0).ring_base, 0)
        state = {"n": 0, "t": time.monotonic_ns()}

        def beat() -> None:
            state["n"] += 2
            state["t"] += 20_000_000
            clock.observe(state["n"], state["t"])

        return min(timeit.repeat(beat, number=20000, repeat=5)) / 20000 * 1e6
    finally:
        seg.close()
        segment.unlink(seg.job)


def history_cost_us(ranges_per_step: int = 20, keep: int = 32) -> tuple[float, float]:
    """The work of one step (``ranges_per_step`` ranges and ``step()``) with no window
    recording, without and with ``history_steps=keep``: microseconds per step, min of 5."""
    from dynprof_nb.training import ranges

    costs = []
    for k in (0, keep):
        name = f"bench-hist-{os.getpid()}-{k}"
        job = dynprof_nb.attach(name, create=True)
        with tempfile.TemporaryDirectory() as tmp:
            mon = dynprof_nb.Monitor(job=name, rank=0, output_path=tmp, backend="builtin",
                                     history_steps=k or None)

            def one_step(mon: dynprof_nb.Monitor = mon) -> None:
                for _ in range(ranges_per_step):
                    with dynprof_nb.range("work"):
                        pass
                mon.step()

            try:
                costs.append(min(timeit.repeat(one_step, number=2000, repeat=5)) / 2000 * 1e6)
            finally:
                mon.close()
                ranges.set_sink(None)
                job.close()
                segment.unlink(name)
    return costs[0], costs[1]


def one_run(ranks: int, step_ms: float, slow_ms: float, out: Path) -> dict:
    name = f"bench-trig-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    out.mkdir(parents=True, exist_ok=True)
    slow = out / f"{name}.slow"
    job = dynprof_nb.attach(name, create=True)
    procs = [spawn_rank(name, r, out, step_ms=step_ms,
                        extra=["--slow-file", str(slow), "--slow-ms", str(slow_ms),
                               "--slow-steps", "20"] if r == 1 else None)
             for r in range(ranks)]
    try:
        wait_until(lambda: len(job.live_slots()) == ranks
                   and all(s.step > 40 for s in job.live_slots()), 60)
        job.trigger(slowdown=2.0, steps=8, confirm=1)
        time.sleep(0.3)
        slow.touch()
        touched = time.monotonic()
        wait_until(lambda: len(job.windows().query("status == 'complete'")) == ranks, 120)
        found = job.windows()
        times = job.step_times(last=250)
        ahead = max(steps_at(times, touched).values())
        wait_until(Path(f"{slow}.done").exists, 60)
        first_slow = int(Path(f"{slow}.done").read_text().split()[0])
        mine = times[(times["rank"] == 1) & (times.step >= first_slow)].iloc[0]
        # end_s is the monotonic clock; started_at is wall time: convert through "now"
        offset = time.time() - time.monotonic()
        started = found.started_at.max().timestamp()
        return {"steps": int(found.start.iloc[0]) - first_slow,
                "stop_after_ahead": int(found.stop.iloc[0]) - ahead,
                "ms": round((started - (mine.end_s + offset)) * 1e3, 1),
                "reason": found.reason.iloc[0]}
    finally:
        for p in procs:
            finish(p)
        job.close()
        segment.unlink(name)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--step-ms", type=float, default=10.0)
    p.add_argument("--slow-ms", type=float, default=60.0)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    cost = ring_cost_us()
    print(f"ring: {cost:.1f} us per heartbeat = {cost / 20000:.3%} of one core on the "
          "heartbeat thread (nothing in step())")
    off, on = history_cost_us()
    print(f"history_steps=32, 20 ranges a step: {off:.1f} us a step without, {on:.1f} us "
          f"with = {(on - off) / (args.step_ms * 1000):.2%} of a {args.step_ms:g} ms step")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            r = one_run(args.ranks, args.step_ms, args.slow_ms, Path(tmp) / str(i))
            print(f"run {i}: window starts {r['steps']} of the slow rank's steps after its "
                  f"first slow step, stops {r['stop_after_ahead']} after the most advanced "
                  f"rank's step at the slowdown; every rank recording {r['ms']} ms after "
                  f"that step ended "
                  f"({r['reason']})")


if __name__ == "__main__":
    main()
