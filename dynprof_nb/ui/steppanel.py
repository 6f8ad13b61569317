"""The panel's "Step times" section: a live rank x recent-steps heat map and the trigger.

* The heat map is ``plot_step_times(job.step_times(last=N))`` as a PNG in an ``Image``
  (folded per node above 64 ranks, stragglers in red). The panel's refresh calls
  :meth:`StepTimesSection.refresh`; it reads the step times at most once every
  :data:`HEAT_PERIOD_S`, skips the picture when they did not change, and renders it in a thread
  of its own (one at a time), so a slow render never holds up the ranks' table: a refresh that
  finds a render still running leaves it be.
* The trigger controls: ``slowdown`` and ``steps``, Arm (``job.trigger(slowdown, steps)``),
  Disarm (``job.trigger(None)``), and a line with ``job.triggers``: armed or not, its state,
  windows fired, the last reason.
"""

from __future__ import annotations

import html
import io
import threading
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import pandas as pd

from dynprof_nb.analysis.steptimes import RECENT_STEPS, plot_step_times, step_grid

HEAT_PERIOD_S = 1.0  # the heat map is re-read and re-drawn at most this often
HEAT_DPI = 72


def heat_png(frame: pd.DataFrame, steps: int = RECENT_STEPS) -> bytes:
    """The heat map of ``frame`` (``job.step_times()``) as PNG bytes. Drawn on a bare
    matplotlib ``Figure`` (no pyplot): safe off the main thread, and no figure is left open."""
    from matplotlib.figure import Figure

    rows = len(step_grid(frame, steps)[0])
    figure = Figure(figsize=(9, 0.3 * max(4, rows) + 1.2))
    plot_step_times(frame, steps, ax=figure.subplots())
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight", dpi=HEAT_DPI)
    return buffer.getvalue()


def trigger_line(state: dict[str, Any]) -> str:
    """``job.triggers`` in one line: "armed (watching): 2.0x, 10-step windows, fired 0/3"."""
    if not state.get("armed"):
        return state.get("error") or "not armed"
    line = (
        f"armed ({state.get('state', '?')}): {state.get('slowdown')}x its median, "
        f"{state.get('steps')}-step windows, fired {state.get('fired', 0)}/"
        f"{state.get('max_windows', '?')}"
    )
    if state.get("cooldown_left_s"):
        line += f", cooling down {state['cooldown_left_s']} s"
    if state.get("last_reason"):
        line += f"; last: {state['last_reason']}"
    return line


class StepTimesSection(widgets.VBox):
    """The heat map and the trigger controls of one job; ``say(text, error)`` is the panel's
    message line."""

    def __init__(self, job: Any, say: Callable[..., None], last: int = RECENT_STEPS) -> None:
        self.job = job
        self.say = say
        self.last = last
        self.heat = widgets.Image(format="png", layout=widgets.Layout(max_width="760px"))
        self.heat.add_class("dynprof-heat")
        self.renders = 0  # heat maps drawn (a test counts them)
        self._heat_at = -HEAT_PERIOD_S  # monotonic time of the last read of the step times
        self._heat_key: Any = None  # what the picture shows, to skip an unchanged one
        self._render: threading.Thread | None = None
        self.slowdown = widgets.FloatText(
            value=2.0,
            description="slowdown",
            step=0.5,
            tooltip="x a rank's own rolling median step time",
            layout=widgets.Layout(width="200px"),
        )
        self.steps = widgets.IntText(
            value=10,
            description="steps",
            tooltip="steps the triggered window records",
            layout=widgets.Layout(width="200px"),
        )
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
        super().__init__(
            [
                widgets.HTML("<b>Step times</b> (no profiling; * = straggler)"),
                self.heat,
                widgets.HBox([self.slowdown, self.steps, self.arm_button, self.disarm_button]),
                self.trigger_state,
            ]
        )
        self.add_class("dynprof-section-steptimes")

    @staticmethod
    def _button(name: str, tooltip: str) -> widgets.Button:
        button = widgets.Button(
            description=name, tooltip=tooltip, layout=widgets.Layout(width="90px")
        )
        button.add_class(f"dynprof-trigger-{name.lower()}")
        return button

    # -- the trigger ------------------------------------------------------------------------

    def arm(self) -> dict[str, Any] | None:
        """Arm the job's trigger with the fields' slowdown and steps; returns ``triggers``."""
        try:
            state = self.job.trigger(
                slowdown=float(self.slowdown.value), steps=int(self.steps.value)
            )
        except Exception as exc:  # JobError: "slowdown must be > 1", ...
            self.say(f"trigger not armed: {exc}", error=True)
            return None
        self.say(f"trigger armed: {self.slowdown.value}x, {self.steps.value}-step windows")
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
        text = html.escape(trigger_line(state))
        if self.trigger_state.value != text:
            self.trigger_state.value = text

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
            repr(frame.attrs.get("stalled")),  # a stall drawn as it grows
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
            self.trigger_state.value = html.escape(f"heat map failed: {exc}")

    def wait(self, timeout: float = 10.0) -> None:
        """Wait for a heat map being drawn (tests, and closing the panel)."""
        render = self._render
        if render is not None and render is not threading.current_thread():
            render.join(timeout)
