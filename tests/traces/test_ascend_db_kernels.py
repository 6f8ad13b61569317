"""The column-wise kernels reader of a .db (traces/ascend_db_kernels.py) gives the frame the
row-wise reader gives, value for value and dtype for dtype, on the real ranks and on copies of
them edited with plain SQL the ways real files differ (TEXT times, NULLs, unknown or repeated
string ids, rows out of order, other devices); files it does not cover take the row-wise path.
The real ranks agree with msprof-analyze (tests/analysis/test_cluster_msprof.py), so this
carries that agreement over to the fast path."""

from __future__ import annotations

import shutil
from pathlib import Path

import ascend_variants as av
import numpy as np
import pandas as pd
import pytest

import dynprof_nb
from dynprof_nb.traces import TraceFormatError
from dynprof_nb.traces.formats.ascend import (
    db_comm as ascend_db_comm,
)
from dynprof_nb.traces.formats.ascend import (
    db_kernels as ascend_db_kernels,
)
from dynprof_nb.traces.formats.ascend.db import AscendDb
from dynprof_nb.traces.formats.common.sqlite import _parse_ints

COVERED = {
    "as_recorded": "",
    "text_times": (
        "CREATE TABLE T2 AS SELECT CAST(startNs AS TEXT) AS startNs, CAST(endNs AS TEXT) AS endNs,"
        " deviceId, connectionId, globalTaskId, globalPid, taskType, contextId, streamId, taskId,"
        " modelId FROM TASK; DROP TABLE TASK; ALTER TABLE T2 RENAME TO TASK;"
    ),
    "nulls": (
        "UPDATE TASK SET streamId = NULL WHERE rowid % 7 = 0;"
        "UPDATE TASK SET taskId = NULL WHERE rowid % 5 = 0;"
        "UPDATE TASK SET taskType = NULL WHERE rowid % 8 = 0;"
        "UPDATE TASK SET startNs = NULL WHERE rowid % 11 = 0;"
        "UPDATE TASK SET endNs = NULL WHERE rowid % 13 = 0;"
        "UPDATE COMPUTE_TASK_INFO SET blockDim = NULL WHERE globalTaskId % 3 = 0;"
        "UPDATE COMPUTE_TASK_INFO SET name = NULL WHERE globalTaskId % 4 = 0;"
        "UPDATE COMPUTE_TASK_INFO SET opType = NULL WHERE globalTaskId % 6 = 0;"
        "UPDATE COMPUTE_TASK_INFO SET taskType = NULL WHERE globalTaskId % 9 = 1;"
        "UPDATE COMPUTE_TASK_INFO SET inputShapes = NULL;"
    ),
    "unknown_and_repeated_string_ids": (
        "INSERT INTO STRING_IDS SELECT id + 1000000, value FROM STRING_IDS;"
        "UPDATE COMPUTE_TASK_INFO SET name = name + 1000000 WHERE globalTaskId % 2 = 0;"
        "UPDATE COMPUTE_TASK_INFO SET opType = 888888 WHERE globalTaskId % 6 = 0;"
    ),
    "rows_out_of_order": (
        "CREATE TABLE T2 AS SELECT * FROM TASK ORDER BY (globalTaskId * 7919) % 1000;"
        "DROP TABLE TASK; ALTER TABLE T2 RENAME TO TASK;"
        "CREATE TABLE C2 AS SELECT * FROM COMPUTE_TASK_INFO ORDER BY globalTaskId DESC;"
        "DROP TABLE COMPUTE_TASK_INFO; ALTER TABLE C2 RENAME TO COMPUTE_TASK_INFO;"
    ),
    "equal_times": "UPDATE TASK SET startNs = 1736407067946125104, endNs = "
    "1736407067946125104 + (rowid % 3) WHERE rowid % 2 = 0;",
    "two_devices": "UPDATE TASK SET deviceId = 3 WHERE rowid % 2 = 0;",
    "no_device_column": (
        "CREATE TABLE T2 AS SELECT startNs, endNs, connectionId, globalTaskId, globalPid,"
        " taskType, contextId, streamId, taskId, modelId FROM TASK;"
        " DROP TABLE TASK; ALTER TABLE T2 RENAME TO TASK;"
    ),
    "untyped_columns": (
        "CREATE TABLE C2 AS SELECT name + 0 AS name, globalTaskId, blockDim + 0 AS blockDim,"
        " taskType, opType, inputShapes FROM COMPUTE_TASK_INFO;"
        " DROP TABLE COMPUTE_TASK_INFO; ALTER TABLE C2 RENAME TO COMPUTE_TASK_INFO;"
    ),
    "no_communication_no_steps": "DROP TABLE COMMUNICATION_OP; DROP TABLE STEP_TIME;",
    "no_compute_rows": "DELETE FROM COMPUTE_TASK_INFO;",
}
DECLINED = {  # values the generic reader keeps as they are (or refuses, naming the file)
    "text_stream": "UPDATE TASK SET streamId = 'x' WHERE rowid % 50 = 0;",
    "sign_alone": "UPDATE TASK SET taskId = '-' WHERE rowid = 5;",
    "text_with_comma": "UPDATE TASK SET taskId = '1,2' WHERE rowid = 5;"
    "UPDATE TASK SET taskId = NULL WHERE rowid = 6;",
    "real_block_dim": "UPDATE COMPUTE_TASK_INFO SET blockDim = blockDim + 0.5;",
    "text_name": "UPDATE COMPUTE_TASK_INFO SET name = 'literal' WHERE globalTaskId % 10 = 0;",
    "untyped_text_ids": (
        "CREATE TABLE C2 AS SELECT CAST(name AS TEXT) AS name, globalTaskId, blockDim, taskType,"
        " opType, inputShapes FROM COMPUTE_TASK_INFO;"
        " DROP TABLE COMPUTE_TASK_INFO; ALTER TABLE C2 RENAME TO COMPUTE_TASK_INFO;"
    ),
    "repeated_task_ids": (
        "CREATE TABLE C2 AS SELECT * FROM COMPUTE_TASK_INFO;"
        "INSERT INTO C2 SELECT * FROM COMPUTE_TASK_INFO WHERE globalTaskId % 10 = 0;"
        "DROP TABLE COMPUTE_TASK_INFO; ALTER TABLE C2 RENAME TO COMPUTE_TASK_INFO;"
    ),
    "no_string_ids": "DROP TABLE STRING_IDS;",
}


