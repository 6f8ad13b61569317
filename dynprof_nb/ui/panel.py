"""``dynprof_nb.panel(job)``: an ipywidgets panel over ``Job`` and ``TraceWindow``.

* A form with one widget per ``ProfilerConfig`` key, chosen from the key's trait type and
  generated from the schema (no hand-written list). The widgets are ``traitlets.link``-ed to a
  draft object; **Apply** checks the draft and writes it to the job in one segment write (an
  error shows next to its field and nothing is written); **Revert** reloads the job's config.
* A live table of ranks and the window's progress, refreshed by a background poller that only
  sets widget traits (it never prints or displays) and stops when the panel is closed.
* The job's windows, with **Load** and **Summary** rendering into an Output area.

Frontends without widgets show the text repr (the job and its ranks).
"""

from __future__ import annotations

import base64
import html
import io
import threading
from typing import Any

import ipywidgets as widgets
import traitlets

from dynprof_nb.config import (
    Choice,
    ChoiceList,
    ConfigError,
    ProfilerConfig,
    RankList,
    StrictBool,
    StrictInt,
    StrList,
    coerce_cli_value,
)
from dynprof_nb.control.status import status_view

__all__ = ["Panel", "panel"]

STATUS_SHOWN = ["rank", "node", "pid", "step", "state", "window", "generation",
                "heartbeat_age_s", "error"]
LATEST = "latest"
TABLE_STYLE = ("<style>table.dynprof-status td, table.dynprof-status th {padding: 2px 10px;"
               " text-align: right} table.dynprof-status td:last-child {text-align: left;"
               " color: #c62828}</style>")


# -- the form, generated from the schema ------------------------------------------------------

def _draft_trait(trait: traitlets.TraitType) -> traitlets.TraitType:
    """The loose trait a widget edits: any value its widget can hold, checked only on Apply."""
    if isinstance(trait, StrictBool):
        return traitlets.Bool(False)
    if isinstance(trait, StrictInt):
        return traitlets.Int(0)
    if isinstance(trait, ChoiceList):
        return traitlets.Tuple()
    return traitlets.Unicode("")  # Choice, prof_path, and text lists (comma-separated)


def _widget_for(key: str, trait: traitlets.TraitType) -> widgets.ValueWidget:
    """A widget chosen from the trait's type, labelled with the key, its help as tooltip."""
    common = {"description": key, "tooltip": trait.metadata.get("help", ""),
              "style": {"description_width": "150px"},
              "layout": widgets.Layout(width="330px")}
    if isinstance(trait, StrictBool):
        widget = widgets.Checkbox(indent=True, **common)
    elif isinstance(trait, StrictInt):
        widget = widgets.IntText(**common)
    elif isinstance(trait, Choice):
        widget = widgets.Dropdown(options=trait.choices, **common)
    elif isinstance(trait, ChoiceList):
        widget = widgets.SelectMultiple(options=trait.choices, rows=len(trait.choices),
                                        **common)
    elif isinstance(trait, (StrList, RankList)):
        widget = widgets.Text(placeholder="comma-separated; empty = none", **common)
    else:
        widget = widgets.Text(**common)
    widget.add_class(f"dynprof-field-{key}")
    return widget


def _to_draft(key: str, value: Any) -> Any:
    trait = ProfilerConfig.class_traits()[key]
    if isinstance(trait, ChoiceList):
        return tuple(value)
    if isinstance(trait, (StrList, RankList)):
        return ",".join(str(v) for v in value)
    return value


def _from_draft(key: str, value: Any) -> Any:
    trait = ProfilerConfig.class_traits()[key]
    if isinstance(trait, ChoiceList):
        return list(value)
    if isinstance(trait, (StrList, RankList)):
        return coerce_cli_value(key, value) if value.strip() else []
    return value


def _error_key(message: str) -> str | None:
    """ConfigError messages start with the key they are about (``stop_step: got ...``)."""
    head = message.split(":", 1)[0].strip()
    return head if head in ProfilerConfig.keys() else None


Draft = type("Draft", (traitlets.HasTraits,), {
    key: _draft_trait(trait) for key, trait in ProfilerConfig.class_traits().items()
})
Draft.__doc__ = "The form's values as the widgets hold them (checked only on Apply)."


