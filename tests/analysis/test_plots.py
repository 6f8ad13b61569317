"""Plots at 2 and 64 ranks and 1,000 steps: rendered to PNG in tests/artifacts/ (look at them),
bounded in size, drawn as a few vectorised collections, and fast against a reference measured in
the same run (the time to build the events frame they draw).

The big windows are built from real data: a real Kineto trace (HTA's NCCL test trace, 27k
events, 3 steps) replicated into several rank files with shifted clocks, and the built-in
backend's window format at 64 ranks x 1,000 steps (tests/testdata.py's write_builtin_window).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.image import imread
from testdata import REPO, fixtures_dir, write_builtin_window

import dynprof_nb
from dynprof_nb.analysis import perfetto, plots
from dynprof_nb.analysis.plots import _depths

ARTIFACTS = REPO / "tests" / "artifacts"
NCCL = "kineto/hta__nccl_parser_config__nccl_data.json.gz"
MAX_W, MAX_H = 1400, 1500  # pixels at 100 dpi: a figure a person can read on a screen


def save(fig: Figure, name: str) -> tuple[int, int]:
    """Render to tests/artifacts/NAME.png; (width, height) in pixels."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    fig.savefig(path, dpi=100)
    h, w = imread(path).shape[:2]
    return w, h


def artists(fig: Figure) -> int:
    """Everything drawn in the data area of every axes: bars, collections, lines, texts."""
    return sum(len(ax.patches) + len(ax.collections) + len(ax.lines) + len(ax.texts)
               + len(ax.images) for ax in fig.axes)


def replicate(src: Path, dest: Path, ranks: int, skew_us: float) -> Path:
    """``ranks`` copies of one real Kineto trace as rank files, rank r's clock ``r * skew_us``
    late (as on hosts whose clocks differ) through the trace's own baseTimeNanoseconds, each
    naming its rank in distributedInfo. The events are serialised once."""
    data = json.loads(gzip.open(src, "rt").read())
    events = json.dumps(data.pop("traceEvents"))
    base = int(data.get("baseTimeNanoseconds") or 0)
    dest.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        data["baseTimeNanoseconds"] = base + int(r * skew_us * 1000)
        data["distributedInfo"]["rank"] = r
        head = json.dumps(data)
        (dest / f"rank{r:03d}.pt.trace.json").write_text(
            head[:-1] + ', "traceEvents": ' + events + "}")
    return dest


#: the groups of replicate_groups' 4 ranks, as Megatron lays out TP=2 x DP=2: name -> ranks
TP_DP_GROUPS = {"1": [0, 1], "2": [2, 3], "3": [0, 2], "4": [1, 3]}


