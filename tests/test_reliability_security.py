"""Reliability matrix, security: the segment is private and owner-checked, nothing read from the
segment or a trace file is unpickled or evaluated, and a config cannot make a rank write
outside the directory it names. See docs/reliability.md (test_segment.py covers the owner and
mode checks on a segment changed in place; these cases use real processes and real files).
"""

from __future__ import annotations

import ast
import os
import pickle
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobutil import finish, spawn_rank, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment, window_dirs
from dynprof_nb.contract.segment import Segment
from dynprof_nb.traces import TraceFormatError

PACKAGE = Path(dynprof_nb.__file__).parent
OTHER_UID = 12345


def test_segment_is_0600_even_when_created_under_umask_000(tmp_path):
    job = unique_job("umask")
    code = textwrap.dedent(f"""
        import os, sys
        os.umask(0)
        import dynprof_nb
        m = dynprof_nb.Monitor(job={job!r}, rank=0, output_path={str(tmp_path)!r})
        print("ready", flush=True); sys.stdin.readline(); m.close()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        st_ = os.stat(segment.segment_path(job))
        assert stat.S_IMODE(st_.st_mode) == 0o600 and st_.st_uid == os.getuid()
    finally:
        proc.communicate("bye\n", timeout=30)
        segment.unlink(job)


def test_segment_name_squatted_by_another_user_costs_the_job_nothing(tmp_path):
    """Another user pre-creates this user's old segment name in ``/dev/shm`` itself (which is
    world-writable) to feed the job configs or turn it off. Segments live in the user's
    private directory now, so the job attaches and profiles as usual; the squatter's file is
    neither used nor removed."""
    if os.getuid() != 0:
        pytest.fail("this test needs root to run a process as another user")
    job = unique_job("squat")
    path = Path(f"/dev/shm/{segment.PREFIX}.{os.getuid()}.{job}")
    assert str(path) != segment.segment_path(job)
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to run a process as another user"
    subprocess.run([setpriv, f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
                    "sh", "-c", f"umask 0; head -c {segment.SEGMENT_BYTES} /dev/zero > {path}"],
                   check=True, timeout=30)
    control = None
    try:
        assert path.stat().st_uid == OTHER_UID
        before = path.read_bytes()
        control = dynprof_nb.attach(job, create=True)
        rank = spawn_rank(job, 0, tmp_path, steps=50)
        out, err = rank.communicate(timeout=60)
        assert out.strip() == "steps=50"
        assert "dynprof_nb is off" not in err and "Traceback" not in err, err
        assert path.read_bytes() == before and path.stat().st_uid == OTHER_UID
    finally:
        if control is not None:
            control.close()
        segment.unlink(job)
        path.unlink(missing_ok=True)


# -- nothing is unpickled or evaluated -------------------------------------------------------

FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle",
                     "joblib", "jsonpickle"}
FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__"}  # called by bare name
FORBIDDEN_METHODS = {"read_pickle", "unsafe_load", "full_load"}  # pandas, yaml


def _offences(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in FORBIDDEN_MODULES:
                found.append(node.module)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if (isinstance(func, ast.Name) and name in FORBIDDEN_BUILTINS) or (
                    isinstance(func, ast.Attribute) and name in FORBIDDEN_METHODS | {"eval"}):
                found.append(f"{name}() at line {node.lineno}")
            if name == "load" and isinstance(func, ast.Attribute) and \
                    getattr(func.value, "id", "") == "yaml":
                found.append(f"yaml.load() at line {node.lineno}")
            for kw in node.keywords:  # np.load(..., allow_pickle=True)
                if kw.arg == "allow_pickle" and not (isinstance(kw.value, ast.Constant)
                                                     and kw.value.value is False):
                    found.append(f"allow_pickle at line {node.lineno}")
    return found


def test_no_code_path_unpickles_or_evaluates_data():
    """A static check over the whole package: no pickle-family module, no eval/exec/compile,
    no allow_pickle, no yaml.load. (The scanner itself is checked on a bad sample.)"""
    bad = ast.parse("import pickle\nfrom marshal import loads\neval(x)\n"
                    "np.load(p, allow_pickle=True)\nyaml.load(s)\npd.read_pickle(p)\n"
                    "re.compile('x')\n")
    assert len(_offences(bad)) == 6  # re.compile is fine
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20
    offences = {}
    for f in files:
        rel, tree = str(f.relative_to(PACKAGE)), ast.parse(f.read_text(encoding="utf-8"))
        found = _offences(tree)
        if rel == SAFE_UNPICKLER:  # the one unpickler: it imports and calls nothing
            found = [o for o in found if o != "pickle"]
        elif _pickle_writes_only(tree):  # pickle.dumps of plain data (a Flight Recorder dump)
            found = [o for o in found if o != "pickle"]
        if found:
            offences[rel] = found
    assert offences == {}


# Flight Recorder dumps are pickles: they are read only through this module's Unpickler, whose
# find_class and persistent_load refuse everything (tests/flight_recorder/test_reader.py runs
# a dump that would call os.system through it and checks nothing ran)
SAFE_UNPICKLER = "flight_recorder/safe_pickle.py"


def _pickle_writes_only(tree: ast.AST) -> bool:
    """The module uses ``pickle`` only to write (``pickle.dumps``/``dump``): nothing it reads
    is unpickled."""
    uses = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and getattr(node.value, "id", "") == "pickle"}
    froms = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and (node.module or "").split(".")[0] == "pickle"]
    return not froms and bool(uses) and uses <= {"dumps", "dump"}


class _Bomb:
    """Unpickling this creates a marker file: proof that something unpickled our data."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: D105
        return (Path.touch, (self.marker,))


