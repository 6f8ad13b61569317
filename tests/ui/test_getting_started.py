"""docs/getting-started/pytorch.md runs as written: its example job (the bash line) started as
printed, and its notebook cells typed into a real IPython shell one block at a time, against
that real PyTorch job: attach leaves ``job``, the window is the ten steps asked for, and the
summary, the interactive timeline and the advice come out of it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from jobutil import finish, unique_job, wait_until

from dynprof_nb.analysis.timeline_view import TimelineView
from dynprof_nb.contract import segment

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "getting-started" / "pytorch.md"

pytest.importorskip("torch")  # the page's job is a PyTorch one (make test installs torch)


def blocks(language: str, after: str) -> list[str]:
    text = PAGE.read_text()
    return re.findall(rf"```{language}\n(.*?)```", text[text.index(after):], re.S)


def test_the_pytorch_page_runs_as_written(ip: InteractiveShell, magics, tmp_path: Path) -> None:
    name = unique_job("gs-torch")
    (command,) = [b for b in blocks("bash", "## 2.") if "examples/train_torch.py" in b]
    argv = shlex.split(command.strip().rstrip("&").replace("llama", name))
    assert argv[:2] == ["python", "examples/train_torch.py"], argv
    proc = subprocess.Popen([sys.executable, str(REPO / argv[1]), *argv[2:]], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    ip.user_ns.pop("job", None)
    try:
        cells = blocks("python", "## 3.")
        assert "%dynprof attach llama" in cells[0]
        _wait_for_rank(name, proc)  # as a person waits for the job they started
        for cell in cells:
            with capture_output():
                result = ip.run_cell(cell.replace("llama", name), store_history=False)
            assert result.success, (cell, result.error_in_exec)
        w = ip.user_ns["w"]
        steps = sorted(w.steps["step"].unique())
        assert len(steps) == 10 and steps[-1] - steps[0] == 9, steps
        assert len(w.ops) > 0 and (w.ops["name"] == "aten::conv2d").any()
        view = ip.run_cell("w.timeline()", store_history=False).result
        assert isinstance(view, TimelineView)
    finally:
        finish(proc)
        job = ip.user_ns.pop("job", None)
        if job is not None:
            job.close()
        magics.job = None
        segment.unlink(name)


def _wait_for_rank(name: str, proc: subprocess.Popen) -> None:
    """Until ``dynprof jobs`` lists the job with a live rank (importing torch takes seconds)."""
    import dynprof_nb

    def live() -> bool:
        frame = dynprof_nb.jobs()
        return bool(((frame.job == name) & (frame.live > 0)).any())

    wait_until(live, 120, "the example job's rank to join", proc)
