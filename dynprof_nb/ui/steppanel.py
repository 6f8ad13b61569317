"""The panel's "Step times" section: a live rank x recent-steps heat map and the trigger.

* The heat map is ``plot_step_times(job.step_times(last=N))`` as a PNG in an ``Image``
  (folded per node above 64 ranks, stragglers in red). The panel's refresh calls
  :meth:`StepTimesSection.refresh`; it reads the step times at most once every
  :data:`HEAT_PERIOD_S`, skips the picture when they did not change, and renders it in a thread
  of its own (one at a time), so a slow render never holds up the ranks' table: a refresh that
  finds a render still running leaves it be.
* The trigger controls: every field of ``job.trigger`` (slowdown, confirm, steps, cooldown
  (empty: auto), max windows, disk budget (empty: none)), Arm and Disarm, and a line with the
  armed values (``job.triggers``): its state, windows fired and refused, the last reason. The
  fields show the armed trigger's values whenever it is armed anew (from here, the magic or
  another notebook), so a box never reads 2 while 3 is armed. When a window fires, a notice
  says so with its reason (and the panel's message line).
* **Keep recent steps**: a number of steps and a button that calls ``job.recent(N)`` (every
  live rank writes its record of its last N steps now, loaded as one window), for a slowdown a
  person sees on the heat map; the panel renders it (``show``) as its Windows rows do.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import pandas as pd

from dynprof_nb.analysis.steptimes import RECENT_STEPS, plot_step_times, step_grid
from dynprof_nb.contract.shared_layout import TRIGGER_DEFAULTS
from dynprof_nb.safetext import escape
from dynprof_nb.ui.triggercmd import armed_values

HEAT_PERIOD_S = 1.0  # the heat map is re-read and re-drawn at most this often
HEAT_DPI = 72


# the section's own title, above the picture: the figure carries none (it said the same words
# a second time); stalled ranks are named on their own rows ("rank 1 STALLED at 812")
HEAT_TITLE = "<b>Step times</b> (no profiling; * = straggler; red = stalled)"
# the trigger fields' labels at their own width: the ipywidgets default (80px) cut
# "max windows" to "max wind..."
FIELD_STYLE = {"description_width": "initial"}
RECENT_ASKED = 100  # the steps "Keep recent steps" asks for by default (job.recent's default)


def heat_figure(frame: pd.DataFrame, steps: int = RECENT_STEPS) -> Any:
    """The heat map of ``frame`` (``job.step_times()``) on a bare matplotlib ``Figure`` (no
    pyplot): safe off the main thread, and no figure is left open. No title: the section's
    ``HEAT_TITLE`` is the one a person reads."""
    from matplotlib.figure import Figure

    rows = len(step_grid(frame, steps)[0])
    figure = Figure(figsize=(9, 0.3 * max(4, rows) + 1.2))
    ax = figure.subplots()
    plot_step_times(frame, steps, ax=ax)
    ax.set_title("")
    return figure


def heat_png(frame: pd.DataFrame, steps: int = RECENT_STEPS) -> bytes:
    """:func:`heat_figure` as PNG bytes."""
    figure = heat_figure(frame, steps)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight", dpi=HEAT_DPI)
    return buffer.getvalue()


def trigger_line(state: dict[str, Any]) -> str:
    """``job.triggers`` in one line: "armed (watching): slowdown 1.5x, confirm 5 steps, ..."."""
    if not state.get("armed"):
        return state.get("error") or "not armed"
    line = f"armed ({state.get('state', '?')}): {armed_values(state)}"
    if state.get("cooldown_left_s"):
        line += f", cooling down {state['cooldown_left_s']} s"
    if state.get("last_reason"):
        line += f"; last: {state['last_reason']}"
    return line


def _optional(text: str, name: str) -> float | None:
    """An empty box is None (auto, none); anything else a number, or a ValueError naming it."""
    text = str(text).strip()
    if not text or text.lower() in ("auto", "none"):
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not a number (empty: the default)") from None


class StepTimesSection(widgets.VBox):
    """The heat map and the trigger controls of one job; ``say(text, error)`` is the panel's
    message line."""

    def __init__(
        self,
        job: Any,
        say: Callable[..., None],
        last: int = RECENT_STEPS,
        show: Callable[[Any], None] | None = None,
    ) -> None:
        self.job = job
        self.say = say
        self.show = show  # renders a kept record (the panel's output area), or None
        self.kept: Any = None  # the last record kept with "Keep recent steps"
        self.last = last
        self.heat = widgets.Image(format="png", layout=widgets.Layout(max_width="760px"))
        self.heat.add_class("dynprof-heat")
        self.renders = 0  # heat maps drawn (a test counts them)
        self._heat_at = -HEAT_PERIOD_S  # monotonic time of the last read of the step times
        self._heat_key: Any = None  # what the picture shows, to skip an unchanged one
        self._render: threading.Thread | None = None
        self._make_fields()
        self._armed_at: Any = None  # the armed trigger the fields last showed
        self._fired = 0  # windows fired when last looked (a notice when it grows)
        self.notice = widgets.HTML()
        self.notice.add_class("dynprof-trigger-notice")
        self.arm_button = self._button(
            "Arm",
            "start a window by itself when a step slows "
            "by this much (stored with the job: no notebook needed)",
        )
        self.disarm_button = self._button("Disarm", "remove the job's trigger")
        self.trigger_state = widgets.HTML()
        self.trigger_state.add_class("dynprof-trigger-state")
        self.arm_button.on_click(lambda _b: self.arm())
        self.disarm_button.on_click(lambda _b: self.disarm())
        self.recent_steps = widgets.IntText(
            value=RECENT_ASKED,
            description="last steps",
            tooltip="how many of each rank's last steps to keep (job.recent(N))",
            layout=widgets.Layout(width="190px"),
            style=FIELD_STYLE,
        )
        self.recent_steps.add_class("dynprof-recent-steps")
        self.recent_button = widgets.Button(
            description="Keep recent steps",
            tooltip="every rank writes its record of its last steps now (step times, your "
            "ranges, GC pauses, data-loader waits), loaded as one window: for a slowdown "
            "seen on the heat map, after the fact",
            layout=widgets.Layout(width="160px"),
        )
        self.recent_button.add_class("dynprof-recent-keep")
        self.recent_button.on_click(lambda _b: self.keep_recent())
        super().__init__(
            [
                widgets.HTML(HEAT_TITLE),
                self.heat,
                widgets.HBox([self.recent_steps, self.recent_button]),
                widgets.HBox([self.slowdown, self.confirm, self.steps]),
                widgets.HBox([self.cooldown, self.max_windows, self.disk_budget]),
                widgets.HBox([self.arm_button, self.disarm_button]),
                self.trigger_state,
                self.notice,
            ]
        )
        self.add_class("dynprof-section-steptimes")

    def _make_fields(self) -> None:
        """The trigger's option boxes, at the trigger's defaults (``fields``: by option name)."""
        d = TRIGGER_DEFAULTS
        small = widgets.Layout(width="190px")
        self.slowdown = widgets.FloatText(
            value=d["slowdown"],
            description="slowdown",
            step=0.5,
            tooltip="x a rank's median step over its last 64 steps",
            layout=small,
            style=FIELD_STYLE,
        )
        self.confirm = widgets.IntText(
            value=d["confirm"],
            description="confirm",
            tooltip="slow steps in a row before it fires (one hiccup is not a slowdown)",
            layout=small,
            style=FIELD_STYLE,
        )
        self.steps = widgets.IntText(
            value=d["steps"],
            description="steps",
            tooltip="steps the triggered window records",
            layout=small,
            style=FIELD_STYLE,
        )
        self.cooldown = widgets.Text(
            value="",
            description="cooldown s",
            placeholder="auto",
            tooltip="seconds between two windows; empty: auto (20 windows' worth of steps, "
            "at least 10 s)",
            layout=small,
            style=FIELD_STYLE,
        )
        self.max_windows = widgets.IntText(
            value=d["max_windows"],
            description="max windows",
            tooltip="windows at most, until armed again",
            layout=small,
            style=FIELD_STYLE,
        )
        self.disk_budget = widgets.Text(
            value="",
            description="disk MB",
            placeholder="none",
            tooltip="fire no more once the job's windows use this much disk; empty: no bound",
            layout=small,
            style=FIELD_STYLE,
        )
        self.fields = {
            "slowdown": self.slowdown,
            "confirm": self.confirm,
            "steps": self.steps,
            "cooldown_s": self.cooldown,
            "max_windows": self.max_windows,
            "disk_budget_mb": self.disk_budget,
        }
        for name, field in self.fields.items():
            field.add_class(f"dynprof-trigger-field-{name}")

    @staticmethod
    def _button(name: str, tooltip: str) -> widgets.Button:
        button = widgets.Button(
            description=name, tooltip=tooltip, layout=widgets.Layout(width="90px")
        )
        button.add_class(f"dynprof-trigger-{name.lower()}")
        return button

    # -- the trigger ------------------------------------------------------------------------

    def arm(self) -> dict[str, Any] | None:
        """Arm the job's trigger with every field's value; returns ``triggers``."""
        try:
            values = {
                "slowdown": float(self.slowdown.value),
                "confirm": int(self.confirm.value),
                "steps": int(self.steps.value),
                "cooldown_s": _optional(self.cooldown.value, "cooldown s"),
                "max_windows": int(self.max_windows.value),
                "disk_budget_mb": _optional(self.disk_budget.value, "disk MB"),
            }
            state = self.job.trigger(**values)
        except Exception as exc:  # JobError: "slowdown must be > 1", ...
            self.say(f"trigger not armed: {exc}", error=True)
            return None
        self.say(f"trigger armed: {armed_values(state)}")
        self.show_trigger(state)
        return state

    def disarm(self) -> dict[str, Any] | None:
        try:
            state = self.job.trigger(None)
        except Exception as exc:
            self.say(f"trigger not disarmed: {exc}", error=True)
            return None
        self.say("trigger disarmed")
        self.show_trigger(state)
        return state

    def show_trigger(self, state: dict[str, Any]) -> None:
        """The armed values in the line, in the fields when armed anew, and a notice when a
        window has fired since the last look."""
        text = escape(trigger_line(state))
        if self.trigger_state.value != text:
            self.trigger_state.value = text
        if not state.get("armed"):
            self._armed_at, self._fired = None, 0
            return
        if state.get("armed_at") != self._armed_at:  # armed anew: the fields read its values
            self._armed_at, self._fired = state.get("armed_at"), state.get("fired", 0)
            for name, field in self.fields.items():
                value = state.get(name)
                if name in ("cooldown_s", "disk_budget_mb"):
                    value = "" if value is None else f"{value:g}"
                if value is not None and field.value != value:
                    field.value = value
        if state.get("fired", 0) > self._fired:
            self._fired = state["fired"]
            # said once, in the banner: the panel is the job's, so no "job NAME:" prefix, and
            # not again in the message line (a new user read the sentence three times)
            reason = str(state.get("last_reason") or "")
            self.notice.value = (
                '<div style="background:#fff3cd;border-left:4px solid #f0ad4e;'
                f'padding:4px 8px"><b>window fired</b>: {escape(reason)}</div>'
            )

    # -- the recent-steps record ----------------------------------------------------------

    def keep_recent(self) -> Any:
        """``job.recent(N)`` with the box's N: the record, shown by ``show`` (None when it
        could not be kept: the message line says why)."""
        try:
            steps = int(self.recent_steps.value)
            self.say(f"keeping every rank's last {steps} steps...")
            record = self.job.recent(steps)
        except Exception as exc:  # JobError: no live rank, no record in time; ValueError: 0
            self.say(f"recent steps not kept: {exc}", error=True)
            return None
        self.kept = record
        ranks = sorted(int(r) for r in getattr(record, "ranks", []) or [])
        self.say(f"kept the last {steps} steps of rank(s) {ranks}: in panel.trace")
        if self.show is not None:
            self.show(record)
        return record

    # -- the live part ----------------------------------------------------------------------

    def refresh(self) -> None:
        """Show ``job.triggers``; re-read the step times if the heat map is a period old, and
        draw them in the background if they changed and no drawing is under way."""
        self.show_trigger(self.job.triggers)
        now = time.monotonic()
        if now - self._heat_at < HEAT_PERIOD_S or (
            self._render is not None and self._render.is_alive()
        ):
            return
        self._heat_at = now
        frame = self.job.step_times(last=self.last)
        key = (
            len(frame),
            int(pd.util.hash_pandas_object(frame, index=False).sum()) if len(frame) else 0,
            repr({r: v["step"] for r, v in (frame.attrs.get("stalled") or {}).items()}),
        )
        if key == self._heat_key:
            return
        self._heat_key = key
        self._render = threading.Thread(
            target=self._draw, args=(frame,), daemon=True, name="dynprof_nb-heatmap"
        )
        self._render.start()

    def _draw(self, frame: pd.DataFrame) -> None:
        try:
            self.heat.value = heat_png(frame, self.last)
            self.renders += 1
        except Exception as exc:  # shown, never printed from this thread
            self.trigger_state.value = escape(f"heat map failed: {exc}")

    def wait(self, timeout: float = 10.0) -> None:
        """Wait for a heat map being drawn (tests, and closing the panel)."""
        render = self._render
        if render is not None and render is not threading.current_thread():
            render.join(timeout)
