"""Another user's job is told as such (issue 50): a second, real user (uid 65534) asking for a
job name that root's running job holds hears that the job may belong to another user, whose
jobs it cannot see, and is not invited to make an empty job of that name with create=True.

It runs in a private ``/dev/shm`` (``unshare --mount``, a fresh tmpfs, as the squat test does),
so nothing is left in the machine's ``/dev/shm``.
"""

from __future__ import annotations

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

ASK = textwrap.dedent("""
    import sys, time
    import dynprof_nb
    job, who = sys.argv[1:3]
    if who == "owner":  # wait for the rank, then ask for a name nobody has
        deadline = time.monotonic() + 60
        while job not in dynprof_nb.jobs().job.tolist() and time.monotonic() < deadline:
            time.sleep(0.05)
        job = job + "-typo"
    try:
        dynprof_nb.attach(job)
        print(who.upper() + " attached")
    except dynprof_nb.JobError as exc:
        print(who.upper() + " " + str(exc))
""")


def test_a_job_of_another_user_is_not_called_no_job(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.fail("this test needs root (a private /dev/shm and a second uid)")
    for tool in ("unshare", "setpriv", "mount"):
        assert shutil.which(tool), f"{tool} (util-linux) is needed"
    job, py = unique_job("theirs"), sys.executable
    out = tmp_path / "out"
    script = (
        "mount -t tmpfs -o mode=1777 tmpfs /dev/shm && "
        f"{{ {py} {REPO / 'tests' / 'train_loop.py'} --job {job} --out {out} --step-ms 5 & }} "
        f'&& RANK=$! && {py} -c "$ASK" {job} owner && '
        f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups "
        f'{py} -c "$ASK" {job} other; kill $RANK; wait'
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), ASK=ASK)
    done = subprocess.run(
        ["unshare", "--mount", "--ipc", "--fork", "sh", "-c", script],
        capture_output=True, text=True, timeout=240, env=env,
    )
    said = {x.split(" ", 1)[0]: x.split(" ", 1)[1] for x in done.stdout.splitlines()
            if x.startswith(("OWNER ", "OTHER "))}
    assert set(said) == {"OWNER", "OTHER"}, done.stdout + done.stderr
    # the owner, alone on the machine, mistyped a name: preparing a job is the way on
    assert f"no job named '{job}-typo'" in said["OWNER"] and "create=True" in said["OWNER"]
    # the second user: root's job may be the one, and create=True would only shadow it
    assert f"no job of yours named '{job}'" in said["OTHER"], said["OTHER"]
    assert "may belong to another user, whose jobs you cannot see (uid 0" in said["OTHER"]
    assert "create=True" not in said["OTHER"] and "--create" not in said["OTHER"]
