"""Run code as a second, real user (uid 65534, nobody) for the cluster security tests.

``setpriv`` drops to uid/gid 65534 with no groups and no capabilities, inside a private mount
namespace in which only what that user's Python needs (the interpreter, the venv, this
checkout) is made reachable; nothing changes for any other process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from nodes import child_env

OTHER_UID = OTHER_GID = 65534  # nobody
ATTACKER = Path(__file__).resolve().parent / "attacker.py"


def as_other_user(argv: list[str], home: Path) -> list[str]:
    """``argv`` run as uid 65534 (nobody), with no capabilities.

    The interpreter, this checkout's venv and the checkout itself may lie under directories
    other users cannot enter (/root is 0700; a clone made with ``mktemp -d`` is too). The
    process gets a private mount namespace in which each such directory is covered by a 0755
    tmpfs carrying bind mounts of only what it needs (:func:`reachable_script`): nothing else
    there is reachable, and nothing changes for any other process."""
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to run a process as another user"
    stash = Path(tempfile.mkdtemp(prefix="mounts-", dir=home))  # one per process started
    script = (f"{reachable_script(needed_paths(), stash)}exec {setpriv} --reuid={OTHER_UID} "
              f'--regid={OTHER_GID} --clear-groups --inh-caps=-all "$0" "$@"')
    return ["unshare", "--mount", "--fork", "sh", "-c", script, *argv]


def needed_paths() -> list[Path]:
    """What a second user's Python needs: the interpreter's prefix, this venv, this checkout
    (PYTHONPATH, the training loop), every directory on sys.path (symlinks resolved)."""
    repo = Path(__file__).resolve().parents[2]
    paths = [Path(sys.base_prefix), Path(sys.prefix), Path(sys.executable).parent, repo,
             *(Path(p) for p in sys.path if p)]
    return sorted({p.resolve() for p in paths if p.exists()})


def reachable_script(needed: list[Path], stash: Path) -> str:
    """Shell commands (run as root in the private mount namespace) after which every path in
    ``needed`` can be entered by anyone: each directory on the way that others cannot enter
    (mode without o+x) is covered, shallowest first, by a 0755 tmpfs into which its entries
    on the way (all of them, for a needed directory itself) are bind-mounted back. Symlinks
    are recreated as they were."""
    import shlex

    def blocked(d: Path) -> bool:
        return d.is_dir() and not d.stat().st_mode & 0o001

    dirs = {a for p in needed for a in [p, *p.parents] if blocked(a)}
    lines, n = [], 0
    for d in sorted(dirs, key=lambda d: len(d.parts)):
        if any(p == d or p in d.parents for p in needed):
            keep = sorted(d.iterdir())  # a needed directory: all of it
        else:
            keep = sorted({d / p.relative_to(d).parts[0] for p in needed if d in p.parents})
        restore = []
        for entry in keep:
            q = shlex.quote(str(entry))
            if entry.is_symlink():
                restore.append(f"ln -s {shlex.quote(os.readlink(entry))} {q}")
                continue
            n += 1
            held = shlex.quote(str(stash / str(n)))
            make = "mkdir" if entry.is_dir() else "touch"
            lines.append(f"{make} {held} && mount --bind {q} {held}")
            restore.append(f"{make} {q} && mount --bind {held} {q}")
        lines.append(f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(d))}")
        lines += restore
    return "".join(f"{line} && " for line in lines)


def run_as_other_user(code: str, args: list[str], home: Path, timeout: float = 240) -> dict:
    """Run ``code`` as uid 65534 (nobody); it prints one JSON line, returned as a dict."""
    env = dict(child_env(), HOME=str(home))
    proc = subprocess.run(as_other_user([sys.executable, "-c", textwrap.dedent(code), *args],
                                        home), env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=str(home))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def attack(targets: list[str], certs: Path | tuple[Path, Path, Path] | None = None
           ) -> tuple[dict, list[str]]:
    """Run attacker.py as uid 65534 against ``targets``, with a copy of ``certs`` (the
    cluster's certificate directory, or its CA, certificate and key files) or none; returns
    what it saw and the files its payloads managed to write (must be none)."""
    markers = Path(tempfile.mkdtemp(prefix="dynprof-markers-"))  # root's, 0700
    home = Path(tempfile.mkdtemp(prefix="dynprof-other-user-"))
    try:
        copy = ""
        if certs is not None:
            copy = str(home / "certs")
            os.mkdir(copy)
            files = certs if isinstance(certs, tuple) else (
                certs / "ca.pem", certs / "cert.pem", certs / "key.pem")
            for src, name in zip(files, ("ca.pem", "cert.pem", "key.pem"), strict=True):
                shutil.copy(src, Path(copy) / name)
        for p in [home, *home.rglob("*")]:
            os.chown(p, OTHER_UID, OTHER_GID)
        proc = subprocess.run(
            as_other_user([sys.executable, str(ATTACKER), json.dumps(targets), copy,
                           str(markers)], home),
            env=dict(child_env(), HOME=str(home)), capture_output=True, text=True,
            timeout=300, cwd=str(home))
        assert proc.returncode == 0, proc.stderr[-3000:]
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
        time.sleep(0.5)  # a payload that ran would have written by now (os.system is quick)
        return seen, sorted(os.listdir(markers))
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(markers, ignore_errors=True)
