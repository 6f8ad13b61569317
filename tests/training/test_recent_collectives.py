"""The record's collectives, one piece: what a rank's Flight Recorder gives, and what a failed
read leaves (the record, without them). The real DDP job is tests/training/test_recent_ddp.py."""

from __future__ import annotations

import time

from dynprof_nb.training.recent import parts, with_collectives


def snapshot() -> dict:
    now = time.monotonic_ns()
    return {"steps": [(1, now - 2_000_000, now - 1_000_000), (2, now - 1_000_000, now)],
            "ranges": [], "gc": [], "note": "", "parts": parts([], [])}


def test_a_failed_dump_loses_the_collectives_not_the_record():
    def broken(rank: int, since_ns: int):
        raise RuntimeError("torch changed its dump")

    got = with_collectives(snapshot(), broken, 0)
    assert got["collectives"] == [] and len(got["steps"]) == 2
    assert "could not be read: RuntimeError('torch changed its dump')" in (
        got["parts"]["unseen"]["collectives"])


def test_entries_are_seen_and_asked_from_the_first_step_on():
    asked = []

    def recorder(rank: int, since_ns: int):
        asked.append((rank, since_ns))
        return [{"name": "gloo:all_reduce", "pg": "0", "seq": 1, "created_ns": since_ns + 5,
                 "started_ns": None, "completed_ns": None}], ""

    before = time.time_ns()
    got = with_collectives(snapshot(), recorder, 3)
    assert "collectives (Flight Recorder)" in got["parts"]["seen"]
    assert "collectives" not in got["parts"]["unseen"]
    (rank, since), = asked
    # since the first step began: 2 ms before its end, on the wall clock
    assert rank == 3 and before - 3_000_000 < since < before


def test_a_running_jobs_record_reads_no_recorder_unless_asked(monkeypatch):
    """torch's dump holds the GIL for 20-150 ms: without Monitor(flight_recorder=True) a
    trigger's or a request's record of a rank with a process group does not read it, and says
    why; a rank without one says that instead."""
    before = with_collectives(snapshot(), None, 0)["parts"]["unseen"]["collectives"]
    # (torch may be imported by an earlier test of this process, without a process group)
    assert "does not use PyTorch" in before or "not initialised in this rank" in before
    import socket

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0",
                 "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(k, v)
    dist.init_process_group("gloo")  # a real one-rank group in this process
    try:
        got = with_collectives(snapshot(), None, 0)
    finally:
        dist.destroy_process_group()
    assert got["collectives"] == []
    assert "only with Monitor(flight_recorder=True)" in got["parts"]["unseen"]["collectives"]


def test_an_infinite_steps_setting_is_ignored_not_the_jobs_end(monkeypatch):
    """DYNPROF_NB_RECENT_STEPS=inf (or 1e400) raised OverflowError out of Monitor() and ended
    the training process (the adversarial pass); it is now ignored, as 'abc' is."""
    from dynprof_nb.training.recent import ENV, steps_asked

    for text in ("inf", "-inf", "1e400", "nan", "abc"):
        monkeypatch.setenv(ENV, text)
        assert steps_asked(None) is None, text


def test_a_request_is_a_whole_number_of_steps_within_the_bound():
    """recent(2**63) raised a raw OverflowError, recent(1.9) gave 1 step (adversarial pass):
    a non-integer is refused by name (a huge one is asked as the most a rank keeps)."""
    import pytest
    from jobutil import unique_job

    import dynprof_nb
    from dynprof_nb.contract import segment
    from dynprof_nb.control.recent import ask

    name = unique_job("askbound")
    job = dynprof_nb.attach(name, create=True)
    try:
        for bad in (1.9, "abc", float("nan"), True):
            with pytest.raises(ValueError, match="whole number of steps"):
                ask(job, bad)
    finally:
        job.close()
        segment.unlink(name)
