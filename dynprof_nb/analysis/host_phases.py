"""Where a host step's wall time goes, on the training thread: the phases of each step of a
host-only window (a CPU PyTorch, built-in or MindSpore CPU window), as a partition of the step.

A phase is wall time on the training thread (the thread that marks the steps), never a sum of
operator times over threads: gloo runs each all-reduce on background threads beside the main
one, and adding their time to the main thread's counted one step's wait two or three times.
Each instant of a step goes to exactly one phase, the first that holds (docs/definitions.md,
"Phases of a host step"):

1. ``GC``: a garbage-collection pause of the training thread (the Monitor's ``GC`` events);
2. ``data loading``: inside a data-loader call (a name with "dataloader", as Kineto's
   ``enumerate(DataLoader)#...__next__``);
3. ``sync``: inside a host sync point (``.item()`` -> ``aten::item``, ``aten::_local_scalar_dense``,
   a stream / device / event synchronize);
4. ``communication``: inside a communication op of the training thread (all-reduce, c10d,
   gloo, NCCL, HCCL ... names), or in no operator of its own while a collective of the rank runs
   on another thread (waiting for it: DDP's wait at the end of the backward pass);
5. ``compute``: inside any other operator or user range of the training thread;
6. ``other``: in nothing recorded (the loop's own Python between operators).

So every phase is >= 0, the phases add up to the step, and each share of a step lies in [0, 1].

MindSpore on CPU records its operators on a track of their own, not on a thread: every entry
of its ``cpu_op_execute_timestamp_<rank>.txt`` has thread field ``0`` (its ``trace_view.json``
shows them as process "CPU OP", thread 0), while the step markers (the MindSpore backend's
``dynprof_steps.csv``) and user ranges carry the training thread's native id. That track holds
the operators the training thread launches, in order, its AllReduce included (PyNative runs
them on MindSpore's pipeline, one at a time), so it is the training thread's view
(:data:`OP_TRACK`): its operators count as the training thread's, as MindSpore's own step
assignment (an operator belongs to the step whose range holds it) counts them.
A rank's *own work* is its step minus ``communication``: what it does itself, as opposed to
waiting for the others in a collective (:mod:`dynprof_nb.analysis.straggler`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.contract.protocol import STEP_FOLDED, STEP_RE
from dynprof_nb.traces.interface import Window

COMM = re.compile(
    r"all_?reduce|all_?gather|reduce_?scatter|broadcast|all_?to_?all|barrier|nccl|hccl|gloo|"
    r"c10d|send|recv|hcom_",
    re.I,
)
DATA = re.compile(r"dataloader", re.I)
SYNC = re.compile(
    r"^aten::item$|^aten::_local_scalar_dense$|synchronize", re.I
)  # .item(), float(t), cuda/aclrt*Synchronize*
SYNC_CALL = re.compile(r"^aten::item$|synchronize", re.I)  # one per sync point (not nested)
GC = "GC"
STEP = STEP_RE
# MindSpore's CPU operator track (the reader's process name for cpu_op_execute_timestamp rows):
# the training thread's operators (module docstring)
OP_TRACK = "CPU OP"
PHASES = ["compute", "communication", "data loading", "GC", "sync", "other"]
_LABEL_CATS = ("user_annotation", "python_function", "gpu_user_annotation")


def training_threads(events: pd.DataFrame) -> dict[int, Any]:
    """Per rank, the thread that marks the steps (the step markers); else the thread with
    the most events."""
    out: dict[int, Any] = {}
    names = events["name"].astype(str)
    for r, part in events.groupby("rank"):
        marks = part[names.loc[part.index].str.match(STEP)]
        src = marks if not marks.empty else part
        out[int(r)] = src["tid"].astype(str).value_counts().idxmax()
    return out


def _covered(mid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Whether each point of ``mid`` lies in one of the intervals [start, end)."""
    if not len(start):
        return np.zeros(len(mid), bool)
    s, e = np.sort(start), np.sort(end)
    return (np.searchsorted(s, mid, "right") - np.searchsorted(e, mid, "right")) > 0


