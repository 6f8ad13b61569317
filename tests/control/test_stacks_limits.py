"""job.stacks() says what it lacks, and never runs a handler the job put on its signal.

A real rank with 300 threads (faulthandler writes 100, newest first: the main thread, the
oldest, is the first one cut) and one thread 150 frames deep (faulthandler writes 100); then
the same rank installs its own handler for SIGRTMIN+7 after the Monitor started.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from jobutil import finish, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.control.stacks import FRAMES_CUT, MAIN_MISSING, read_side

JOB = textwrap.dedent("""
    import os, signal, sys, threading, time
    import dynprof_nb
    from dynprof_nb.contract.shared_layout import STACK_SIGNAL

    job, files, nthreads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    monitor = dynprof_nb.Monitor(job=job, rank=0, output_path=os.path.join(files, "out"))
    park = threading.Event()

    def deep(n):
        return deep(n - 1) if n else park.wait()

    threading.Thread(target=deep, args=(150,), name="deep", daemon=True).start()
    for i in range(nthreads):
        threading.Thread(target=park.wait, name=f"parked-{i}", daemon=True).start()
    print("ready", flush=True)
    installed = False
    while not os.path.exists(os.path.join(files, "stop")):
        monitor.step()
        time.sleep(0.002)
        if not installed and os.path.exists(os.path.join(files, "install")):
            def mine(signum, frame):
                open(os.path.join(files, "job-handler-ran"), "w").close()
            signal.signal(STACK_SIGNAL, mine)
            installed = True
            print("installed", flush=True)
    park.set()
    monitor.close()
""")


def side(control: dynprof_nb.Job, job: str) -> dict | None:
    """The rank's side file, as the controller reads it."""
    live = control.live_slots()
    return read_side(job, live[0]) if live else None


def recorded(control: dynprof_nb.Job, job: str, parked: int) -> bool:
    """The side file names every thread the job started (main, deep, the parked ones), and
    past 100 threads has the main thread's stack (faulthandler's dump leaves it out)."""
    rec = side(control, job)
    names = set(rec["threads"].values()) if rec else set()
    return {"MainThread", "deep", *(f"parked-{i}" for i in range(parked))} <= names and (
        parked < 100 or "main_stack" in rec)


def test_a_cut_dump_says_so_and_names_the_missing_main_thread_then_a_job_handler_is_refused(
    tmp_path,
):
    job = unique_job("cut")
    control = dynprof_nb.attach(job, create=True)
    proc = subprocess.Popen([sys.executable, "-c", JOB, job, str(tmp_path), "300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        wait_until(lambda: control.live_slots(), what="the rank", proc=proc)
        wait_until(lambda: recorded(control, job, 300), what="every thread's name recorded",
                   proc=proc)
        stacks = control.stacks()
        assert not stacks.silent, stacks.silent
        cuts = " ".join(c["what"] for c in stacks.attrs["truncated"])
        assert "stopped after 100 threads" in cuts and "more not shown" in cuts, cuts
        # faulthandler left the main thread (the oldest) out: it is there all the same, as the
        # rank recorded it (it does so every second past 100 threads), and said so
        assert "the main thread is not in the dump; its stack is the one the rank recorded" in cuts
        main = stacks[stacks.thread == "MainThread"].sort_values("depth")
        assert MAIN_MISSING not in set(main.function)
        assert main.function.iloc[0] == "<module>", main  # the job's own loop
        deep = stacks[stacks.thread == "deep"]
        if len(deep):  # the deep thread is old too: it may be among those not shown
            assert deep.sort_values("depth").function.iloc[0] == FRAMES_CUT
            assert len(deep) == 101
        text = str(stacks.tree())
        assert "cut: faulthandler stopped after 100 threads" in text
        assert "MainThread [rank 0]" in text and "not in the dump" in text

        (tmp_path / "install").touch()
        wait_until(lambda: proc.stdout.readline().strip() == "installed", what="the handler",
                   proc=proc)
        wait_until(lambda: (rec := side(control, job)) and rec["handler"] != "ok",
                   what="the rank's recorder to see the job's own handler", proc=proc)
        refused = control.stacks()
        assert len(refused) == 0 and len(refused.silent) == 1, refused.silent
        why = refused.silent[0]["why"]
        assert "installed its own handler for signal" in why and "not signalled" in why, why
        # a signal sent would run the handler before the main thread's next bytecode: once
        # the rank has stepped on, the handler has had its chance
        at = control.live_slots()[0].step
        wait_until(lambda: control.live_slots()[0].step > at + 2, what="the rank to step on",
                   proc=proc)
        assert not (tmp_path / "job-handler-ran").exists()
        assert proc.poll() is None  # the job trains on
    finally:
        (tmp_path / "stop").touch()
        finish(proc)
        control.close()
        segment.unlink(job)


def test_a_whole_dump_has_the_main_thread_and_no_cut():
    job = unique_job("whole")
    control = dynprof_nb.attach(job, create=True)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen([sys.executable, "-c", JOB, job, d, "3"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
            wait_until(lambda: control.live_slots(), what="the rank", proc=proc)
            wait_until(lambda: recorded(control, job, 3), what="every thread's name recorded",
                       proc=proc)
            stacks = control.stacks()
            cuts = [c["what"] for c in stacks.attrs.get("truncated", [])]
            assert cuts == ["1 thread cut at 100 frames (the older frames are not shown)"], cuts
            main = stacks[stacks.thread == "MainThread"].sort_values("depth")
            assert MAIN_MISSING not in set(main.function) and "<module>" in set(main.function)
            deep = stacks[stacks.thread == "deep"].sort_values("depth")
            assert deep.function.iloc[0] == FRAMES_CUT and len(deep) == 101
        finally:
            Path(d, "stop").touch()
            finish(proc)
            control.close()
            segment.unlink(job)


def test_a_main_thread_nobody_recorded_is_named_missing_not_left_out():
    """Without the rank's recorded main stack (an older rank, a side file not yet written),
    the cut main thread is one row that names it missing."""
    from dynprof_nb.control.stacks import _main_rows, dump_cuts

    text = "".join(f"Thread 0x{i:x} (most recent call first):\n  File \"x.py\", line 1 in f\n\n"
                   for i in range(1, 101)) + "...\n"
    notes, missing = dump_cuts(text, main=str(0xABC), threads=150)
    assert missing and "50 more not shown" in notes[0]
    rows = _main_rows({}, "0xabc", notes)
    assert [(r["thread"], r["function"]) for r in rows] == [("MainThread", MAIN_MISSING)]
    assert dump_cuts(text, main=None)[0][-1] == "the main thread may be among the threads not shown"
