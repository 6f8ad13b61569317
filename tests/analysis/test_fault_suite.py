"""The fault suite: real 2-rank PyTorch DDP jobs (gloo, CPU, the torch backend's real profiler)
with one cause injected each (tests/ddp_fault_job.py), diagnosed by ``w.explain(baseline)``
against a window of the same job before the injection, and by ``w.advise()``.

Each case asserts the rank named (the culprit, never the rank that waits for it), the cause
named, and that every number is possible: no phase below 0, phases that add up to the step,
shares in [0, 1], no NaN anywhere in the answer. The injected magnitudes are large against a
step of this small model (tens of ms, a full GC of the process per step) so a loaded machine
does not blur them; "none" checks that noise alone names no cause of work: beside other
processes (two CPU burners) a rank may be named, but only for CPU contention, with a run-queue
excess of its training thread that exists (``w.thread_cpu()``, recorded by every backend).

"busy-base" runs no fault but CPU burners through the baseline window only: the window is
faster, and the answer is "the baseline ran busier", with both windows' CPU waits, no culprit.

The MindSpore cases run a real 2-rank MindSpore 2.7 data-parallel job (``tests/ms_fault_job.py``
in ``.venv/ms``, launched by MindSpore's own ``msrun``: a scheduler and two workers, gradients
all-reduced by MindSpore's CPU collectives) recorded by the MindSpore backend: its operators
(MindSpore's own ``cpu_op_execute_timestamp`` file, on MindSpore's operator track) split each
step into phases as a PyTorch window's do."""

from __future__ import annotations

import math
import os
import socket
import sys
import warnings
from pathlib import Path

import jobutil
import numpy as np
import pytest
from framework_jobs import mindspore_python, outputs_within

import dynprof_nb
from dynprof_nb.analysis.host_phases import OP_TRACK
from dynprof_nb.analysis.same_work import SAME_CALLS, SLOWER
from dynprof_nb.analysis.straggler import (
    CONTENTION,
    CONTENTION_SHARE,
    phases_per_step,
    runqueue_change,
)

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "tests" / "ddp_fault_job.py"
MS_JOB = REPO / "tests" / "ms_fault_job.py"
BASE, WINDOW = (4, 9), (12, 17)  # the fault is on from step 11

pytestmark = pytest.mark.timeout(300)

# case -> (fault, backend, job options)
CASES = {
    "compute": ("compute", "torch", ["--ms", "60"]),
    "loader": ("loader", "torch", ["--ms", "60"]),
    "comm": ("comm", "torch", ["--n", "20"]),
    "gc": ("gc", "torch", ["--n", "1"]),
    "sync": ("sync", "torch", ["--n", "300"]),
    "none": ("none", "torch", []),
    # the built-in backend sees ranges and GC pauses (not operators nor gloo's threads)
    "builtin-compute": ("compute", "builtin", ["--ms", "60"]),
    "builtin-gc": ("gc", "builtin", ["--n", "1"]),
    # no fault; 8 CPU burners through the baseline only: the baseline ran busier
    "busy-base": ("none", "torch", ["--busy-base", "8"]),
    # a real MindSpore 2-rank job (msrun, MindSpore's CPU collectives), the MindSpore backend
    "ms-compute": ("compute", "mindspore", ["--ms", "1500"]),
    "ms-none": ("none", "mindspore", []),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ms_job(out: Path, case: str) -> None:
    """MindSpore's launcher starts the scheduler and both workers; each worker's output goes
    into ``out/logs/worker_<rank>.log`` (shown when the job fails)."""
    fault, _, options = CASES[case]
    ms_bin = str(Path(mindspore_python()).parent)
    env = dict(os.environ, PATH=ms_bin + os.pathsep + os.environ.get("PATH", ""),
               OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), GLOG_v="3")
    logs = out / "logs"
    proc = jobutil.start_script(
        [os.path.join(ms_bin, "msrun"), "--worker_num=2", "--local_worker_num=2",
         "--master_addr=127.0.0.1", f"--master_port={free_port()}", f"--log_dir={logs}",
         "--join=True", str(MS_JOB), "--job", f"fault-{case}", "--out", str(out), "--fault",
         fault, "--on", "1", "--base", "-".join(map(str, BASE)), "--fault-from", "11",
         "--window", "-".join(map(str, WINDOW)), *options], env=env)
    (output,) = outputs_within([proc], 280)
    workers = "\n".join(p.read_text(errors="replace")[-3000:] for p in logs.glob("worker_*.log"))
    assert proc.returncode == 0, output[-3000:] + "\n" + workers
    for p in logs.iterdir():  # windows only under out
        p.unlink()
    logs.rmdir()


