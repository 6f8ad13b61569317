"""Hostile inputs on the surfaces built most recently, the cases an adversarial pass found
holding, and the ones it broke once fixed (its repro scripts: ``git show dfaea85:adv/``): a
foreign or damaged ``thread_cpu.json`` on one rank of a window, a rank claimed twice, a file
planted under a job's segment name, job names from hostile config directories and the
environment, and a restart under the same name while no handle is open."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pandas as pd
import pytest
from jobutil import finish, kill_process, spawn_rank, trace_steps, unique_job, wait_until
from testdata import write_builtin_window

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.contract.protocol import THREAD_CPU_FILE
from dynprof_nb.contract.rows import StepWindow
from dynprof_nb.contract.slot import claim_slot
from dynprof_nb.control.base import RankClaimedTwice
from dynprof_nb.traces.formats.common.threadcpu import read_file
from dynprof_nb.training.dropin import job_name_for

GOOD = {"steps": 3, "wall_ns": 9_000_000, "on_cpu_ns": 6_000_000, "runqueue_ns": 1_000_000,
        "timeslices": 30}


def two_ranks(root: Path, rank1: bytes | None, slow: bool = True) -> Path:
    """A 2-rank built-in window whose rank 1 is 3x slower (``slow``) and whose rank 1's
    ``thread_cpu.json`` is ``rank1`` (None: no file); rank 0's is a sound record."""
    for r in (0, 1):
        d = write_builtin_window(root, rank=r, start=1, stop=3,
                                 step_us=3000.0 if (r == 1 and slow) else 1000.0)
        data = json.dumps(GOOD).encode() if r == 0 else rank1
        if data is not None:
            (d / THREAD_CPU_FILE).write_bytes(data)
    return root


def _loaded(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dynprof_nb.load_window(str(path))


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{"steps":3,"wall_ns":NaN,"on_cpu_ns":1,"runqueue_ns":1,"timeslices":1}', "lacks"),
        (json.dumps({**GOOD, "steps": True}).encode(), "lacks"),
        (json.dumps({**GOOD, "steps": 3.0}).encode(), "lacks"),
        (b"\x00" * 100, "not valid JSON"),
        (b'{"missing": "\xff\xfe"}', "not valid JSON"),
        (b"", "not valid JSON"),
        (("{\"steps\": " + "9" * 5000 + "}").encode(), "not valid JSON"),
        (b"[" * 60_000, "not valid JSON"),  # deeper than the parser recurses
        (json.dumps({**GOOD, "wall_ns": 10**400}).encode(), "cannot be"),
        (json.dumps({**GOOD, "runqueue_ns": 10**18}).encode(), "cannot be"),
        (json.dumps({**GOOD, "on_cpu_ns": 2**64}).encode(), "cannot be"),
    ],
)
def test_a_foreign_record_is_a_row_that_says_why(tmp_path: Path, content: bytes, why: str):
    p = tmp_path / THREAD_CPU_FILE
    p.write_bytes(content)
    got = read_file(p)
    assert list(got) == ["missing"] and why in got["missing"], got


def test_a_directory_or_a_device_in_place_of_the_record_is_no_record(tmp_path: Path) -> None:
    (tmp_path / "d.json").mkdir()
    assert "cannot be read" in read_file(tmp_path / "d.json")["missing"]
    (tmp_path / "z.json").symlink_to("/dev/zero")  # read directly: capped, not endless
    assert "over 64 KiB" in read_file(tmp_path / "z.json")["missing"]


@pytest.mark.parametrize("rank1", [None, b'{"missing": "<img src=x onerror=alert(1)>"}',
                                   b"[1, 2]"], ids=["absent", "script", "not-an-object"])
def test_one_rank_without_a_sound_record_still_gets_a_diagnosis(tmp_path: Path, rank1):
    """Rank 1 is the straggler; its record is missing, a script, or foreign: slow_ranks,
    advise and explain still name it, say contention cannot be told apart, and escape the
    text they did not write."""
    w = _loaded(two_ranks(tmp_path / "w", rank1))
    b = _loaded(two_ranks(tmp_path / "b", json.dumps(GOOD).encode(), slow=False))
    cpu = w.thread_cpu()
    assert list(cpu["rank"]) == [0, 1] and pd.isna(cpu["missing"].iloc[0])
    assert isinstance(cpu["missing"].iloc[1], str)
    sr = w.slow_ranks().set_index("rank")
    assert bool(sr.loc[1, "slow"]) and not bool(sr.loc[0, "slow"])
    found = w.advise()
    html = found._repr_html_()
    assert "straggler" in html and "<img" not in html
    said = str(w.explain(b))
    assert "rank 1" in said and "CPU contention" not in said.split(":")[0]


