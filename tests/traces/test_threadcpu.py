"""The training thread's CPU record (``thread_cpu.json``): what a backend writes, read back per
rank by ``w.thread_cpu()``, and what a damaged or foreign file gives: a row that says why it
has no numbers, never an exception nor a number that cannot exist."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

import dynprof_nb
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.protocol import THREAD_CPU_FILE
from dynprof_nb.traces.formats.common.threadcpu import MAX_BYTES, read_file
from dynprof_nb.training.backends.builtin import BuiltinBackend
from dynprof_nb.training.threadcpu import ThreadCpu, read_schedstat

linux = pytest.mark.skipif(not Path("/proc/thread-self/schedstat").exists(), reason="Linux only")


def spin(seconds: float) -> None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        pass


@linux
def test_a_backend_writes_the_training_threads_time_over_its_steps(tmp_path: Path) -> None:
    b = BuiltinBackend()
    b.start(tmp_path, ProfilerConfig().update(start_step=3, stop_step=5), 3)
    for step in (3, 4, 5):
        spin(0.02)  # on a CPU: at least 20 ms of wall time each, most of it running
        time.sleep(0.001)  # the step blocks once (I/O, a collective): the thread runs again
        b.step(step)  # after it, so timeslices counts one per step at least
    b.stop()
    assert THREAD_CPU_FILE in b.save()
    w = dynprof_nb.load_window(str(tmp_path))
    (row,) = w.thread_cpu().to_dict("records")
    assert row["missing"] is None and row["rank"] == 0 and row["steps"] == 3, row
    assert row["wall_ns"] >= 60e6 and row["on_cpu_ns"] > 0 and row["timeslices"] >= 3, row
    # the kernel accounts running time at ticks: within one of the wall time
    assert row["on_cpu_ns"] + row["runqueue_ns"] <= row["wall_ns"] + 10e6, row
    assert row["on_cpu_us_per_step"] == pytest.approx(row["on_cpu_ns"] / 3000)


@linux
def test_it_is_the_training_threads_even_when_another_thread_stops_it() -> None:
    """The stop may come from elsewhere (a Monitor closing): the reading is still the thread
    that started the window, which here slept: no on-CPU time of the thread that spun."""
    rec = ThreadCpu()
    started = threading.Event()
    done = threading.Event()

    def training() -> None:
        rec.start(1)
        started.set()
        done.wait(10)

    t = threading.Thread(target=training)
    t.start()
    assert started.wait(10)
    spin(0.05)  # this thread runs; the training thread sleeps
    rec.stop(1)
    done.set()
    t.join()
    r = rec.record()
    assert r["missing"] is None and r["on_cpu_ns"] < 20e6 and r["wall_ns"] >= 50e6, r


def test_where_the_kernel_does_not_say_the_record_says_why(tmp_path: Path) -> None:
    assert read_schedstat(2**31 - 1) is None  # no such thread
    rec = ThreadCpu()
    rec.start(1)
    rec.tid = 2**31 - 1  # the thread is gone by the stop
    rec.stop(4)
    rec.write(tmp_path)
    doc = json.loads((tmp_path / THREAD_CPU_FILE).read_text())
    assert doc["missing"].startswith("no /proc/thread-self/schedstat") and "on_cpu_ns" not in doc
    assert read_file(tmp_path / THREAD_CPU_FILE) == {"missing": doc["missing"]}
    assert ThreadCpu().record()["missing"].startswith("the window was not stopped")


GOOD = {"steps": 2, "wall_ns": 10, "on_cpu_ns": 4, "runqueue_ns": 2, "timeslices": 1}


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "is not valid JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (json.dumps({**GOOD, "runqueue_ns": -5}).encode(), "negative"),
        (json.dumps({**GOOD, "on_cpu_ns": "4"}).encode(), "lacks its counters"),
        (json.dumps({**GOOD, "steps": 0}).encode(), "covers no step"),
        (b" " * (MAX_BYTES + 1), "over 64 KiB"),
    ],
)
def test_a_damaged_file_gives_a_row_that_says_why(tmp_path: Path, content: bytes, why: str):
    p = tmp_path / THREAD_CPU_FILE
    p.write_bytes(content)
    got = read_file(p)
    assert list(got) == ["missing"] and why in got["missing"], got


def test_a_good_file_gives_its_numbers_per_step(tmp_path: Path) -> None:
    p = tmp_path / THREAD_CPU_FILE
    p.write_text(json.dumps(GOOD))
    got = read_file(p)
    assert got["missing"] is None and got["runqueue_us_per_step"] == pytest.approx(0.001)
    assert read_file(None)["missing"].startswith("no thread_cpu.json in the window")


@linux
def test_a_record_that_leads_out_of_the_window_is_never_read(tmp_path: Path) -> None:
    """A thread_cpu.json that is a symlink to a file elsewhere (another window's, another
    user's) is not this window's record: the rank's row says there is none."""
    win = tmp_path / "win"
    win.mkdir()
    b = BuiltinBackend()
    b.start(win, ProfilerConfig().update(start_step=1, stop_step=1), 1)
    b.step(1)
    b.stop()
    b.save()
    elsewhere = tmp_path / "elsewhere.json"
    (win / THREAD_CPU_FILE).rename(elsewhere)
    (win / THREAD_CPU_FILE).symlink_to(elsewhere)
    with pytest.warns(UserWarning, match=r"lead out of the window \(thread_cpu.json\)"):
        w = dynprof_nb.load_window(str(win))
    (row,) = w.thread_cpu().to_dict("records")
    assert row["missing"].startswith("no thread_cpu.json in the window"), row


@linux
def test_a_whole_process_record_counts_the_threads_that_do_the_work() -> None:
    """MindSpore runs its operators on threads of its own while the training thread waits for
    them: its backend's record (``whole_process``) sums every thread of the process, so the
    work another thread does in the window is in it, and the file says whose it is."""
    rec, alone = ThreadCpu(whole_process=True), ThreadCpu()
    rec.start(1)
    alone.start(1)
    done, stopped = threading.Event(), threading.Event()

    def work() -> None:  # 50 ms on a CPU (however loaded the machine), alive until the stop
        while time.thread_time() < 0.05:
            pass
        done.set()
        stopped.wait(30)

    worker = threading.Thread(target=work)  # begun in the window: counted from 0
    worker.start()
    assert done.wait(60)
    rec.stop(1)
    alone.stop(1)
    stopped.set()
    worker.join()
    r, a = rec.record(), alone.record()
    assert r["missing"] is None and r["threads"] == "process" and a["threads"] == "training"
    assert r["on_cpu_ns"] >= a["on_cpu_ns"] + 40e6, (r, a)  # the worker's 50 ms, not a's