class Panel(widgets.VBox):
    """The panel of one job. Close it (``panel.close()``) to stop its poller."""

    def __init__(self, job: Any, interval: float = 1.0, poll: bool = True) -> None:
        self.job = job
        self.interval = interval
        self.trace: Any = None  # the last TraceWindow loaded with Load or Summary
        self.draft = Draft()
        traits = ProfilerConfig.class_traits()
        self.fields = {k: _widget_for(k, traits[k]) for k in ProfilerConfig.keys()}
        self.errors = {k: widgets.HTML(layout=widgets.Layout(width="auto"))
                       for k in self.fields}
        self.links = [traitlets.link((w, "value"), (self.draft, k))
                      for k, w in self.fields.items()]
        self.apply_button = widgets.Button(description="Apply", button_style="primary",
                                           tooltip="check the form and send it to every rank")
        self.revert_button = widgets.Button(description="Revert",
                                            tooltip="reload the job's current config")
        self.apply_button.add_class("dynprof-apply")
        self.revert_button.add_class("dynprof-revert")
        self.message = widgets.HTML()
        self.message.add_class("dynprof-message")
        self.progress = widgets.FloatProgress(min=0.0, max=1.0, description="window",
                                              bar_style="info")
        self.progress_label = widgets.Label()
        self.ranks = widgets.HTML()
        self.ranks.add_class("dynprof-ranks")
        self.window_list = widgets.Select(options=[("latest complete window", LATEST)],
                                          value=LATEST, rows=6,
                                          layout=widgets.Layout(width="95%"))
        self.load_button = widgets.Button(description="Load", tooltip="load into panel.trace")
        self.summary_button = widgets.Button(description="Summary",
                                             tooltip="summary and plots of the window")
        self.output = widgets.Output()
        self.apply_button.on_click(lambda _b: self.apply())
        self.revert_button.on_click(lambda _b: self.revert())
        self.load_button.on_click(lambda _b: self.show(summary=False))
        self.summary_button.on_click(lambda _b: self.show(summary=True))

        rows = [widgets.HBox([w, self.errors[k]]) for k, w in self.fields.items()]
        half = (len(rows) + 1) // 2
        form = widgets.HBox([widgets.VBox(rows[:half]), widgets.VBox(rows[half:])])
        super().__init__(children=[
            widgets.HTML(f"<b>dynprof</b> job <code>{html.escape(job.name)}</code>"),
            widgets.HBox([self.progress, self.progress_label]),
            self.ranks,
            widgets.HTML("<b>Config</b>"), form,
            widgets.HBox([self.apply_button, self.revert_button, self.message]),
            widgets.HTML("<b>Windows</b>"), self.window_list,
            widgets.HBox([self.load_button, self.summary_button]),
            self.output,
        ])
        self.add_class("dynprof-panel")
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.revert()
        self.refresh(windows=True)
        if poll:
            self._thread = threading.Thread(target=self._poll, name="dynprof_nb-panel",
                                            daemon=True)
            self._thread.start()

    # -- config ---------------------------------------------------------------------------

    def revert(self) -> None:
        """Load the job's current config into the form; clear the errors."""
        cfg = self.job.config
        with self.draft.hold_trait_notifications():
            for key in ProfilerConfig.keys():
                setattr(self.draft, key, _to_draft(key, getattr(cfg, key)))
        self._show_errors({})
        self.message.value = ""

    def check(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The form as config values, and the error of each field that is wrong."""
        values: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for key in ProfilerConfig.keys():
            try:
                value = _from_draft(key, getattr(self.draft, key))
                ProfilerConfig(**{key: value})  # this key alone
                values[key] = value
            except ConfigError as exc:
                errors[key] = str(exc)
        if not errors:
            try:
                ProfilerConfig(**values).validate()  # the window as a whole
            except ConfigError as exc:
                errors[_error_key(str(exc)) or "start_step"] = str(exc)
        return values, errors

    def apply(self) -> int | None:
        """Send the changed keys to the job in one write; returns the new generation.

        Nothing is written when a field is wrong: its error shows next to it.
        """
        values, errors = self.check()
        self._show_errors(errors)
        if errors:
            self._say(f"not applied: {len(errors)} field(s) to fix", error=True)
            return None
        current = self.job.config.to_dict()
        changes = {k: v for k, v in values.items() if v != current[k]}
        if not changes:
            self._say("nothing changed")
            return None
        try:
            gen = self.job.set(**changes)
        except (ConfigError, ValueError, RuntimeError) as exc:
            key = _error_key(str(exc))
            if key:
                self._show_errors({key: str(exc)})
            self._say(f"not applied: {exc}", error=True)
            return None
        self._say(f"applied {', '.join(changes)} (generation {gen})")
        self.refresh()
        return gen

    def _show_errors(self, errors: dict[str, str]) -> None:
        for key, box in self.errors.items():
            text = errors.get(key, "")
            box.value = (f'<span style="color:#c62828" title="{html.escape(text)}">'
                         f"{html.escape(text)}</span>" if text else "")

    def _say(self, text: str, error: bool = False) -> None:
        color = "#c62828" if error else "#2e7d32"
        self.message.value = f'<span style="color:{color}">{html.escape(text)}</span>'

    # -- live status ----------------------------------------------------------------------

    def refresh(self, windows: bool = False) -> None:
        """Re-read the ranks (and, with ``windows``, the window list); sets traits only."""
        with self._lock:
            status = self.job.status()
            table = TABLE_STYLE + status_view(status[STATUS_SHOWN]).to_html(
                index=False, border=0, na_rep="", classes="dynprof-status")
            if self.ranks.value != table:
                self.ranks.value = table
            done, total = self.job.progress()
            cfg = self.job.config
            self.progress.value = done / total if total else 0.0
            self.progress.bar_style = "success" if total and done >= total else "info"
            window = f"steps {cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "none"
            self.progress_label.value = (f"{window}: {done}/{total} rank-steps, "
                                         f"generation {self.job.generation}")
            if windows:
                self._refresh_windows()

    def _refresh_windows(self) -> None:
        frame = self.job.windows()
        options = [("latest complete window", LATEST)] + [
            (f"{i}: rank {r.rank}  steps {r.start}-{r.stop}  {r.status}  {r.backend or ''}", i)
            for i, r in enumerate(frame.itertuples())
        ]
        if list(self.window_list.options) != options:
            chosen = self.window_list.value
            self.window_list.options = options
            values = [v for _, v in options]
            self.window_list.value = chosen if chosen in values else LATEST

    def _poll(self) -> None:
        """Background refresh: sets traits only; ends when the panel closes."""
        n = 0
        while not self._stop.wait(self.interval):
            if self.comm is None:  # closed
                return
            try:
                self.refresh(windows=n % 3 == 0)
            except Exception as exc:  # shown in the panel, never printed from this thread
                self.progress_label.value = f"refresh failed: {exc}"
            n += 1

    def close(self) -> None:
        """Stop the poller and close every widget of the panel (idempotent)."""
        stop = getattr(self, "_stop", None)
        if stop is None or stop.is_set():
            super().close()
            return
        stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        for link in self.links:
            link.unlink()
        for widget in _descendants(self):
            widget.close()
        super().close()

    @property
    def polling(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- windows --------------------------------------------------------------------------

    def show(self, summary: bool = True) -> Any:
        """Load the selected window into ``self.trace`` and render it (with plots) below."""
        choice = self.window_list.value
        out = self.output
        out.clear_output()
        try:
            trace = self.job.load(None if choice in (LATEST, None) else int(choice))
        except Exception as exc:
            out.append_stdout(f"could not load the window: {exc}\n")
            return None
        self.trace = trace
        if summary:
            out.append_display_data(trace.summary())
            _show_figures(trace, out)
        else:
            out.append_display_data(trace)
            out.append_stdout("loaded into panel.trace\n")
        return trace

    # -- text repr for frontends without widgets ------------------------------------------

    def __repr__(self) -> str:
        try:
            status = status_view(self.job.status()[STATUS_SHOWN]).to_string(index=False)
            done, total = self.job.progress()
        except Exception as exc:
            return f"<dynprof panel for job {self.job.name!r}: {exc}>"
        return (f"{self.job!r}\nwindow progress: {done}/{total} rank-steps\n{status}\n"
                "(the interactive panel needs a frontend with ipywidgets)")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is not None:
            bundle["text/plain"] = repr(self)
        return bundle


def _descendants(widget: widgets.Widget) -> list[widgets.Widget]:
    out = []
    for child in getattr(widget, "children", ()):
        out.append(child)
        out.extend(_descendants(child))
    return out


def _show_figures(trace: Any, out: widgets.Output) -> None:
    """The window's standard plots as PNGs (whatever matplotlib backend is active); a plot that has nothing to show (no
    memory recorded, say) is replaced by a one-line note."""
    import matplotlib.pyplot as plt

    for name in ("plot_timeline", "plot_ops", "plot_steps", "plot_memory"):
        try:
            figure = getattr(trace, name)()
        except Exception as exc:
            out.append_stdout(f"{name}: {exc}\n")
            continue
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", bbox_inches="tight", dpi=80)
        plt.close(figure)
        png = base64.b64encode(buffer.getvalue()).decode("ascii")
        out.outputs += ({"output_type": "display_data", "metadata": {},
                         "data": {"image/png": png, "text/plain": f"<{name} figure>"}},)


def panel(job: Any, interval: float = 1.0) -> Panel:
    """The interactive panel of ``job`` (a ``Job`` or a job name)."""
    if isinstance(job, str):
        from dynprof_nb.control.registry import attach

        job = attach(job)
    return Panel(job, interval=interval)