def test_pickled_payloads_in_the_segment_and_in_trace_files_are_never_loaded(tmp_path):
    marker = tmp_path / "UNPICKLED"
    payload = pickle.dumps(_Bomb(marker))
    # 1) as the config bytes of a live job, read by a rank and by the notebook
    job = unique_job("pickle")
    control = dynprof_nb.attach(job, create=True)
    monitor = dynprof_nb.Monitor(job=job, rank=0, output_path=tmp_path / "out",
                                 backend="builtin")
    try:
        control.segment(create=True).write_config(payload)
        for _ in range(3):
            monitor.step()
        assert "not valid JSON" in monitor.last_error
        with pytest.warns(UserWarning, match="cannot be used"):
            control.config  # noqa: B018
    finally:
        monitor.close()
        control.close()
        segment.unlink(job)
    # 2) as every kind of trace file, alone and in a window directory
    window = tmp_path / "rank0_start1_stop2"
    (window / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    names = ["trace.json", "x.pt.trace.json", "trace.json.gz", "kernel_details.csv",
             "communication.json", "ascend.db", "data.pkl", "data.npy"]
    for name in names:
        (window / name).write_bytes(payload)
    np.save(window / "arr.npy", np.array([_Bomb(marker)], dtype=object), allow_pickle=True)
    for name in names:
        try:
            dynprof_nb.load_trace(window / name)
        except (TraceFormatError, ValueError):
            pass
    try:
        w = dynprof_nb.load_window(window)
        for kind in ("events", "ops", "steps", "kernels", "memory", "communication"):
            try:
                getattr(w, kind)
            except (TraceFormatError, ValueError):
                pass
    except (TraceFormatError, ValueError):
        pass
    assert not marker.exists(), "a pickle from the segment or a trace file was loaded"


# -- no writing outside the directory the config names -----------------------------------------


@settings(max_examples=200, deadline=None)
@given(rank=st.integers(-2**63, 2**63 - 1), start=st.integers(1, 2**63 - 1),
       stop=st.integers(1, 2**63 - 1))
def test_window_names_are_a_single_plain_path_component(rank, start, stop):
    name = window_dirs.window_name(rank, start, stop)
    assert "/" not in name and "\\" not in name and ".." not in name and "\0" not in name
    assert Path(name).name == name and window_dirs.WINDOW_RE.match(name.replace("rank-", "rank"))


@pytest.mark.parametrize("bad", ["../etc", "0/../../x", "1\0", " 1/2"])
def test_window_name_parts_that_are_not_integers_are_refused(bad):
    with pytest.raises(ValueError):
        window_dirs.window_name(bad, 1, 2)  # type: ignore[arg-type]


@pytest.mark.parametrize("prof_path", ["{base}/a/../b", "{base}/b/./", "{base}//b"])
def test_a_window_lands_exactly_in_the_directory_the_config_names(tmp_path, prof_path):
    """``..`` in prof_path names a directory like any other path: the window goes there, as
    one ``rank{r}_start{s}_stop{e}`` child, and nothing is written anywhere else."""
    base = tmp_path / "sandbox"
    (base / "a").mkdir(parents=True)
    named = Path(os.path.abspath(prof_path.format(base=base)))
    assert named == base / "b"
    job = unique_job("dots")
    control = dynprof_nb.attach(job, create=True)
    monitor = dynprof_nb.Monitor(job=job, rank=3, output_path=tmp_path / "default",
                                 backend="builtin")
    try:
        control.start(2, 4, prof_path=prof_path.format(base=base))
        for _ in range(6):
            monitor.step()
        monitor.close()
        written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
        assert written and all(p.parts[:3] == ("sandbox", "b", "rank3_start2_stop4")
                               for p in written), written
        assert not (tmp_path / "default").exists() and monitor.last_error == ""
    finally:
        control.close()
        segment.unlink(job)


def test_a_live_rank_reports_a_prof_path_it_cannot_use_and_trains_on(tmp_path):
    """A prof_path with a NUL byte (no such path can exist) fails the window, not the rank."""
    job = unique_job("nul")
    control = dynprof_nb.attach(job, create=True)
    rank = spawn_rank(job, 0, tmp_path, step_ms=2)
    try:
        wait_until(lambda: control.live_slots() and control.live_slots()[0].step > 0)
        control.start("+100", "+101", prof_path=str(tmp_path / "x\0y"))
        wait_until(lambda: control.status().error[0], timeout=30, what="the report")
        assert "could not start" in control.status().error[0]
        assert rank.poll() is None
        out, err = finish(rank)
        assert int(out.split("=")[1]) > 0 and "Traceback" not in err
    finally:
        control.close()
        segment.unlink(job)
        if rank.poll() is None:
            rank.kill()


def test_segment_refuses_to_attach_through_a_symlinked_name(tmp_path):
    """A symlink planted at the segment's name is not followed (shm_open uses O_NOFOLLOW)."""
    job = unique_job("shmlink")
    target = tmp_path / "target"
    target.write_bytes(b"\0" * 16)
    link = Path(segment.segment_path(job))
    link.symlink_to(target)
    try:
        with pytest.raises((OSError, segment.SegmentError)):
            Segment.open(job)
        assert target.read_bytes() == b"\0" * 16
    finally:
        link.unlink(missing_ok=True)
