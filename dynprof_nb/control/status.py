"""The status row: one definition of what ``status()`` shows for a rank, whatever the controller.

Every controller (shared memory, a MindSpore config file, a cluster) returns these columns in
this order, so the magics, the panel and the CLI render any of them the same way.
"""

from __future__ import annotations

import json
import socket
import time
from typing import TYPE_CHECKING, Any

from dynprof_nb.contract.rows import StepWindow, window_text
from dynprof_nb.contract.segment import Segment, SlotView, process_alive

if TYPE_CHECKING:
    import pandas as pd

# step_s: the rank's recent median step time, from its heartbeat (no profiling); slow: that
# against the job's median ("+35%"), see mark_slow; run: the job's run the rank joined (a job
# restarted under its name is a new run, see dynprof_nb.control.runs)
STATUS_COLUMNS = [
    "rank",
    "node",
    "pid",
    "step",
    "state",
    "window",
    "generation",
    "heartbeat_age_s",
    "alive",
    "error",
    "step_s",
    "slow",
    "run",
]
# the node a local controller's ranks run on: this machine (a cluster controller names each)
THIS_NODE = socket.gethostname()


def status_row(
    *,
    rank: int,
    pid: Any,
    step: Any,
    state: str,
    window: str = "",
    generation: int = 0,
    heartbeat_age_s: Any = None,
    alive: Any = None,
    error: str = "",
    node: str = THIS_NODE,
    step_s: Any = None,
    run: Any = None,
) -> dict[str, Any]:
    """A row of ``status()``; what the controller cannot know is ``None`` (``<NA>`` in the
    frame), never made up."""
    return {
        "rank": rank,
        "node": node,
        "pid": pid,
        "step": step,
        "state": state,
        "window": window,
        "generation": generation,
        "heartbeat_age_s": heartbeat_age_s,
        "alive": alive,
        "error": error,
        "step_s": step_s,
        "run": run,
    }


def age_s(now_ns: int, then_ns: int) -> float:
    """Seconds since ``then_ns``, rounded to the millisecond, never negative."""
    return round(max(0, now_ns - then_ns) / 1e9, 3)


def slot_row(slot: SlotView, now_ns: int) -> dict[str, Any]:
    """A rank slot as a status row; a rank that died without closing shows ``dead``."""
    closed = slot.state == "closed"
    alive = not closed and slot.alive  # one liveness check per rank
    return status_row(
        rank=slot.rank,
        pid=slot.pid,
        step=slot.step,
        state=slot.state if alive or closed else "dead",
        window=window_text(StepWindow.of(slot.start, slot.stop)),
        generation=slot.applied,
        heartbeat_age_s=age_s(now_ns, slot.heartbeat_ns),
        alive=alive,
        error=slot.error,
        run=slot.run or None,
    )


def relay_rows(seg: Segment, now_ns: int | None = None) -> list[dict[str, Any]]:
    """The relay's row (``rank`` -1, ``state`` relay), if a relay ever ran for this job."""
    text, beat = seg.read_note()
    try:
        note = json.loads(text) if text else None
    except ValueError:
        note = None
    if not isinstance(note, dict) or note.get("role") != "relay":
        return []
    now_ns = time.monotonic_ns() if now_ns is None else now_ns
    alive = process_alive(int(note.get("pid", 0)), int(note.get("pid_start", 0)))
    return [
        status_row(
            rank=-1,
            pid=note.get("pid", 0),
            step=0,
            state="relay" if alive else "dead",
            window=note.get("window", ""),
            generation=note.get("generation", 0),
            heartbeat_age_s=age_s(now_ns, beat),
            alive=alive,
            error=note.get("error", ""),
        )
    ]