def test_a_rank_claimed_twice_is_named_when_a_window_is_asked() -> None:
    job = unique_job("badv2x")
    seg = segment.Segment.open(job)
    try:
        claim_slot(seg, 0)
        claim_slot(seg, 0)
        control = dynprof_nb.attach(job)
        try:
            assert list(control.status()["rank"]) == [0, 0]
            with pytest.warns(RankClaimedTwice, match=r"rank 0 by 2 live processes"):
                control.start("+5", "+9")
        finally:
            control.close()
    finally:
        seg.close()
        segment.unlink(job)


@pytest.mark.parametrize("size", [0, 17, 1 << 16, 1 << 40], ids=["empty", "17B", "64K", "1T"])
def test_a_file_planted_under_a_jobs_name_is_that_jobs_problem(size: int) -> None:
    job = unique_job("badvplant")
    path = segment.segment_path(job)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    try:
        if size == 1 << 16:
            os.write(fd, os.urandom(size))
        else:
            os.ftruncate(fd, size)
        os.close(fd)
        for create in (False, True):
            with pytest.raises(dynprof_nb.JobError, match="damaged"):
                dynprof_nb.attach(job, create=create)
        listed = dynprof_nb.jobs()
        row = listed[listed.job == job]
        assert len(row) == 1 and "damaged" in row.problem.iloc[0]
    finally:
        if os.path.lexists(path):
            os.unlink(path)


@pytest.mark.parametrize("base", [b"..", b"...", b"a\nb", "数据".encode(), "\u202eevil".encode(),
                                  b"x" * 255, b"-._", b"$(reboot)"])
def test_a_config_directorys_name_gives_a_usable_job_name(tmp_path: Path, base: bytes) -> None:
    parent = os.path.join(os.fsencode(tmp_path), b"p" + base[:50] if base != b".." else b"pp")
    d = os.path.join(parent, base) if base != b".." else parent + b"/sub/.."
    os.makedirs(d, exist_ok=True)
    name = job_name_for(os.fsdecode(d))
    assert segment.check_job_name(name) == name and len(name) <= 64


@pytest.mark.parametrize("env", ["../x", "a\n", "x" * 100])
def test_a_hostile_dynprof_job_is_refused_by_name(tmp_path: Path, monkeypatch, env: str) -> None:
    monkeypatch.setenv("DYNPROF_JOB", env)
    with pytest.raises(segment.SegmentError, match="is not usable"):
        segment.check_job_name(job_name_for(tmp_path))


def test_a_restart_with_no_handle_open_inherits_no_window(tmp_path: Path) -> None:
    """Issue 50's held-out check with the notebook's handle closed across the restart: run 1
    arms a window far ahead, every rank is killed, run 2 starts, a new handle attaches."""
    job, out = unique_job("badvrs"), tmp_path / "out"

    def stepping(c) -> bool:
        live = c.live_slots()
        return len(live) == 2 and all(s.step > 3 for s in live)

    control = dynprof_nb.attach(job, create=True)
    procs = [spawn_rank(job, r, out, step_ms=2) for r in range(2)]
    try:
        wait_until(lambda: stepping(control), what="run 1 to step")
        far = control.live_slots()[0].step + 100_000
        control.start(far, far + 4)
        wait_until(lambda: [s.state for s in control.live_slots()] == ["armed"] * 2,
                   what="run 1 to arm")
        control.close()
        for p in procs:
            kill_process(p)
        procs = [spawn_rank(job, r, out, step_ms=2) for r in range(2)]
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            control = dynprof_nb.attach(job)
            wait_until(lambda: stepping(control), what="run 2 to step")
            status = control.status()
        live = status[status.alive.astype(bool)]
        assert list(live.state) == ["idle", "idle"] and list(live.run) == [2, 2]
        assert any(f"window {far}-{far + 4} was asked of run 1" in str(w.message) for w in said)
        control.start("+20", "+24")
        first, last = control.config.start_step, control.config.stop_step
        window = control.load(timeout=120)
        assert (window.start_step, window.stop_step, window.run) == (first, last, 2)
        for path in control.windows().path:
            assert trace_steps(path) == list(range(first, last + 1))
        assert not list(out.glob(f"*start{far}*"))
    finally:
        for p in procs:
            finish(p)
        control.close()
        segment.unlink(job)


KINETO = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 5}


