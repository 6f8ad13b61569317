"""The analysis of Flight Recorder dumps: the stuck collective of each process group and the
ranks that never arrived, checked against torch's own ``fr_trace`` on real dumps."""

from __future__ import annotations

import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

from dynprof_nb.flight_recorder import analyse, load
from dynprof_nb.flight_recorder.analysis import culprits, waited_in

REPO = Path(__file__).resolve().parents[2]
DUMPS = REPO / "tests" / "data" / "flight_recorder" / "gloo_hang"


def stuck(rows) -> dict[tuple[str, int], list[int]]:
    return {(r.pg_desc, int(r.seq)): list(r.missing) for r in rows.itertuples()}


def fr_trace_missing(directory: Path) -> dict[tuple[str, int], list[int]]:
    """What torch's own analyser says: (group desc, seq) -> missing ranks."""
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(directory)],
        capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    found = {}
    for block in text.split("Not all ranks joining collective")[1:]:
        seq = int(re.search(r"sequence number: (\d+)", block).group(1))
        desc = re.search(r"group info: [^:\n]*:(\S+)", block).group(1)
        ranks = re.search(r"missing ranks: \{([\d, ]*)\}", block).group(1)
        found[(desc, seq)] = sorted(int(r) for r in ranks.split(",") if r.strip())
    assert found, text
    return found


def test_real_gloo_hang_names_the_hung_rank_as_torchs_fr_trace_does(tmp_path):
    rows = analyse(DUMPS)
    for f in DUMPS.glob("_dump_*"):  # fr_trace reads every file below its directory
        shutil.copy(f, tmp_path / f.name)
    assert stuck(rows) == fr_trace_missing(tmp_path)
    assert stuck(rows) == {("PAIR_B", 5): [3], ("default_pg", 5): [2, 3]}
    assert culprits(rows) == [3]  # rank 2 is missing from the world's because it waits in PAIR_B
    pair_b = rows[rows.pg_desc == "PAIR_B"].iloc[0]
    assert (pair_b.op, pair_b["size"], pair_b["dtype"], pair_b.arrived) == (
        "all_reduce", "64", "Float", [2])
    assert rows.verdict.startswith(
        "PG 2 PAIR_B all_reduce #5 64 Float: 1 of 2 ranks arrived; 3 never did")
    assert "Rank 2 is held up in PG 2 PAIR_B" in rows.verdict
    assert stuck(analyse(DUMPS / "json")) == stuck(rows)  # torch's JSON form, no pg_config
    # whichever group's wait began first, rank 3 is waited for in PAIR_B (rank 2's wait)
    flipped = rows.iloc[::-1].reset_index(drop=True)
    assert waited_in(flipped, 3).pg_desc == waited_in(rows, 3).pg_desc == "PAIR_B"


def test_a_rank_with_an_empty_or_no_dump_is_still_a_member(tmp_path):
    for r in range(3):
        shutil.copy(DUMPS / f"_dump_{r}", tmp_path / f"_dump_{r}")
    rows = analyse(tmp_path)  # rank 3's dump missing
    pair_b = rows[rows.pg_desc == "PAIR_B"].iloc[0]
    assert pair_b.missing == [3] and pair_b.no_dump == [3]
    assert "no dump from 3" in rows.verdict and culprits(rows) == [3]
    value = pickle.loads((DUMPS / "_dump_3").read_bytes())  # our own test file: trusted
    value["entries"], value["pg_status"] = [], {}
    (tmp_path / "_dump_3").write_bytes(pickle.dumps(value))
    rows = analyse(tmp_path)  # rank 3's dump empty
    assert stuck(rows)[("PAIR_B", 5)] == [3] and culprits(rows) == [3]


def test_members_that_disagree_on_dtype_are_named(tmp_path):
    for r in range(4):
        value = pickle.loads((DUMPS / f"_dump_{r}").read_bytes())
        if r == 1:
            for e in value["entries"]:
                if e["process_group"][1] == "PAIR_A" and e["collective_seq_id"] == 3:
                    e["input_dtypes"] = e["output_dtypes"] = ["BFloat16"]
        (tmp_path / f"_dump_{r}").write_bytes(pickle.dumps(value))
    rows = analyse(tmp_path)
    pair_a = rows[rows.pg_desc == "PAIR_A"].iloc[0]
    assert (pair_a.seq, pair_a.mismatched, pair_a.missing) == (3, [1], [])