def status_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as the ``status()`` frame, columns in their documented order, unknowns ``<NA>``."""
    import pandas as pd

    rows = mark_slow([dict(row) for row in rows])
    rows = [{k: pd.NA if v is None else v for k, v in row.items()} for row in rows]
    return pd.DataFrame(rows, columns=STATUS_COLUMNS)


def mark_slow(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fill each row's ``slow``: its ``step_s`` against the median of the live rows that
    step, as ``"+35%"`` ("" where either is unknown; "stalled" for a stalled rank)."""

    def known(v: Any) -> bool:
        try:
            return bool(v)
        except TypeError:  # pd.NA
            return False

    def stepping(r: dict[str, Any]) -> bool:
        return known(r.get("alive")) and r.get("state") != "stalled"

    values = sorted(r["step_s"] for r in rows if stepping(r) and known(r.get("step_s")))
    n = len(values)
    median = (values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2) if n else 0
    for r in rows:
        v = r.get("step_s")
        if r.get("state") == "stalled":  # not a fast rank: a rank that does not step
            r["slow"] = "stalled"
            continue
        r["slow"] = f"{(v / median - 1) * 100:+.0f}%" if known(v) and median and stepping(r) else ""
    return rows


PAGE_ROWS = 64  # a status table longer than this is shown one row per node
NODE_VIEW_COLUMNS = ["node", "ranks", "live", "steps", "states", "window", "generation", "error"]


def status_view(status: pd.DataFrame, limit: int = PAGE_ROWS) -> pd.DataFrame:
    """What a person can read at a glance: the rows themselves up to ``limit`` ranks; beyond
    that one row per node (ranks, live ranks, step range, state counts, window, the lowest
    applied generation, the first error), so 1,000 ranks stay one page that renders at once."""
    import pandas as pd

    if len(status) <= limit or "node" not in status:
        return status
    rows = []
    for node, group in status.groupby(status["node"].astype(str), sort=True):
        steps = pd.to_numeric(group["step"], errors="coerce")
        states = group["state"].value_counts()
        errors = [e for e in group["error"].fillna("") if e]
        windows = sorted({w for w in group["window"].fillna("") if w})
        rows.append(
            {
                "node": node,
                "ranks": len(group),
                "live": int(group["alive"].fillna(False).astype(bool).sum()),
                "steps": f"{steps.min():.0f}-{steps.max():.0f}" if steps.notna().any() else "",
                "states": ", ".join(f"{n} {s}" for s, n in states.items()),
                "window": ", ".join(windows),
                "generation": pd.to_numeric(group["generation"], errors="coerce").min(),
                "error": f"{errors[0]} ({len(errors)} rank(s))" if errors else "",
            }
        )
    return pd.DataFrame(rows, columns=NODE_VIEW_COLUMNS)


# the states a rank is counted in by jobs_view, in the order a person scans them; any other
# (excluded, closed) is counted in "other"
JOB_STATES = ("recording", "saving", "armed", "idle", "stalled", "dead")
JOBS_VIEW_COLUMNS = ["job", "ranks", *JOB_STATES, "other", "window", "run", "last_heartbeat_s"]


def jobs_view(statuses: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Several jobs at a glance, one row per job, from each job's own ``status()`` frame (no
    read of its own): ``ranks`` as live/total, a count per state, the windows its ranks hold,
    the run(s) they joined, and ``last_heartbeat_s``, the age of the newest heartbeat of any
    rank (a job whose newest beat is old has stopped stepping everywhere). What ``dynprof
    status`` prints when several jobs run and none is named."""
    import pandas as pd

    rows = []
    for name, status in statuses.items():
        ranks = status[pd.to_numeric(status["rank"], errors="coerce") >= 0]  # not the relay
        states = ranks["state"].astype(str).value_counts()
        alive = ranks["alive"].fillna(False).astype(bool)
        beats = pd.to_numeric(ranks["heartbeat_age_s"][alive], errors="coerce").dropna()
        if beats.empty:  # no live rank: the newest beat of any
            beats = pd.to_numeric(ranks["heartbeat_age_s"], errors="coerce").dropna()
        windows = sorted({str(w) for w in ranks["window"].fillna("") if w})
        runs = sorted({str(r) for r in ranks["run"].dropna()})
        row: dict[str, Any] = {"job": name, "ranks": f"{int(alive.sum())}/{len(ranks)}"}
        row.update({s: int(states.get(s, 0)) for s in JOB_STATES})
        row["other"] = int(len(ranks) - sum(row[s] for s in JOB_STATES))
        row.update(
            window=", ".join(windows),
            run=", ".join(runs),
            last_heartbeat_s=beats.min() if len(beats) else pd.NA,
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=JOBS_VIEW_COLUMNS)