@pytest.mark.parametrize("change", [
    {"ts": "1e300"}, {"ts": [1]}, {"dur": "abc"}, {"dur": {}}, {"pid": {"a": 1}}, {"tid": [1, 2]},
    {"name": 12345}, {"name": None}, {"name": ["a"]}, {"args": [1, 2]}, {"args": "x"}, {"ph": 5},
    {"cat": {"x": 1}}, {"ts": True}, {"ts": -1e18}, {"pid": 2**70}, {"ts": 2**70}, {"dur": 2**70},
    {"args": {"External id": "x", "correlation": [1]}}, {"name": "ProfilerStep#abc"},
    {"name": "ProfilerStep#" + "9" * 30, "cat": "user_annotation"},
], ids=lambda c: "-".join(f"{k}={str(v)[:12]}" for k, v in c.items()))
def test_a_kineto_field_of_the_wrong_type_leaves_every_view_working(tmp_path: Path, change):
    events = [KINETO, {**KINETO, "ts": 200}, {**KINETO, **change},
              {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
               "ts": 90, "dur": 500}]
    p = tmp_path / "trace.json"
    p.write_text(json.dumps({"traceEvents": events}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_trace(str(p))
        assert len(w.events) >= 2 and len(w.ops) >= 1
        w.summary()
        w.plot_timeline()


def test_a_file_in_the_segment_directory_that_names_no_job_is_no_job() -> None:
    """A file there whose name is no job name (planted, or a foreign tool's) made ``jobs()``,
    ``dynprof jobs`` and ``dynprof status`` fail for every job of the user."""
    job = unique_job("badvodd")
    odd = os.path.join(os.path.dirname(segment.segment_path(job)),
                       os.path.basename(segment.segment_path(job)).replace(job, "..zz"))
    seg = segment.Segment.open(job)
    try:
        with open(odd, "wb"):
            pass
        assert job in segment.list_jobs() and "..zz" not in segment.list_jobs()
        assert job in set(dynprof_nb.jobs().job)
    finally:
        os.unlink(odd)
        seg.close()
        segment.unlink(job)


def test_a_config_directory_not_in_utf8_gives_a_usable_job_name(tmp_path: Path) -> None:
    """A directory named in Latin-1 (``caf\\xe9``) crashed the training script's Monitor."""
    d = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.makedirs(d)
    name = job_name_for(os.fsdecode(d))
    assert segment.check_job_name(name) == name and name.startswith(tmp_path.name[:24])


@pytest.mark.parametrize("text", ["\u00b2-3", "30-20", "0-0", "1" * 19 + "-1" + "0" * 19, "-3",
                                  "3-", "+3-5", " 3-5", "3-5\n"])
def test_a_window_text_that_is_not_a_window_is_none(text: str) -> None:
    assert StepWindow.parse(text) is None
    assert StepWindow.parse("20-30") == (20, 30)


_OWN_PEAK = r"""
import json, resource, sys, time, warnings
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
import dynprof_nb
from dynprof_nb.traces import load_trace
before, t = peak_mb(), time.perf_counter()
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    w = load_trace(sys.argv[1])
    events = len(w.events)
print(json.dumps({"own_mb": peak_mb() - before, "s": time.perf_counter() - t, "events": events,
                  "said": [str(x.message) for x in said]}))
"""


def _own_peak(path: Path, deadline_s: float = 60) -> dict:
    """Load ``path`` in a fresh process (4 GiB address-space cap, cache off, ``deadline_s``):
    the load's own peak RSS in MB (VmHWM after minus before), its seconds, its events' count
    and its warnings."""
    import subprocess
    import sys

    env = {**os.environ, "DYNPROF_NB_CACHE": "off",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", _OWN_PEAK, str(path)], capture_output=True,
                         text=True, env=env, timeout=deadline_s)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


_EV = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":5}'


def test_a_number_token_of_megabytes_is_a_bad_number_not_a_parse(tmp_path: Path) -> None:
    """A ``ts`` of 16 MB of digits (adversarial pass: 64 MB took 11.5x the file and 35 s) is
    past any time: not read digit by digit, its event is dropped and counted as a bad ts."""
    mb = 16
    p = tmp_path / "number.json"
    p.write_bytes(b'{"traceEvents":[' + _EV % 1 + b',{"ph":"X","cat":"cpu_op","name":"b",'
                  b'"pid":1,"tid":1,"ts":1' + b"0" * (mb << 20) + b',"dur":5}]}')
    got = _own_peak(p)
    assert got["events"] == 1, got
    assert any("1 row had no readable" in s for s in got["said"]), got["said"]
    assert got["own_mb"] <= 4 * mb and got["s"] < 20, got


@pytest.mark.parametrize("counter", [2**63 - 1, 2**62, -5])
def test_a_run_counter_no_rank_wrote_leaves_profiling_on(tmp_path: Path, counter: int) -> None:
    """A run counter at 2**63-1 turned a joining rank's profiler off (bumping it overflowed
    its word; adversarial pass). The rank sets it back from the runs the segment names, says
    so once, and a window asked then (for the ranks to come: run 5, the counter having been
    4) is recorded by the run it was asked of."""
    job, out = unique_job("badvrc"), tmp_path / "out"
    control = dynprof_nb.attach(job, create=True)
    seg = segment.Segment.open(job)
    proc = None
    try:
        seg.words[segment.H_RUN] = 4
        control.start(20, 24)  # no rank live: the window is for run 5
        seg.words[segment.H_RUN] = counter
        proc = spawn_rank(job, 0, out, step_ms=2)
        wait_until(lambda: (control.windows().status == "complete").any(), timeout=120,
                   what="the window to be recorded", proc=proc)
        window = control.load(timeout=120)
        assert (window.start_step, window.stop_step, window.run) == (20, 24, 5)
        assert trace_steps(control.windows().path[0]) == list(range(20, 25))
        assert segment.run_of(seg)[0] == 5
    finally:
        err = finish(proc)[1] if proc is not None else ""
        control.close()
        seg.close()
        segment.unlink(job)  # before any assert: a failed run leaves no segment behind
    said = [line for line in err.splitlines() if "run counter was" in line]
    assert len(said) == 1 and f"was {counter}" in said[0] and "run 5" in said[0], err


def test_a_rescued_run_counter_never_passes_one_runs_window_for_anothers() -> None:
    """Run 5's rank asked for a window and died; then the counter is corrupted. The next rank
    to join is run 6 (the dead slot still names run 5), so run 5's window stays dropped."""
    import subprocess

    from dynprof_nb.contract.protocol import decode
    from dynprof_nb.control.runs import dropped_window

    job = unique_job("badvrw")
    control = dynprof_nb.attach(job, create=True)
    seg = segment.Segment.open(job)
    slots = []
    try:
        seg.words[segment.H_RUN] = 4
        slots.append(claim_slot(seg, 0))
        assert slots[0].run == 5
        control.start(10_000, 10_004)  # asked of run 5, whose rank (this process) is live
        gone = subprocess.Popen(["true"])
        gone.wait()
        seg.words[segment.slot_base(slots[0].index) + segment.S_PID] = gone.pid  # it died
        seg.words[segment.H_RUN] = 2**63 - 1
        slots.append(claim_slot(seg, 1))
        assert slots[1].run == 6 and segment.run_of(seg)[0] == 6
        cmd = decode(seg.read_config()[1])
        assert cmd.run == 5 and "asked of run 5, which ended" in dropped_window(cmd, seg)
    finally:
        control.close()
        seg.close()
        segment.unlink(job)


def test_a_rank_joining_a_live_run_mends_a_corrupt_run_counter() -> None:
    """The counter corrupted while run 1 is live: a rank joining run 1 wrote nothing back, so
    the counter stayed corrupt, commands were stamped with a run past every real one and a
    later run took run 1's window for its own (adversarial pass). Joining mends it."""
    job = unique_job("badvlive")
    control = dynprof_nb.attach(job, create=True)
    seg = segment.Segment.open(job)
    slots = []
    try:
        slots.append(claim_slot(seg, 0))
        assert slots[0].run == 1
        seg.words[segment.H_RUN] = 2**63 - 1
        slots.append(claim_slot(seg, 1))  # run 1's rank 0 is live: rank 1 joins run 1
        assert slots[1].run == 1 and segment.run_of(seg)[0] == 1
    finally:
        control.close()
        seg.close()
        segment.unlink(job)


@pytest.mark.parametrize("where", ["after the array", "after the object"])
def test_megabytes_of_blanks_at_a_traces_end_are_not_read(tmp_path: Path, where: str) -> None:
    """32 MB of whitespace between the event array's ``]`` and the object's ``}`` (or after
    the ``}``) made the streaming reader refuse the file and read it whole: 3x the file in
    memory (adversarial pass). The ends are found past the blanks; the load's own peak RSS
    stays a fraction of them."""
    mb = 32
    blanks = b" \n\t\r" * (mb << 18)
    events = b'{"traceEvents":[' + _EV % 1 + b"," + _EV % 10 + b"]"
    p = tmp_path / "blanks.json"
    p.write_bytes(events + blanks + b"}" if where == "after the array" else
                  events + b"}" + blanks)
    got = _own_peak(p)
    assert got["events"] == 2 and got["own_mb"] <= mb / 2 and got["s"] < 20, got
