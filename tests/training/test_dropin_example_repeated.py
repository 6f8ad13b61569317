"""MindSpore 2.7's documented two-window ``step()`` example, 20 times under the drop-in, beside a
CPU-heavy process, as MindSpore's own system test ``test_net_with_dynamic_profiler_step`` runs
it: no pause anywhere, the file rewritten in place right before step 6's ``dp.step()``.

Issue 30: with a timed poll (MindSpore's 2 s, the relay's 0.5 s) whether the second window was
recorded depended on the step time and the machine's load. File mode now looks at the file in
every ``step()``, so every run must give both windows, under the names MindSpore's test looks
for, with the steps file mode documents: 2..5 exact, and 6..7 (written after step 6 ran) moved
to 7..8. The 20 runs are two processes of ten (MindSpore's import is slow), side by side.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from framework_jobs import marked_steps, mindspore_python, outputs_within, spawn
from jobutil import kill_process

from dynprof_nb.contract import segment, window_dirs
from dynprof_nb.training.dropin import job_name_for

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "ms_documented_example.py"
PROCESSES, RUNS = 2, 10
NAMES = ["rank0_start2_stop5", "rank0_start6_stop7"]


def test_both_windows_every_time_beside_a_busy_cpu(tmp_path: Path) -> None:
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    procs = []
    try:
        for p in range(PROCESSES):
            (tmp_path / f"p{p}").mkdir()
            procs.append(spawn(
                [EXAMPLE, "--monitor", "dropin", "--root", tmp_path / f"p{p}", "--styles",
                 "step", "--settle", "0", "--repeat", RUNS], python=mindspore_python(),
                cwd=tmp_path / f"p{p}", env={"GLOG_v": "3"}))
        outputs = outputs_within(procs, timeout=240)  # about 35 s here, pytest's limit 300
    finally:
        hog.kill()
        hog.wait()
        for proc in procs:
            if proc.returncode is None:
                kill_process(proc)
        for p in range(PROCESSES):
            for i in range(RUNS):
                segment.unlink(job_name_for(tmp_path / f"p{p}" / "step" / f"run{i}" / "cfg"))
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0 and "done step" in out, out[-3000:]
    runs = [tmp_path / f"p{p}" / "step" / f"run{i}" / "prof"
            for p in range(PROCESSES) for i in range(RUNS)]
    found = {str(run): sorted(d.name for d in run.iterdir()) for run in runs}
    assert all(names == NAMES for names in found.values()), found
    for run in runs:
        first, second = (window_dirs.read_manifest(run / name) for name in NAMES)
        assert (first["status"], second["status"]) == ("complete", "complete"), run
        assert sorted(marked_steps(run / NAMES[0])) == [2, 3, 4, 5], run
        assert sorted(marked_steps(run / NAMES[1])) == [7, 8], run
        assert (second["requested_start_step"], second["requested_stop_step"]) == (6, 7)
        for name in NAMES:  # MindSpore's analysis ran: what its own test opens is there
            assert list((run / name).glob("*_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json"))

