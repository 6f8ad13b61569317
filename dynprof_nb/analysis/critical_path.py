"""The critical path of a step: HTA 0.5.0's lightweight critical path analysis
(``hta.analyzers.critical_path_analysis``), on a window's events frame.

Why HTA's and not a new one: it is the definition GPU users already read, and it is the oracle
(tests/analysis/test_critical_path_oracle.py runs HTA live). Its graph, followed here step by
step (docs/definitions.md, "Critical path"):

- **Nodes**: the start and the end of every CPU operator and CUDA runtime call (``cpu_op``,
  ``cuda_runtime``, ``cuda_driver``) and of every device row with a launch (kernels, memcpys,
  memsets, syncs), within the region: CPU events that start in it (with a duration), device rows
  whose launch starts in it, and every "Stream Wait Event".
- **CPU edges** (per thread, walking its call stack depth first): from each node to the next one
  visited, weighted by the time between them (an operator's own time, the gap between two
  nested calls); a blocking sync call's (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
  ``cudaEventSynchronize``, ``cudaEventQuery``, ``cudaMemcpy[Async]``) last edge weighs 0 (it
  waits: the GPU edge into its end carries the time); consecutive top-level operators of a
  thread are linked by a 0-weight dependency.
- **GPU edges**: a kernel's start to its end (its duration); into its start either a *launch
  delay* edge from its runtime call's start (when its stream's queue was empty at the launch
  and at its start, and the previous kernel had ended before the launch) or a *kernel-kernel*
  edge from the previous kernel's end on the stream (the gap); a stream-wait dependency from the
  kernel the wait's ``cudaEventRecord`` followed to the next kernel launched on the waiting
  stream (0 weight).
- **Sync edges** (GPU to CPU, 0 weight): from the last kernel of a stream (all streams for a
  Context Sync; the event's kernel for an Event Sync) into the end of the sync call.

The critical path is the longest weighted path of that DAG (``networkx.dag_longest_path``'s
dynamic programme). Each edge on it is one segment, attributed to an event as HTA does (an
operator's span to it, a gap between nested calls to the parent, a kernel-kernel gap to the
kernel before it) and classified by HTA's ``bound_by``: ``cpu_bound``, ``gpu_compute_bound``,
``gpu_communication_bound`` (an ``nccl...Kernel``), ``gpu_kernel_kernel_overhead``,
``gpu_kernel_launch_overhead``; 0-weight dependencies have none. The summary groups them into
the four kinds a user reads: host, compute, communication, idle (the two overheads).

Times are exact int64 ns (HTA's are µs floats): path lengths agree with HTA's to its rounding.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.traces.interface import Window

from .advise.frames import ranks_of, with_rank

#: HTA's CPGraph.BLOCKING_SYNC_CALLS: their last edge weighs 0 (they wait on the GPU)
BLOCKING_SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventQuery",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
    }
)
#: HTA's get_runtime_launch_events_query (launches that enqueue device work)
LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "runFunction - job_prep_and_submit_for_execution",
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipMemcpyAsync",
        "hipMemsetAsync",
        "hipMemcpyWithStream",
    }
)
NODE_CATS = frozenset({"cpu_op", "cuda_runtime", "cuda_driver"})
SYNC_CAT = "cuda_sync"
COMM_KERNEL = re.compile(r"^nccl.*Kernel")  # HTA's is_comm_kernel
KIND = {
    "cpu_bound": "host",
    "gpu_compute_bound": "compute",
    "gpu_communication_bound": "communication",
    "gpu_kernel_kernel_overhead": "idle",
    "gpu_kernel_launch_overhead": "idle",
}
OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC = (
    "operator",
    "dependency",
    "kernel_launch_delay",
    "kernel_kernel_delay",
    "sync_dependency",
)
SEGMENT_COLUMNS = [
    "start_ns",
    "end_ns",
    "duration_us",
    "kind",
    "bound_by",
    "edge",
    "name",
    "lane",
    "stream",
    "rank",
]


#: the events' columns the graph reads
NEEDED = (
    "name",
    "cat",
    "ph",
    "pid",
    "tid",
    "process",
    "thread",
    "ts_ns",
    "dur_ns",
    "rank",
    "stream_arg",
    "correlation",
    "wait_on_stream",
    "wait_on_corr",
)


class CriticalPath(pd.DataFrame):
    """The segments of a step's critical path, in path order (one row per edge of HTA's graph
    on it: ``start_ns``, ``end_ns``, ``duration_us``, ``kind``, ``bound_by``, ``edge``,
    ``name``, ``lane``, ``stream``, ``rank``). ``.summary`` is the time by kind; ``.length_us``
    the path's length; ``.region`` the (start, end) ns it was computed on."""

    _metadata = ["region", "rank_id", "window"]

    @property
    def _constructor(self) -> type:
        return CriticalPath

    def __getstate__(self) -> dict:
        """Pickled without its window (a live window does not travel; ``show()`` needs it)."""
        state = super().__getstate__()
        if "window" in state:
            state["window"] = None
        return state

    def show(self, **kw: Any) -> Any:
        """The window's interactive timeline zoomed to the path's region (on its rank),
        with the path drawn over its lanes (:meth:`.TimelineView.mark_path`)."""
        w = self.window
        if len(getattr(w, "ranks", []) or []) > 1 and "ranks" not in kw:
            kw["ranks"] = [self.rank_id]
        view = w.plot_timeline(interactive=True, **kw)
        lo, hi = self.region
        off = view.tl.offsets.get(self.rank_id, 0) if view.tl.offsets else 0
        pad = max((hi - lo) // 20, 1000)
        view.zoom(lo - off - pad, hi - off + pad)
        return view.mark_path(self)

    @property
    def length_us(self) -> float:
        return float(self["duration_us"].sum())

    @property
    def summary(self) -> pd.DataFrame:
        """Per kind (host, compute, communication, idle): ``time_us`` and ``share`` of the
        path, with HTA's finer ``bound_by`` categories beside them."""
        seg = self[self["kind"] != ""]
        total = float(self["duration_us"].sum())
        by = seg.groupby(["kind", "bound_by"], sort=False)["duration_us"].sum().reset_index()
        kinds = ["compute", "communication", "host", "idle"]
        rows = []
        for k in kinds:
            part = by[by["kind"] == k]
            t = float(part["duration_us"].sum())
            detail = ", ".join(
                f"{b} {v:.1f} µs"
                for b, v in zip(part["bound_by"], part["duration_us"], strict=True)
            )
            rows.append((k, t, t / total if total else np.nan, detail))
        return pd.DataFrame(rows, columns=["kind", "time_us", "share", "bound_by"]).set_index(
            "kind"
        )


@dataclass
class _Ev:
    """The rank's events as plain arrays, in frame order (HTA's index order)."""

    name: np.ndarray
    cat: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    lane: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    stream: np.ndarray
    corr: np.ndarray
    peer: np.ndarray  # HTA's index_correlation: the linked host/device row, -1 none
    wait_corr: np.ndarray
    wait_stream: np.ndarray


def _arrays(e: pd.DataFrame) -> _Ev:
    n = len(e)

    def ints(col: str) -> np.ndarray:
        if col not in e:
            return np.full(n, -1, np.int64)
        return e[col].astype("Float64").fillna(-1).to_numpy("float64").astype(np.int64)

    name = e["name"].astype(str).to_numpy(object)
    cat = e["cat"].astype(str).to_numpy(object)
    stream = ints("stream_arg")
    corr = ints("correlation")
    peer = np.where(corr >= 0, 0, -1).astype(np.int64)  # HTA: linked, but the peer is absent
    has = np.flatnonzero(corr >= 0)
    if len(has):
        link = pd.DataFrame({"i": has, "c": corr[has], "gpu": stream[has] != -1})
        m = link[~link["gpu"]].merge(link[link["gpu"]], on="c")
        peer[m["i_x"].to_numpy()] = m["i_y"].to_numpy()
        peer[m["i_y"].to_numpy()] = m["i_x"].to_numpy()
    return _Ev(
        name=name,
        cat=cat,
        pid=e["pid"].astype(str).to_numpy(object),
        tid=e["tid"].astype(str).to_numpy(object),
        lane=(e["process"].astype(str) + " / " + e["thread"].astype(str)).to_numpy(object)
        if "process" in e and "thread" in e
        else (e["pid"].astype(str) + " / " + e["tid"].astype(str)).to_numpy(object),
        ts=e["ts_ns"].to_numpy("int64"),
        dur=e["dur_ns"].to_numpy("int64"),
        stream=stream,
        corr=corr,
        peer=peer,
        wait_corr=ints("wait_on_corr"),
        wait_stream=ints("wait_on_stream"),
    )


def region_of(
    w: Window, e: pd.DataFrame, step: int | None, annotation: str | None, instance: int
) -> tuple[int, int]:
    """The (start, end) ns a path is computed on: the step's span, or (HTA's
    ``annotation``/``instance_id``) the ``instance``-th event whose name contains
    ``annotation``; "" is the whole trace."""
    if annotation is not None:
        if annotation == "":
            return int(e["ts_ns"].min()), int((e["ts_ns"] + e["dur_ns"]).max())
        names = e["name"].astype(str)
        a = e[names.str.contains(annotation, regex=False) & (e["ph"].astype(str) == "X")]
        a = a.sort_values("ts_ns", kind="stable")
        if instance >= len(a):
            raise LookupError(f"{annotation!r} occurs {len(a)} time(s); no instance {instance}")
        row = a.iloc[instance]
        return int(row["ts_ns"]), int(row["ts_ns"] + row["dur_ns"])
    st = w.steps
    if st.empty:
        raise LookupError("the window has no steps: name a region with annotation= ('' for all)")
    if "rank" in st and "rank" in e:
        st = st[st["rank"] == e["rank"].iloc[0]]
    if step is None:
        step = int(st["step"].iloc[0])
    sel = st[st["step"] == step]
    if sel.empty:
        raise LookupError(f"no step {step} (steps: {', '.join(map(str, st['step'].tolist()))})")
    s = int(sel["start_ns"].iloc[0])
    return s, s + int(round(float(sel["duration_us"].iloc[0]) * 1000))


def _queue_lengths(v: _Ev) -> dict[int, int]:
    """HTA's TraceCounters queue length per stream, read at each launch and each device row:
    +1 at a launch (its ts), -1 at its device row's start, summed in time order."""
    launch = np.flatnonzero(np.isin(v.name, list(LAUNCH_CALLS)) & (v.peer > 0) & (v.stream == -1))
    dev = v.peer[launch]
    idx = np.concatenate([launch, dev])
    ts = np.concatenate([v.ts[launch], v.ts[dev]])
    q = np.concatenate([np.ones(len(launch), np.int64), -np.ones(len(dev), np.int64)])
    stream = np.concatenate([v.stream[dev], v.stream[dev]])
    df = pd.DataFrame({"i": idx, "ts": ts, "q": q, "s": stream}).sort_values("ts", kind="stable")
    df["len"] = df.groupby("s")["q"].cumsum()
    return dict(zip(df["i"].tolist(), df["len"].tolist(), strict=True))


class _Graph:
    """HTA's CPGraph: nodes are (event, is_start) points, edges carry a weight in ns."""

    def __init__(self, v: _Ev, rows: np.ndarray):
        self.v = v
        order = np.lexsort(
            (
                np.concatenate([np.zeros(len(rows)), np.ones(len(rows))]),
                np.concatenate([v.ts[rows], v.ts[rows] + v.dur[rows]]),
            )
        )
        ev = np.concatenate([rows, rows])[order]
        start = np.concatenate([np.ones(len(rows), bool), np.zeros(len(rows), bool)])[order]
        self.node_ev = ev
        self.node_start = start
        self.node_ts = np.where(start, v.ts[ev], v.ts[ev] + v.dur[ev])
        self.start_of = {int(e): i for i, (e, s) in enumerate(zip(ev, start, strict=True)) if s}
        self.end_of = {int(e): i for i, (e, s) in enumerate(zip(ev, start, strict=True)) if not s}
        self.edges: dict[tuple[int, int], tuple[int, str, int]] = {}  # (u, v): weight, type, ev
        self.pred: dict[int, list[int]] = {}

    def add(
        self, u: int, w_: int, kind: str = OPERATOR, zero: bool = False, attr: int = -1
    ) -> None:
        assert u != w_
        weight = (
            0 if kind in (DEPENDENCY, SYNC) or zero else int(self.node_ts[w_] - self.node_ts[u])
        )
        if (u, w_) not in self.edges:
            self.pred.setdefault(w_, []).append(u)
        self.edges[(u, w_)] = (weight, kind, attr)

    def attribute(self, u: int, w_: int, kind: str, src_parent: int) -> int:
        """HTA's _attribute_edge: the event a span or a delay is charged to."""
        if kind == KERNEL_KERNEL:
            return int(self.node_ev[u])
        if self.node_start[u]:
            return int(self.node_ev[u])
        if not self.node_start[w_]:
            return int(self.node_ev[w_])
        return src_parent

    def longest_path(self) -> list[int]:
        """networkx's dag_longest_path on this graph (negative weights count as 0, HTA's -1 µs
        tolerance for nesting that rounds past its parent)."""
        n = len(self.node_ev)
        indeg = np.zeros(n, np.int64)
        succ: dict[int, list[int]] = {}
        for u, w_ in self.edges:
            indeg[w_] += 1
            succ.setdefault(u, []).append(w_)
        stack = [i for i in range(n) if indeg[i] == 0][::-1]
        dist: dict[int, tuple[int, int]] = {}
        while stack:
            x = stack.pop()
            best = (0, x)
            for u in self.pred.get(x, ()):
                d = dist[u][0] + max(self.edges[(u, x)][0], 0)
                if d > best[0] or best[1] == x and d >= best[0]:
                    best = (d, u)
            dist[x] = best if best[0] >= 0 else (0, x)
            for w_ in succ.get(x, ()):
                indeg[w_] -= 1
                if indeg[w_] == 0:
                    stack.append(w_)
        if len(dist) < n:
            raise RuntimeError("the critical path graph has a cycle (trace timestamps overlap)")
        end = max(dist, key=lambda x: dist[x][0])
        path = [end]
        while dist[path[-1]][1] != path[-1]:
            path.append(dist[path[-1]][1])
        return path[::-1]


def _cpu_edges(g: _Graph, v: _Ev, cpu_rows: np.ndarray, has_node: set[int]) -> None:
    """Per CPU thread, HTA's call stack walked depth first, linking the nodes as HTA's
    enter/exit callbacks do."""
    by_thread: dict[tuple[str, str], list[int]] = {}
    for i in cpu_rows.tolist():
        by_thread.setdefault((v.pid[i], v.tid[i]), []).append(i)
    for rows in by_thread.values():
        _thread_edges(g, v, *_call_stack(v, rows), has_node)


def _call_stack(v: _Ev, rows: list[int]) -> tuple[dict[int, int], dict[int, list[int]]]:
    """HTA's CallStackGraph of one thread (its compare_events order: at one time an end comes
    before a start, a longer start first, a shorter end first): parent and children."""
    pts = []
    for i in rows:
        d = max(int(v.dur[i]), 0)
        pts.append((int(v.ts[i]), 1, -d, i, i))
        pts.append((int(v.ts[i]) + d, 0, d, -i, i))
    pts.sort()
    parent: dict[int, int] = {}
    children: dict[int, list[int]] = {-1: []}
    stack: list[int] = []
    for _, is_start, _, _, i in pts:
        if is_start:
            if i in parent:
                continue
            p = stack[-1] if stack else -1
            parent[i] = p
            children.setdefault(p, []).append(i)
            children[i] = []
            stack.append(i)
        elif stack:
            stack.pop()
    return parent, children


def _thread_edges(
    g: _Graph, v: _Ev, parent: dict[int, int], children: dict[int, list[int]], has_node: set[int]
) -> None:
    """HTA's _construct_graph_from_call_stack: an edge from each node to the next visited, a
    0-weight dependency between consecutive top-level operators."""
    last_node: int | None = None
    last_top: int | None = None
    depth = 0
    last_parent = -1

    def walk(i: int) -> None:
        nonlocal last_node, last_top, depth, last_parent
        node = i in has_node
        if node:  # enter
            s = g.start_of[i]
            if depth == 0 and last_top is not None:
                g.add(last_top, s, DEPENDENCY)
            depth += 1
            if last_node is not None:
                g.add(last_node, s, attr=g.attribute(last_node, s, OPERATOR, last_parent))
            last_node, last_parent = s, parent[i]
        for c in children[i]:
            walk(c)
        if node:  # exit
            en = g.end_of[i]
            depth -= 1
            if last_node is not None:
                attr = g.attribute(last_node, en, OPERATOR, last_parent)
                g.add(last_node, en, zero=v.name[i] in BLOCKING_SYNC_CALLS, attr=attr)
            if depth == 0:
                last_node, last_top = None, en
            else:
                last_node, last_parent = en, parent[i]

    for top in children[-1]:
        walk(top)


def _launches(v: _Ev) -> pd.DataFrame:
    """HTA's runtime launch calls, in time order, each with its device row's stream and
    device (pid) and a sequential ``launch_id``."""
    i = np.flatnonzero(np.isin(v.name, list(LAUNCH_CALLS)) & (v.peer > 0) & (v.stream == -1))
    df = pd.DataFrame(
        {
            "i": i,
            "ts": v.ts[i],
            "pid": v.pid[i],
            "tid": v.tid[i],
            "stream": v.stream[v.peer[i]],
            "gpu": v.pid[v.peer[i]],
        }
    )
    df = df.sort_values("ts", kind="stable").reset_index(drop=True)
    df["launch_id"] = np.arange(len(df))
    return df


def _event_syncs(v: _Ev, launches: pd.DataFrame) -> tuple[dict[int, int], dict[int, int]]:
    """For CUDA event syncs: the launch before each waited-on ``cudaEventRecord`` on the
    recorded stream (by record correlation), and the next launch on the waiting stream after
    each ``cudaStreamWaitEvent`` call from the same thread (by that call's index)."""
    prev_launch: dict[int, int] = {}
    waits = np.flatnonzero(v.wait_corr >= 0)
    rec = {int(v.wait_corr[i]): (int(v.wait_stream[i]), v.pid[i]) for i in waits}
    records = np.flatnonzero((v.name == "cudaEventRecord") & np.isin(v.corr, list(rec)))
    for r in sorted(records.tolist(), key=lambda r: v.ts[r]):
        stream, gpu = rec[int(v.corr[r])]
        sel = launches[
            (launches["gpu"] == gpu) & (launches["stream"] == stream) & (launches["ts"] <= v.ts[r])
        ]
        if len(sel):
            prev_launch[int(v.corr[r])] = int(sel["i"].iloc[-1])
    next_launch: dict[int, int] = {}
    calls = np.flatnonzero((v.name == "cudaStreamWaitEvent") & (v.peer > 0))
    for c in calls.tolist():
        stream = v.stream[v.peer[c]]
        sel = launches[
            (launches["pid"] == v.pid[c])
            & (launches["tid"] == v.tid[c])
            & (launches["stream"] == stream)
            & (launches["ts"] >= v.ts[c])
        ]
        if len(sel):
            next_launch[c] = int(sel["i"].iloc[0])
    return prev_launch, next_launch


def _gpu_edges(g: _Graph, v: _Ev, dev_rows: np.ndarray) -> None:
    """HTA's _construct_graph_from_kernels: device rows in start order (syncs at their end)."""
    q = _queue_lengths(v)
    launches = _launches(v)
    prev_launch, next_launch = _event_syncs(v, launches)
    sort_by = np.where(
        v.cat[dev_rows] == SYNC_CAT, v.ts[dev_rows] + v.dur[dev_rows], v.ts[dev_rows]
    )
    rows = dev_rows[np.argsort(sort_by, kind="stable")]
    last: dict[int, int] = {}
    kernel_sync: dict[int, int] = {}
    for i in rows.tolist():
        runtime = int(v.peer[i])
        if v.cat[i] == SYNC_CAT:
            name = v.name[i]
            if name in ("Stream Wait Event", "Event Sync"):
                src_launch = prev_launch.get(int(v.wait_corr[i]))
                if src_launch is None:
                    continue
                src = int(v.peer[src_launch])
                if name == "Stream Wait Event":
                    dest_launch = next_launch.get(runtime)
                    if dest_launch is not None:
                        kernel_sync[int(v.peer[dest_launch])] = src
                elif src in g.end_of and runtime in g.end_of:
                    g.add(g.end_of[src], g.end_of[runtime], SYNC)
                continue
            nodes = list(last.values()) if name == "Context Sync" else [last.get(int(v.stream[i]))]
            for n in nodes:
                if n is not None and runtime in g.end_of:
                    g.add(n, g.end_of[runtime], SYNC)
            continue
        s, en = g.start_of[i], g.end_of[i]
        g.add(s, en, attr=i)
        stream = int(v.stream[i])
        sync_end = None
        src = kernel_sync.pop(i, None)
        if src is not None and src in g.end_of:
            sync_end = g.end_of[src]
            g.add(sync_end, s, SYNC)
        rts = v.ts[runtime] if runtime > 0 else None
        prev = last.get(stream)
        if (
            q.get(runtime) == 1
            and q.get(i) == 0
            and (prev is None or g.node_ts[prev] < rts)
            and (sync_end is None or g.node_ts[sync_end] < rts)
            and runtime in g.start_of
        ):
            g.add(g.start_of[runtime], s, LAUNCH)
        elif prev is not None and (sync_end is None or g.node_ts[sync_end] < g.node_ts[prev]):
            g.add(prev, s, KERNEL_KERNEL, attr=int(g.node_ev[prev]))
        last[stream] = en


def _bound_by(kind: str, stream: int, name: str) -> str:
    """HTA's bound_by of an edge on the path."""
    if kind == KERNEL_KERNEL:
        return "gpu_kernel_kernel_overhead"
    if kind == LAUNCH:
        return "gpu_kernel_launch_overhead"
    if kind in (DEPENDENCY, SYNC):
        return ""
    if stream < 0:
        return "cpu_bound"
    return "gpu_communication_bound" if COMM_KERNEL.match(name) else "gpu_compute_bound"


def critical_path(
    w: Window,
    step: int | None = None,
    *,
    annotation: str | None = None,
    instance: int = 0,
    rank: int | None = None,
) -> CriticalPath:
    """The critical path of ``step`` (default: the window's first step) on ``rank`` (default:
    the first), or of HTA's region: the ``instance``-th event whose name contains
    ``annotation`` (``""``: the whole trace). See the module docstring for the graph."""
    e = w.events
    if hasattr(e, "compute"):  # out of core: only the columns the graph reads come in
        e = e[[c for c in NEEDED if c in e.columns]].compute()
    e = with_rank(e, w)
    if rank is None:
        rank = ranks_of(w)[0]
    e = e[e["rank"] == rank]
    e = e[(e["ph"].astype(str) == "X")].reset_index(drop=True)
    if e.empty:
        raise LookupError(f"rank {rank} has no complete events")
    lo, hi = region_of(w, e, step, annotation, instance)
    v = _arrays(e)
    if "wait_on_corr" not in e and np.isin(v.name, ["Stream Wait Event", "Event Sync"]).any():
        warnings.warn(
            "the events frame lacks the CUDA event syncs' record correlations (wait_on_corr): "
            "the path has no Stream Wait / Event Sync edges",
            stacklevel=3,
        )
    cpu = v.stream == -1
    cpu_rows = np.flatnonzero(cpu & (v.ts >= lo) & (v.ts <= hi) & (v.dur > 0))
    rt = np.where(v.peer >= 0, v.peer, 0)
    launched = (
        (~cpu) & (v.peer > 0) & cpu[rt] & (v.ts[rt] >= lo) & (v.ts[rt] <= hi) & (v.dur[rt] > 0)
    )
    dev_rows = np.flatnonzero(launched | ((~cpu) & (v.name == "Stream Wait Event")))
    rows = np.union1d(cpu_rows, dev_rows)
    is_node = np.isin(v.cat[rows], list(NODE_CATS)) | ((v.stream[rows] != -1) & (v.peer[rows] >= 0))
    node_rows = rows[is_node]
    if not len(node_rows):
        raise LookupError(
            f"no CPU operator, runtime call or launched kernel starts in {lo}-{hi} ns "
            f"on rank {rank}"
        )
    g = _Graph(v, node_rows)
    _cpu_edges(g, v, cpu_rows, set(node_rows.tolist()))
    gpu = dev_rows[(v.peer[dev_rows] >= 0) & np.isin(dev_rows, node_rows)]
    _gpu_edges(g, v, gpu)
    path = g.longest_path()
    out = []
    for u, x in zip(path[:-1], path[1:], strict=True):
        weight, kind, attr = g.edges[(u, x)]
        ev = attr if attr >= 0 else int(g.node_ev[x] if kind == LAUNCH else g.node_ev[u])
        stream = int(v.stream[ev]) if kind != LAUNCH else int(v.stream[g.node_ev[x]])
        name = str(v.name[ev])
        b = _bound_by(kind, -1 if kind not in (OPERATOR, KERNEL_KERNEL) else stream, name)
        out.append(
            (
                int(g.node_ts[u]),
                int(g.node_ts[x]),
                max(weight, 0) / 1e3,
                KIND.get(b, ""),
                b,
                kind,
                name,
                str(v.lane[ev]),
                stream,
                int(rank),
            )
        )
    cp = CriticalPath(pd.DataFrame(out, columns=SEGMENT_COLUMNS))
    cp.region = (lo, hi)
    cp.rank_id = int(rank)
    cp.window = w
    return cp
