"""Reading Flight Recorder dumps: real torch dumps in both forms, any names, and hostile files
refused without anything in them running."""

from __future__ import annotations

import gzip
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dynprof_nb.flight_recorder import load
from dynprof_nb.flight_recorder.reader import read_dump
from dynprof_nb.traces.errors import TraceFormatError

REPO = Path(__file__).resolve().parents[2]
DUMPS = REPO / "tests" / "data" / "flight_recorder" / "gloo_hang"
ISSUE_COLUMNS = ["rank", "pg_id", "pg_desc", "collective_seq_id", "p2p_seq_id", "op",
                 "input_sizes", "output_sizes", "dtypes", "state", "time_created_ns",
                 "time_started_ns", "time_completed_ns", "timeout_ms", "thread", "frames"]


class _RunsAShell:
    """What an attacker pickles: unpickling calls os.system with the command."""

    def __reduce__(self):
        return (os.system, ('touch "$DYNPROF_FR_MARK"',))


def hostile_dump() -> bytes:
    """A dump-shaped dict whose one entry runs a shell command under plain pickle."""
    return pickle.dumps({"version": "2.10", "pg_config": {}, "pg_status": {},
                         "entries": [{"profiling_name": _RunsAShell()}]}, protocol=2)


def test_real_dumps_load_with_the_issues_columns_and_membership():
    fr = load(DUMPS)
    assert list(fr.columns[: len(ISSUE_COLUMNS)]) == ISSUE_COLUMNS
    assert fr.ranks == [0, 1, 2, 3]
    groups = {g.pg_desc: g.ranks for g in fr.pg_config.itertuples()}
    assert groups == {"default_pg": [0, 1, 2, 3], "PAIR_A": [0, 1], "PAIR_B": [2, 3]}
    assert set(fr.op) == {"all_reduce"} and set(fr.backend) == {"gloo"}
    assert all(tuple(d) == ("Float",) for d in fr["dtypes"])  # (fr.dtypes is pandas')
    # the call sites torch recorded: this job's own line among them
    assert any(f["name"] == "main" and f["filename"].endswith("fr_hang_job.py")
               for frames in fr.frames for f in frames)
    assert {"rank", "pg_uid", "last_enqueued", "last_completed"} <= set(fr.pg_status.columns)


def test_torchs_json_form_gives_the_same_entries():
    pickled, js = load(DUMPS), load(DUMPS / "json")
    keys = ["rank", "pg_id", "pg_desc", "collective_seq_id", "op", "state"]
    assert (pickled[keys].sort_values(keys).values.tolist()
            == js[keys].sort_values(keys).values.tolist())
    # gloo's JSON has no membership: the groups are inferred from who used them
    assert js.pg_config.inferred.all()
    assert {g.pg_desc: g.ranks for g in js.pg_config.itertuples()}["PAIR_B"] == [2, 3]


def test_any_file_names_and_gzip(tmp_path):
    for rank, name in enumerate(["node-a.rank0.pkl", "host_rank1", "trace-2.gz", "x_3"]):
        data = (DUMPS / f"_dump_{rank}").read_bytes()
        (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    (tmp_path / "README.txt").write_text("notes beside the dumps are not read")
    assert load(tmp_path).ranks == [0, 1, 2, 3]
    assert len(load(tmp_path)) == len(load(DUMPS))


def test_rank_from_the_groups_when_the_name_has_none(tmp_path):
    value = {"version": "2.9", "entries": [], "pg_status": {},
             "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"},
                           "7": {"name": "7", "desc": "TP", "ranks": "[2, 3]"},
                           "9": {"name": "9", "desc": "DP", "ranks": "[1, 3]"}}}
    (tmp_path / "dump").write_bytes(pickle.dumps(value))
    assert read_dump(tmp_path / "dump").rank == 3
    (tmp_path / "other").write_bytes(pickle.dumps(dict(value, pg_config={})))
    with pytest.raises(TraceFormatError, match="cannot tell this dump's rank"):
        read_dump(tmp_path / "other")


def test_a_pickle_that_would_run_code_is_refused_and_nothing_runs(tmp_path):
    data = hostile_dump()
    # the dump is really hostile: plain pickle, in a child, runs the command
    (tmp_path / "child").mkdir()
    ran = tmp_path / "child" / "plain_pickle_ran"
    plain = "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"
    subprocess.run([sys.executable, "-c", plain], input=data,
                   env=dict(os.environ, DYNPROF_FR_MARK=str(ran)), check=False)
    assert ran.exists()
    mark = tmp_path / "must_never_appear"
    os.environ["DYNPROF_FR_MARK"] = str(mark)
    try:
        (tmp_path / "_dump_0").write_bytes(data)
        with pytest.raises(TraceFormatError) as info:
            load(tmp_path)
    finally:
        del os.environ["DYNPROF_FR_MARK"]
    assert "_dump_0" in str(info.value) and "refused" in str(info.value)
    assert "system" in str(info.value) or "GLOBAL" in str(info.value)
    assert not mark.exists()


