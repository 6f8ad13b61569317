"""The straggler rule's cause on a rank that waited for a core (CPU contention) against one that
did more work, from per-step phases and the training threads' scheduler totals
(``w.thread_cpu()``'s frame), each case built to sit on one side of the rule."""

from __future__ import annotations

import pandas as pd
import pytest

from dynprof_nb.analysis.host_phases import PHASES
from dynprof_nb.analysis.straggler import CONTENTION, baseline_busier, find_straggler

MS = 1000.0


def phases(extra: dict[str, float]) -> pd.DataFrame:
    """Two ranks, six steps of 40 ms compute; rank 1 has ``extra`` µs per step in phases, and
    rank 0 waits that long in communication (a synchronous job)."""
    rows = []
    for step in range(6):
        jitter = 100.0 * (step % 3)
        for rank in (0, 1):
            row = dict.fromkeys(PHASES, 0.0)
            row.update(rank=rank, step=step, compute=40 * MS + jitter, sync_points=0)
            if rank == 1:
                for k, v in extra.items():
                    row[k] += v
            else:
                row["communication"] = sum(extra.values())
            row["duration_us"] = sum(row[p] for p in PHASES)
            rows.append(row)
    return pd.DataFrame(rows)


def cpu(on_cpu: tuple[float, float], runq: tuple[float, float], missing=None) -> pd.DataFrame:
    return pd.DataFrame({
        "rank": [0, 1],
        "on_cpu_us_per_step": list(on_cpu),
        "runqueue_us_per_step": list(runq),
        "missing": [None, missing],
    })


@pytest.mark.parametrize(
    ("extra", "threads", "cause"),
    [
        # the same time on a CPU, 8 of its 10 ms more waiting for one: contention
        ({"compute": 10 * MS}, cpu((30 * MS, 30 * MS), (10 * MS, 18 * MS)), CONTENTION),
        # 60 ms more on a CPU, and the wait that work has on a busy machine: compute
        ({"compute": 90 * MS}, cpu((30 * MS, 90 * MS), (15 * MS, 45 * MS)), "compute"),
        # a loader that sleeps: neither on a CPU nor in the run queue
        ({"data loading": 60 * MS}, cpu((30 * MS, 30 * MS), (10 * MS, 11 * MS)), "data loading"),
        # a GC storm on a CPU, less waiting than the others
        ({"GC": 50 * MS}, cpu((30 * MS, 80 * MS), (10 * MS, 5 * MS)), "GC"),
    ],
)
def test_the_cause_is_contention_only_where_the_rank_waited_for_a_core(extra, threads, cause):
    v = find_straggler(phases(extra), PHASES, None, floor_us=2 * MS, cpu=threads)
    assert v.rank == 1 and v.cause == cause, (v.cause, v.cpu)
    assert v.cpu["reference_wait_rate"] == pytest.approx(
        threads.loc[0, "runqueue_us_per_step"] / threads.loc[0, "on_cpu_us_per_step"])


def test_without_a_record_contention_is_not_told_apart_and_it_says_why():
    threads = cpu((30 * MS, 30 * MS), (10 * MS, 18 * MS), missing="no /proc here")
    v = find_straggler(phases({"compute": 10 * MS}), PHASES, None, 2 * MS, cpu=threads)
    assert v.rank == 1 and v.cause == "compute" and not v.cpu
    assert v.cpu_missing == "rank 1: no /proc here"
    v = find_straggler(phases({"compute": 10 * MS}), PHASES, None, 2 * MS)
    assert v.cause == "compute" and v.cpu_missing == "no thread CPU record for this window"


@pytest.mark.parametrize(
    "changes, delta, rank",
    [
        ({0: -30 * MS, 1: 2 * MS}, -40 * MS, 0),  # rank 0 waited 30 ms more then: enough
        ({0: -10 * MS, 1: -12 * MS}, -40 * MS, None),  # a quarter of the drop: not the reason
        ({0: -30 * MS, 1: -35 * MS}, 40 * MS, None),  # the window is slower: not this rule
        ({}, -40 * MS, None),  # no record: not told
    ],
)
def test_the_baseline_ran_busier_where_one_ranks_cpu_wait_explains_the_drop(changes, delta, rank):
    assert baseline_busier(changes, delta) == rank


def test_one_rank_has_no_others_to_compare_and_shows_no_made_up_reference(tmp_path) -> None:
    """A single-rank window: its own work and its wait, and no others' work, excess or
    threshold (they showed its own work again and 0.0, numbers that look measured)."""
    import warnings

    from testdata import write_builtin_window

    import dynprof_nb

    write_builtin_window(tmp_path, rank=0, start=1, stop=3, step_us=2000.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (row,) = dynprof_nb.load_window(str(tmp_path)).slow_ranks().to_dict("records")
    assert row["own_us"] > 0 and not row["slow"] and "one rank only" in row["note"]
    assert all(pd.isna(row[c]) for c in ("others_own_us", "excess_us", "threshold_us")), row


def _busy_baseline() -> pd.DataFrame:
    """A baseline on a busy machine: every rank's compute inflated 32 ms a step (it waited for
    a CPU), with the spread of a loaded machine (steps 8-50 ms longer)."""
    b = phases({})
    spread = [0.0, 8.0, 50.0, 20.0, 12.0, 35.0]
    for step, more in enumerate(spread):
        for rank in (0, 1):
            at = (b["step"] == step) & (b["rank"] == rank)
            b.loc[at, "compute"] += 32 * MS + more * MS
    b["duration_us"] = b[PHASES].sum(axis=1)
    return b


def test_a_busier_baseline_does_not_hide_a_growth_of_the_ranks_own_work():
    """A 60 ms loader stall on rank 1, against a baseline that waited 32 ms a step for a CPU
    (its compute inflated, its steps spread): own work grew only ~24 ms, under that baseline's
    noise, and no rank was named (a fault-suite run beside a CI run). The baseline's extra wait
    is taken out of it, at its share of own work: rank 1, data loading. With training threads
    that waited alike, or where the rank's own work did not grow, nothing changes."""
    window = phases({"data loading": 60 * MS})
    base = _busy_baseline()
    quiet = cpu((36 * MS, 36 * MS), (1 * MS, 1.5 * MS))
    busy = cpu((41 * MS, 41 * MS), (32 * MS, 33 * MS))
    assert find_straggler(window, PHASES, base, floor_us=4 * MS).rank is None  # without records
    v = find_straggler(window, PHASES, base, floor_us=4 * MS, cpu=quiet, cpu_ref=busy)
    assert v.rank == 1 and v.cause == "data loading", v.table.to_string()
    credit = v.table.set_index("rank").loc[1, "reference_cpu_wait_us"]
    assert 0 < credit <= 31.5 * MS, credit  # the wait, at most all of it
    alike = find_straggler(window, PHASES, base, floor_us=4 * MS, cpu=busy, cpu_ref=busy)
    assert alike.rank is None
    every = busy.assign(threads="process")  # MindSpore's record: every thread, not the step's
    assert find_straggler(window, PHASES, base, 4 * MS, cpu=quiet.assign(threads="process"),
                          cpu_ref=every).rank is None