def run_job(out: Path, case: str) -> None:
    fault, backend, options = CASES[case]
    if backend == "mindspore":
        return run_ms_job(out, case)
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
        # output into a file, in a session of its own (jobutil.start_script): what
        # outputs_within reads, and no pipe a forked worker could hold
        procs.append(jobutil.start_script(
            [sys.executable, str(JOB), "--job", f"fault-{case}", "--out", str(out), "--fault",
             fault, "--backend", backend, "--on", "1", "--base", "-".join(map(str, BASE)),
             "--fault-from", "11", "--window", "-".join(map(str, WINDOW)), *options],
            env=env))
    outputs = outputs_within(procs, 240)
    assert all(p.returncode == 0 for p in procs), "\n".join(o[-3000:] for o in outputs)


def load(out: Path, steps: tuple[int, int]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dynprof_nb.load_window(
            [str(out / f"rank{r}_start{steps[0]}_stop{steps[1]}") for r in (0, 1)])


@pytest.fixture(scope="module", params=list(CASES))
def case(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    run_job(out, request.param)
    w, b = load(out, WINDOW), load(out, BASE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return request.param, w, b, w.explain(b), w.advise()


def finite_numbers(x) -> bool:
    if isinstance(x, dict):
        return all(finite_numbers(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return all(finite_numbers(v) for v in x)
    if isinstance(x, float):
        return math.isfinite(x)
    return True


def assert_possible(w, e, adv) -> None:
    """Every number of both answers is one that can exist."""
    ph, phases, kind = phases_per_step(w)
    assert kind == "host"
    assert not ph.isna().any().any(), ph
    assert (ph[phases] >= 0).all().all()
    assert (ph[phases].sum(axis=1) - ph["duration_us"]).abs().max() < 1e-3 * ph["duration_us"].max()
    t = e.phases
    assert not t.isna().any().any(), t
    assert not e.operators.isna().any().any(), e.operators
    assert (t[["window_us", "baseline_us"]] >= 0).all().all(), t
    for col in ("window_share", "baseline_share", "share_of_growth"):
        assert t[col].between(0, 1).all(), t
    assert math.isfinite(e.noise_us) and e.noise_us > 0
    low = e.text.lower()
    assert "nan" not in low and "inf " not in low and "%" in low, e.text
    for f in adv:
        assert finite_numbers(f.numbers), (f.rule, f.numbers)
        for k, v in f.numbers.items():
            if "share" in k:
                assert 0 <= v <= 1, (f.rule, k, v)
        assert "nan" not in f.evidence.lower(), f.evidence


def straggler(adv):
    return adv.rule("straggler")


def assert_contention(cpu: dict, excess_us: float, text: str) -> None:
    """A CPU-contention verdict stands on a run-queue excess that exists: the rank waited for a
    core at a higher rate than its reference, by a third of its excess or more and more than
    the work it did more, and it is said with its numbers."""
    assert cpu["wait_rate"] > cpu["reference_wait_rate"], cpu
    assert cpu["runqueue_excess_us"] >= CONTENTION_SHARE * excess_us, (cpu, excess_us)
    assert cpu["runqueue_excess_us"] > cpu["work_excess_us"], cpu
    assert "waited" in text and "per step for a CPU" in text, text


def assert_same_work(same: dict, text: str) -> None:
    """A "same work, slower" verdict stands on calls that exist: as many per step as its
    reference's (within SAME_CALLS or one call), each longer, and it is said with its numbers.
    (CI's loaded machine ran one rank's 203 matrix products a step 1.5x slower, with no wait
    for a CPU: its core was slower, no fault of the job.)"""
    c, ref = same["calls_per_step"], same["reference_calls_per_step"]
    assert c > 0 and abs(c - ref) <= max(1.0, SAME_CALLS * ref), same
    assert same["per_call_ratio"] > 1 and same["us_per_step"] > same["reference_us_per_step"]
    assert "ran the same work slower" in text and "as long" in text, text


def assert_machine(e) -> None:
    """A verdict with a rank names it for the machine only: CPU contention or the same work,
    slower, each with numbers that exist."""
    if e.cause == CONTENTION:
        assert_contention(e.verdict.cpu, e.verdict.excess_us, e.text)
    else:
        assert e.cause == SLOWER, e.text
        assert_same_work(e.verdict.same_work, e.text)


def assert_no_culprit_of_work(w, adv) -> None:
    """No rank named for compute, data loading, GC or sync: beside other processes a rank may
    be named, only for the machine: CPU contention, or the same work run slower (by advise()
    and in the slow_ranks() table alike)."""
    for s in straggler(adv):
        assert s.numbers["cause"] in (CONTENTION, SLOWER), s.evidence
        if s.numbers["cause"] == CONTENTION:
            assert_contention(s.numbers["thread_cpu"], s.numbers["excess_us"], s.evidence)
        else:
            assert_same_work(s.numbers["same_work"], s.evidence)
    sr = w.slow_ranks()
    machine = {CONTENTION, SLOWER}
    assert list(sr["rank"]) == [0, 1] and set(sr.loc[sr["slow"], "cause"]) <= machine, sr
    assert [s.ranks for s in straggler(adv)] == [[r] for r in sr.loc[sr["slow"], "rank"]]


def test_thread_cpu_recorded(case):
    """Every rank's window holds its training thread's on-CPU time and run-queue delay over
    exactly the window's steps, within its wall time (a tick of the kernel's accounting); a
    MindSpore rank's record is every thread of its process (its operators run on their own)."""
    name, w, b, _, _ = case
    for x, steps in ((w, WINDOW), (b, BASE)):
        t = x.thread_cpu()
        assert list(t["rank"]) == [0, 1], t
        assert t["missing"].isna().all(), t
        assert (t["steps"] == steps[1] - steps[0] + 1).all(), t
        assert (t[["on_cpu_ns", "runqueue_ns", "timeslices"]] > 0).all().all(), t
        one = t["threads"] == "training"  # MindSpore's: every thread of the process
        assert (t.loc[one, "on_cpu_ns"] + t.loc[one, "runqueue_ns"]
                <= t.loc[one, "wall_ns"] + 10e6).all(), t
        assert (t["on_cpu_ns"] <= t["wall_ns"] * os.cpu_count() + 10e6).all(), t
        assert set(t["threads"]) == {"process" if CASES[name][1] == "mindspore" else "training"}


def test_mindspore_ops_in_steps(case):
    """MindSpore's operators (its ``cpu_op_execute_timestamp`` file, on MindSpore's operator
    track, thread field 0) land in the window's steps: each one in the step whose range holds
    its start (MindSpore's and msprof-analyze's Step Id rule), and the per-step sums of each
    operator add up to MindSpore's own total of it (``cpu_op_detail_info``: ``w.ops``); the
    phases count them as the training thread's (compute, and AllReduce as communication)."""
    name, w, _, _, _ = case
    if CASES[name][1] != "mindspore":
        pytest.skip("a MindSpore case's check")
    ev = w.events
    track = ev[ev["process"].astype(str) == OP_TRACK]
    assert set(track["tid"]) == {0}, set(track["tid"])
    for r in (0, 1):
        st = w.steps[w.steps["rank"] == r].sort_values("start_ns")
        mine = track[track["rank"] == r]
        at = np.searchsorted(st["start_ns"].to_numpy("int64"), mine["ts_ns"].to_numpy("int64"),
                             "right") - 1
        end = (st["start_ns"] + st["duration_us"] * 1000).to_numpy()
        assert (at >= 0).all() and (mine["ts_ns"].to_numpy() < end[at]).all()
        per_step = mine.assign(step=st["step"].to_numpy()[at]).groupby(
            [mine["name"].astype(str), "step"])["dur_ns"].sum() / 1000
        total = per_step.groupby(level=0).sum()
        ops = w.ops[w.ops["rank"] == r].set_index("name")["total_us"]
        assert len(total) > 5
        np.testing.assert_allclose(total.to_numpy(), ops.reindex(total.index).to_numpy(),
                                   rtol=1e-6)
    ph, _, kind = phases_per_step(w)
    assert kind == "host" and (ph["compute"] > 0).all() and (ph["communication"] > 0).all(), ph


def test_fault_named(case):
    name, w, b, e, adv = case
    fault, backend, _ = CASES[name]
    assert_possible(w, e, adv)
    out_of_scope = adv.checked[adv.checked["status"] == "out of scope"]
    # an Ascend-only rule never runs on this CPU window
    assert {"affinity API", "slow rank", "synchronize stream", "memory copies"} <= set(
        out_of_scope["rule"]
    )
    kind = {"torch": "PyTorch", "builtin": "built-in backend", "mindspore": "MindSpore"}[backend]
    assert adv.out_of_scope().startswith(f"not applicable to a CPU {kind} window:")
    assert not adv.rule("affinity API")
    if backend == "builtin":  # no collective recorded: the wait is not seen, work is
        assert e.rank == 1 and e.cause == {"compute": "compute", "gc": "GC"}[fault], e.text
        assert e.verdict.blind and any("no collective recorded" in n for n in e.notes)
        (s,) = straggler(adv)
        assert s.ranks == [1] and "waiting is not seen" in s.evidence
        return
    if name == "busy-base":  # the window is faster: the baseline waited for a CPU, no culprit
        assert e.changed and e.delta_us < 0 and e.rank is None and e.cause == CONTENTION, e.text
        assert "the baseline ran busier (CPU wait" in e.text and "no culprit" in e.text, e.text
        waits = runqueue_change(w.thread_cpu(), b.thread_cpu())
        assert min(waits.values()) < 0, waits
        assert_no_culprit_of_work(w, adv)
        return
    if fault == "none":  # no cause of work; the machine (contention, a slower core) may be seen
        if e.rank is not None:  # one rank waited for a core, or its core ran slower
            assert_machine(e)
        elif e.changed:  # the machine's load changed between the windows (the burners)
            assert e.cause in (None, CONTENTION, SLOWER), e.text
            if e.cause == SLOWER:  # every rank ran its same calls slower
                assert "every rank ran the same operator calls slower" in e.text, e.text
                assert "no culprit" in e.text, e.text
            elif "the baseline ran busier" in e.text:  # one rank waited for a CPU then
                waits = runqueue_change(w.thread_cpu(), b.thread_cpu())
                assert e.delta_us < 0 and e.cause == CONTENTION and min(waits.values()) < 0
            elif e.cause == CONTENTION:
                assert "the machine's load changed" in e.text, e.text
                waits = runqueue_change(w.thread_cpu(), b.thread_cpu())
                assert sorted(waits) == [0, 1] and len({v > 0 for v in waits.values()}) == 1
        else:
            assert e.cause is None, e.text
            assert "no meaningful change" in e.text and "noise bound" in e.text
        assert_no_culprit_of_work(w, adv)
        return
    if fault == "comm":  # on both ranks: no culprit rank, communication named
        assert e.changed, e.text
        if e.rank is not None:  # (beside the burners) only for the machine
            assert_machine(e)
        else:
            assert "communication grew on every rank" in e.text
        assert_no_culprit_of_work(w, adv)
        grew = e.phases[e.phases["phase"] == "communication"]["delta_us"]
        assert (grew > 0).all()
        return
    if fault == "sync":
        (f,) = adv.rule("sync points")
        assert f.ranks == [1] and f.numbers["per_step"] == 300
        if e.rank == 0:  # (on a loaded machine) only for the machine: rank 0 has no fault
            assert_machine(e)
        else:
            assert e.rank in (None, 1), e.text
        return
    cause = {"compute": "compute", "loader": "data loading", "gc": "GC"}[fault]
    assert e.rank == 1 and e.cause == cause, e.text
    assert "rank 1's own work grew" in e.text and "rank 0 waits for it" in e.text
    (s,) = straggler(adv)
    assert s.ranks == [1] and s.numbers["cause"] == cause, s.evidence
    sr = w.slow_ranks().set_index("rank")  # the same rule's table: the culprit only, its cause
    assert sr["slow"].to_dict() == {0: False, 1: True} and sr.loc[1, "cause"] == cause, sr
    assert sr.loc[1, "note"].startswith("rank 1 is the straggler"), sr
    if fault == "compute":
        assert "extra_compute" in e.text
    if fault == "loader":
        (d,) = adv.rule("data-loader waits")
        assert d.ranks == [1]
    if fault == "gc":
        (g,) = adv.rule("GC")
        assert g.ranks == [1]
