"""The controller's side of step times and the trigger: arm, disarm, show; read the rings.

A trigger is stored in the job's segment (its own region: the definition as JSON, a
generation, counters), so it outlives the notebook that armed it: the ranks' heartbeat
threads evaluate it (:mod:`dynprof_nb.training.steptimes`). Arming resets its counters and
records the job's median step time as the baseline of the second condition. The ring and the
trigger words are laid out in :mod:`~dynprof_nb.contract.shared_layout`,
which the rank side reads too.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from dynprof_nb.contract.segment import Segment
from dynprof_nb.contract.shared_layout import (
    R_MEDIAN_NS,
    R_RECENT_NS,
    T_ARMED_NS,
    T_BASELINE_NS,
    T_FIRED,
    T_GEN,
    T_LAST_FIRE_NS,
    T_REFUSED,
    T_REFUSED_GEN,
    T_REQ,
    T_REQ_DONE,
    TriggerError,
    check_definition,
    cooldown_s,
    durations,
    job_median_ns,
    read_entries,
)
from dynprof_nb.control.status import THIS_NODE

if TYPE_CHECKING:
    import pandas as pd

    from dynprof_nb.contract.config import ProfilerConfig

STEP_TIME_COLUMNS = ["rank", "node", "step", "end_s", "duration_s", "kind"]
SLOW_MARK = 0.2  # a rank this much slower than the job's median is a straggler (plots)


def definition(
    slowdown: float = 1.5,
    steps: int = 10,
    cooldown_s: float | None = None,
    max_windows: int = 3,
    confirm: int = 5,
    disk_budget_mb: float | None = None,
    mode: str = "local",
    **window: Any,
) -> dict[str, Any]:
    """The stored form of ``job.trigger(...)``'s arguments, checked."""
    return check_definition(
        {
            "slowdown": slowdown,
            "steps": steps,
            "cooldown_s": cooldown_s,
            "max_windows": max_windows,
            "confirm": confirm,
            "disk_budget_mb": disk_budget_mb,
            "mode": mode,
            "window": window,
            "armed_at": time.time(),
        }
    )


def check_window(config: ProfilerConfig, d: dict[str, Any], current: int) -> None:
    """Build the window config the trigger would ask for if it fired now (from the standing
    config, ``steps`` steps ahead of step ``current``, with its window options), so values
    no rank could use (``steps=10**30``) are refused when armed, not when it fires."""
    first = current + 3
    config.update(start_step=first, stop_step=first + d["steps"] - 1, **d["window"])


def arm(seg: Segment, d: dict[str, Any] | None) -> int:
    """Store (``d``) or clear (None) the job's trigger; returns the trigger's generation."""
    w, tb = seg.words, seg.trigger_base
    with seg.write_lock():
        w[tb + T_FIRED] = 0
        w[tb + T_LAST_FIRE_NS] = 0
        w[tb + T_BASELINE_NS] = int(job_median_ns(seg, R_MEDIAN_NS)) if d else 0
        w[tb + T_REFUSED] = w[tb + T_REFUSED_GEN] = 0
        w[tb + T_REQ_DONE] = w[tb + T_REQ]
        w[tb + T_ARMED_NS] = time.time_ns() if d else 0
        seg.write_trigger_text(json.dumps(d) if d else "", "")
        w[tb + T_GEN] += 1
        return w[tb + T_GEN]


def describe(seg: Segment | None) -> dict[str, Any]:
    """The trigger as stored: its options, windows fired, the last reason, its state."""
    if seg is None:
        return {"armed": False}
    w, tb = seg.words, seg.trigger_base
    text, reason = seg.read_trigger_text()
    if not text:
        return {"armed": False}
    try:
        d = json.loads(text)
    except ValueError:
        return {"armed": False, "error": "the stored trigger is unreadable; arm it again"}
    refused = w[tb + T_REFUSED]
    fired, last = w[tb + T_FIRED] - refused, w[tb + T_LAST_FIRE_NS]
    cooldown = 0.0
    pause = cooldown_s(d, w[tb + T_BASELINE_NS])
    if last:
        cooldown = max(0.0, pause - (time.monotonic_ns() - last) / 1e9)
    state = (
        "spent"
        if fired >= d.get("max_windows", 1)
        else "cooling down"
        if cooldown > 0
        else "watching"
    )
    return {
        "armed": True,
        "state": state,
        **{k: v for k, v in d.items() if k != "window"},
        "window_options": d.get("window", {}),
        "fired": fired,
        "refused": refused,
        "cooldown_effective_s": round(pause, 1),
        "cooldown_left_s": round(cooldown, 1),
        "baseline_s": w[tb + T_BASELINE_NS] / 1e9,
        "last_reason": reason,
        "pending_request": w[tb + T_REQ] != w[tb + T_REQ_DONE],
    }


def take_request(seg: Segment) -> str | None:
    """A cluster-mode request the node's ranks made (its reason), marking it taken."""
    w, tb = seg.words, seg.trigger_base
    if w[tb + T_REQ] == w[tb + T_REQ_DONE]:
        return None
    with seg.write_lock():
        reason = seg.read_trigger_text()[1]
        w[tb + T_REFUSED] = w[tb + T_REFUSED_GEN] = 0
        w[tb + T_REQ_DONE] = w[tb + T_REQ]
    return reason


def note_fired(seg: Segment, reason: str) -> None:
    """A window the cluster started for this trigger: count it on this node (cooldown)."""
    w, tb = seg.words, seg.trigger_base
    with seg.write_lock():
        text, _ = seg.read_trigger_text()
        w[tb + T_FIRED] += 1
        w[tb + T_LAST_FIRE_NS] = time.monotonic_ns()
        seg.write_trigger_text(text, reason)


def step_rows(seg: Segment | None, last: int, node: str = THIS_NODE) -> list[dict[str, Any]]:
    """Every rank's last ``last`` step times as rows of :data:`STEP_TIME_COLUMNS`; ``end_s``
    on the monotonic clock of the rank's machine."""
    if seg is None:
        return []
    rows = []
    for s in seg.slots():
        entries = read_entries(seg.words, seg.ring_base(s.index), last)
        for step, end_ns, dur, kind in durations(entries)[-last:]:
            rows.append(
                {
                    "rank": s.rank,
                    "node": node,
                    "step": step,
                    "end_s": end_ns / 1e9,
                    "duration_s": dur,
                    "kind": kind,
                }
            )
    return rows


def step_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=STEP_TIME_COLUMNS)
    return frame.sort_values(["rank", "step"], kind="stable").reset_index(drop=True)


def recent_step_s(seg: Segment, index: int) -> float | None:
    """A slot's recent median step time (s), None before its first measured step."""
    v = seg.words[seg.ring_base(index) + R_RECENT_NS]
    return v / 1e9 if v > 0 else None


__all__ = ["TriggerError", "arm", "definition", "describe", "step_rows"]
