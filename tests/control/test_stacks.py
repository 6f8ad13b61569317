"""job.stacks() on real processes: a real 2-rank DDP job (gloo, torchrun) hung in its all-reduce,
a rank stuck in C code holding the GIL, a process without the handler (never killed)."""

from __future__ import annotations

import faulthandler
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from jobutil import finish, unique_job, wait_until

import dynprof_nb
from dynprof_nb.analysis.stacks import StackFrame
from dynprof_nb.contract import segment
from dynprof_nb.control.job import Job
from dynprof_nb.control.stacks import DUMP_TIMEOUT_S, last_stacks_path, parse_dump

REPO = Path(__file__).resolve().parents[2]
DDP_JOB = REPO / "tests" / "ddp_hang_job.py"
HANG_STEP = 10


def child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main_thread(stacks: StackFrame, rank: int) -> list[str]:
    """The functions of ``rank``'s main thread, outermost first."""
    rows = stacks[(stacks["rank"] == rank) & (stacks.thread == "MainThread")]
    return list(rows.sort_values("depth").function)


def test_parse_dump_reads_faulthandlers_own_output(tmp_path):
    """The parser against faulthandler's real text (this process, two threads)."""
    ready, done = threading.Event(), threading.Event()

    def parked_worker() -> None:
        ready.set()
        done.wait()

    worker = threading.Thread(target=parked_worker, name="parked")
    worker.start()
    ready.wait()
    try:
        with open(tmp_path / "dump", "w+") as fh:
            faulthandler.dump_traceback(fh, all_threads=True)
            fh.seek(0)
            text = fh.read()
    finally:
        done.set()
        worker.join()
    rows = parse_dump(text, {str(worker.ident): "parked",
                             str(threading.main_thread().ident): "MainThread"})
    threads = {r["thread"] for r in rows}
    assert {"parked", "MainThread"} <= threads
    parked = [r for r in rows if r["thread"] == "parked"]
    assert parked[0]["depth"] == 0 and parked[0]["function"] == "_bootstrap"  # outermost first
    assert "parked_worker" in [r["function"] for r in parked]
    main = [r for r in rows if r["thread"] == "MainThread"]
    assert main[-1]["function"] == "test_parse_dump_reads_faulthandlers_own_output"
    assert main[-1]["file"] == __file__ and isinstance(main[-1]["line"], int)


@pytest.fixture
def ddp_job(tmp_path):
    """torchrun, 2 ranks, gloo; rank 1 hangs before its backward at step HANG_STEP until the
    test removes ``proc.hold`` (240 s at most: the bound on a test that dies first)."""
    name = unique_job("ddp")
    hold = tmp_path / "rank1.hold"
    hold.touch()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(DDP_JOB),
           "--job", name, "--out", str(tmp_path), "--steps", "30", "--hang-step",
           str(HANG_STEP), "--hang-s", "240", "--hold", str(hold)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=child_env(), start_new_session=True)
    proc.hold = hold
    job = Job.open(name)
    try:
        yield job, proc
    finally:
        hold.unlink(missing_ok=True)
        out, _ = finish(proc, timeout=60)
        job.close()
        segment.unlink(name)
        last_stacks_path(name).unlink(missing_ok=True)  # the stall's stacks, kept for a user


def test_ddp_hang_stacks_name_each_rank_and_training_resumes(ddp_job):
    job, proc = ddp_job

    def at_the_hang():
        live = job.live_slots()
        return len(live) == 2 and all(s.step == HANG_STEP - 1 for s in live)

    wait_until(at_the_hang, 120, "both DDP ranks to reach the hang", proc)
    job.hang_min_s = 1000.0  # far from the threshold: no stall named
    assert not job.status().error.str.contains("stalled").any()

    def both_in_place():  # rank 0 waits in its backward pass's all-reduce, rank 1 in the hang
        t0 = time.monotonic()
        taken = job.stacks()
        took = time.monotonic() - t0
        assert took < DUMP_TIMEOUT_S, took
        return ("backward" in main_thread(taken, 0)
                and main_thread(taken, 1)[-1:] == ["rank1_sleeps"] and [taken])

    stacks = wait_until(both_in_place, 30, "rank 0 in backward, rank 1 hung", proc)[0]
    assert stacks.silent == []
    assert set(stacks["rank"]) == {0, 1} and (stacks.node != "").all()
    assert list(stacks.columns[:8]) == ["rank", "node", "pid", "thread", "depth", "function",
                                        "file", "line"]
    rank0, rank1 = main_thread(stacks, 0), main_thread(stacks, 1)
    assert "backward" in rank0 and rank0[-1] in ("_engine_run_backward", "backward"), rank0
    assert rank1[-1] == "rank1_sleeps", rank1
    tree = stacks.tree()
    main_groups = [g["ranks"] for g in tree.groups if g["thread"] == "MainThread"]
    assert sorted(main_groups) == [[0], [1]]
    text = str(tree)
    assert re.search(r"rank1_sleeps.*\[rank 1\]", text) and re.search(r"backward.*\[rank 0\]", text)
    assert "<details" in tree._repr_html_()

    # the stall is named once the (test-sized) threshold passes, and the stacks are kept
    job.hang_after, job.hang_min_s = 20.0, 1.0
    def stalled():
        st = job.status()
        return [st] if st.error.str.contains(f"stalled since step {HANG_STEP - 1}").all() \
            else None

    status = wait_until(stalled, 6, "the stall to be named")[0]
    assert status.alive.all()
    kept = job.last_stacks
    assert kept is not None and main_thread(kept, 1)[-1] == "rank1_sleeps"
    later = Job.open(job.name, create=False)  # a notebook attached later sees them
    assert main_thread(later.last_stacks, 1)[-1] == "rank1_sleeps"
    assert "stalled since" in later.last_stacks.attrs["reason"]
    later.close()

    proc.hold.unlink()  # the test has what it needs: rank 1 goes on
    out, _ = proc.communicate(timeout=90)  # training went on after the hang, to the end
    assert proc.returncode == 0, out
    done = re.findall(r"rank (\d) done (\d+) checksum (-?\d+\.\d+)", out)
    assert sorted(d[:2] for d in done) == [("0", "30"), ("1", "30")], out
    assert done[0][2] == done[1][2], out  # DDP kept both ranks' parameters identical


