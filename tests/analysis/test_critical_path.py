"""w.critical_path(step) on a real PyTorch CPU window (tests/data/torch_cpu): the step API and
the frame's promises (HTA's numbers themselves: test_critical_path_oracle.py)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import dynprof_nb

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def window():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dynprof_nb.load_window(DATA / "torch_cpu")


def test_a_steps_path_is_a_chain_inside_the_step(window):
    steps = window.steps
    for step in steps["step"].tolist():
        cp = window.critical_path(step)
        row = steps[steps["step"] == step].iloc[0]
        lo, hi = cp.region
        assert lo == row["start_ns"]
        # one chain of segments: each starts where the one before ended
        assert (cp["start_ns"].iloc[1:].to_numpy() == cp["end_ns"].iloc[:-1].to_numpy()).all()
        assert (cp["end_ns"] >= cp["start_ns"]).all() and (cp["duration_us"] >= 0).all()
        # the path is the step's CPU chain: it fits in the step and is most of it
        assert cp.length_us <= (hi - lo) / 1e3 + 1e-6
        span = (cp["end_ns"].iloc[-1] - cp["start_ns"].iloc[0]) / 1e3
        assert cp.length_us <= span + 1e-6
        # a CPU-only window: all host, and the names are the step's operators
        s = cp.summary
        assert s.loc["host", "share"] == pytest.approx(1.0)
        assert s["time_us"].sum() == pytest.approx(cp.length_us)
        ev = window.events
        names = set(ev[(ev["ts_ns"] >= lo) & (ev["ts_ns"] <= hi)]["name"].astype(str))
        assert set(cp["name"]) <= names


def test_default_is_the_first_step_and_errors_name_the_choice(window):
    first = int(window.steps["step"].iloc[0])
    assert window.critical_path().region == window.critical_path(first).region
    with pytest.raises(LookupError, match="no step 999"):
        window.critical_path(999)
    with pytest.raises(LookupError, match="no instance"):
        window.critical_path(annotation="ProfilerStep", instance=99)


def test_show_opens_the_timeline_on_the_paths_step(window):
    cp = window.critical_path()
    view = cp.show()
    lo, hi = cp.region
    off = view.tl.offsets.get(cp.rank_id, 0) if view.tl.offsets else 0
    vlo, vhi = view.visible_range
    assert vlo <= lo - off < hi - off <= vhi  # the step is in view
    assert vhi - vlo < 2 * (hi - lo)  # and the view is about it, not the window
    assert view.drawn["count"] > 0
