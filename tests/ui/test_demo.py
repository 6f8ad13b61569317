"""The main job (`make demo` = `dynprof demo`) runs end to end on a machine with no framework."""

from __future__ import annotations

import subprocess
import sys


def test_demo_profiles_ten_steps_of_two_ranks(tmp_path):
    result = subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", "demo", "--output",
                             str(tmp_path / "out")], capture_output=True, text=True,
                            timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert out.count(" complete ") == 2  # both ranks' windows, published
    windows = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(windows) == 2 and windows[0].startswith("rank0_") and windows[1].startswith("rank1_")
    start, stop = (int(x) for x in windows[0].removeprefix("rank0_start").split("_stop"))
    assert stop - start == 9
    assert "Top operations" in out and "matmul" in out and "allreduce" in out
    assert "rank 1 (us)" in out and "Notes:" in out
