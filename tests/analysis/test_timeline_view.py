"""The interactive timeline's kernel side, on the 352k-event window of test_plots: the range
choice is the static plot's choice (same lanes, same per-pixel rule), every event overlapping a
range is found (checked against a plain scan), zooming to one kernel draws that kernel, a
redraw costs a small fraction of the static full draw, a click gives the event's args from the
trace file, and a frontend without widgets gets a PNG."""

from __future__ import annotations

import base64
import io
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from test_plots import ARTIFACTS, NCCL, loaded, replicate
from testdata import fixtures_dir

from dynprof_nb.analysis import plots, timeline_view
from dynprof_nb.analysis.timeline_view import TimelineView


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    root = replicate(fixtures_dir() / NCCL, tmp_path_factory.mktemp("tv") / "w13", 13,
                     skew_us=2_000_000)
    w, _ = loaded(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return w, w.plot_timeline(interactive=True)


def drawn_ids(view: TimelineView) -> np.ndarray:
    n = view.drawn["count"]
    return np.frombuffer(view.rects, np.int32, n, 8 * n)


def test_visible_events_are_exactly_those_overlapping_the_range(big):
    _, view = big
    idx = view.index
    lo, hi = view.full
    rng = np.random.default_rng(5)
    for _ in range(20):
        a = rng.uniform(lo, hi)
        b = a + (hi - lo) * 10 ** rng.uniform(-6, -0.5)
        got = np.sort(idx.visible(a, b))
        want = np.flatnonzero((idx.x0 < b) & (idx.x1 > a))
        assert np.array_equal(got, want), (a, b)


def test_whole_view_draws_what_the_static_plot_draws(big):
    w, view = big
    lay = view.tl
    view.zoom(lay.lo, lay.hi, pixels=plots._PIXELS)  # the static plot's range and width
    mine = set(lay.index[drawn_ids(view)].tolist())
    static = plots.longest_per_pixel(lay.x0, lay.dur, lay.y, lay.lo, lay.hi, plots._PIXELS)
    assert mine == set(lay.index[static].tolist())
    assert view.drawn["visible"] == lay.n_drawable > view.drawn["count"]


def test_zoom_to_one_kernel_and_redraws_cost_little(big):
    w, view = big
    idx = view.index
    device = view.tl.lanes.loc[view.tl.lanes["device"], "y0"].to_numpy()
    kernels = np.flatnonzero(np.isin(idx.y, device))
    k = int(kernels[np.argsort(idx.dur[kernels])[len(kernels) // 2]])  # a median kernel
    t = time.process_time()
    plots.timeline(w).savefig(io.BytesIO(), format="png", dpi=100)
    static = time.process_time() - t
    lo, hi = view.full
    centre, worst = idx.x0[k] + idx.dur[k] / 2, 0.0
    while hi - lo > 3 * idx.dur[k]:
        span = (hi - lo) / 4
        lo, hi = centre - span / 2, centre + span / 2
        t = time.process_time()
        view.zoom(lo, hi)
        view.zoom(lo + span / 3, hi + span / 3)  # and a pan
        view.zoom(lo, hi)
        worst = max(worst, (time.process_time() - t) / 3)
    assert k in drawn_ids(view)  # one kernel fills the view
    assert view.drawn["count"] <= 2 * view.tl.rows  # a few per row: the ones covering it
    # a redraw is a searchsorted and a per-pixel max: ~1 ms against ~2 s for the full static
    # timeline; a twentieth leaves room for a loaded machine
    assert worst < static / 20, (worst, static)


def test_a_click_gives_the_events_details_and_args(big):
    w, view = big
    i = int(np.argmax(view.index.dur))
    view.selected = i
    d = view.details
    row = w.events.iloc[int(view.tl.index[i])]
    assert d["name"] == row["name"] and d["rank"] == row["rank"]
    assert d["thread/stream"] == row["thread"]
    assert isinstance(d["args"], dict) and d["args"]  # read back from the Kineto file


def test_without_widgets_the_display_is_a_png_of_the_view(big):
    _, view = big
    lo, hi = view.full
    view.zoom(lo, lo + (hi - lo) / 10)
    data, _ = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    png = base64.b64decode(data["image/png"])
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "timeline_view_fallback.png").write_bytes(png)
    h, w_px = imread(io.BytesIO(png)).shape[:2]
    assert w_px <= 1400 and h <= 1500
    assert "events drawn" in data["text/plain"]


def test_small_window_draws_every_event(tmp_path: Path):
    root = replicate(fixtures_dir() / NCCL, tmp_path / "w2", 2, skew_us=28_000_000)
    w, _ = loaded(root)
    view = w.plot_timeline(interactive=True, ranks=[0])
    lo, hi = view.full
    view.zoom(lo, lo + (hi - lo) / 1000)
    assert view.drawn["count"] == view.drawn["visible"]  # few in range: all, exactly


def test_the_summary_holds_the_longest_event_of_each_bucket_at_each_level(big):
    _, view = big
    idx, lev, widths, complete = timeline_view.summary_levels(view.index)
    info = view.summary_info
    assert info["count"] == len(idx) and info["levels"] == widths and info["complete"] == complete
    assert widths == sorted(widths, reverse=True) and len(widths) >= 2
    held = set(idx.tolist())
    lo, hi = view.index.lo, view.index.hi + 1.0
    for k, wk in enumerate(widths):  # each level's choice is the per-bucket rule, all of it
        pick = plots.longest_per_pixel(view.index.x0, view.index.dur, view.index.y, lo, hi,
                                       round((hi - lo) / wk))
        assert held.issuperset(pick.tolist())
        assert set(idx[lev <= k].tolist()) >= set(pick.tolist())
    small, _, _, small_complete = timeline_view.summary_levels(view.index, budget=1000)
    assert not small_complete and len(small) < len(idx)  # the first level, whatever it costs


def test_search_and_range_sums_agree_with_a_plain_scan(big):
    w, view = big
    found = view.search("NCCLKERNEL")
    names = np.array(view._full_names, dtype=object)[view._name_of]
    want = np.flatnonzero(["nccl" in n.lower() and "kernel" in n.lower() for n in names])
    assert found["total"] == len(want) > 0
    assert {it[0] for it in found["items"]} <= set(want.tolist())
    starts = [it[1] for it in found["items"]]
    assert starts == sorted(starts)
    lo, hi = view.full
    a, b = lo + (hi - lo) * 0.3, lo + (hi - lo) * 0.35
    s = view.range_summary(b, a)
    inside = np.minimum(view.index.x1, b) - np.maximum(view.index.x0, a)
    keep = inside > 0
    assert s["events"] == int(keep.sum()) and s["duration_ns"] == pytest.approx(b - a)
    top_name, top_ns, top_n = s["names"][0]
    per = {}
    for n, t in zip(names[keep], inside[keep], strict=True):
        per[n] = per.get(n, 0.0) + t
    best = max(per, key=per.get)
    assert top_ns == pytest.approx(per[best]) and top_name == plots.short_label(best, 80)


def test_a_kernel_links_to_its_launch_and_zoom_to_a_step(big, tmp_path):
    w, view = big
    ids = np.flatnonzero(["vectorized_elementwise" in view._full_names[c]
                          for c in view._name_of])
    kernel = int(ids[np.argmax(view.index.dur[ids])])  # a kernel whose launch is drawn
    d = view.event(int(kernel))
    # 13 ranks in 64 rows: one level per lane, so the launch (nested) is named, not drawn
    assert d["launch"].startswith("cudaLaunchKernel at ") and "not drawn" in d["launch"]
    small = replicate(fixtures_dir() / NCCL, tmp_path / "w1", 1, skew_us=0)
    w1, _ = loaded(small)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = w1.plot_timeline(interactive=True)
    ids = np.flatnonzero(["vectorized_elementwise" in one._full_names[c] for c in one._name_of])
    kernel = int(ids[np.argmax(one.index.dur[ids])])
    d = one.event(kernel)
    launches = [f for f in d["flows"] if f["why"] == "launch"]
    assert len(launches) == 1 and "not drawn" not in d["launch"]
    host = w1.events.iloc[int(one.tl.index[launches[0]["id"]])]
    assert host["correlation"] == w1.events["correlation"].iloc[int(one.tl.index[kernel])]
    assert host["name"] == "cudaLaunchKernel"
    back = one.event(launches[0]["id"])  # and the launch points at its kernel
    assert any(f["id"] == kernel for f in back["flows"] if f["why"] == "kernel")
    assert "kernels" in back
    view.zoom_to(step=int(w.steps["step"].iloc[0]))
    lo, hi = view.visible_range
    marks = view.step_marks()
    assert lo < marks.iloc[0] < hi and view.goto[:2] == [lo, hi]


def test_a_kineto_file_is_not_titled_chrome():
    w, _ = loaded(fixtures_dir() / NCCL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        view = w.plot_timeline(interactive=True)
    assert w.framework == "chrome" and "PyTorch (Kineto)" in view.title
    assert "chrome" not in view.title


def test_an_arrangement_that_is_not_this_views_is_drawn_as_the_layout_with_a_warning(big):
    """``arranged`` comes from the browser; one set by hand, or damaged, must not make the
    view impossible to display (its PNG is ``figure()``): the layout's own lanes are drawn,
    and a warning says why."""
    w, view = big
    plain = [t.get_text() for t in view.figure().axes[0].get_yticklabels()]
    rows = view.tl.rows
    bad = [{"rows": ["x"] * rows, "lanes": [], "height": 3},
           {"rows": list(range(rows))},
           {"rows": list(range(rows)), "lanes": [[0, 1, "a"]], "height": rows},
           {"rows": list(range(rows)), "lanes": 5, "height": rows},
           {"rows": list(range(rows)), "lanes": [], "height": None},
           {"rows": list(range(rows)), "lanes": [], "height": 0},
           {"rows": list(range(rows - 1)), "lanes": [], "height": rows}]
    try:
        for arranged in bad:
            view.arranged = arranged
            with pytest.warns(UserWarning, match="not an arrangement of this view"):
                labels = [t.get_text() for t in view.figure().axes[0].get_yticklabels()]
            assert labels == plain, arranged
    finally:
        view.arranged = {}


def test_search_pages_are_whole_numbers_of_at_least_one_match(big):
    w, view = big
    with pytest.raises(ValueError, match="at least one match"):
        view.search("nccl", limit=0)
    a, b = view.search("nccl", limit=3, page=1.0), view.search("nccl", limit=3, page=1)
    assert a == b and len(a["items"]) == 3
    assert view.search("nccl", limit=3, page=-7)["page"] == 0


def test_timeline_is_the_interactive_timeline_by_its_short_name():
    """``w.timeline()`` (the name the getting-started pages use) is
    ``w.plot_timeline(interactive=True)``: the same widget over the same lanes and range."""
    from dynprof_nb import samples

    w = samples.load("pytorch_cpu")
    view = w.timeline()
    same = w.plot_timeline(interactive=True)
    assert isinstance(view, TimelineView)
    assert view.full == same.full and view.tl.n_drawable == same.tl.n_drawable > 0
