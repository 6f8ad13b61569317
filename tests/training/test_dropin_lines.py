"""The drop-in prints MindSpore's own window lines, as MindSpore's monitor prints them, once per
window edge: a script or a log watcher that looks for ``[Dynamic Profiler] Rank 0 Dynamic
profiler start at step 3, will stop at step 5`` finds it. A real training process (built-in
backend: the lines come from the drop-in, not from MindSpore), its window asked for in its
``profiler_config.json`` before training starts, as MindSpore's documented usage does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dynprof_nb.contract import segment

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
from dynprof_nb import DynamicProfilerMonitor
dp = DynamicProfilerMonitor(cfg_path=sys.argv[1], output_path=sys.argv[2], backend="builtin",
                            job=sys.argv[3], rank=0)
for step in range(8):
    sum(range(1000))
    dp.step()
dp.close()
"""


def test_the_dropin_prints_mindspores_window_lines_once(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "profiler_config.json").write_text(json.dumps({"start_step": 3, "stop_step": 5}))
    name = f"dropin-lines-{os.getpid()}"
    try:
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(cfg), str(tmp_path / "data"), name],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(REPO)))
    finally:
        segment.unlink(name)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("[Dynamic Profiler]")]
    assert lines == [
        "[Dynamic Profiler] Rank 0 Dynamic profiler start at step 3, will stop at step 5",
        "[Dynamic Profiler] Rank 0 Dynamic profiler stop at step 5",
    ], out.stdout
    assert (tmp_path / "data" / "rank0_start3_stop5").is_dir()