def _moe_dumps(tmp_path: Path) -> None:
    """8 ranks, an expert group [4..7] whose rank 6 hangs before all_to_all #41 and dumps
    nothing, local group ids that differ between ranks outside the group."""
    world = {"name": "0", "desc": "default_pg", "ranks": str(list(range(8)))}
    for rank in range(8):
        ep = {"name": "72", "desc": "EXPERT_MODEL_PARALLEL_GROUP",
              "ranks": "[4, 5, 6, 7]" if rank >= 4 else "[0, 1, 2, 3]"}
        ep["name"] = "72" if rank >= 4 else "71"
        uid = 3 if rank >= 4 else 5  # the same group id means another group elsewhere
        last = 40 if rank == 6 else 41
        entries = [] if rank == 6 else [{
            "record_id": 9, "pg_id": uid, "process_group": (ep["name"], ep["desc"]),
            "collective_seq_id": 41, "p2p_seq_id": 0, "op_id": 41, "is_p2p": False,
            "profiling_name": "nccl:all_to_all", "input_sizes": [[2048, 5120]],
            "output_sizes": [[2048, 5120]], "input_dtypes": ["BFloat16"],
            "output_dtypes": ["BFloat16"], "state": "scheduled", "time_created_ns": 10 + rank,
            "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
            "timeout_ms": 600000, "thread_name": "pt_main", "frames": []}] if rank >= 4 else []
        status = {str(uid): {"last_enqueued_collective": last if rank >= 4 else 41,
                             "last_started_collective": -1,
                             "last_completed_collective": 40 if rank >= 4 else 41},
                  "0": {"last_enqueued_collective": 7, "last_started_collective": -1,
                        "last_completed_collective": 7}}
        dump = {"version": "2.9", "pg_config": {"0": world, ep["name"]: ep}, "pg_status": status,
                "entries": entries}
        (tmp_path / f"_dump_{rank}").write_bytes(pickle.dumps(dump))


def test_an_empty_dump_borrows_its_group_id_from_its_co_members_only(tmp_path):
    _moe_dumps(tmp_path)
    rows = analyse(tmp_path)
    assert len(rows) == 1
    row = rows.iloc[0]
    assert (row.pg_id, row.op, row["size"], row["dtype"]) == (
        "72", "all_to_all", "2048x5120", "BFloat16")
    assert (row.arrived, row.missing) == ([4, 5, 7], [6])
    assert rows.verdict.startswith(
        "PG 72 EXPERT_MODEL_PARALLEL_GROUP all_to_all #41 2048x5120 BFloat16: 3 of 4 ranks "
        "arrived; 6 never did")


def test_dynprof_fr_prints_one_line_per_finding():
    out = subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", "fr", str(DUMPS)],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    lines = out.strip().splitlines()
    assert lines[0].startswith("PG 2 PAIR_B all_reduce #5") or lines[1].startswith("PG 2 PAIR_B")
    assert "waited for: rank 3 (missing, and waiting in no stuck collective)" in lines
    assert "held up: rank 2 waits in PG 2 PAIR_B all_reduce #5" in lines
    assert len(load(DUMPS)) > 0


def test_a_send_without_its_recv_is_named_when_no_collective_is_stuck(tmp_path):
    world = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
    send = {"record_id": 0, "pg_id": 0, "process_group": ("0", "default_pg"),
            "collective_seq_id": 0, "p2p_seq_id": 1, "op_id": 1, "is_p2p": True,
            "profiling_name": "gloo:send 0->1", "input_sizes": [[8]], "output_sizes": [[8]],
            "input_dtypes": ["Float"], "output_dtypes": ["Float"], "state": "scheduled",
            "time_created_ns": 1, "timeout_ms": 1000, "frames": []}
    for rank, entries in ((0, [send]), (1, [])):
        (tmp_path / f"_dump_{rank}").write_bytes(pickle.dumps(
            {"version": "2.10", "pg_config": world, "pg_status": {}, "entries": entries}))
    rows = analyse(tmp_path)
    assert len(rows) == 0
    assert "Point-to-point ops wait unmatched: PG 0: 0->1 1 send(s) without a recv" in rows.verdict


def test_torch_npu_hccl_dumps_as_its_own_tests_describe_them(tmp_path):
    """torch_npu's recorder (its test_flight_recorder.py): version 2.4, group "group_name_0"
    with an empty desc, an empty profiling_name, sizes as tuples, files trace_<rank>."""
    config = {"group_name_0": {"name": "group_name_0", "desc": "", "ranks": "[0, 1]"}}
    for rank, last in ((0, 3), (1, 2)):
        entries = [{"record_id": s - 1, "pg_id": 0, "process_group": ("group_name_0", ""),
                    "collective_seq_id": s, "p2p_seq_id": 0, "op_id": s,
                    "profiling_name": "", "input_sizes": ((3, 4),), "output_sizes": ((3, 4),),
                    "input_dtypes": ["Float"], "output_dtypes": ["Float"],
                    "state": "completed" if s < 3 else "scheduled", "retired": s < 3,
                    "time_created_ns": 100 + s, "time_discovered_started_ns": None,
                    "time_discovered_completed_ns": None, "timeout_ms": 3636000,
                    "frames": []} for s in range(1, last + 1)]
        status = {"0": {"last_enqueued_collective": last, "last_started_collective": -1,
                        "last_completed_collective": 2}}
        (tmp_path / f"trace_{rank}").write_bytes(pickle.dumps(
            {"version": "2.4", "pg_config": config, "pg_status": status, "entries": entries}))
    rows = analyse(tmp_path)
    assert stuck(rows) == {("", 3): [1]}
    row = rows.iloc[0]
    assert (row.pg_id, row.op, row["size"], row["dtype"]) == ("group_name_0", "collective", "3x4",
                                                             "Float")