def _both(db: Path) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """(the fast path's frame or None, the generic path's frame) of one rank's db."""
    adb = AscendDb(db)
    comm = ascend_db_comm.comm_ops(adb.db) if adb.has("COMMUNICATION_OP") else None
    fast = ascend_db_kernels.kernels(adb.db, comm, adb.step_time())
    return fast, AscendDb(db).kernels_generic(comm)


def _same(fast: pd.DataFrame, generic: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(fast, generic, check_exact=True)
    for c in generic.columns:  # categories too: same strings, same order, same dtype
        assert fast[c].dtype == generic[c].dtype, c
        if isinstance(generic[c].dtype, pd.CategoricalDtype):
            assert fast[c].cat.categories.dtype == generic[c].cat.categories.dtype, c


@pytest.mark.parametrize("rank", [0, 1])
def test_real_ranks_read_column_wise_equal_the_row_wise_read(rank: int):
    fast, generic = _both(av.db_file(av.DB / f"rank{rank}_ascend_pt"))
    assert fast is not None and len(fast) == len(generic) > 100
    _same(fast, generic)
    assert fast["start_ns"].is_monotonic_increasing and (fast["core"] == "HCCL").sum() > 0


@pytest.mark.parametrize("name", sorted(COVERED))
def test_edited_copies_read_column_wise_equal_the_row_wise_read(tmp_path: Path, name: str):
    _, db = av.one_rank(tmp_path)
    if COVERED[name]:
        av.sql(db, COVERED[name])
    fast, generic = _both(db)
    assert fast is not None, "the fast path should cover this file"
    _same(fast, generic)


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_files_the_fast_path_does_not_cover_take_the_row_wise_path(tmp_path: Path, name: str):
    _, db = av.one_rank(tmp_path)
    av.sql(db, DECLINED[name])
    adb = AscendDb(db)
    comm = ascend_db_comm.comm_ops(adb.db) if adb.has("COMMUNICATION_OP") else None
    assert ascend_db_kernels.kernels(adb.db, comm, adb.step_time()) is None
    try:
        generic = AscendDb(db).kernels_generic(comm)
    except (TypeError, ValueError) as exc:  # the row-wise read refuses it: so does kernels
        with pytest.raises(type(exc)):
            AscendDb(db).kernels()
    else:
        _same(AscendDb(db).kernels(), generic)


def test_ranks_read_in_threads_equal_each_rank_read_alone():
    k = dynprof_nb.load_window(av.DB).kernels
    strings = {c: object for c in ("name", "type", "core", "task_type", "input_shapes")}
    for r in (0, 1):
        alone = AscendDb(av.db_file(av.DB / f"rank{r}_ascend_pt")).kernels()
        part = k[k["rank"] == r].drop(columns="rank").reset_index(drop=True)
        pd.testing.assert_frame_equal(part.astype(strings), alone.astype(strings), check_exact=True)


def test_a_damaged_rank_read_in_a_thread_raises_naming_its_file(tmp_path: Path):
    root = tmp_path / "job"
    shutil.copytree(av.DB, root)
    bad = av.db_file(root / "rank1_ascend_pt")
    av.sql(bad, "DROP TABLE TASK;")
    with pytest.raises(TraceFormatError, match="table TASK is missing") as e:
        dynprof_nb.load_window(root).kernels  # noqa: B018
    assert bad.name in str(e.value)


def test_joined_integers_parse_exactly_or_not_at_all():
    lo, hi = -(2**63), 2**63 - 1
    got = _parse_ints(f"{hi},{lo},1736407067950342548,-5,0,4294967295", 6)
    assert got.dtype == np.int64
    assert got.tolist() == [hi, lo, 1736407067950342548, -5, 0, 4294967295]
    assert _parse_ints(None, 0).tolist() == []
    assert _parse_ints(None, 1) is None and _parse_ints("1,2", 3) is None
    for text in ("1.5,2", "1,,2", "-,1", "1, 2", "+5,1", "1,abc", "0x10,1", "1-2,1"):
        assert _parse_ints(text, 2) is None, text
    assert _parse_ints("1,2,", 3) is None  # a last value of '' (text)
