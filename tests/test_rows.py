"""One typed view of a rank (contract/rows.py): a window is a value, made and parsed in one
place, and a row crosses the wire as plain data and comes back the same."""

from __future__ import annotations

import json

import pytest
from jobutil import unique_job

from dynprof_nb.contract import segment
from dynprof_nb.contract.rows import RankRow, StepWindow, row_of_slot, window_text
from dynprof_nb.contract.slot import claim_slot
from dynprof_nb.control.asks import refuse_passed
from dynprof_nb.control.base import WindowRefused


@pytest.mark.parametrize("text", ["", None, "20", "-30", "a-b", "20-", "3-4-5"])
def test_a_text_that_is_no_window_parses_to_none(text):
    assert StepWindow.parse(text) is None


def test_a_window_reads_back_as_it_was_written():
    w = StepWindow(20, 30)
    assert str(w) == "20-30" and StepWindow.parse(str(w)) == w
    assert window_text(None) == "" and StepWindow.of(0, 0) is None  # a slot with no window


def test_a_row_crosses_the_wire_as_plain_json_and_comes_back_equal():
    row = RankRow(3, 4242, 17, "armed", StepWindow(20, 30), node="node-b", error="")
    sent = json.loads(json.dumps(row.to_dict()))  # what the gate lets through: no pickles
    assert sent["window"] == "20-30"
    assert RankRow.from_dict(sent) == row
    assert row.name == "3 on node-b" and row._replace(node="").name == "3"


def test_an_agents_status_row_becomes_a_row_of_the_node_that_answered():
    answer = {
        "rank": 1,
        "pid": 7,
        "step": 40,
        "state": "recording",
        "window": "35-45",
        "alive": True,
        "error": "",
        "rate": 12.0,
    }  # extra keys are ignored
    row = RankRow.from_dict(answer, node="n1")
    assert (row.node, row.window, row.state) == ("n1", StepWindow(35, 45), "recording")


def test_the_cluster_and_a_local_job_refuse_a_passed_window_with_one_message():
    rows = [RankRow(r, 100 + r, 50, "idle") for r in range(20)]
    with pytest.raises(WindowRefused) as cluster:
        refuse_passed(rows, 40, 45, shown=16)
    assert "has already begun on every rank (rank 0 at step 50" in str(cluster.value)
    assert "rank 16 at" not in str(cluster.value)  # a cluster's thousands: the first 16
    refuse_passed(rows[:1] + [RankRow(9, 1, 10, "idle")], 40, 45)  # one rank behind: fine


def test_a_real_slot_becomes_a_row():
    job = unique_job("rows")
    try:
        with segment.Segment.open(job) as seg:
            claim_slot(seg, 5)
            (slot,) = seg.slots()
            row = row_of_slot(slot)
        assert (row.rank, row.window, row.node) == (5, None, "")
        assert row.to_dict()["window"] == ""
    finally:
        segment.unlink(job)
