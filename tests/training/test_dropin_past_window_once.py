"""A window written into ``profiler_config.json`` after its steps have passed is said once per
edit of the file (issue 48: it was said at every look, 8 times, each naming the rank's newer
step, though the README promises once). A real drop-in process (built-in backend) whose file is
edited twice, as a user does, to windows that have ended: two lines, one per edit, each naming
its window; the relay still looks at the file (it keeps refusing, so a rank that joins later
than the others would still be asked), it only does not repeat itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from dynprof_nb.contract import segment

REPO = Path(__file__).resolve().parents[2]
# steps of 20 ms and a relay that looks every 20 ms: each refused file is looked at again many
# times (at least once per step from its edit to the next), with the rank at a newer step
SCRIPT = """
import json, logging, sys, time
from pathlib import Path
logging.basicConfig(level=logging.WARNING, format="LOG %(levelname)s %(message)s")
from dynprof_nb import DynamicProfilerMonitor
cfg = Path(sys.argv[1]) / "profiler_config.json"
base = json.loads(cfg.read_text())
dp = DynamicProfilerMonitor(cfg_path=sys.argv[1], output_path=sys.argv[2], poll_interval=0.02,
                            backend="builtin", job=sys.argv[3], rank=0)
for step in range(1, 41):
    time.sleep(0.02)
    if step in (10, 25):  # windows whose steps have passed: 4-5, then 6-7
        first = 4 if step == 10 else 6
        cfg.write_text(json.dumps(dict(base, start_step=first, stop_step=first + 1)))
    dp.step()
dp.close()
"""


def test_a_window_already_past_is_said_once_per_edit(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "profiler_config.json").write_text(json.dumps({"start_step": 2, "stop_step": 3}))
    name = f"dropin-past-{os.getpid()}"
    try:
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(cfg), str(tmp_path / "data"), name],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(REPO)))
    finally:
        segment.unlink(name)
    assert out.returncode == 0, out.stderr[-3000:]
    said = [ln for ln in out.stderr.splitlines() if "has ended on every rank" in ln]
    assert len(said) == 2, out.stderr[-3000:]
    # each names its window and the step the rank was seen at when the edit was read (the
    # relay thread may read it before the rank's step() that follows the edit)
    for line, (first, last, edited) in zip(said, [(4, 5, 10), (6, 7, 25)], strict=True):
        seen = re.search(rf"window {first}-{last} has ended on every rank \(rank 0 at step (\d+)\)",
                         line)
        assert seen and last < int(seen[1]) <= edited, line
    assert all("Write a later window into the file." in ln for ln in said), said
    # the window asked for before training was recorded; the two that had passed were not
    assert sorted(d.name for d in (tmp_path / "data").iterdir()) == ["rank0_start2_stop3"]