def test_every_protocols_callables_are_refused_before_building(tmp_path):
    for protocol in range(0, pickle.HIGHEST_PROTOCOL + 1):
        path = tmp_path / f"_dump_{protocol}"
        path.write_bytes(pickle.dumps({"entries": [_RunsAShell()]}, protocol=protocol))
        with pytest.raises(TraceFormatError, match="refused"):
            read_dump(path)


def test_damaged_and_oversized_dumps_are_refused_naming_the_file(tmp_path, monkeypatch):
    data = (DUMPS / "_dump_0").read_bytes()
    (tmp_path / "_dump_0").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="_dump_0"):
        read_dump(tmp_path / "_dump_0")
    (tmp_path / "_dump_1").write_bytes(b"not a dump at all")
    with pytest.raises(TraceFormatError, match="neither a pickle nor JSON"):
        read_dump(tmp_path / "_dump_1")
    bomb = tmp_path / "_dump_2"  # 64 MiB of zeros in a small gzip
    bomb.write_bytes(gzip.compress(b"\x80\x04" + bytes(64 << 20)))
    with pytest.raises(TraceFormatError, match="inflates"):
        read_dump(bomb)
    shutil.copy(DUMPS / "_dump_3", tmp_path / "_dump_3")
    monkeypatch.setenv("DYNPROF_NB_FR_MAX_BYTES", "1K")
    with pytest.raises(TraceFormatError, match="DYNPROF_NB_FR_MAX_BYTES"):
        read_dump(tmp_path / "_dump_3")


def test_two_dumps_of_one_rank_are_an_error(tmp_path):
    shutil.copy(DUMPS / "_dump_1", tmp_path / "_dump_1")
    shutil.copy(DUMPS / "_dump_1", tmp_path / "copy_1")
    with pytest.raises(TraceFormatError, match="a second dump for rank 1"):
        load(tmp_path)


def test_the_package_imports_no_torch_and_the_rank_side_no_pandas():
    code = ("import sys, dynprof_nb.flight_recorder, dynprof_nb.flight_recorder.safe_pickle, "
            "dynprof_nb.flight_recorder.layout, dynprof_nb.training.frdump\n"
            "print(' '.join(m for m in ('torch', 'pandas', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=str(REPO))).stdout.strip()
    assert out == ""


def test_a_jobs_logs_beside_the_dumps_are_left_out_and_a_prefix_finds_them(tmp_path):
    for rank in range(4):
        shutil.copy(DUMPS / f"_dump_{rank}", tmp_path / f"nccl_trace_rank_{rank}")
    (tmp_path / "slurm-1234.out").write_text("rank 3: watchdog timeout\n")
    with pytest.warns(UserWarning, match="not Flight Recorder dumps, left out: slurm-1234.out"):
        assert load(tmp_path).ranks == [0, 1, 2, 3]
    assert load(tmp_path / "nccl_trace_rank_").ranks == [0, 1, 2, 3]  # TORCH_FR_DUMP_TEMP_FILE
    with pytest.raises(TraceFormatError, match="neither a pickle nor JSON"):
        load([tmp_path / "slurm-1234.out"])  # named on its own: read, and refused


def test_the_safe_reader_builds_what_pickle_builds_for_real_dumps_and_plain_data():
    from dynprof_nb.flight_recorder import safe_pickle

    for f in sorted(DUMPS.glob("_dump_*")):
        data = f.read_bytes()  # our own test files: trusted by plain pickle here
        assert safe_pickle.loads(data, f) == pickle.loads(data)
    shared = [1, "two"]
    value = {"a": [None, True, False, -5, 2**70, 1.5, "é☃", (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
             "shared": [shared, shared, (shared, shared)], "big": list(range(3000))}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert safe_pickle.loads(pickle.dumps(value, protocol=protocol), "x") == value


def test_the_dumps_of_one_load_share_one_build_budget(tmp_path, monkeypatch):
    from dynprof_nb.flight_recorder import safe_pickle
    from dynprof_nb.flight_recorder.reader import ROW_COST

    spent = []  # what each dump is charged: what its pickle builds, and its rows in the frames
    for r in range(4):
        value, built = safe_pickle.loads_counted((DUMPS / f"_dump_{r}").read_bytes(), "x")
        spent.append(built + ROW_COST * len(value["entries"]))
    assert load(DUMPS).ranks == [0, 1, 2, 3]
    monkeypatch.setenv("DYNPROF_NB_FR_MAX_BUILD", str(spent[0] + spent[1] + spent[2] // 2))
    with pytest.raises(TraceFormatError, match=r"_dump_2.*builds over .*DYNPROF_NB_FR_MAX_BUILD"):
        load(DUMPS)  # each dump alone fits; the third does not fit in what the first two left
