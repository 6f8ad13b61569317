"""w.explain(baseline): a two-rank job whose rank 1 slows in one operator (its other rank
waits for it in the all-reduce) is explained by that rank and that operator, against a named
baseline and against the job's last normal window found beside it; the numbers are the
windows' own per-step operator times."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from testdata import write_builtin_window

import dynprof_nb

BASE = {"matmul": 50.0, "allreduce": 30.0}
SLOW_BY = 800.0  # rank 1's matmul takes this much longer; rank 0 waits as long in allreduce
# (8% of the step: over the 5% a change must have to be told from noise)


def job(root: Path) -> tuple[list[Path], list[Path]]:
    normal = [write_builtin_window(root, rank=r, start=1, stop=3, step_us=10_000,
                                   extra_ops=BASE) for r in (0, 1)]
    slow_ops = [{**BASE, "allreduce": BASE["allreduce"] + SLOW_BY},
                {**BASE, "matmul": BASE["matmul"] + SLOW_BY}]
    slow = [write_builtin_window(root, rank=r, start=11, stop=15, step_us=10_000 + SLOW_BY,
                                 extra_ops=slow_ops[r]) for r in (0, 1)]
    for p in slow:  # recorded later, by the trigger
        m = json.loads((p / "window.json").read_text())
        m.update(started_at=100.0, ended_at=101.0, reason="step 12 took 1.4x the median")
        (p / "window.json").write_text(json.dumps(m))
    return normal, slow


def load(paths: list[Path]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dynprof_nb.load_window([str(p) for p in paths])


def test_explain_names_the_slow_rank_and_operator(tmp_path):
    normal, slow = job(tmp_path)
    w, b = load(slow), load(normal)
    for e in (w.explain(b), w.explain()):  # named, and the job's last normal window
        assert e.rank == 1
        assert e.operators["name"].iloc[0] == "matmul"
        assert "rank 1" in e.text and "matmul" in e.text and "rank 0 waits" in e.text
        # the numbers are the frames': per step, from the ops tables
        def per_step(win, rank, name):
            ops, st = win.ops, win.steps
            n = (st["rank"] == rank).sum()
            return ops[(ops["rank"] == rank) & (ops["name"] == name)]["self_us"].sum() / n
        top = e.operators.iloc[0]
        assert top["window_us"] == pytest.approx(per_step(w, 1, "matmul"))
        assert top["baseline_us"] == pytest.approx(per_step(b, 1, "matmul"))
        ratio = per_step(w, 1, "matmul") / per_step(w, 0, "matmul")
        assert top["vs_others"] == pytest.approx(ratio)
        comm = e.phases.set_index(["rank", "phase"]).loc[(0, "communication"), "delta_us"]
        assert comm == pytest.approx(per_step(w, 0, "allreduce") - per_step(b, 0, "allreduce"))
        step = lambda win: win.steps.groupby("rank")["duration_us"].mean().max()  # noqa: E731
        assert e.delta_us == pytest.approx(step(w) - step(b))
    assert "why (vs the last normal window)" in str(w.summary())


def test_no_baseline_is_said(tmp_path):
    _, slow = job(tmp_path)
    for p in (tmp_path / n for n in ("rank0_start1_stop3", "rank1_start1_stop3")):
        m = json.loads((p / "window.json").read_text())
        (p / "window.json").write_text(json.dumps({**m, "reason": "triggered too"}))
    with pytest.raises(ValueError, match="no baseline"):
        load(slow).explain()
