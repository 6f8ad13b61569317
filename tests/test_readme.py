"""The README's sample-window example runs as written, from any directory (it reads only the
package's own sample data)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_samples_example_runs_anywhere(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    (example,) = [b for b in blocks if "from dynprof_nb import samples" in b]
    code = example + "\nprint('ok', len(gpu.communication), len(npu.kernels))\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "ok 10 191"
