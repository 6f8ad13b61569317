"""What a MindSpore user's log shows under the drop-in (issue 48): MindSpore's own window lines,
once per window edge, and no warning that the profiler API the drop-in drives is going away.

MindSpore 2.7's documented usage (``tests/ms_documented_example.py``, both call styles) under
the drop-in, with MindSpore's default log level (``GLOG_v=2``: its warnings are shown, as a user
sees them). ``mindspore.Profiler`` logs at each construction that it "will be deprecated and
removed"; the backend drives ``mindspore.profiler.profile``, which MindSpore 2.7 recommends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from framework_jobs import mindspore_python, outputs_within, spawn
from jobutil import kill_process

from dynprof_nb.contract import segment
from dynprof_nb.training.dropin import job_name_for

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "ms_documented_example.py"
DEPRECATED = "'mindspore.Profiler' will be deprecated and removed"
# every window of the example: the step style's two (the second written after step 6 ran, so
# moved to 7..8, file mode's rule) and the callback style's one
WINDOWS = [(2, 5), (7, 8), (3, 5)]


def test_mindspores_window_lines_and_no_deprecation_warning(tmp_path: Path) -> None:
    proc = spawn([EXAMPLE, "--monitor", "dropin", "--root", tmp_path, "--settle", "0"],
                 python=mindspore_python(), cwd=tmp_path, env={"GLOG_v": "2"})
    try:
        (out,) = outputs_within([proc], timeout=240)
    finally:
        if proc.returncode is None:
            kill_process(proc)
        for style in ("step", "callback"):
            segment.unlink(job_name_for(tmp_path / style / "cfg"))
    assert proc.returncode == 0 and "done callback" in out, out[-3000:]
    # the capture shows MindSpore's warnings: this one it logs for every profiler without a
    # schedule (its own monitor's too), so the deprecation line would be seen if logged
    assert "[WARNING] ME(" in out, out[-3000:]
    assert DEPRECATED not in out, out[-3000:]
    assert "Incorrect schedule" not in out and "profile is stopped" not in out, out[-3000:]
    lines = [ln for ln in out.splitlines() if ln.startswith("[Dynamic Profiler]")]
    assert lines == [
        line
        for start, stop in WINDOWS
        for line in (
            f"[Dynamic Profiler] Rank 0 Dynamic profiler start at step {start}, "
            f"will stop at step {stop}",
            f"[Dynamic Profiler] Rank 0 Dynamic profiler stop at step {stop}",
        )
    ], out[-3000:]
    for style, names in (("step", ["rank0_start2_stop5", "rank0_start6_stop7"]),
                         ("callback", ["rank0_start3_stop5"])):
        prof = tmp_path / style / "prof"
        assert sorted(d.name for d in prof.iterdir()) == names
        for name in names:  # MindSpore's analysis ran into each window
            assert list((prof / name).glob("*_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json"))
