"""The hang report at 1,024 ranks is a few lines, not one per rank (issue 47).

One rank (517) of 32 nodes x 32 ranks never arrives at all-reduce #52: the report built by
``ClusterJob.hang_report()``'s assembly (``cluster_hang_report``) from what 32 agents answer
(synthetic answers: the agents' plain data, the status rows a 1,024-rank job pushes) names it in
one sentence, with where its main thread is and the step ``status()`` saw it at, and says
the other 1,023 in one phrase; with no recorder, the stacks alone give two lines. The real
cluster hang (four ranks on two simulated nodes, torch's recorder) is
``tests/cluster/test_cluster_hang.py``.
"""

from __future__ import annotations

import time

from dynprof_nb.cluster.stacks import cluster_hang_report

NODES, PER_NODE, HUNG, SEQ, STEP = 32, 32, 517, 52, 40
RANKS = NODES * PER_NODE
CROWD = ["<module>", "main", "train_step", "all_reduce"]
ALONE = ["<module>", "main", "train_step", "load_batch"]
OFF = "flight_recorder is off for this rank (Monitor(flight_recorder=True))"


def entry(seq: int, state: str) -> dict:
    return {"record_id": seq, "pg_id": 0, "process_group": ("0", "default_pg"),
            "thread_name": "python", "thread_id": "1", "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "profiling_name": "nccl:all_reduce",
            "time_created_ns": 1_700_000_000_000_000_000 + seq, "input_sizes": [[64]],
            "input_dtypes": ["Float"], "output_sizes": [[64]], "output_dtypes": ["Float"],
            "state": state, "time_discovered_started_ns": None,
            "time_discovered_completed_ns": None, "retired": False, "timeout_ms": 600000,
            "is_p2p": False}


def dump(rank: int) -> dict:
    last = SEQ - 1 if rank == HUNG else SEQ
    entries = [entry(SEQ - 1, "completed")] + ([entry(SEQ, "scheduled")] if last == SEQ else [])
    return {"rank": rank, "version": "2.10",
            "pg_config": {"0": {"desc": "default_pg", "ranks": str(list(range(RANKS)))}},
            "pg_status": {"0": {"last_enqueued_collective": last,
                                "last_started_collective": -1,
                                "last_completed_collective": SEQ - 1}},
            "entries": entries}


def stack_rows(rank: int) -> list[dict]:
    funcs = ALONE if rank == HUNG else CROWD
    return [{"rank": rank, "pid": 1000 + rank, "thread": "MainThread", "depth": d,
             "function": f, "file": "train.py", "line": 10 + d, "thread_id": "0x1"}
            for d, f in enumerate(funcs)]


def agents(recorder: bool):
    def ask(op: str, payload: dict):
        answers = []
        for n in range(NODES):
            ranks = range(n * PER_NODE, (n + 1) * PER_NODE)
            answer = {"key": f"tls://10.0.0.{n}:1", "node": f"node{n}"}
            if op == "flight_recorder":
                answer["dumps"] = [dump(r) for r in ranks] if recorder else []
                answer["notes"] = {} if recorder else {r: OFF for r in ranks}
            else:
                answer["rows"] = [row for r in ranks for row in stack_rows(r)]
                answer["silent"] = []
            answers.append(answer)
        return answers, []
    return ask


def status_rows() -> list[dict]:
    return [{"rank": r, "node": f"node{r // PER_NODE}", "pid": 1000 + r, "alive": True,
             "step": STEP} for r in range(RANKS)]


def report(recorder: bool):
    return cluster_hang_report("llama", agents(recorder), status_rows, dict, timeout=1.0)


def test_one_rank_that_never_arrives_of_1024_is_one_sentence():
    t0 = time.process_time()
    found = report(recorder=True)
    cpu = time.process_time() - t0
    findings = found.findings()
    assert found.verdict.startswith(
        f"PG 0 default_pg all_reduce #{SEQ} 64 Float: 1,023 of 1,024 ranks arrived; "
        f"{HUNG} never did."), found.verdict
    assert (f"rank {HUNG} never called all_reduce #{SEQ} (PG 0 default_pg); its main thread "
            f"is in load_batch ← train_step ← main ← ... (at step {STEP})") in findings
    assert len(findings) <= 6, findings  # not a line per rank
    assert sorted(found.dumps) == list(range(RANKS)) and not found.notes
    text = str(found)
    assert len(text.splitlines()) <= 12, text  # the stacks tree merges the 1,023 too
    assert "ranks 0-516,518-1023" in text and f"rank {HUNG}" in text
    assert cpu < 30, cpu  # a bound far above what it takes (about 1 s), never a 1,024-row loop


def test_without_a_recorder_the_stacks_say_it_in_two_lines():
    found = report(recorder=False)
    findings = found.findings()
    assert findings[0].startswith(f"No Flight Recorder dump ({OFF})"), findings
    assert findings[1:] == [
        f"1,023 of 1,024 ranks' main threads are in all_reduce ← train_step ← main ← ... "
        f"(at step {STEP}):",
        f"  rank {HUNG}: in load_batch ← train_step ← main ← ... (at step {STEP})",
    ]
