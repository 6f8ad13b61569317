"""Pressing Jupyter's stop button during ``%dynprof wait``, in each notebook that waits, stops
only the waiting: the training job the notebook started keeps training.

A real kernel (jupyter_client, as Jupyter runs it: in its own process group, the stop button
is SIGINT to that whole group) runs the notebook's own cells up to its first window; the window
asked for is far ahead so that the wait is still waiting when the button is pressed. Then the
notebook's own wait cell runs and the test presses stop (``interrupt_kernel``).
"""

from __future__ import annotations

import json
import os
import queue
import time
from pathlib import Path

import pytest
from jobutil import unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
# notebook: (the env variable naming its job, its cleanup code)
WAITING = {
    "quickstart.ipynb": ("DYNPROF_JOB", "stop_ranks(procs)\njob.close()"),
    "pytorch.ipynb": ("DYNPROF_TORCH_JOB", "proc.terminate()\nproc.wait(60)\njob.close()"),
}


def _code_cells(name: str) -> list[str]:
    cells = json.loads((NOTEBOOKS / name).read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def test_every_notebook_that_waits_is_tested_here():
    waits = {p.name for p in NOTEBOOKS.glob("*.ipynb")
             if any("%dynprof wait" in c or ".wait(" in c for c in _code_cells(p.name))}
    assert waits == set(WAITING)


def _run(kc, code: str, timeout: float = 180) -> str:
    out: list[str] = []

    def hook(msg: dict) -> None:
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append("ERROR " + "\n".join(msg["content"]["traceback"]))

    reply = kc.execute_interactive(code, output_hook=hook, timeout=timeout)
    text = "".join(out)
    assert reply["content"]["status"] == "ok", text
    return text


@pytest.mark.parametrize("name", sorted(WAITING))
def test_stop_button_during_wait_leaves_training_running(name, tmp_path):
    from jupyter_client.manager import start_new_kernel

    variable, cleanup = WAITING[name]
    job = unique_job("stopbtn")
    env = dict(os.environ, PYTHONPATH=str(REPO), **{variable: job})
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(NOTEBOOKS), env=env)
    cells = _code_cells(name)
    first_start = next(i for i, c in enumerate(cells) if "%dynprof start" in c)
    wait_cell = next(c for c in cells[first_start:] if "%dynprof wait" in c)
    control = None
    try:
        for cell in cells[:first_start]:  # setup, %load_ext, attach (waits for the ranks)
            _run(kc, cell)
        control = dynprof_nb.attach(job)
        pids = sorted(s.pid for s in control.live_slots())
        assert pids
        _run(kc, "%dynprof start +100000 +100009")  # still armed when stop is pressed
        msg_id = kc.execute(wait_cell)
        seen = ""
        deadline = time.monotonic() + 60
        while "job " + job not in seen:  # the wait's progress is showing: it is waiting
            assert time.monotonic() < deadline, seen
            try:
                msg = kc.get_iopub_msg(timeout=5)
            except queue.Empty:
                continue
            content = msg["content"]
            seen += content.get("text", "") + json.dumps(content.get("data", {}))
        km.interrupt_kernel()  # the stop button
        reply = kc.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=60)
        while True:  # what the cell showed, up to its end
            msg = kc.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
            seen += msg["content"].get("text", "")
        assert reply["content"]["status"] == "ok", seen  # one line, not a KeyboardInterrupt
        assert "stopped waiting; window" in seen and "is still armed" in seen, seen
        steps = {s.pid: s.step for s in control.live_slots()}
        wait_until(lambda: all(s.step > steps.get(s.pid, 0) for s in control.live_slots()),
                   timeout=60, what="training to go on after the stop button")
        assert sorted(s.pid for s in control.live_slots()) == pids
        assert {s.state for s in control.live_slots()} == {"armed"}
        alive = _run(kc, "print(all(p.poll() is None for p in globals().get('procs') "
                         "or [proc]))")
        assert alive.strip().splitlines()[-1] == "True", alive
        _run(kc, cleanup)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        if control is not None:
            for slot in control.live_slots():  # never leave a rank behind a failed test
                os.kill(slot.pid, 15)
            wait_until(lambda: not control.live_slots(), what="the ranks to stop")
            control.close()
        segment.unlink(job)
