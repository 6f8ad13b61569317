"""Reliability matrix, squatting: another local user (a real uid 65534 process) pre-creates every
per-user name dynprof_nb once used in ``/dev/shm`` (the private directory's, the stack
directory's and a job segment's), and the victim's job works as if nothing were there.

It runs in a private ``/dev/shm`` (``unshare --mount``, a fresh tmpfs, as the cluster tests'
nodes do), so the planted names cost no other test on this machine anything.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from jobutil import unique_job

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534

VICTIM = textwrap.dedent("""
    import json, os, subprocess, sys, time
    import dynprof_nb
    from dynprof_nb import locks
    from dynprof_nb.contract import segment
    from dynprof_nb.contract.shared_layout import stack_dir

    job, out, loop = sys.argv[1:4]
    rank = subprocess.Popen([sys.executable, loop, "--job", job, "--rank", "0", "--out", out,
                             "--step-ms", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    control = dynprof_nb.attach(job, create=True)
    deadline = time.monotonic() + 60
    while not control.live_slots() and time.monotonic() < deadline:
        time.sleep(0.05)
    step = max(s.step for s in control.live_slots())
    control.start(step + 20, step + 25)
    control.wait(timeout=60, progress=False)
    from dynprof_nb.control.stacks import read_side
    deadline = time.monotonic() + 60
    while (not read_side(job, control.live_slots()[0])  # the side file names the threads
           and time.monotonic() < deadline):
        time.sleep(0.05)
    stacks = control.stacks()
    cli = subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", "jobs"],
                         capture_output=True, text=True, timeout=60)
    result = {
        "private": locks.private_dir(),
        "segment": segment.segment_path(job),
        "stacks_dir": str(stack_dir()),
        "windows": list(control.windows().status),
        "stack_threads": sorted(set(stacks.thread)),
        "silent": stacks.silent,
        "cli": cli.stdout + cli.stderr,
    }
    rank.terminate()
    _, err = rank.communicate(timeout=60)
    result["rank_err"] = err
    control.close()
    print("RESULT " + json.dumps(result), flush=True)
""")


def test_every_planted_per_user_name_costs_the_victim_nothing(tmp_path):
    if os.getuid() != 0:
        pytest.fail("this test needs root (a private /dev/shm and a second uid)")
    for tool in ("unshare", "setpriv", "mount"):
        assert shutil.which(tool), f"{tool} (util-linux) is needed"
    uid, job = os.getuid(), unique_job("planted")
    planted = {
        f"/dev/shm/dynprof_nb.{uid}": "dir",  # the private (lock) directory's name
        f"/dev/shm/dynprof_nb-stacks.{uid}": "dir",  # the old stack directory's
        f"/dev/shm/dynprof_nb.{uid}.{job}": "file",  # the old segment name
    }
    plant = "; ".join(
        f"mkdir -m 700 {p}" if kind == "dir" else f"head -c 4096 /dev/zero > {p}"
        for p, kind in planted.items()
    )
    listing = " ".join(planted)
    script = (
        "mount -t tmpfs -o mode=1777 tmpfs /dev/shm && "
        f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups sh -c '{plant}' && "
        f"{sys.executable} -c \"$VICTIM\" {job} {tmp_path / 'out'} "
        f"{REPO / 'tests' / 'train_loop.py'}"
        f" && stat -c '%n %u %F' {listing}"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), VICTIM=VICTIM)
    done = subprocess.run(["unshare", "--mount", "--ipc", "--fork", "sh", "-c", script],
                          capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    private = result["private"]
    assert private not in planted and os.path.basename(private).startswith(f"dynprof_nb-{uid}-")
    assert len(os.path.basename(private)) >= len(f"dynprof_nb-{uid}-") + 32  # 128 random bits
    assert result["segment"].startswith(private + "/")
    assert result["stacks_dir"] == private + "/stacks"
    assert result["windows"] == ["complete"]  # the job was profiled
    assert "MainThread" in result["stack_threads"] and not result["silent"]
    assert job in result["cli"]  # another process of the user found the job
    assert "dynprof_nb is off" not in result["rank_err"], result["rank_err"]
    # the squatter's names were neither used nor removed
    stats = {p: (int(u), kind) for p, u, *kind in
             (x.split(" ", 2) for x in done.stdout.splitlines()[-3:])}
    assert {p: s[0] for p, s in stats.items()} == dict.fromkeys(planted, NOBODY), stats
