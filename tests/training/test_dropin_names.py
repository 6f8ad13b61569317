"""The drop-in's job name is one a person recognises in ``dynprof jobs`` (the config directory
and the directory that holds it), the same for every rank and for a notebook that asks with the
same path, distinct for two copies of a project, and said once on rank 0 when training starts."""

from __future__ import annotations

import os
import sys

from jobutil import run_script

from dynprof_nb.contract import segment
from dynprof_nb.training.dropin import job_name_for


def test_a_drop_in_job_is_named_after_its_directories(tmp_path, monkeypatch):
    monkeypatch.delenv("DYNPROF_JOB", raising=False)
    cfg = tmp_path / "llama" / "cfg"
    name = job_name_for(cfg)
    assert name.startswith("llama-cfg-") and segment.check_job_name(name) == name
    assert job_name_for(f"{cfg}/") == name  # the same directory, however it is written
    assert job_name_for(tmp_path / "copy" / "llama" / "cfg") != name  # another copy
    odd = job_name_for(tmp_path / "my run (2)" / ("x" * 80))
    assert segment.check_job_name(odd) == odd and odd.startswith("my-run--2-xxxx")
    assert segment.check_job_name(job_name_for("/")) == job_name_for("/")
    monkeypatch.setenv("DYNPROF_JOB", "chosen")
    assert job_name_for(cfg) == "chosen"


def test_rank_zero_says_the_job_name_once(tmp_path):
    script = (
        "from dynprof_nb import DynamicProfilerMonitor\n"
        "dp = DynamicProfilerMonitor(cfg_path='llama/cfg', output_path='prof', rank=0)\n"
        "for _ in range(3):\n"
        "    dp.step()\n"
        "dp.close()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DYNPROF_JOB"}
    done = run_script([sys.executable, "-c", script], timeout=120, cwd=tmp_path,
                      env=dict(env, PYTHONPATH=os.getcwd()))
    name = job_name_for(tmp_path / "llama" / "cfg")
    if name in segment.list_jobs():  # a closed job's segment may outlive it: leave none
        segment.unlink(name)
    assert done.returncode == 0, done.stdout + done.stderr
    said = [line for line in done.stdout.splitlines() if name in line]
    assert said == [f"dynprof_nb: this is job {name!r} (%dynprof attach {name}; dynprof status)"]
