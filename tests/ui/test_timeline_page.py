"""The interactive timeline's features in real chromium, one page each (tests/timeline_page.py:
the widget's own JS and CSS in a plain page, its model wired to the real TimelineView in this
process, no JupyterLab): zoom and pan drawn from the held summary and the kernel asked only
below it; a tooltip that follows the pointer through a zoom; names inside bars, a colour per
name, step numbers that agree with ``w.steps``; collapsed and pinned lanes; search with
next/previous; WASD and the arrows; a range's summed time per name; the arrow from a kernel to
its launch; ``zoom_to(step=)`` and a finding's ``show()``; and the frame time of zoom and pan
on a 352k-event window with a CPU-bound process beside it. Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from testdata import fixtures_dir
from timeline_page import LEFT, MEASURE, TOP, TimelinePage, percentile

import dynprof_nb
from dynprof_nb.analysis import plots, timeline_view

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from test_plots import (  # noqa: E402
    ARTIFACTS,
    NCCL,
    TP_DP_GROUPS,
    loaded,
    replicate,
    replicate_groups,
)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    root = replicate(fixtures_dir() / NCCL, tmp_path_factory.mktemp("tp") / "w2", 2,
                     skew_us=28_000_000)
    w, _ = loaded(root)
    return w


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """A TP=2 x DP=2 job's 4 ranks (test_plots.replicate_groups), 7 s clock skew each."""
    root = replicate_groups(fixtures_dir() / NCCL, tmp_path_factory.mktemp("tp") / "w4",
                            skew_us=7_000_000)
    w, _ = loaded(root)
    return w


