"""The phases of a host step (dynprof_nb.analysis.host_phases) on a hand-made trace whose answer
is known to the µs: the training thread's wall time, each instant in one phase, so no phase is
negative and they add up to the step however many threads run beside it; and the noise bound
and straggler rule (dynprof_nb.analysis.straggler) on numbers worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dynprof_nb.analysis.host_phases import PHASES, step_phases
from dynprof_nb.analysis.straggler import find_straggler, noise_bound
from dynprof_nb.contract.protocol import step_marker

MAIN, GLOO1, GLOO2 = 100, 200, 201
T0 = 10**18


class Window:
    """Frames only: one rank's steps and host events."""

    rank = 0

    def __init__(self, events: list[tuple[str, str, int, float, float]], steps: list[float]):
        rows, t, st = [], T0, []
        for i, d in enumerate(steps, 1):
            st.append({"step": i, "start_ns": t, "duration_us": d})
            rows.append((step_marker(i), "user_annotation", MAIN, (t - T0) / 1000, d))
            t += int(d * 1000)
        rows += events
        self.steps = pd.DataFrame(st)
        self.events = pd.DataFrame({
            "name": [r[0] for r in rows], "cat": [r[1] for r in rows],
            "tid": [r[2] for r in rows], "ph": "X",
            "ts_ns": [T0 + int(r[3] * 1000) for r in rows],
            "dur_ns": [int(r[4] * 1000) for r in rows]})


def test_a_wait_on_background_threads_is_counted_once():
    # one 1000 µs step: compute 0-200 (an op), the main thread idle 200-900 while gloo's two
    # threads each run an all-reduce over it (700 µs each: summed, 1400 µs > the step), a
    # copy 900-950, nothing 950-1000
    w = Window([("aten::mm", "cpu_op", MAIN, 0, 200),
                ("c10d::allreduce_", "cpu_op", MAIN, 150, 30),
                ("gloo:all_reduce", "user_annotation", GLOO1, 180, 720),
                ("gloo:all_reduce", "user_annotation", GLOO2, 190, 700),
                ("aten::copy_", "cpu_op", MAIN, 900, 50)], [1000])
    p = step_phases(w).iloc[0]
    # 150-180 the training thread's own comm op; 200-900 waiting (no op of its own)
    assert p["communication"] == pytest.approx(30 + 700)
    assert p["compute"] == pytest.approx(150 + 20 + 50)  # mm outside the comm op, the copy
    assert p["other"] == pytest.approx(50)
    assert sum(p[k] for k in PHASES) == pytest.approx(p["duration_us"])
    assert all(p[k] >= 0 for k in PHASES)


def test_gc_data_loading_and_sync_take_their_instants_first():
    w = Window([("aten::linear", "cpu_op", MAIN, 0, 400),
                ("GC", "user_annotation", MAIN, 100, 100),  # inside the op: a GC pause
                ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                 "user_annotation", MAIN, 500, 200),
                ("aten::randn", "cpu_op", MAIN, 550, 50),  # inside the loader: loading
                ("aten::item", "cpu_op", MAIN, 800, 20),
                ("aten::_local_scalar_dense", "cpu_op", MAIN, 805, 10),
                ("aten::item", "cpu_op", MAIN, 850, 20)], [1000, 500])
    p = step_phases(w).set_index("step")
    assert p.loc[1, "GC"] == pytest.approx(100)
    assert p.loc[1, "compute"] == pytest.approx(300)
    assert p.loc[1, "data loading"] == pytest.approx(200)
    assert p.loc[1, "sync"] == pytest.approx(40)
    assert p.loc[1, "sync_points"] == 2  # the nested _local_scalar_dense is the same point
    assert p.loc[1, "other"] == pytest.approx(1000 - 100 - 300 - 200 - 40)
    assert p.loc[2, "other"] == pytest.approx(500)  # a step with nothing recorded
    assert (p[PHASES].sum(axis=1) - p["duration_us"]).abs().max() < 1e-6


def test_no_host_events_is_said():
    w = Window([], [1000])
    w.events = w.events.iloc[0:0]
    with pytest.raises(LookupError, match="no steps with host events"):
        step_phases(w)


def test_noise_bound_by_hand():
    a, b = pd.Series([10.0, 11, 12, 13, 14]), pd.Series([20.0, 20, 22, 24, 24])
    # MAD(a) = 1, MAD(b) = 2
    want = 3 * 1.2533 * 1.4826 * math.sqrt(1 / 5 + 4 / 5)
    assert noise_bound(a, b) == pytest.approx(want)
    assert noise_bound(a, pd.Series([], dtype=float)) == 0.0


def frame(rows):
    return pd.DataFrame(rows, columns=["rank", "step", "duration_us", "compute", "communication",
                                       "other"])


def test_the_rank_that_waits_is_never_named():
    # synchronous steps of 100: rank 1 computes 80, rank 0 computes 20 and waits 75
    now = frame([(0, s, 100.0, 20.0, 75.0, 5.0) for s in range(5)]
                + [(1, s, 100.0, 80.0, 15.0, 5.0) for s in range(5)])
    v = find_straggler(now, ["compute", "communication", "other"], floor_us=5.0)
    assert v.rank == 1 and v.cause == "compute" and v.excess_us == pytest.approx(60.0)
    # against a baseline where both computed 20: rank 1 grew, rank 0's wait is not work
    base = frame([(r, s, 40.0, 20.0, 15.0, 5.0) for r in (0, 1) for s in range(5)])
    v = find_straggler(now, ["compute", "communication", "other"], base, floor_us=5.0)
    assert v.rank == 1 and v.excess_us == pytest.approx(60.0)
    t = v.table.set_index("rank")
    assert t.loc[0, "excess_us"] == pytest.approx(0.0)


def test_equal_ranks_name_no_one():
    now = frame([(r, s, 100.0, 50.0 + (s % 2), 45.0, 5.0) for r in (0, 1) for s in range(6)])
    v = find_straggler(now, ["compute", "communication", "other"], floor_us=5.0)
    assert v.rank is None and v.cause is None


def test_mindspore_operator_track_is_the_training_threads():
    # MindSpore on CPU writes its operators with thread field 0 (process "CPU OP"), the
    # backend's step markers with the training thread's id: one 1000 µs step, MatMul 0-300,
    # AllReduce 300-700 on MindSpore's track, a user range 750-850 on the training thread
    w = Window([("MatMul", "HostCpuOps", 0, 0, 300),
                ("Default/AllReduce-op0", "HostCpuOps", 0, 300, 400),
                ("extra_compute", "user_annotation", MAIN, 750, 100)], [1000])
    process = ["CPU OP" if t == 0 else "dynprof_nb" for t in w.events["tid"]]
    w.events = w.events.assign(process=process)
    p = step_phases(w).iloc[0]
    assert p["compute"] == pytest.approx(300 + 100)
    assert p["communication"] == pytest.approx(400)  # not "a collective elsewhere": its own
    assert p["other"] == pytest.approx(200)
