"""What profiling costs the training loop, as ratios measured in one run (issue 19).

For the built-in and the torch backends:

* idle ``step()`` against an empty method call;
* starting and stopping a window: the training thread's cost of the step that reads the
  request (decodes and checks the command), the one that starts the window and the one that
  stops it, median and p99 over many windows, with the profiler's own start/stop (torch's)
  counted apart;
* 1k / 5k / 20k-step windows (one range per step): how long the save takes, the ratio of
  each to the 1k one, how long ``close()`` takes right after the stop, and the training
  throughput while the save runs against the throughput before the window;
* a ``with_stack`` window of 1e9 steps against its memory budget: RSS growth / budget, and
  the reason it was saved with.

    python benchmarks/training_cost.py [--backends builtin,torch] [--sizes 1000,5000,20000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import dynprof_nb
from dynprof_nb.contract import segment, window_dirs


class Empty:
    def step(self) -> None:
        pass


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def make_work(backend: str) -> Any:
    """One training step's worth of work (~50 µs), inside a user range."""
    if backend == "torch":
        import torch

        x = torch.ones(16, 16)

        def work() -> None:
            with dynprof_nb.range("work"):
                for _ in range(4):
                    torch.mm(x, x)
    else:
        def work() -> None:
            with dynprof_nb.range("work"):
                sum(range(300))
    return work


class Rank:
    """A Monitor, its controller, and a loop that steps it."""

    def __init__(self, backend: str, out: str, **budgets: Any) -> None:
        self.job = f"bench-cost-{backend}-{os.getpid()}-{time.monotonic_ns() % 10**6}"
        self.control = dynprof_nb.attach(self.job, create=True)
        self.monitor = dynprof_nb.Monitor(job=self.job, output_path=out, backend=backend,
                                          max_windows_per_minute=10**6, **budgets)
        self.work = make_work(backend)

    def steps(self, n: int) -> float:
        """Run n steps; seconds taken."""
        work, step = self.work, self.monitor.step
        t0 = time.perf_counter()
        for _ in range(n):
            work()
            step()
        return time.perf_counter() - t0

    def ask(self, first: int, last: int, **options: Any) -> None:
        """Ask for a window and step until the rank has read it (armed)."""
        self.control.start(first, last, **options)
        self.steps(1)

    def close(self) -> None:
        self.monitor.close()
        segment.unlink(self.job)


def start_stop_cost(rank: Rank, windows_n: int) -> dict[str, float]:
    """Per window of 2 steps: the training thread's time in the step() that starts it and
    the one that stops it (minus the profiler's own start/stop)."""
    starts, stops, prof, reads = [], [], [], []
    m = rank.monitor
    for _ in range(windows_n):
        now = m.step_count
        rank.control.start(now + 3, now + 4)
        t0 = time.perf_counter()
        m.step()  # the rank reads and checks the request
        reads.append(time.perf_counter() - t0)
        while m.step_count < now + 1:
            rank.steps(1)
        t0 = time.perf_counter()
        m.step()  # end of step now+2: the window starts
        starts.append(time.perf_counter() - t0 - m.timings.get("profiler_start_s", 0.0))
        prof.append(m.timings.get("profiler_start_s", 0.0) + 0.0)
        m.step()
        t0 = time.perf_counter()
        m.step()  # end of step now+4: the window stops
        stop = time.perf_counter() - t0
        stops.append(stop - m.timings.get("profiler_stop_s", 0.0))
        prof[-1] += m.timings.get("profiler_stop_s", 0.0)
        m.wait_saved()
    q = statistics.quantiles
    return {"start_median_us": statistics.median(starts) * 1e6,
            "start_p99_us": q(starts, n=100)[98] * 1e6,
            "stop_median_us": statistics.median(stops) * 1e6,
            "stop_p99_us": q(stops, n=100)[98] * 1e6,
            "read_median_us": statistics.median(reads) * 1e6,
            "read_p99_us": q(reads, n=100)[98] * 1e6,
            "profiler_start_stop_median_us": statistics.median(prof) * 1e6,
            "profiler_start_stop_p99_us": q(prof, n=100)[98] * 1e6}


def save_cost(rank: Rank, length: int) -> dict[str, float]:
    """Record a window of ``length`` steps, then measure its save."""
    m = rank.monitor
    before = 2000 / rank.steps(2000)  # steps/s, no window
    now = m.step_count
    rank.ask(now + 3, now + 2 + length)
    while m.step_count < now + 1 + length:
        rank.steps(1)
    t0 = time.perf_counter()
    rank.steps(1)  # the last step of the window: the save begins
    steps_during, t_during = 0, 0.0
    while not m.wait_saved(0):
        t_during += rank.steps(50)
        steps_during += 50
    saved = time.perf_counter() - t0
    during = steps_during / t_during if t_during else before
    return {"save_s": saved, "throughput_ratio": during / before,
            "steps_during_save": steps_during}


