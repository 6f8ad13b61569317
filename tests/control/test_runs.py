"""A run is a run (issue 50): real ranks killed and restarted under the same name while a
notebook's handle stays open. The new run inherits no window of the dead one, every window
says its run, and ``load()`` is the window asked for or says why not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from jobutil import finish, kill_process, spawn_rank, trace_steps, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment, window_dirs
from dynprof_nb.control.loading import WindowPending
from dynprof_nb.control.runs import WindowDropped

RANKS = 2


def start_run(job: str, out: Path) -> list:
    return [spawn_rank(job, r, out, step_ms=2) for r in range(RANKS)]


def stepping(control: dynprof_nb.Job, run: int) -> bool:
    live = control.live_slots()
    return len(live) == RANKS and all(s.run == run and s.step > 3 for s in live)


@pytest.fixture
def restarted(tmp_path: Path):
    """A 2-rank job whose run 1 armed a window far ahead and was killed (SIGKILL), then
    restarted under the same name: ``(handle, run 2's processes, output)``."""
    job, out = unique_job("runs"), tmp_path / "out"
    control = dynprof_nb.attach(job, create=True)
    procs = start_run(job, out)
    try:
        wait_until(lambda: stepping(control, 1), what="run 1 to step")
        first = control.live_slots()[0].step + 100_000
        control.start(first, first + 4)
        wait_until(
            lambda: [s.state for s in control.live_slots()] == ["armed"] * RANKS,
            what="run 1's ranks to arm the far window",
        )
        for p in procs:
            kill_process(p)
        procs = start_run(job, out)
        wait_until(lambda: stepping(control, 2), what="run 2 to step")
        yield control, procs, out, (first, first + 4)
    finally:
        for p in procs:
            finish(p)
        control.close()
        segment.unlink(job)


def test_a_restarted_job_inherits_no_window_and_records_its_own_steps(restarted) -> None:
    control, _, out, far = restarted
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        status = control.status()
        again = control.status()
    live = status[status.alive.astype(bool)]
    assert list(live.state) == ["idle"] * RANKS, status.to_string()
    assert list(live.run) == [2] * RANKS and (live.window == "").all()
    assert status.attrs["run"].startswith("run 2")
    dropped = [str(w.message) for w in said if issubclass(w.category, WindowDropped)]
    assert dropped == [  # said once, not on every look
        f"job {control.name!r}: window {far[0]}-{far[1]} was asked of run 1, which ended; "
        "dropped (the job's ranks were restarted: run 2 now). Ask again for a window of "
        "this run."
    ], dropped
    assert status.attrs["note"] == dropped[0] and "note" not in again.attrs
    assert not control.config.has_window
    assert "run 2" in repr(control)

    control.start("+20", "+24")
    first, last = control.config.start_step, control.config.stop_step
    window = control.load(timeout=120)  # at once: waits for the window asked
    assert (window.start_step, window.stop_step, window.run) == (first, last, 2)
    assert f"steps {first}..{last} of run 2" in repr(window)
    rows = control.windows()
    assert list(rows.run) == [2] * RANKS and set(rows.start) == {first}
    for path in rows.path:
        manifest = window_dirs.read_manifest(Path(path))
        assert (manifest["job"], manifest["run"]) == (control.name, 2)
        assert (manifest["requested_start_step"], manifest["requested_stop_step"]) == (first, last)
        assert trace_steps(path) == list(range(first, last + 1))
    assert not list(out.glob(f"*start{far[0]}*"))  # the dead run's window was never recorded


def test_load_right_after_start_is_the_window_asked_or_says_it_is_pending(tmp_path) -> None:
    job, out = unique_job("load"), tmp_path / "out"
    control = dynprof_nb.attach(job, create=True)
    procs = start_run(job, out)
    try:
        wait_until(lambda: stepping(control, 1), what="the ranks to step")
        control.start("+10", "+14")
        older = control.load(timeout=120)
        control.start("+40", "+44")
        first, last = control.config.start_step, control.config.stop_step
        with pytest.raises(WindowPending) as pending:
            control.load(wait=False)
        said = str(pending.value)
        assert f"window {first}-{last} of run 1 is pending" in said
        assert f"steps {older.start_step}-{older.stop_step} of run 1" in said  # the way out
        window = control.load(timeout=120)
        assert (window.start_step, window.stop_step) == (first, last)
        # an older window is a choice, by steps, run or index
        by_steps = control.load(steps=(older.start_step, older.stop_step))
        assert by_steps.start_step == older.start_step and by_steps.run == 1
        assert control.load(run=1).start_step == first  # the latest of run 1
        assert control.load(index=0).start_step == older.start_step
        with pytest.raises(dynprof_nb.JobError, match="no complete rank"):
            control.load(run=7)
    finally:
        for p in procs:
            finish(p)
        control.close()
        segment.unlink(job)


def test_the_magics_follow_the_same_rule(restarted, ip: InteractiveShell, magics) -> None:
    control, _, _, far = restarted
    ip.run_line_magic("dynprof", f"attach {control.name}")
    status = ip.run_line_magic("dynprof", "status")
    assert set(status[status.alive.astype(bool)].run) == {2}
    ip.run_line_magic("dynprof", "start +30 +34")
    first = control.config.start_step
    with pytest.raises(UsageError, match=f"window {first}-{first + 4} of run 2 is pending"):
        ip.run_line_magic("dynprof", "load --no-wait")
    window = ip.run_line_magic("dynprof", "load")
    assert (window.start_step, window.run) == (first, 2)
    steps = ip.run_line_magic("dynprof", f"load --steps {first}-{first + 4} --run 2")
    assert steps.start_step == first
    with pytest.raises(UsageError, match="no complete rank"):
        ip.run_line_magic("dynprof", f"load --steps {far[0]}-{far[1]}")
    with pytest.raises(UsageError, match="FIRST-LAST"):
        ip.run_line_magic("dynprof", "load --steps 7")


def test_the_command_line_says_a_dropped_window_in_one_line(restarted) -> None:
    """``dynprof status`` after a restart: the dropped window is one ``dynprof:`` line, not
    the path and source line of ours that raised the warning."""
    control, _, _, far = restarted
    cmd = [sys.executable, "-m", "dynprof_nb.ui.cli", "status", control.name]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert done.returncode == 0, done.stderr
    said = [ln for ln in done.stderr.splitlines() if "WindowDropped" in ln]
    assert said and said[0].startswith(f"dynprof: WindowDropped: job {control.name!r}: "
                                       f"window {far[0]}-{far[1]} was asked of run 1"), said
    assert ".py:" not in done.stderr, done.stderr


def test_a_dead_ranks_window_is_not_another_controllers(tmp_path) -> None:
    """A window written by a rank (its relay, its trigger) that then died is not "another
    controller's": the warning names the rank and says it has exited."""
    from dynprof_nb.contract.protocol import Command
    from dynprof_nb.contract.segment import SlotView
    from dynprof_nb.control.asks import writer

    dead = kill_process_pid()
    slot = SlotView(0, dead, 0, 7, "armed", 9, 12, 1, 0, 0, "", 0, "", "")
    cmd = Command("start", dynprof_nb.ProfilerConfig(), by=dead)
    assert writer(cmd, [slot]) == f"rank 0 (pid {dead}, which has exited; its config-file relay)"
    assert writer(cmd, []) == f"pid {dead} (a process that has exited)"
    assert "another controller" in writer(Command("start", cmd.config, by=1), [])


def kill_process_pid() -> int:
    """The pid of a process that has exited."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_window_json_of_an_unshifted_window_says_both_steps(tmp_path) -> None:
    manifest = window_dirs.new_manifest(
        job="j", rank=0, start=44, stop=48, backend="builtin", config={}, run=3
    )
    assert manifest["requested_start_step"] == 44 and manifest["requested_stop_step"] == 48
    assert manifest["run"] == 3 and json.loads(json.dumps(manifest))["job"] == "j"


def test_a_window_of_mindspores_own_monitor_says_which_iterations_it_holds(tmp_path) -> None:
    """MindSpore's own monitor names a window after the steps asked, but in step() mode its
    step() is one late: the loaded window says both readings, never just "steps 5..8"."""
    import shutil

    from dynprof_nb.control.filemode import FileJob

    data = Path(__file__).resolve().parents[1] / "data" / "mindspore_cpu"
    prof, cfg = tmp_path / "prof", tmp_path / "cfg"
    shutil.copytree(data / "rank0_start5_stop8", prof / "rank0_start5_stop8")
    cfg.mkdir()
    shutil.copy(data / "profiler_config.json", cfg / "profiler_config.json")
    job = FileJob(cfg, prof_path=prof, settle_s=0)
    window = job.load(wait=False)  # the window asked, written whole: no wait
    assert (window.start_step, window.stop_step) == (5, 8)
    assert window.step_note == (
        "MindSpore's own monitor: iterations 6..9 if the job calls dp.step() (its step() is "
        "one late), 5..8 with Model.train callbacks"
    )
    assert window.step_note in repr(window)


def test_ctrl_c_in_a_waiting_load_stops_only_the_waiting(tmp_path) -> None:
    """load() waits with wait()'s machinery: Ctrl-C there says what the window is doing and
    leaves the ranks and the window as they were."""
    import os
    import signal
    import sys
    import threading
    import time

    from jobutil import running_ranks

    from dynprof_nb.control.base import WaitInterrupted

    main = threading.main_thread().ident

    def interrupt_once_waiting() -> None:  # SIGINT when load() is inside wait(), not before
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            frame = sys._current_frames().get(main)
            while frame is not None and frame.f_code.co_name != "wait_for":
                frame = frame.f_back
            if frame is not None:
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.01)

    with running_ranks(unique_job("ctrlc"), tmp_path, ranks=1) as (control, procs):
        control.start("+100000", "+100004")
        first = control.config.start_step
        helper = threading.Thread(target=interrupt_once_waiting, daemon=True)
        helper.start()
        with pytest.raises(WaitInterrupted, match=f"stopped waiting; window {first}-"):
            control.load()
        helper.join(timeout=60)
        assert procs[0].poll() is None
        assert control.config.start_step == first


@pytest.mark.filterwarnings("error::dynprof_nb.control.runs.WindowDropped")
def test_the_panel_tells_the_runs_apart(tmp_path) -> None:
    """The panel's rank table has the run, and its window list says each window's run. The
    window run 1 recorded before it ended is done, not dropped: nothing says it was."""
    from dynprof_nb.ui.panel import Panel

    job, out = unique_job("panelrun"), tmp_path / "out"
    control = dynprof_nb.attach(job, create=True)
    procs = start_run(job, out)
    panel = None
    try:
        for run in (1, 2):
            wait_until(lambda run=run: stepping(control, run), what=f"run {run} to step")
            control.start("+10", "+12")
            control.wait(timeout=120, progress=False)
            if run == 1:
                for p in procs:
                    kill_process(p)
                procs = start_run(job, out)
        panel = Panel(control, poll=False)
        panel.refresh(windows=True)
        assert "note" not in control.status().attrs
        labels = [r.children[0].value for r in panel.window_rows.children]
        assert len(labels) == 2, labels
        assert " · run 2 · steps" in labels[0] and " · run 1 · steps" in labels[1], labels
        assert "<th>run</th>" in panel.ranks.value
    finally:
        if panel is not None:
            panel.close()
        for p in procs:
            finish(p)
        control.close()
        segment.unlink(job)


def test_a_choice_among_windows_that_do_not_all_say_their_run() -> None:
    """Windows recorded before runs were counted have no run: a choice by run leaves them
    out, the window asked takes them, and a moved window is found by the steps asked."""
    from dynprof_nb.control import loading

    frame = loading.window_frame([
        {"rank": 0, "start": 5, "stop": 9, "status": "complete", "path": "/w/rank0_start5_stop9",
         "run": None, "started_at": 1.0},
        {"rank": 0, "start": 8, "stop": 12, "status": "complete",
         "path": "/w/rank0_start7_stop11", "run": 2, "started_at": 2.0},
    ])
    assert list(loading.choose(frame, run=2).start) == [8]
    assert list(loading.choose(frame, steps=(7, 11)).start) == [8]  # moved: asked 7..11
    assert list(loading.of_asked(frame, (5, 9, 2)).start) == [5]
    assert list(loading.of_asked(frame, (7, 11, 2)).start) == [8]
    with pytest.raises(dynprof_nb.JobError, match="no window 3: windows\\(run=2\\) lists 1"):
        loading.choose(frame, index=3, run=2)