def _rank_phases(ev: pd.DataFrame, steps: pd.DataFrame, tid: Any) -> pd.DataFrame:
    """One rank: µs per step and phase (rows step, phase, us) and sync points per step."""
    st = steps.sort_values("start_ns")
    s0 = st["start_ns"].to_numpy("int64")
    s1 = s0 + np.round(st["duration_us"].to_numpy(float) * 1000).astype("int64")
    names = ev["name"].astype(str)
    a = ev["ts_ns"].to_numpy("int64")
    b = a + ev["dur_ns"].fillna(0).to_numpy("int64")
    main = (ev["tid"].astype(str) == str(tid)).to_numpy()
    if "process" in ev:  # MindSpore's operator track is the training thread's (docstring)
        main = main | (ev["process"].astype(str) == OP_TRACK).to_numpy()
    keep = (b > a) & ~names.str.match(STEP).to_numpy() & (names != STEP_FOLDED).to_numpy()
    is_comm = names.str.contains(COMM).to_numpy()
    label = ev["cat"].astype(str).isin(_LABEL_CATS).to_numpy() if "cat" in ev else False
    kinds = {
        "GC": main & keep & (names == GC).to_numpy(),
        "data loading": main & keep & names.str.contains(DATA).to_numpy(),
        "sync": main & keep & names.str.contains(SYNC).to_numpy(),
        "communication": main & keep & is_comm,
        "op": main & keep & ~label,
        "range": main & keep,
        "collective elsewhere": ~main & keep & is_comm,
    }
    bounds = np.unique(np.concatenate([s0, s1, a[keep], b[keep]]))
    mid = (bounds[:-1] + bounds[1:]) / 2.0
    length = np.diff(bounds).astype(float) / 1000.0
    step_at = np.searchsorted(s0, mid, "right") - 1
    inside = (step_at >= 0) & (mid < s1[np.maximum(step_at, 0)])
    cover = {k: _covered(mid, a[m], b[m]) for k, m in kinds.items()}
    phase = np.full(len(mid), "other", dtype=object)
    waiting = cover["collective elsewhere"]
    # lowest precedence first: each later assignment overrides
    phase[cover["range"]] = "compute"
    phase[waiting & ~cover["op"]] = "communication"  # in no operator of its own: waiting
    phase[cover["op"]] = "compute"  # the training thread works (overlapped, if waiting)
    for k in ("communication", "sync", "data loading", "GC"):
        phase[cover[k]] = k
    t = pd.DataFrame(
        {
            "step": st["step"].to_numpy()[step_at[inside]],
            "phase": phase[inside],
            "us": length[inside],
        }
    )
    t = t.groupby(["step", "phase"])["us"].sum().unstack("phase")
    t = t.reindex(index=st["step"].to_numpy(), columns=PHASES).fillna(0.0)
    syncs = main & keep & names.str.contains(SYNC_CALL).to_numpy()
    at = np.searchsorted(s0, a[syncs], "right") - 1
    ok = (at >= 0) & (a[syncs] < s1[np.maximum(at, 0)])
    count = pd.Series(st["step"].to_numpy()[at[ok]]).value_counts()
    t["sync_points"] = count.reindex(t.index).fillna(0).astype(int).to_numpy()
    t["duration_us"] = st["duration_us"].to_numpy(float)
    return t.rename_axis("step").reset_index()


def step_phases(w: Window) -> pd.DataFrame:
    """Per rank and step: ``duration_us``, one column per phase (µs, see the module
    docstring: they add up to ``duration_us``), ``sync_points`` (host sync calls in the step).
    Raises ``LookupError`` when the window has no host events on its steps' clock."""
    st = w.steps
    if "rank" not in st:
        st = st.assign(rank=int(getattr(w, "rank", None) or 0))
    st = st[st["duration_us"].notna() & st["start_ns"].notna()]
    ev = w.events
    if st.empty or ev.empty or not {"ts_ns", "dur_ns", "tid"} <= set(ev.columns):
        raise LookupError("no steps with host events to split them into phases")
    if "rank" not in ev:
        ev = ev.assign(rank=int(st["rank"].iloc[0]))
    ev = ev[ev["ph"].astype(str) == "X"] if "ph" in ev else ev
    ev = ev[ev["ts_ns"].notna()]
    threads = training_threads(ev)
    out = []
    for r, part in st.groupby("rank"):
        e = ev[ev["rank"] == r]
        if e.empty or int(r) not in threads:
            raise LookupError(f"rank {r} has steps but no host events")
        out.append(_rank_phases(e, part, threads[int(r)]).assign(rank=int(r)))
    t = pd.concat(out, ignore_index=True)
    return t[["rank", "step", "duration_us", *PHASES, "sync_points"]]


__all__ = ["COMM", "OP_TRACK", "PHASES", "step_phases", "training_threads"]