def close_after_stop(backend: str, length: int) -> float:
    """Seconds close() takes right after a ``length``-step window ends."""
    with tempfile.TemporaryDirectory() as out:
        rank = Rank(backend, out)
        now = rank.monitor.step_count
        rank.ask(now + 3, now + 2 + length)
        rank.steps(length + 2)
        t0 = time.perf_counter()
        rank.close()
        took = time.perf_counter() - t0
        for pid in rank.monitor.handed_off:  # let writers finish before the directory goes
            while os.path.exists(f"/proc/{pid}"):
                time.sleep(0.05)
        return took


def stack_window_memory(backend: str, budget_mb: float, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        rank = Rank(backend, out, memory_budget_mb=budget_mb)
        m = rank.monitor
        rank.ask(m.step_count + 2, m.step_count + 10**9, with_stack=True)
        base = rss_bytes()
        peak, t0 = base, time.monotonic()
        while m.state == "recording" or m.step_count < 3:
            rank.steps(10)
            peak = max(peak, rss_bytes())
            if time.monotonic() - t0 > seconds:
                break
        ended_by_budget = m.state != "recording"
        m.wait_saved()
        found = window_dirs.find_windows([Path(out)], rank.job)
        reason = (window_dirs.read_manifest(found[-1]["path"]) or {}).get("stop_reason") if found \
            else None
        rank.close()
        return {"rss_growth_over_budget": (peak - base) / (budget_mb * 2**20),
                "ended_by_budget": ended_by_budget, "reason": reason}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backends", default="builtin,torch")
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--flips", type=int, default=200)
    parser.add_argument("--budget-mb", type=float, default=64)
    parser.add_argument("--only-start-stop", action="store_true",
                        help="idle step and window start/stop only (no saves, no memory)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    for backend in args.backends.split(","):
        print(f"== backend {backend}")
        with tempfile.TemporaryDirectory() as out:
            rank = Rank(backend, out)
            env = {"monitor": rank.monitor, "empty": Empty()}
            empty = idle = 1.0
            for _ in range(7):  # interleaved, so machine noise hits both alike
                empty = min(empty, timeit.timeit("empty.step()", globals=env, number=200_000))
                idle = min(idle, timeit.timeit("monitor.step()", globals=env, number=200_000))
            print(f"idle step / empty call          : {idle / empty:6.2f}x "
                  f"({idle / 2e5 * 1e9:.0f} ns vs {empty / 2e5 * 1e9:.0f} ns)")
            cost = start_stop_cost(rank, args.flips)
            print("window start, training thread  : median {start_median_us:.0f} µs, "
                  "p99 {start_p99_us:.0f} µs".format(**cost))
            print("window stop, training thread   : median {stop_median_us:.0f} µs, "
                  "p99 {stop_p99_us:.0f} µs".format(**cost))
            print("request read, training thread  : median {read_median_us:.0f} µs, "
                  "p99 {read_p99_us:.0f} µs".format(**cost))
            print("profiler's own start+stop      : median "
                  "{profiler_start_stop_median_us:.0f} µs, p99 "
                  "{profiler_start_stop_p99_us:.0f} µs".format(**cost))
            first = None
            for length in [] if args.only_start_stop else sizes:
                got = save_cost(rank, length)
                first = first or got["save_s"]
                print(f"{length:>6}-step window: save {got['save_s']:6.2f} s "
                      f"({got['save_s'] / first:5.2f}x the {sizes[0]}-step one), throughput "
                      f"during the save {got['throughput_ratio']:.1%} of before "
                      f"({got['steps_during_save']} steps), {rank.monitor.timings}")
            rank.close()
        if args.only_start_stop:
            continue
        took = close_after_stop(backend, sizes[-1])
        print(f"close() right after a {sizes[-1]}-step window: {took:.2f} s")
        mem = stack_window_memory(backend, args.budget_mb, 60)
        print(f"with_stack window, budget {args.budget_mb:.0f} MB: RSS growth "
              f"{mem['rss_growth_over_budget']:.2f}x the budget, ended by budget: "
              f"{mem['ended_by_budget']}, reason: {mem['reason']}")


if __name__ == "__main__":
    main()
