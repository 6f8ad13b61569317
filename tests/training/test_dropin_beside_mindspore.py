"""The drop-in beside real MindSpore 2.7.0: MindSpore's own documented examples run once with
MindSpore's ``DynamicProfilerMonitor`` and once with the drop-in (one import line apart), and
must give the same windows, directories and files.

The two runs are one process each, side by side (MindSpore's import is slow); each runs both
call styles of ``tests/ms_documented_example.py``: ``step()`` with the file edited between two
windows, and ``Model.train(callbacks=[dp])``. MindSpore itself is the oracle for what each
window holds: the number of times each op ran in it (its ``cpu_op_execute_timestamp`` file).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from framework_jobs import (
    marked_steps,
    mindspore_op_times,
    mindspore_python,
    outputs_within,
    spawn,
)
from jobutil import kill_process

import dynprof_nb
from dynprof_nb.contract import segment, window_dirs
from dynprof_nb.training.dropin import job_name_for
from dynprof_nb.training.gcpauses import GC_EVENT

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "ms_documented_example.py"
# what the drop-in adds to a window
OURS_ONLY = {window_dirs.MANIFEST, "dynprof_steps.csv", "thread_cpu.json"}


def run_both(root: Path) -> dict[str, Path]:
    """Run the example with each monitor at once; return each one's output root."""
    procs = {}
    try:
        for kind in ("mindspore", "dropin"):
            (root / kind).mkdir(parents=True)
            procs[kind] = spawn([EXAMPLE, "--monitor", kind, "--root", root / kind],
                                python=mindspore_python(), cwd=root / kind, env={"GLOG_v": "3"})
        outputs = dict(zip(procs, outputs_within(list(procs.values()), timeout=240),
                           strict=True))
    finally:
        for proc in procs.values():
            if proc.returncode is None:
                kill_process(proc)
        for style in ("step", "callback"):
            segment.unlink(job_name_for(root / "dropin" / style / "cfg"))
    for kind, proc in procs.items():
        assert proc.returncode == 0, f"{kind} run failed:\n{outputs[kind]}"
        assert "done callback" in outputs[kind], outputs[kind]
    return {kind: root / kind for kind in procs}


def shape(window: Path) -> set[str]:
    """A window's files with what differs between any two runs (host, pid, time) masked."""
    out = set()
    for p in window.rglob("*"):
        if p.is_file():
            rel = str(p.relative_to(window))
            rel = re.sub(r"^[^/]+_\d+_\d+_ascend_ms/", "HOST_PID_TIME_ascend_ms/", rel)
            out.add(re.sub(r"profiler_\d+_\d+\.log$", "profiler_TIME_PID.log", rel))
    return out


def op_counts(window: Path) -> Counter[str]:
    """How often each op ran in a window. The example builds a new optimizer every step, so
    MindSpore numbers its ops by step (``ApplyMomentum-op6``): the number is dropped."""
    counts: Counter[str] = Counter()
    for name, times in mindspore_op_times(window).items():
        if name == GC_EVENT:  # the drop-in's own garbage-collection spans (MindSpore has none)
            continue
        counts[re.sub(r"-op\d+$", "", name)] += len(times)
    return counts


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return run_both(tmp_path_factory.mktemp("ms_beside"))


@pytest.mark.parametrize("style, names", [
    ("step", ["rank0_start2_stop5", "rank0_start6_stop7"]),
    ("callback", ["rank0_start3_stop5"]),
])
def test_same_windows_directories_and_files_as_mindspore(runs, style: str, names) -> None:
    theirs, ours = (runs[k] / style / "prof" for k in ("mindspore", "dropin"))
    assert sorted(p.name for p in theirs.iterdir()) == names  # what MindSpore's test looks for
    assert sorted(p.name for p in ours.iterdir()) == names
    for name in names:
        mine = shape(ours / name)
        assert OURS_ONLY <= mine
        assert mine - OURS_ONLY == shape(theirs / name), name
        assert "HOST_PID_TIME_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json" in mine
        # the same number of steps: every op ran as often in our window as in MindSpore's
        assert op_counts(ours / name) == op_counts(theirs / name), name
        loaded = [dynprof_nb.load_window(d) for d in (ours / name, theirs / name)]
        assert {re.sub(r"-op\d+$", "", n) for n in loaded[0].ops.name} - {GC_EVENT} == \
            {re.sub(r"-op\d+$", "", n) for n in loaded[1].ops.name}


def test_step_numbers_and_the_moved_window_say_what_was_recorded(runs) -> None:
    step = runs["dropin"] / "step" / "prof"
    assert sorted(marked_steps(step / "rank0_start2_stop5")) == [2, 3, 4, 5]  # exact
    # 6..7 was written after step 6 ran, before its dp.step(), which applies it: moved to
    # 7..8 (MindSpore's own monitor sees it a poll later, during step 7, and records 8..9;
    # the same number of steps, which the op counts above compare)
    moved = window_dirs.read_manifest(step / "rank0_start6_stop7")
    assert sorted(marked_steps(step / "rank0_start6_stop7")) == [7, 8]
    assert (moved["start_step"], moved["stop_step"], moved["status"]) == (7, 8, "complete")
    assert (moved["requested_start_step"], moved["requested_stop_step"]) == (6, 7)
    assert "recording steps 7-8 instead" in moved["note"]
    callback = runs["dropin"] / "callback" / "prof" / "rank0_start3_stop5"
    assert sorted(marked_steps(callback)) == [3, 4, 5]
    # the file's view of the drop-in's job finds the moved window by the name asked for
    files = dynprof_nb.attach(cfg_path=runs["dropin"] / "step" / "cfg")
    files.settle_s = 0.0
    row = files.status().iloc[0]
    assert (row.state, row.window) == ("written", "6-7") and "recorded steps 7-8" in row.error
