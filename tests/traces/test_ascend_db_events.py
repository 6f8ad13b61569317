"""The events of a real torch_npu .db window laid out as its text export's trace_view.json is:
threads decoded from the db's global tids, the communication ops on an HCCL lane, the
``with_stack`` Python frames marked as Python frames, so the two windows plot alike.

tests/data/ascend_real's db and text windows are two sessions of the same 2-rank script (see its
SOURCE.md): thread ids differ between them, the shape of every thread does not."""

from __future__ import annotations

import re

import pytest
from ascend_variants import sql_rows
from testdata import fixtures_dir

import dynprof_nb

REAL = fixtures_dir() / "ascend_real"
DB, TEXT = REAL / "db_level0", REAL / "text_level0"
LANE = re.compile(r"^(Thread \d+|Stream \d+|Group \d+ Communication)$")


def _db(rank: int):
    out = DB / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    return out / f"ascend_pytorch_profiler_{rank}.db"


@pytest.fixture(scope="module")
def windows():
    return dynprof_nb.load_window(DB), dynprof_nb.load_window(TEXT)


def _shape(ev, process: str) -> list[tuple]:
    """Per thread of ``process``: (is the main thread, its rows per category), sorted."""
    host = ev[ev["process"] == process]
    out = []
    for (pid, tid), g in host.groupby(["pid", "tid"], observed=True):
        cats = g["cat"].astype(str).value_counts()
        out.append((pid == tid, tuple(sorted(cats.items()))))
    return sorted(out)


@pytest.mark.parametrize("rank", [0, 1])
def test_threads_are_decoded_from_the_global_tid(windows, rank: int):
    """globalTid is pid << 32 | tid (TASK's globalPid is the same pid): the lanes read
    "Thread <tid>" and the pid column is the process's, as in trace_view.json."""
    ev = windows[0].rank_window(rank).events
    (task_pid,), = sql_rows(_db(rank), "SELECT DISTINCT globalPid FROM TASK")
    gtids = {g for (g,) in sql_rows(_db(rank), "SELECT DISTINCT globalTid FROM PYTORCH_API")}
    assert all(g >> 32 == task_pid for g in gtids)
    host = ev[ev["process"].isin(["Python", "CANN"])]
    assert set(host["pid"]) == {task_pid}
    assert {(task_pid << 32) | t for t in host[host["process"] == "Python"]["tid"]} == gtids
    threads = set(ev["thread"].astype(str))
    assert all(LANE.match(t) for t in threads), threads
    assert not any(str(g) in " ".join(threads) for g in gtids)
    assert (host["thread"].astype(str) == "Thread " + host["tid"].astype(str)).all()
    assert f"Thread {task_pid}" in threads  # the main thread, as the text window has it


@pytest.mark.parametrize("rank", [0, 1])
def test_db_threads_have_the_text_windows_shape(windows, rank: int):
    """Same script, another session: the Python threads hold the same rows of the same kinds
    (main thread: ops, enqueues and Python frames; the queue thread: dequeues; ...)."""
    db, text = (w.rank_window(rank).events for w in windows)
    assert _shape(db, "Python") == _shape(text, "Python")
    main_text = text[(text["process"] == "Python") & (text["pid"] == text["tid"])]
    main_db = db[(db["process"] == "Python") & (db["pid"] == db["tid"])]
    assert len(main_db) == len(main_text) == 1651


@pytest.mark.parametrize("rank", [0, 1])
def test_communication_ops_are_on_an_hccl_lane(windows, rank: int):
    db, text = (w.rank_window(rank).events for w in windows)
    comm = db[db["process"] == "HCCL"]
    assert set(comm["thread"].astype(str)) == {"Group 0 Communication"}
    assert set(comm["thread"].astype(str)) == set(
        text[text["process"] == "HCCL"]["thread"].astype(str)
    )
    ops = sql_rows(
        _db(rank),
        "SELECT CAST(startNs AS INTEGER), CAST(endNs AS INTEGER), s.value FROM COMMUNICATION_OP o "
        "JOIN STRING_IDS s ON s.id = o.opName ORDER BY 1",
    )
    assert comm["ts_ns"].tolist() == [a for a, _, _ in ops]
    assert comm["dur_ns"].tolist() == [b - a for a, b, _ in ops]
    assert comm["name"].astype(str).tolist() == [n for _, _, n in ops]
    assert db["tid"].max() < 2**32 and (db["thread"].astype(str) != "Stream <NA>").all()
    # device pids as trace_view.json forms them: host pid << 10 | sort index << 5 | device
    hw = db[db["process"] == "Ascend Hardware"]["pid"].unique().tolist()
    pid = int(db[db["process"] == "Python"]["pid"].iloc[0])
    assert hw == [(pid << 10) | (13 << 5) | rank]
    assert comm["pid"].unique().tolist() == [(pid << 10) | (15 << 5) | rank]


@pytest.mark.parametrize("rank", [0, 1])
def test_with_stack_frames_are_python_frames(windows, rank: int):
    """PYTORCH_API type 'trace' rows are the with_stack frames: category python_function, as
    the text window's, so they stay out of the op table and the timeline hides them."""
    db, text = windows[0].rank_window(rank), windows[1].rank_window(rank)
    (n,), = sql_rows(
        _db(rank),
        "SELECT count(*) FROM PYTORCH_API p JOIN ENUM_API_TYPE e ON e.id = p.type "
        "WHERE e.name = 'trace'",
    )
    frames = db.events[db.events["cat"] == "python_function"]
    assert len(frames) == n == (text.events["cat"] == "python_function").sum() == 1282
    assert "<string>(1): <module>" in set(frames["name"].astype(str))
    assert not db.ops["name"].isin(frames["name"].astype(str).unique()).any()