def _view(w, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return w.plot_timeline(interactive=True, **kw)


@pytest.fixture
def page(browser):
    p = browser.new_page(viewport={"width": 1450, "height": 1100})
    p.set_default_timeout(30_000)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    p.close()
    assert not errors, errors


def _x(state: dict, box: dict, t: float) -> float:
    """The canvas x of time ``t`` in the drawn range."""
    lo, hi = float(state["lo"]), float(state["hi"])
    return LEFT + (t - lo) / (hi - lo) * (box["width"] - LEFT - 10)


def _t(state: dict, box: dict, x: float) -> float:
    lo, hi = float(state["lo"]), float(state["hi"])
    return lo + (x - LEFT) / (box["width"] - LEFT - 10) * (hi - lo)


def _longest_on(view, needle: str) -> int:
    """The longest drawn event whose name contains ``needle``."""
    ids = np.flatnonzero([needle in view._full_names[c] for c in view._name_of])
    return int(ids[np.argmax(view.index.dur[ids])])


def _show(tp: TimelinePage, view, i: int, pad: float = 2.0) -> tuple[float, float]:
    """Zoom from Python onto event ``i`` (its width ``pad`` times either side); the page
    position (x, y) of its middle."""
    x0, x1 = view.index.x0[i], view.index.x1[i]
    w = max(x1 - x0, 1.0)
    view.zoom(x0 - pad * w, x1 + pad * w)
    tp.push()
    box, st = tp.box(), tp.state()
    x = _x(st, box, (x0 + x1) / 2)
    return box["x"] + x, box["y"] + TOP + int(view.index.y[i]) * view.row_height + 9


def test_zoom_and_pan_are_drawn_from_the_summary_without_the_kernel(page, two):
    view = _view(two)
    tp = TimelinePage(page, view)
    assert view.summary_info["complete"]  # 42k events: all held, at every zoom
    first = tp.state()
    box = tp.box()
    page.mouse.move(box["x"] + 700, box["y"] + 120)
    for _ in range(12):
        page.mouse.wheel(0, -300)
    st = tp.state()
    span0 = float(first["hi"]) - float(first["lo"])
    span = float(st["hi"]) - float(st["lo"])
    assert span < span0 / 100
    assert int(st["level"]) > 0  # a finer level than the whole window's
    assert "view" not in tp.calls  # never asked the kernel
    page.mouse.move(box["x"] + 900, box["y"] + 120)
    page.mouse.down()
    page.mouse.move(box["x"] + 750, box["y"] + 120, steps=4)
    page.mouse.move(box["x"] + 600, box["y"] + 120, steps=4)
    page.mouse.up()
    panned = tp.state()
    assert float(panned["lo"]) - float(st["lo"]) == pytest.approx(
        300 / (box["width"] - LEFT - 10) * span, rel=0.03)
    page.wait_for_timeout(400)  # the view at rest is told to the kernel
    assert view.visible_range == pytest.approx((float(panned["lo"]), float(panned["hi"])))


def test_below_the_summary_the_kernel_is_asked_and_the_summary_drawn_meanwhile(
        page, two, monkeypatch):
    monkeypatch.setattr(timeline_view, "SUMMARY_BUDGET", 5_000)
    view = _view(two)
    info = view.summary_info
    assert not info["complete"] and info["count"] < info["events"] / 2
    tp = TimelinePage(page, view)
    box = tp.box()
    page.mouse.move(box["x"] + 700, box["y"] + 300)
    for _ in range(30):
        page.mouse.wheel(0, -300)
        if tp.state()["source"] == "kernel":
            break
    page.wait_for_function("() => document.querySelector('.dynprof-timeline')"
                           ".dataset.source === 'kernel'")
    st = tp.state()
    assert "view" in tp.calls
    fine = float(view.summary_info["levels"][-1])
    assert (float(st["hi"]) - float(st["lo"])) / (box["width"] - LEFT - 10) < fine
    assert int(st["drawn"]) > 0
    page.mouse.wheel(0, 2000)  # back out: the summary again, with no wait
    assert tp.state()["source"] == "summary"


def test_the_tooltip_names_what_is_under_the_pointer_after_each_zoom(page, two):
    view = _view(two)
    tp = TimelinePage(page, view)
    i = _longest_on(view, "ncclKernel")
    x, y = _show(tp, view, i, pad=0.3)
    page.mouse.move(x, y)
    tip = tp.root.locator(".dynprof-tl-tip")
    assert tip.is_visible()
    box = tp.box()
    for _ in range(8):  # zoom out on the pointer: other events come under it, or none
        page.mouse.wheel(0, 400)
        st = tp.state()
        if "hover" not in st:
            assert not tip.is_visible()
            continue
        j = int(st["hover"])
        assert tip.inner_text().split("\n")[0] == view.names[int(view._name_of[j])]
        t = _t(st, box, x - box["x"])
        px = (float(st["hi"]) - float(st["lo"])) / (box["width"] - LEFT - 10)
        assert view.index.x0[j] - 2 * px <= t <= view.index.x1[j] + 2 * px
        assert int(view.index.y[j]) == int((y - box["y"] - TOP) // view.row_height)


def test_names_colours_and_step_numbers(page, two):
    view = _view(two)
    tp = TimelinePage(page, view)
    assert view.row_height >= 16  # an 11 px name fits
    st, box = tp.state(), tp.box()
    assert int(st["labels"]) > 5  # the top-level ops of the whole window are named
    # the step numbers: every step of w.steps in view, where its ranks' median start is
    steps = two.steps
    labels = dict((int(s), x) for s, x in json.loads(st["stepLabels"]))
    assert sorted(labels) == sorted(set(steps["step"].tolist()))
    marks = view.step_marks()
    for s, x in labels.items():
        assert x == pytest.approx(_x(st, box, marks[s]), abs=1.0)
    # rank r's steps start r * skew later on the wall clock: on their own steps all agree
    first = steps.groupby("rank")["start_ns"].min()
    a = steps.assign(a=steps["start_ns"] - steps["rank"].map(first))
    assert a.groupby("step")["a"].median().to_numpy() == pytest.approx(
        marks.to_numpy() - marks.iloc[0] + a.groupby("step")["a"].median().iloc[0])
    # one colour per name: a kernel's bar is drawn in its name's colour, on both ranks
    i = _longest_on(view, "ncclKernel")
    x, y = _show(tp, view, i)
    rgb = page.evaluate("([x, y]) => Array.from(document.querySelector('.dynprof-tl-canvas')"
                        ".getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3))",
                        [x - box["x"], y - box["y"] - 5])
    want = plots.name_colour(view._full_names[int(view._name_of[i])])
    assert rgb == pytest.approx([int(want[k:k + 2], 16) for k in (1, 3, 5)], abs=3)
    tp.root.screenshot(path=str(ARTIFACTS / "timeline_page_kernel.png"))


def test_lanes_collapse_expand_and_pin(page, two):
    view = _view(two)
    tp = TimelinePage(page, view)
    box = tp.box()
    rows0 = int(tp.state()["rows"])
    lane0 = view.lanes[0]
    assert lane0["rows"] > 1
    page.mouse.click(box["x"] + 6, box["y"] + TOP + 9)  # ▾ of the first lane
    assert int(tp.state()["rows"]) == rows0 - lane0["rows"] + 1
    page.mouse.click(box["x"] + 6, box["y"] + TOP + 9)
    assert int(tp.state()["rows"]) == rows0
    stream = next(j for j, lane in enumerate(view.lanes) if "stream 40" in lane["label"])
    y = view.lanes[stream]["y0"] * view.row_height + 9
    page.mouse.click(box["x"] + 20, box["y"] + TOP + y)  # ○: pin the stream, every rank's
    order = json.loads(tp.state()["order"])
    group = [lane["label"] for lane in view.lanes if lane["thread"] == view.lanes[stream]["thread"]]
    assert len(group) == 2 and order[:2] == group
    tp.root.screenshot(path=str(ARTIFACTS / "timeline_page_pinned.png"))
    # the static figure (what an export shows) draws the lanes as the browser does
    labels, rows = _figure_lanes(page, view, "timeline_figure_pinned.png")
    assert labels[:2] == [f"● {g}" for g in group] and len(labels) == len(order)
    assert rows == int(tp.state()["rows"])
    # a label: its process (rank 0's host process, 3 lanes) becomes one header row; the
    # device lanes of rank 0 stay as they were
    host = [ln for ln in view.lanes if ln["rank"] == 0 and not ln["device"]]
    assert len(host) == 3
    page.mouse.click(box["x"] + 120, box["y"] + TOP + 2 * view.row_height + 9)
    st = tp.state()
    assert int(st["rows"]) == rows0 - sum(ln["rows"] for ln in host) + 1
    assert json.loads(st["headers"]) == ["process"]
    assert not {ln["label"] for ln in host[1:]} & set(json.loads(st["order"]))
    assert "rank 0 · stream 40 " in json.loads(st["order"])
    tp.root.screenshot(path=str(ARTIFACTS / "timeline_page_process_collapsed.png"))
    labels, rows = _figure_lanes(page, view, "timeline_figure_process_collapsed.png")
    assert rows == int(st["rows"]) and len(labels) == len(json.loads(st["order"]))
    assert [x for x in labels if x.endswith(" lanes")] == [
        f"rank 0 · {host[0]['process']} (host) · 3 lanes"]
    assert not {ln["label"] for ln in host} & set(labels)
    page.mouse.click(box["x"] + 120, box["y"] + TOP + 2 * view.row_height + 9)  # its header
    assert int(tp.state()["rows"]) == rows0
    # shift-click: the whole rank, host and device, is one header row (and one more where its
    # pinned stream is, at the top)
    page.keyboard.down("Shift")
    page.mouse.click(box["x"] + 120, box["y"] + TOP + 2 * view.row_height + 9)
    page.keyboard.up("Shift")
    st = tp.state()
    rank0 = [ln for ln in view.lanes if ln["rank"] == 0]
    assert json.loads(st["headers"]) == ["rank", "rank"]
    assert int(st["rows"]) == rows0 - sum(ln["rows"] for ln in rank0) + 2


def test_a_drag_is_a_pan_wherever_it_ends(page, two):
    """A pan dragged from the events to over the lane labels and released there pans, and
    collapses nothing (the browser's click fires wherever a press ends over the canvas); a
    press on a label dragged off it is no click either; a plain label click still collapses."""
    view = _view(two)
    tp = TimelinePage(page, view)
    box = tp.box()
    before = tp.state()
    rows0, order0 = int(before["rows"]), before["order"]
    label_y = box["y"] + TOP + 2 * view.row_height + 9  # rank 0's host process, as above
    page.mouse.move(box["x"] + 700, label_y)
    page.mouse.down()
    page.mouse.move(box["x"] + 400, label_y, steps=4)
    page.mouse.move(box["x"] + 120, label_y, steps=4)  # over the labels
    page.mouse.up()
    panned = tp.state()
    assert float(panned["lo"]) > float(before["lo"])  # dragged left: later times in view
    assert int(panned["rows"]) == rows0 and json.loads(panned["headers"]) == []
    assert panned["order"] == order0
    page.mouse.move(box["x"] + 120, label_y)
    page.mouse.down()
    page.mouse.move(box["x"] + 160, label_y + 40, steps=4)  # pressed on a label, moved off
    page.mouse.up()
    assert int(tp.state()["rows"]) == rows0
    page.mouse.click(box["x"] + 120, label_y)
    assert json.loads(tp.state()["headers"]) == ["process"]


def _figure_lanes(page, view, png: str) -> tuple[list[str], int]:
    """``view.figure()`` once the browser's arrangement has reached the kernel: its lane
    labels, top to bottom, and how many rows it draws; the figure saved to tests/artifacts."""
    sent = view.arranged
    for _ in range(100):  # the page's save_changes is asynchronous, as a comm is
        page.wait_for_timeout(20)
        if view.arranged is not sent:
            break
    fig = view.figure()
    fig.savefig(ARTIFACTS / png, dpi=80)
    ax = fig.axes[0]
    return [t.get_text() for t in ax.get_yticklabels()], round(ax.get_ylim()[0])


def test_pin_communication_keeps_every_ranks_communication_lanes_together(page, two):
    """One click pins, as one group at the top, the lanes that run the window's collectives:
    on each rank the stream its NCCL kernels ran on (by ``w.kernels``), and nothing else."""
    view = _view(two)
    k = two.kernels
    nccl = k[k.name.str.contains("nccl", case=False)]
    expected = [lane["label"] for lane in view.lanes if lane["device"] and any(
        lane["rank"] == r and lane["label"].rstrip().endswith(f"stream {s}")
        for r, s in zip(nccl["rank"], nccl["stream"], strict=True))]
    assert len(expected) == 2, [lane["label"] for lane in view.lanes]
    tp = TimelinePage(page, view)
    before = json.loads(tp.state()["order"])
    assert before[:2] != expected
    page.click(".dynprof-tl-pincomm")
    st = tp.state()
    assert st["commPinned"] == "1" and json.loads(st["order"])[:2] == expected
    assert page.locator(".dynprof-tl-pincomm").inner_text().startswith("●")
    tp.root.screenshot(path=str(ARTIFACTS / "timeline_page_pinned_comm.png"))
    page.click(".dynprof-tl-pincomm")
    assert json.loads(tp.state()["order"]) == before


def test_pin_a_communication_group_keeps_its_member_ranks_lanes_together(page, four):
    """A TP=2 x DP=2 job: the group menu lists the four process groups by name and ranks, and
    choosing the data-parallel group of ranks 0 and 2 pins those two ranks' stream 41, the
    stream its broadcasts ran on (by ``w.kernels``), and nothing else; choosing none unpins."""
    view = _view(four)
    assert [(g["key"], g["label"], g["lanes"]) for g in view.comm_groups] == [
        (g, f"group {g} · ranks [{r[0]}, {r[1]}]", 2) for g, r in TP_DP_GROUPS.items()]
    k = four.kernels
    dp = k[k["name"].str.startswith("ncclKernel_Broadcast") & k["rank"].isin([0, 2])]
    expected = [ln["label"] for ln in view.lanes if ln["device"] and any(
        ln["rank"] == r and ln["label"].rstrip().endswith(f"stream {s}")
        for r, s in zip(dp["rank"], dp["stream"], strict=True))]
    assert len(expected) == 2
    tp = TimelinePage(page, view)
    before = json.loads(tp.state()["order"])
    menu = tp.root.locator(".dynprof-tl-pingroup")
    assert menu.is_visible()
    menu.select_option("3")
    st = tp.state()
    assert st["groupPinned"] == "3" and json.loads(st["order"])[:2] == expected
    assert json.loads(st["order"])[2:] == [lab for lab in before if lab not in expected]
    tp.root.screenshot(path=str(ARTIFACTS / "timeline_page_pinned_group.png"))
    menu.select_option("")
    assert json.loads(tp.state()["order"]) == before


def test_a_collectives_peers_are_its_groups_ranks(page, four):
    """Clicked, an allreduce of rank 0's tensor-parallel group names and points to rank 1's,
    its only peer, never the other group's ranks 2 and 3; a broadcast of its data-parallel
    group, rank 2's; kernels and host calls alike."""
    view = _view(four)
    tp = TimelinePage(page, view)
    rank_of = plots.rank_of_events(four.events, four)[view.tl.index]
    # the kernels name their group; the host calls are in the group of the
    # record_param_comms they enclose or are nested in
    for needle, peer in (("ncclKernel_AllReduce", 1), ("ncclKernel_Broadcast", 2),
                         ("nccl:all_reduce", 1), ("nccl:broadcast", 2)):
        ids = [i for i in np.flatnonzero(rank_of == 0)
               if view._full_names[int(view._name_of[i])].startswith(needle)]
        i = int(ids[len(ids) // 2])
        x, y = _show(tp, view, i, pad=3)
        page.mouse.click(x, y)
        page.wait_for_function("() => +document.querySelector('.dynprof-timeline')"
                               ".dataset.flows > 0")
        assert [f["why"] for f in view.details["flows"] if f["why"].startswith("rank")] == [
            f"rank {peer}"]
        assert f"rank {peer} at" in tp.root.locator(".dynprof-tl-details").inner_text()


def test_an_event_outside_every_step_and_one_clicked_twice_show_their_details(page):
    """The bundled MindSpore sample's first event is before its first step: its details say
    so (they once failed on the NA step and never came). Clicked again, the same event shows
    its details again, not a wait for an answer that is not coming."""
    from dynprof_nb import samples

    w = samples.load("mindspore_cpu")
    view = _view(w)
    tp = TimelinePage(page, view)
    outside = [i for i in range(len(view.tl.index)) if pd.isna(
        w.events["step"].iloc[int(view.tl.index[i])])]
    assert outside
    i = outside[0]
    x, y = _show(tp, view, i, pad=3)
    panel = tp.root.locator(".dynprof-tl-details")
    for _ in range(2):
        page.mouse.click(x, y)
        page.wait_for_function("() => document.querySelector('.dynprof-tl-details')"
                               ".textContent.startsWith('name: ')")
        assert "step: outside every recorded step" in panel.inner_text()
        assert tp.state()["selected"] == str(i)


def test_a_match_in_a_collapsed_lane_opens_it(page, two):
    """A search match nested in a collapsed lane (or a collapsed rank): going to it opens
    what hid it, so the selected event is drawn and outlined."""
    view = _view(two)
    tp = TimelinePage(page, view)
    box = tp.box()
    rows0 = int(tp.state()["rows"])
    lane0 = view.lanes[0]
    page.mouse.click(box["x"] + 6, box["y"] + TOP + 9)  # ▾: lane 0 shows its top level only
    assert int(tp.state()["rows"]) == rows0 - lane0["rows"] + 1
    deep = [i for i in range(len(view.index.y)) if lane0["y0"] < view.index.y[i] < lane0["y0"]
            + lane0["rows"] and view._full_names[int(view._name_of[i])].startswith(
                "DistributedDataParallel")]
    assert deep
    search = tp.root.locator(".dynprof-tl-search")
    search.fill("DistributedDataParallel.forward")
    search.press("Enter")
    page.wait_for_function("() => document.querySelector('.dynprof-timeline').dataset.match")
    assert int(tp.state()["rows"]) == rows0  # opened
    assert int(tp.state()["match"]) in deep


def test_a_rank_with_nothing_to_draw_and_a_window_of_one_instant_are_said(tmp_path):
    """A rank whose trace holds only metadata is named in the note, not silently left out;
    a window of one zero-length event opens on a microsecond, not on 0.01 ns."""
    root = replicate(fixtures_dir() / NCCL, tmp_path / "w3", 2, skew_us=0)
    data = json.loads(gzip.open(fixtures_dir() / NCCL, "rt").read())
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("ph") == "M"][:5]
    data["distributedInfo"]["rank"] = 2
    (root / "rank002.pt.trace.json").write_text(json.dumps(data))
    w, _ = loaded(root)
    assert 2 in w.ranks
    view = _view(w)
    assert "rank(s) [2] have no events to draw" in view.note
    assert "no events to draw" not in _view(w, ranks=[0, 1]).note  # (asked for: not news)
    one = tmp_path / "one.pt.trace.json"
    one.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": "tick", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 5.0, "dur": 0}]}))
    view = _view(dynprof_nb.load_trace(one))
    lo, hi = view.full
    assert 1000 <= hi - lo < 1100 and lo < view.index.x0[0] < hi


def test_search_lists_matches_and_steps_through_them(page, two):
    view = _view(two)
    tp = TimelinePage(page, view)
    box = tp.box()
    search = tp.root.locator(".dynprof-tl-search")
    search.fill("ncclkernel_broadcast")
    search.press("Enter")
    page.wait_for_function("() => document.querySelector('.dynprof-timeline').dataset.match")
    want = view.search("ncclkernel_broadcast")
    assert int(tp.state()["matches"]) == want["total"] > 2
    assert tp.root.locator(".dynprof-tl-match").count() == len(want["items"])
    for k, key in [(0, None), (1, "Enter"), (2, "Enter"), (1, "Shift+Enter")]:
        if key:
            search.press(key)
        st = tp.state()
        item = want["items"][k]
        assert int(st["match"]) == item[0]
        assert (float(st["lo"]) + float(st["hi"])) / 2 == pytest.approx((item[1] + item[2]) / 2)
        assert _x(st, box, item[2]) - _x(st, box, item[1]) >= 3  # wide enough to see
    tp.root.locator(".dynprof-tl-next").click()
    assert int(tp.state()["match"]) == want["items"][2][0]
    details = tp.root.locator(".dynprof-tl-details")
    page.wait_for_function("() => document.querySelector('.dynprof-tl-details')"
                           ".textContent.includes('ncclKernel_Broadcast')")
    assert "step: " in details.inner_text()


def test_next_and_previous_reach_every_match_past_the_first_page(page, two):
    """A name with thousands of matches: the page holds the first 500, and next from the 500th
    goes on to the 501st; previous from the first wraps to the very last, next from there to
    the first, as the count says."""
    view = _view(two)
    tp = TimelinePage(page, view)
    search = tp.root.locator(".dynprof-tl-search")
    count = tp.root.locator(".dynprof-tl-count")
    first = view.search("aten::")
    total, limit = first["total"], first["limit"]
    assert total > 2 * limit
    search.fill("aten::")
    search.press("Enter")
    page.wait_for_function("() => document.querySelector('.dynprof-timeline').dataset.match")
    assert int(tp.state()["match"]) == first["items"][0][0]
    tp.root.locator(".dynprof-tl-match").nth(limit - 1).click()  # the page's last
    assert int(tp.state()["match"]) == first["items"][-1][0]
    tp.root.locator(".dynprof-tl-next").click()

    def shown(item: list) -> None:
        page.wait_for_function(
            "(id) => document.querySelector('.dynprof-timeline').dataset.match === id",
            arg=str(item[0]))

    shown(view.search("aten::", page=1)["items"][0])
    assert count.inner_text().startswith(f"{limit + 1:,} / {total:,}")
    search.press("Enter")  # the page's second
    shown(view.search("aten::", page=1)["items"][1])
    search.press("Shift+Enter")
    search.press("Shift+Enter")  # back over the page's start, to the first page's last
    shown(first["items"][-1])
    tp.root.locator(".dynprof-tl-match").first.click()
    search.press("Shift+Enter")  # before the first: the last of all
    last = view.search("aten::", page=total)  # (a page past the end: the last page)
    shown(last["items"][-1])
    assert count.inner_text().startswith(f"{total:,} / {total:,}")
    search.press("Enter")  # and on, round to the first
    shown(first["items"][0])
    assert count.inner_text().startswith(f"1 / {total:,}")


def test_wasd_and_arrow_keys_zoom_and_pan(page, two):
    view = _view(two)
    tp = TimelinePage(page, view)
    box = tp.box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + 10)  # focus, on the step band
    for _ in range(6):
        page.keyboard.press("w")  # in from the whole window, where a pan would be clamped
    for key, zoom, shift in [("w", 0.8, 0), ("ArrowUp", 0.8, 0), ("s", 1.25, 0),
                             ("d", 1, 0.2), ("ArrowLeft", 1, -0.2), ("a", 1, -0.2),
                             ("ArrowRight", 1, 0.2), ("ArrowDown", 1.25, 0)]:
        before = tp.state()
        lo, hi = float(before["lo"]), float(before["hi"])
        page.keyboard.press(key)
        st = tp.state()
        lo2, hi2 = float(st["lo"]), float(st["hi"])
        assert hi2 - lo2 == pytest.approx((hi - lo) * zoom, rel=1e-6), key
        if shift:
            assert lo2 - lo == pytest.approx(shift * (hi - lo), rel=1e-6), key


def _shift_drag(page, x0: float, x1: float, y: float) -> None:
    """Shift-drag from x0 to x1 at height y, as a person selects a range."""
    page.keyboard.down("Shift")
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x1, y, steps=6)
    page.mouse.up()
    page.keyboard.up("Shift")


def test_a_selected_range_gives_its_duration_and_time_per_name(page, two):
    view = _view(two)
    tp = TimelinePage(page, view)
    box = tp.box()
    x0, x1 = box["x"] + 400, box["x"] + 800
    _shift_drag(page, x0, x1, box["y"] + 200)
    page.wait_for_function("() => document.querySelector('.dynprof-timeline')"
                           ".dataset.rangeEvents")
    st = tp.state()
    a, b = json.loads(st["range"])
    assert a == pytest.approx(_t(st, box, 400), rel=1e-3, abs=1e4)
    assert b == pytest.approx(_t(st, box, 800), rel=1e-3, abs=1e4)
    want = view.range_summary(a, b)
    assert int(st["rangeEvents"]) == want["events"] > 0
    text = tp.root.locator(".dynprof-tl-span").inner_text()
    assert "selection: " in text and want["names"][0][0][:30] in text
    assert tp.root.locator(".dynprof-tl-sums tr").count() == len(want["names"])
    tp.root.screenshot(path=str(ARTIFACTS / "timeline_page_range.png"))
    # Esc, then the same range again: its sums again (the kernel, asked nothing new, is not
    # waited for)
    page.keyboard.press("Escape")
    assert tp.root.locator(".dynprof-tl-span").inner_text() == ""
    _shift_drag(page, x0, x1, box["y"] + 200)
    assert tp.root.locator(".dynprof-tl-sums tr").count() == len(want["names"])
    assert "summing" not in tp.root.locator(".dynprof-tl-span").inner_text()


def test_a_kernel_points_to_its_launch(page, two):
    view = _view(two)
    tp = TimelinePage(page, view)
    i = _longest_on(view, "vectorized_elementwise")
    x, y = _show(tp, view, i, pad=40)
    page.mouse.click(x, y)
    links = tp.root.locator(".dynprof-tl-link")
    links.first.wait_for()
    details = tp.root.locator(".dynprof-tl-details").inner_text()
    assert "launch: cudaLaunchKernel" in details and "step: " in details
    assert int(tp.state()["flows"]) >= 1
    tp.root.screenshot(path=str(ARTIFACTS / "timeline_page_flow.png"))
    assert links.first.inner_text().startswith("→ launch: cudaLaunchKernel")
    links.first.click()  # to the launch: centred and selected
    page.wait_for_function("() => document.querySelector('.dynprof-timeline')"
                           ".dataset.selectedName === 'cudaLaunchKernel'")
    st = tp.state()
    launch = int(st["selected"])
    assert view._full_names[int(view._name_of[launch])] == "cudaLaunchKernel"
    row = int(view.index.y[launch])
    assert not next(ln for ln in view.lanes if ln["y0"] <= row < ln["y0"] + ln["rows"])["device"]
    assert "kernels: " in tp.root.locator(".dynprof-tl-details").inner_text()


def test_zoom_to_a_step_and_a_findings_show(page, browser, two):
    from dynprof_nb.analysis.advise.findings import Finding, Findings

    view = _view(two)
    tp = TimelinePage(page, view)
    view.zoom_to(step=5)
    tp.push()
    st = tp.state()
    pos = plots.aligned_steps(two, view.tl.offsets, 1.0)
    a, b = pos.loc[pos["step"] == 5, "a"].min(), pos.loc[pos["step"] == 5, "b"].max()
    lo, hi = float(st["lo"]), float(st["hi"])
    assert lo <= a < b <= hi and hi - lo < (b - a) * 1.1
    labels = [s for s, _ in json.loads(st["stepLabels"])]
    assert 5 in labels
    with pytest.raises(ValueError, match="step 99 is not in this window"):
        view.zoom_to(step=99)
    # a finding opens its own view at its range
    start = int(two.steps["start_ns"].iloc[1])
    f = Finding("demo", "info", "evidence", "suggestion", "peer", ranks=[0], steps=[5],
                start_ns=start, end_ns=start + 5_000_000)
    shown = Findings(two, [f], pd.DataFrame()).show(0)
    lo, hi = shown.visible_range
    off = shown.tl.offsets.get(0, 0)
    assert lo < start - off < start - off + 5_000_000 < hi < lo + 6_000_000
    other = browser.new_page(viewport={"width": 1450, "height": 900})
    tp2 = TimelinePage(other, shown)
    st = tp2.state()
    assert float(st["lo"]) == pytest.approx(lo) and float(st["hi"]) == pytest.approx(hi)
    other.close()


def test_a_window_taller_than_the_screen_draws_the_rows_in_sight_as_the_page_scrolls(
        browser, four):
    """Every lane of every rank, three screens tall: the canvas is only as tall as the window
    (a frame draws what is in sight, not every row: at 1,024 rows that was 100 ms a frame, and
    past 32,767 px no browser draws the canvas at all), the time axis stays at the top as the
    page scrolls, and a click on a lane far down the page hits that lane."""
    page = browser.new_page(viewport={"width": 1450, "height": 420})
    view = _view(four, lanes=3000, max_rows=100_000)
    tp = TimelinePage(page, view)
    rows0, row_h = int(tp.state()["rows"]), view.row_height
    full = TOP + rows0 * row_h
    assert full > 2.5 * 420
    box = tp.box()
    assert box["height"] == 420  # the viewport's height, not the rows'
    lane = next(ln for ln in view.lanes if ln["rows"] > 1 and 600 < ln["y0"] * row_h < full - 300)
    y = lane["y0"] * row_h
    page.evaluate("(y) => window.scrollTo(0, y)", box["y"] + y - 150)
    page.wait_for_function("() => +document.querySelector('.dynprof-timeline').dataset.off > 0")
    st, box = tp.state(), tp.box()
    off = int(st["off"])
    assert abs(box["y"]) <= 1 and off >= y - 150 - 2  # stuck to the top, scrolled past rows
    assert int(st["drawn"]) > 0
    page.screenshot(path=str(ARTIFACTS / "timeline_page_scrolled.png"))
    page.mouse.click(box["x"] + 6, box["y"] + TOP - off + y + 9)  # ▾ of that lane
    assert int(tp.state()["rows"]) == rows0 - lane["rows"] + 1
    page.set_viewport_size({"width": 1450, "height": 800})  # the window made taller
    page.wait_for_function("() => document.querySelector('.dynprof-tl-canvas')"
                           ".getBoundingClientRect().height === 800")
    page.close()


def test_a_match_in_a_row_below_the_window_is_scrolled_into_sight(browser, four):
    view = _view(four, lanes=3000, max_rows=100_000)
    page = browser.new_page(viewport={"width": 1450, "height": 420})
    tp = TimelinePage(page, view)
    found = view.search("ncclKernel")
    k, item = next((k, it) for k, it in enumerate(found["items"])
                   if it[3] * view.row_height > 900)
    search = tp.root.locator(".dynprof-tl-search")
    search.fill("ncclKernel")
    search.press("Enter")
    page.wait_for_function("() => document.querySelector('.dynprof-timeline').dataset.match")
    tp.root.locator(".dynprof-tl-match").nth(k).click()
    page.wait_for_function("() => +document.querySelector('.dynprof-timeline').dataset.off > 0")
    st, box = tp.state(), tp.box()
    y = box["y"] + TOP - int(st["off"]) + item[3] * view.row_height  # the row on the screen
    assert int(st["match"]) == item[0] and TOP <= y - box["y"] and y + view.row_height <= 420
    page.screenshot(path=str(ARTIFACTS / "timeline_page_match_scrolled.png"))
    page.close()


def test_frame_time_of_zoom_and_pan_on_352k_events_beside_a_busy_cpu(page, tmp_path):
    root = replicate(fixtures_dir() / NCCL, tmp_path / "w13", 13, skew_us=2_000_000)
    w, _ = loaded(root)
    view = _view(w)
    assert len(w.events) > 350_000
    tp = TimelinePage(page, view)
    page.evaluate(MEASURE, [12, 0.5, 120])  # warm: the first frames compile the drawing
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        res = page.evaluate(MEASURE, [96, 0.45, 120])
    finally:
        hog.kill()
        hog.wait()
    work = res["work"]
    p50, p99 = percentile(work, 50), percentile(work, 99)
    print(f"352k events: input to pixels p50 {p50:.1f} ms, p99 {p99:.1f} ms; frame interval "
          f"p50 {percentile(res['frames'], 50):.1f} ms; drew {tp.state()['drawn']}")
    assert p50 < 50 and p99 < 400  # generous: a loaded 2-core box; measured ~10x less


def test_on_the_bundled_kineto_sample_a_searched_kernel_reaches_its_launch_by_its_arrow(page):
    from dynprof_nb import samples

    w = samples.load("kineto_gpu")
    view = _view(w)
    tp = TimelinePage(page, view)
    assert "chrome" not in view.title
    search = tp.root.locator(".dynprof-tl-search")
    search.fill("ncclKernel_SendRecv")
    search.press("Enter")
    page.wait_for_function("() => +document.querySelector('.dynprof-timeline').dataset.flows > 0")
    kernel = int(tp.state()["match"])
    launch = next(f for f in view.details["flows"] if f["why"] == "launch")
    box = tp.box()
    for _ in range(40):  # zoom out on the kernel until its launch is in view too
        st = tp.state()
        if float(st["lo"]) < launch["x0"] < float(st["hi"]):
            break
        page.keyboard.press("s")
    st = tp.state()
    x = box["x"] + _x(st, box, launch["x0"])
    y = box["y"] + TOP + launch["row"] * view.row_height + view.row_height / 2
    page.mouse.click(x, y)  # the arrow's tail: the launch
    page.wait_for_function("() => document.querySelector('.dynprof-timeline')"
                           ".dataset.selectedName === 'cudaLaunchKernel'")
    assert int(tp.state()["selected"]) == launch["id"]
    page.wait_for_function("() => document.querySelector('.dynprof-tl-details')"
                           ".textContent.includes('kernels: ncclKernel_SendRecv')")
    assert any(f["id"] == kernel for f in view.details["flows"])


def test_a_critical_path_is_drawn_over_its_lanes(page):
    """``w.critical_path(...).show()`` (HTA's AlexNet trace, the oracle test's): every
    segment lands on its lane, and a compute segment's bar is in compute's colour under the
    stream that ran the kernel, where no kernel colour is."""
    w = loaded_kineto("hta__critical_path__alexnet__benchmark_result_2869224_1695835535_trace"
                      ".json.gz")
    cp = w.critical_path(annotation="[param|pytorch.model.alex_net|0|0|0|measure|forward]",
                         instance=1)
    view = cp.show()
    assert len(view.path) == len(cp) and "critical path:" in view.note
    tp = TimelinePage(page, view)
    st = tp.state()
    lo, hi = float(st["lo"]), float(st["hi"])
    inside = [p for p in view.path if p[1] >= lo and p[0] <= hi]
    assert int(st["path"]) == len(inside) > 0
    compute = max((p for p in inside if p[3] == 0), key=lambda p: p[1] - p[0])
    lane = view.lanes[compute[2]]
    assert lane["device"] and "stream" in lane["label"]
    box = tp.box()
    x = _x(st, box, (max(compute[0], lo) + min(compute[1], hi)) / 2)
    y = TOP + lane["y0"] * view.row_height + view.row_height - 2
    rgb = page.evaluate("([x, y]) => Array.from(document.querySelector('.dynprof-timeline "
                        "canvas').getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3))",
                        [int(x), int(y)])
    assert rgb == [0xD6, 0x27, 0x28], rgb
    tp.root.screenshot(path=str(ARTIFACTS / "timeline_page_critical_path.png"))


def loaded_kineto(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import dynprof_nb

        return dynprof_nb.load_trace(fixtures_dir() / "kineto" / name)