def replicate_groups(src: Path, dest: Path, skew_us: float, late_us: float = 3000.0) -> Path:
    """HTA's real NCCL trace as 4 ranks of a TP=2 x DP=2 job (TP_DP_GROUPS), rank r's clock
    ``r * skew_us`` late: its allreduces are its tensor-parallel group's (``Process Group
    Name`` "1" or "2", on stream 40) and its broadcasts its data-parallel group's ("3" or "4",
    moved to stream 41: NCCL gives each communicator its own stream), the args and
    ``distributedInfo.pg_config`` as PyTorch writes them. Group "2"'s allreduces end
    ``late_us`` later on both its ranks (the other TP group is not in lockstep), so matching
    collectives by name across groups gets ranks 2 and 3's clocks wrong."""
    data = json.loads(gzip.open(src, "rt").read())
    events = json.dumps(data.pop("traceEvents"))
    base = int(data.get("baseTimeNanoseconds") or 0)
    dest.mkdir(parents=True, exist_ok=True)
    for r in range(4):
        tp, dp = ("1", "2")[r // 2], ("3", "4")[r % 2]
        mine = {g: ranks for g, ranks in TP_DP_GROUPS.items() if g in (tp, dp)}
        data["baseTimeNanoseconds"] = base + int(r * skew_us * 1000)
        data["distributedInfo"].update(rank=r, world_size=4, pg_count=len(mine), pg_config=[
            {"pg_name": g, "pg_desc": "undefined", "backend_config": "cuda:nccl",
             "pg_size": 2, "ranks": ranks} for g, ranks in mine.items()])
        evs = json.loads(events)
        evs += [  # stream 41's names, as Kineto writes every stream's
            {**e, "tid": 41, "args": {"name": "stream 41 "} if "name" in e["args"] else
             {"sort_index": 41}}
            for e in evs if e.get("ph") == "M" and e.get("tid") == 40]
        for e in evs:
            a = e.get("args") or {}
            if a.get("Process Group Name") is None or a.get("Collective name") is None:
                continue
            g = tp if a["Collective name"] == "allreduce" else dp
            a.update({"Process Group Name": g, "Process Group Description": "undefined",
                      "Process Group Ranks": str(TP_DP_GROUPS[g]), "Group size": 2})
            if e.get("cat") == "kernel" and g == dp:
                e["tid"] = a["stream"] = 41
            if e.get("cat") == "kernel" and g == "2":
                e["ts"] += late_us
        head = json.dumps(data)
        (dest / f"rank{r:03d}.pt.trace.json").write_text(
            head[:-1] + ', "traceEvents": ' + json.dumps(evs) + "}")
    return dest


@pytest.fixture(scope="module")
def builtin_64(tmp_path_factory) -> Path:
    """64 ranks x 1,000 steps in the built-in backend's format; rank 37 is 30% slower."""
    root = tmp_path_factory.mktemp("b64")
    for r in range(64):
        write_builtin_window(root, rank=r, start=1, stop=1000,
                             step_us=1000 * (1.3 if r == 37 else 1.0 + 0.001 * r))
    return root


def loaded(path) -> tuple[object, float]:
    """The window, and the CPU seconds this process takes to build its events frame, rank by
    rank (the reference: CPU time, because the machine running the tests may be shared, and
    in this process, because load_window parses ranks in worker processes). The steps frame
    the plots also read is loaded outside the timed plot (loading, not drawing), and so is
    matplotlib's first figure in the process (fonts, backends)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_window(path)
        w.events  # noqa: B018
        w.steps  # noqa: B018
        parts = [c.path for c in getattr(w, "children", [w])]
        t = time.process_time()
        for p in parts:
            (dynprof_nb.load_trace(p) if p.is_file() else dynprof_nb.load_window(p)).events  # noqa: B018
        ref = time.process_time() - t
    fig = Figure(figsize=(2, 1))
    fig.add_subplot().set_title("warm-up")
    fig.savefig(io.BytesIO(), format="png")
    return w, ref


def timed(fn, *args, **kw):
    """(result, CPU seconds)."""
    t = time.process_time()
    out = fn(*args, **kw)
    return out, time.process_time() - t


def test_depths_stack_nested_events():
    lane = np.array([0, 0, 0, 0, 0, 1, 1])
    start = np.array([0, 10, 50, 55, 100, 0, 0])
    end = np.array([100, 40, 90, 65, 120, 30, 30])  # lane 1: two equal spans stack
    assert _depths(lane, start, end).tolist() == [0, 1, 1, 2, 0, 0, 1]


def test_64_ranks_1000_steps(builtin_64: Path):
    w, ref = loaded(builtin_64)
    assert len(w.ranks) == 64 and w.steps["step"].nunique() == 1000
    fig, t_plot = timed(w.plot_timeline)
    size, t_save = timed(save, fig, "timeline_64ranks_1000steps")
    assert size[0] <= MAX_W and size[1] <= MAX_H, size
    assert artists(fig) < 40  # collections, not one patch per event
    # drawing and saving cost about as much as parsing the events (0.9-1.1x on a quiet
    # machine and in CI; one patch per event took 7-20 times that); 2x leaves room for noise
    assert t_plot + t_save < 2 * ref, (t_plot, t_save, ref)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [f"rank {r} · MainThread" for r in range(64)]  # one lane per rank
    fig = w.plot_timeline(max_rows=16)  # fewer rows than ranks: the slowest and fastest kept
    save(fig, "timeline_64ranks_16rows")
    note = fig.axes[0].get_title(loc="left").replace("\n", " ")
    assert "16 of 64 ranks shown" in note
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "rank 37 · MainThread" in labels and "rank 0 · MainThread" in labels
    top = [a for a in fig.axes[0].child_axes][0]
    assert len(top.get_xticks()) <= 28  # step labels thinned (40 px apart), once for all ranks

    fig = w.plot_steps()
    size = save(fig, "steps_64ranks_1000steps")
    assert size[0] <= MAX_W and size[1] <= MAX_H, size
    grid = fig.axes[0].images[0].get_array()
    assert grid.shape == (64, 1000)
    assert int(np.ma.median(grid, axis=1).argmax()) == 37  # the straggler is the bright row
    assert "slowest: rank 37" in fig.axes[1].get_title()

    fig = w.plot_ops()
    size = save(fig, "ops_64ranks")
    assert size[0] <= MAX_W and size[1] <= MAX_H, size
    ax = fig.axes[0]
    assert "mean over 64 ranks" in ax.get_title()
    names = [t.get_text() for t in ax.get_yticklabels()][::-1]  # top first
    means = w.ops.groupby(w.ops["name"].astype(object))["self_us"].sum() / 64
    assert names == list(means.loc[names].sort_values(ascending=False).index)

    fig = w.plot_memory()
    size = save(fig, "memory_64ranks")
    assert size[0] <= MAX_W and size[1] <= MAX_H, size
    assert len(fig.axes[0].lines) == 64 * 2  # allocated and reserved per rank; colour = rank


def test_352k_events_under_the_load_time(tmp_path: Path):
    """13 copies of a real 27k-event Kineto trace: 350k events, the size that took 9-28 s."""
    root = replicate(fixtures_dir() / NCCL, tmp_path / "w13", 13, skew_us=2_000_000)
    w, ref = loaded(root)
    assert len(w.events) >= 340_000
    fig, t_plot = timed(w.plot_timeline)
    size, t_save = timed(save, fig, "timeline_352k_events")
    # drawing and saving cost about as much as parsing the events (the old per-event bars
    # took 7-20 times that); 2x leaves room for a noisy machine
    assert t_plot + t_save < 2 * ref, (t_plot, t_save, ref)
    assert size[0] <= MAX_W and size[1] <= MAX_H, size
    assert artists(fig) < 40
    note = fig.axes[0].get_title(loc="left").replace("\n", " ")
    assert "events drawn (the longest in each pixel" in note


def test_two_skewed_ranks_align_on_their_steps(tmp_path: Path):
    """Rank 1's clock 28 s late: on its own steps the two ranks overlap; on wall time they sit
    28 s apart (what the old timeline showed as two slivers)."""
    root = replicate(fixtures_dir() / NCCL, tmp_path / "w2", 2, skew_us=28_000_000)
    w, _ = loaded(root)
    fig = w.plot_timeline()
    save(fig, "timeline_2ranks_skewed_step_aligned")
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert "ms" in ax.get_xlabel() and hi - lo < 1000  # ms: one window's worth, not 28 s
    assert "aligned on step 4" in fig._suptitle.get_text()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "rank 0 · thread 2910249 (pt_main_thread)"
    assert any(lab.startswith("rank 1 · ") for lab in labels)
    top = ax.child_axes[0]
    assert [t.get_text() for t in top.get_xticklabels()] == ["4", "5", "6"]  # once, not per rank
    depth_rows = {round(p.vertices[0, 1]) for p in ax.collections[0].get_paths()[:5000]}
    assert len(depth_rows) > 4  # nested events stacked by depth in the lanes
    fig = w.plot_timeline(align="wall")
    save(fig, "timeline_2ranks_skewed_wall")
    lo, hi = fig.axes[0].get_xlim()
    assert "(s)" in fig.axes[0].get_xlabel() and hi - lo > 28
    with pytest.raises(ValueError, match="align='steps'.*'step'"):
        w.plot_timeline(align="steps")
    # the arguments a hurried person gets wrong say what they expect, not KeyError: nan
    with pytest.raises(ValueError, match=r"ranks=\[\]: name at least one .* \[0, 1\]"):
        w.plot_timeline(ranks=[])
    with pytest.raises(ValueError, match="no events for rank.*[7].*the window has ranks"):
        w.plot_timeline(ranks=[0, 7])
    with pytest.raises(ValueError, match="lanes=None: expected how many lanes"):
        w.plot_timeline(interactive=True, lanes=None)


def test_comm_alignment_recovers_a_clock_skew(tmp_path: Path):
    """Rank 1's clock 28 s late and its steps no help (align="comm" reads only collectives):
    the NCCL collectives' ends give back the skew to the nanosecond, so the two ranks' kernels
    overlap on one axis and the title says how the clocks were corrected. On a real 2-rank NPU
    window (one host, one clock) the correction is small, and the HCCL ends agree better than
    on wall time."""
    root = replicate(fixtures_dir() / NCCL, tmp_path / "w2", 2, skew_us=28_000_000)
    w, _ = loaded(root)
    skew, matched = plots.comm_clock_offsets(w, [0, 1])
    assert skew == {0: 0, 1: 28_000_000_000} and matched == len(
        w.events[(w.events["rank"] == 0) & w.events["name"].str.startswith("ncclKernel")]
    )
    fig = w.plot_timeline(align="comm")
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert "ms" in ax.get_xlabel() and hi - lo < 1000
    assert f"rank clocks corrected by {matched} collectives' ends" in fig._suptitle.get_text()

    npu, _ = loaded(fixtures_dir() / "ascend_real" / "text_level0")
    skew, matched = plots.comm_clock_offsets(npu, [0, 1])
    assert matched >= 3 and abs(skew[1]) < 1_000_000  # same host: well under a millisecond
    ev = npu.events
    hccl = ev[(ev["process"].astype(object) == "HCCL") & (ev["ph"] == "X")]
    end = hccl["ts_ns"] + hccl["dur_ns"]
    e0 = np.sort(end[hccl["rank"] == 0].to_numpy("int64"))
    e1 = np.sort(end[hccl["rank"] == 1].to_numpy("int64"))
    n = min(len(e0), len(e1))
    wall = np.median(np.abs(e1[:n] - e0[:n]))
    assert np.median(np.abs(e1[:n] - skew[1] - e0[:n])) <= wall


def test_comm_alignment_matches_collectives_within_their_groups(tmp_path: Path):
    """A TP=2 x DP=2 job whose ranks' clocks are 7 s apart each: matching a collective within
    its communication group (never an allreduce of one TP group with the other's, which ends
    3 ms later) gives every clock back to the nanosecond, rank 3, which shares no group with
    rank 0, through a rank that does."""
    root = replicate_groups(fixtures_dir() / NCCL, tmp_path / "w4", skew_us=7_000_000)
    w, _ = loaded(root)
    ev = w.events
    kernels = ev[ev["name"].str.startswith("ncclKernel")]
    assert sorted(kernels["pg_name"].astype(str).unique()) == ["1", "2", "3", "4"]
    assert set(kernels.loc[kernels["rank"] == 3, "pg_ranks"].astype(str)) == {"[2, 3]", "[1, 3]"}
    skew, matched = plots.comm_clock_offsets(w, [0, 1, 2, 3])
    assert skew == {r: r * 7_000_000_000 for r in range(4)}
    per_rank = len(kernels[kernels["rank"] == 0])
    assert matched == 2 * per_rank  # each collective of each group, matched once
    for shown in ([1, 2], [0, 3], [3, 0]):  # linked through the ranks not shown
        sub, n = plots.comm_clock_offsets(w, shown)
        assert sub == {r: (r - shown[0]) * 7_000_000_000 for r in shown} and n == matched
    c = w.communication
    nccl = c[c["name"].str.startswith("ncclKernel")]
    assert set(nccl["group"]) == {"1", "2", "3", "4"}
    assert set(nccl.loc[nccl["group"] == "3", "group_ranks"]) == {"[0, 2]"}


def test_real_npu_two_ranks(fixtures: Path):
    """A real 2-rank torch_npu window: lanes per rank, process and stream; ops grouped per rank;
    memory one line per rank and device (one component, not all of them zigzagging)."""
    w, _ = loaded(fixtures / "ascend_real" / "text_level0")
    fig = w.plot_timeline()
    size = save(fig, "timeline_npu_2ranks")
    assert size[0] <= MAX_W and size[1] <= MAX_H
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "rank 0 · Ascend Hardware · Stream 2" in labels
    assert "rank 1 · HCCL · Group 0 Communication" in labels
    assert [lab.split(" · ")[0] for lab in labels] == sorted(
        (lab.split(" · ")[0] for lab in labels), key=lambda s: int(s.split()[1]))
    assert "Python frames not drawn" in fig.axes[0].get_title(loc="left")
    assert len(fig.legends[0].get_texts()) >= 5  # a legend of the top operations

    fig = w.plot_ops()
    save(fig, "ops_npu_2ranks")
    ax = fig.axes[0]
    assert len(ax.containers) == 2  # one group of bars per rank, side by side
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["rank 0", "rank 1"]
    widths = np.array([[b.get_width() for b in c] for c in ax.containers])
    means = widths.mean(axis=0)
    assert list(means) == sorted(means)  # largest mean on top (bars go bottom-up)

    fig = w.plot_memory()
    save(fig, "memory_npu_2ranks")
    ax = fig.axes[0]
    labels = sorted(t.get_text() for t in ax.get_legend().get_texts())
    assert labels == ["rank 0 · NPU:0 allocated", "rank 0 · NPU:0 reserved",
                      "rank 1 · NPU:1 allocated", "rank 1 · NPU:1 reserved"]
    assert "PTA+GE" in ax.get_title()

    fig = w.plot_steps()
    save(fig, "steps_npu_2ranks")
    assert len(fig.axes) == 2  # one small panel per rank


def test_real_npu_db_two_ranks_reads_like_the_text_window(fixtures: Path):
    """The same script exported as .db: lanes named as in the text window (no raw global
    tids, the communication ops on an HCCL lane), Python frames hidden with the same note, and
    a one-step window says which step its lone step label is."""
    w, _ = loaded(fixtures / "ascend_real" / "db_level0")
    text, _ = loaded(fixtures / "ascend_real" / "text_level0")
    fig = w.plot_timeline()
    size = save(fig, "timeline_npu_db_2ranks")
    assert size[0] <= MAX_W and size[1] <= MAX_H
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert not [lab for lab in labels if re.search(r"\d{9,}", lab)], labels  # no global tids
    for r in (0, 1):
        assert f"rank {r} · HCCL · Group 0 Communication" in labels
        assert f"rank {r} · Ascend Hardware · Stream 2" in labels
        pid = int(w.rank_window(r).events.query("process == 'Python'")["pid"].iloc[0])
        assert f"rank {r} · Python · Thread {pid}" in labels  # the main thread
    assert not any("thread -1" in lab for lab in labels)
    note = ax.get_title(loc="left")
    text_note = text.plot_timeline().axes[0].get_title(loc="left")
    frames = "2,564 Python frames not drawn (python=True draws them)"
    assert note.startswith(frames) and text_note.startswith(frames)
    top = ax.child_axes[0]
    assert [t.get_text() for t in top.get_xticklabels()] == ["step 50 starts"]
    assert "Python frames" not in w.plot_timeline(python=True).axes[0].get_title(loc="left")


def test_steps_stay_bounded_at_1000_steps(tmp_path: Path):
    """The old step plot was 0.5 inch per step: 100,090 px wide for a 1,000-step window."""
    one = dynprof_nb.load_window(write_builtin_window(tmp_path / "one", start=1, stop=1000))
    size = save(one.plot_steps(), "steps_1rank_1000steps")
    assert size[0] <= MAX_W and size[1] <= MAX_H, size
    for r in range(2):
        write_builtin_window(tmp_path / "two", rank=r, start=1, stop=1000,
                             step_us=1000 * (1 + 0.2 * r))
    two = dynprof_nb.load_window(tmp_path / "two")
    fig = two.plot_steps()
    size = save(fig, "steps_2ranks_1000steps")
    assert size[0] <= MAX_W and size[1] <= MAX_H, size
    assert fig.axes[0].images  # a step x rank heat map
    fig = two.plot_timeline()
    size = save(fig, "timeline_2ranks_1000steps")
    assert size[0] <= MAX_W and size[1] <= MAX_H, size
    assert len(fig.axes[0].child_axes[0].get_xticks()) <= 28


def test_perfetto_file_opens_as_a_trace(fixtures: Path, tmp_path: Path):
    w, _ = loaded(fixtures / "ascend_real" / "text_level0")
    f = perfetto.open_in_perfetto(w, tmp_path / "npu.perfetto.json")
    data = json.loads(f.path.read_text())
    names = {e["args"]["name"] for e in data["traceEvents"] if e.get("name") == "process_name"}
    assert {"rank 0 · Ascend Hardware", "rank 1 · Python"} <= names
    n_x = int((w.events["ph"] == "X").sum())
    assert sum(e["ph"] == "X" for e in data["traceEvents"]) == n_x
    back = dynprof_nb.load_trace(f.path)  # a Chrome trace our own reader (and Perfetto) opens
    assert int((back.events["ph"] == "X").sum()) == n_x
    assert "ui.perfetto.dev" in f._repr_html_() and "nothing is uploaded" in f._repr_html_()
    assert "nothing is uploaded" in repr(f)