HOLDS_GIL = """
import ctypes, sys, time, dynprof_nb
m = dynprof_nb.Monitor(job=sys.argv[1], rank=0)
for _ in range(3):
    m.step()
def stuck_in_c_with_the_gil():
    # libc sleep(), called without releasing the GIL; like any signal, the dump's ends a bare
    # sleep() early (EINTR): what C code that does not retry sees (see docs/stacks.md)
    ctypes.PyDLL(None).sleep(4)
print("ready", flush=True)
stuck_in_c_with_the_gil()
m.step()
m.close()
print("after", m.step_count, flush=True)
"""


def test_stacks_of_a_rank_stuck_in_c_holding_the_gil():
    name = unique_job("gil")
    proc = subprocess.Popen([sys.executable, "-c", HOLDS_GIL, name], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=child_env())
    job = Job.open(name)
    try:
        assert proc.stdout.readline().strip() == "ready"
        stacks = wait_until(lambda: (st := job.stacks()).silent == []
                            and main_thread(st, 0)[-1:] == ["stuck_in_c_with_the_gil"] and [st],
                            10, "rank 0's stack inside the C call that holds the GIL", proc)[0]
        assert stacks.silent == []
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "after 4" in out, out
    finally:
        finish(proc)
        job.close()
        segment.unlink(name)


NO_HANDLER = """
import faulthandler, sys, time, dynprof_nb
from dynprof_nb.contract.shared_layout import STACK_SIGNAL
m = dynprof_nb.Monitor(job=sys.argv[1], rank=0)
faulthandler.unregister(STACK_SIGNAL)  # as if something had taken the handler away
m.step()
print("ready", flush=True)
time.sleep(3)
m.close()
print("alive", flush=True)
"""


def test_a_process_without_the_handler_is_named_silent_not_killed():
    name = unique_job("nohandler")
    proc = subprocess.Popen([sys.executable, "-c", NO_HANDLER, name], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=child_env())
    job = Job.open(name)
    try:
        assert proc.stdout.readline().strip() == "ready"
        stacks = job.stacks(timeout=1.0)
        assert len(stacks) == 0 and len(stacks.silent) == 1
        assert "no handler" in stacks.silent[0]["why"]
        assert "silent" in str(stacks.tree())
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "alive" in out, out
    finally:
        finish(proc)
        job.close()
        segment.unlink(name)


def test_monitor_start_installs_the_handler_once_and_close_removes_its_file():
    from dynprof_nb.contract.shared_layout import STACK_SIGNAL, catches, stack_dir

    name = unique_job("install")
    a = dynprof_nb.Monitor(job=name, rank=0)
    b = dynprof_nb.Monitor(job=name, rank=1)  # two Monitors of one process share it
    try:
        assert catches("self", STACK_SIGNAL)
        dumps = list(stack_dir().glob(f"{os.getpid()}.*.stack"))
        assert len(dumps) == 1 and stat_mode(stack_dir()) == 0o700
        a.close()
        assert catches("self", STACK_SIGNAL)
    finally:
        a.close()
        b.close()
        segment.unlink(name)
    assert not list(stack_dir().glob(f"{os.getpid()}.*.stack"))  # no controller signals us
    # a signal that was already on its way when the Monitor closed is still harmless
    os.kill(os.getpid(), STACK_SIGNAL)  # delivered before kill() returns (POSIX, to oneself)
    c = dynprof_nb.Monitor(job=name, rank=2)  # a later Monitor of this process installs again
    try:
        assert len(list(stack_dir().glob(f"{os.getpid()}.*.stack"))) == 1
    finally:
        c.close()
        segment.unlink(name)


def stat_mode(path: Path) -> int:
    return os.lstat(path).st_mode & 0o777


def test_the_stack_directory_is_never_listed_as_a_job():
    """The private stack directory sits in /dev/shm beside the segments; named like one, it was
    listed as a job 'stacks' whose shm_open failed with EINVAL in every agent beat, so no
    node pushed its status rows."""
    from dynprof_nb.contract.segment import list_jobs
    from dynprof_nb.contract.shared_layout import stack_dir

    path = stack_dir()
    assert path.is_dir()
    assert path.name not in list_jobs() and "stacks" not in list_jobs()
