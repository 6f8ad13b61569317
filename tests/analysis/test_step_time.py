"""One step time per window: the summary's notes, its Ranks table and ``w.advise()``'s step
outliers give the same median step for a rank (docs/definitions.md, "Step time").

A new user saw "147.6 ms" as the median step in the summary's note and "90.7 ms" in the
findings under it, for one window: the note took the median of each step's slowest-rank time,
the finding each rank's own median. Two real ranks that run at different speeds without a
barrier (as ranks drift apart) make those two numbers differ; here they must agree."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from jobutil import finish, spawn_rank, unique_job, wait_until
from testdata import write_builtin_window

import dynprof_nb
from dynprof_nb.analysis.step_time import rank_medians, step_outliers
from dynprof_nb.contract import segment

NOTE = re.compile(
    r"step (?P<step>\d+) (?:took|was slow on ranks [\d, ]+: up to) (?P<factor>[\d.]+)x "
    r"rank (?P<rank>\d+)'s median step \((?P<ms>[\d.]+) ms vs (?P<median_ms>[\d.]+) ms\)"
)


def assert_one_step_time(w) -> pd.DataFrame:
    """Every step-outlier finding has its note, with the same step, rank and median; every
    median is the Ranks table's for that rank. Returns the findings' numbers."""
    s = w.summary()
    ranks = s.ranks.set_index("rank")["median_step_us"]
    found = [f for f in w.advise(events=False) if f.rule == "step outliers"]
    rows = pd.DataFrame(
        [(f.ranks[0], f.steps[0], f.numbers["median_us"], f.numbers["duration_us"])
         for f in found], columns=["rank", "step", "median_us", "duration_us"])
    notes = {int(m["step"]): m for n in s.notes if (m := NOTE.search(n))}
    for row in rows.itertuples(index=False):
        assert row.median_us == pytest.approx(ranks[row.rank], rel=1e-12), (row, ranks)
        if row.step not in notes:
            continue  # past the first three (checked below)
        note = notes[row.step]
        # a step slow on several ranks: the note gives the slowest of them
        same = rows[rows.step == row.step]
        worst = same.loc[(same.duration_us / same.median_us).idxmax()]
        assert int(note["rank"]) == worst["rank"]
        assert float(note["median_ms"]) == round(worst["median_us"] / 1000, 1)
        assert float(note["ms"]) == round(worst["duration_us"] / 1000, 1)
    slow = sorted(set(rows.step))
    assert sorted(notes) == slow[:3], (s.notes, rows)  # the first three, one by one
    if len(slow) > 3:  # the others named in one line
        rest = f"{len(slow) - 3} more steps took >= 1.5x their rank's median step: "
        assert rest + ", ".join(map(str, slow[3:])) in "\n".join(s.notes)
    return rows


def test_real_ranks_at_different_speeds_one_median_step(tmp_path: Path):
    """Rank 0 steps in 20 ms; rank 1 in 8 ms with single 32 ms steps about one in three (the
    loop's ``--hiccups``): rank 1's slow steps are over 1.5x its own median, and over 1.5x the
    20 ms the old note measured them against."""
    out = tmp_path / "out"  # the loop writes out.hiccups.R beside it: inside tmp_path
    job_name = unique_job("steptime")
    job = dynprof_nb.attach(job_name, create=True)
    procs = [
        spawn_rank(job_name, 0, out, step_ms=20),
        spawn_rank(job_name, 1, out, step_ms=8, extra=["--hiccups", "4-4:2"]),
    ]
    try:
        wait_until(lambda: len(job.live_slots()) == 2
                   and all(s.step > 0 for s in job.live_slots()),
                   what="2 ranks stepping")
        job.start("+5", "+24")
        job.wait(timeout=120, progress=False)
        w = job.load()
    finally:
        for p in procs:
            finish(p)
        job.close()
        segment.unlink(job_name)
    assert sorted(w.ranks) == [0, 1]
    rows = assert_one_step_time(w)
    # 20 steps at one in about three: rank 1 has slow steps in the window, and they are found
    assert (rows["rank"] == 1).any(), w.steps.to_string()
    hiccups = {int(n) for n in Path(f"{out}.hiccups.1").read_text().split()}
    assert set(rows.loc[rows["rank"] == 1, "step"]) <= hiccups


def test_fixture_window_notes_use_each_ranks_median(tmp_path: Path):
    """A built-in window with a slow rank: its slow step is measured against its own median,
    not the slowest rank's (rank 1's step 3 is 1.8x its own median, 0.9x rank 0's)."""
    write_builtin_window(tmp_path, rank=0, start=1, stop=6, step_us=2000)
    write_builtin_window(tmp_path, rank=1, start=1, stop=6, step_us=1000, slow_step=3,
                         slow_factor=1.8)
    w = dynprof_nb.load_window(tmp_path)
    rows = assert_one_step_time(w)
    assert list(rows[["rank", "step"]].itertuples(index=False, name=None)) == [(1, 3)]
    assert "step 3 took 1.8x rank 1's median step (1.8 ms vs 1.0 ms)" in str(w.summary())


def test_step_time_without_rank_column():
    steps = pd.DataFrame({"step": [1, 2, 3, 4], "duration_us": [10.0, 10.0, 30.0, 12.0]})
    assert rank_medians(steps).to_dict() == {0: 11.0}
    out = step_outliers(steps)
    assert out[["rank", "step", "median_us"]].values.tolist() == [[0, 3, 11.0]]
    assert out["start_ns"].isna().all()
