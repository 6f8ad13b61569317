"""The step column of any format's events frame: what every events reader does last, so a new
format imports this and not the derived source."""

from __future__ import annotations

import pandas as pd

from ... import schema
from ..base import ReadContext
from ..mindspore import framework as mindspore
from . import from_events as derive


def events_with_steps(w: ReadContext, ev: pd.DataFrame) -> pd.DataFrame:
    """Every events reader's last step: the MindSpore backend's step markers
    (``dynprof_steps.csv``) joined in, and each event's step assigned."""
    markers = w.files.step_markers
    if markers is not None:
        ev = schema.concat_frames(
            [schema.conform(ev, "events").drop(columns="step"), mindspore.step_markers(markers)]
        )
        w.sources["events"]["files"].append(str(markers))
        w.sources["events"]["notes"].append("step markers from dynprof_steps.csv")
    iv = derive.step_intervals(ev)
    steps = derive.assign_steps(ev["ts_ns"].to_numpy("int64", na_value=0), iv)
    step = derive.device_steps(ev, iv, steps)
    at = len(schema.EVENTS) - 1  # the step column's place: conform then copies nothing
    if "step" not in ev.columns and list(ev.columns[:at]) == list(schema.EVENTS)[:at]:
        ev.insert(at, "step", step)
    else:
        ev["step"] = step
    return ev
