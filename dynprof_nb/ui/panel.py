"""``dynprof_nb.panel(job)``: an ipywidgets panel over a controller and its windows.

* A form generated from ``ProfilerConfig`` (each trait names its kind of field), grouped into
  the window, what to record, and an **Ascend** section for the keys only MindSpore and
  torch_npu on Ascend use. Text fields sync as you type, so what you see is what Apply sends.
* **Apply sends only the fields you edited** since the form last matched the job's config.
  The form follows the job live: a key changed elsewhere (a cell, the CLI, another panel)
  updates its field unless you are editing it; if you are, Apply refuses that edit with
  "changed since you loaded it: Revert?" instead of undoing the other change. Apply echoes
  what it wrote (``applied stop_step=209, mstx=True``). ``+N`` steps are relative to the most
  advanced rank. **Stop window** ends or cancels the window and says which.
* Errors ("not a number") stay under their field in a fixed-height line: the form never
  reflows.
* A live table of ranks and the window's progress, refreshed by a background poller that only
  sets widget traits (it never prints or displays) and stops when the panel is closed.
* A "Step times" section: the ranks' recent step times as a heat map (at most once a second,
  drawn off the refresh), **Keep recent steps** (``job.recent(N)``, rendered below with its
  ``explain()``) and the trigger's Arm / Disarm (``dynprof_nb.ui.steppanel``).
* One row per window (steps, ranks done/total, the config it was recorded with) with
  **Load**, **Summary**, **Compare** and **Advice** (``w.advise()``), rendering into an Output
  area.

Frontends without widgets show the text repr (the job and its ranks).
"""

from __future__ import annotations

import base64
import io
import threading
import warnings
from typing import Any

import ipywidgets as widgets
import traitlets

from dynprof_nb.contract.config import ConfigError, ProfilerConfig
from dynprof_nb.contract.window_dirs import describe_config
from dynprof_nb.control.status import status_view
from dynprof_nb.safetext import escape, frame_html
from dynprof_nb.ui.formsync import FormSync
from dynprof_nb.ui.steppanel import StepTimesSection

__all__ = ["Panel", "panel"]

STATUS_SHOWN = [
    "rank",
    "node",
    "pid",
    "step",
    "state",
    "window",
    "generation",
    "run",
    "heartbeat_age_s",
    "error",
]
TABLE_STYLE = (
    "<style>table.dynprof-status td, table.dynprof-status th {padding: 2px 10px;"
    " text-align: right} table.dynprof-status td:last-child {text-align: left;"
    " color: #c62828}</style>"
)
NOTE = "note: "  # the Monitor's prefix of a message that informs, not an error


def with_notes(status: Any) -> Any:
    """The status rows with notes (errors that start with :data:`NOTE`: a cost, a choice made)
    moved to a ``note`` column before ``error``, so the red error column holds errors only."""
    if "error" not in status:
        return status
    status = status.copy()
    errors = status["error"].fillna("").astype(str)
    is_note = errors.str.startswith(NOTE)
    status.insert(len(status.columns) - 1, "note", errors.where(is_note, "").str.slice(len(NOTE)))
    status["error"] = errors.where(~is_note, "")
    return status


WINDOW_KEYS = ("start_step", "stop_step")
WINDOW_ROWS = 12  # newest windows listed
FIELD_WIDTH = "320px"
CELL_WIDTH = "335px"  # a field and its border: three fit JupyterLab's default notebook width
LABEL_WIDTH = "150px"
GRID_COLUMNS = f"repeat(auto-fill, {CELL_WIDTH})"
ERROR_STYLE = (
    "display:block; white-space:nowrap; overflow:hidden; text-overflow:ellipsis;"
    " font-size:11px; line-height:14px; color:#c62828"
)
CONFLICT = "changed since you loaded it"


# -- the form, generated from the schema ------------------------------------------------------


#: the keys only MindSpore's profiler reads (training/backends/mindspore.py): a job recording
#: with torch or the built-in backend shows them folded with the Ascend-only keys, so that a
#: PyTorch user is not offered MindSpore's output choices as if they applied
MINDSPORE_ONLY = (
    "export_type",
    "analyse",
    "analyse_mode",
    "data_simplification",
    "mstx",
    "mstx_domain_include",
    "mstx_domain_exclude",
    "parallel_strategy",
)
#: the backends that read none of the Ascend or MindSpore-only keys
NOT_ASCEND = ("torch", "builtin")


def sections(backend: str | None = None) -> list[tuple[str, list[str]]]:
    """The form's sections: the window, the rest in schema order, and the Ascend-only keys
    (those whose help says so, plus ``host_sys``, which only msprof on Ascend collects); for a
    job known to record with torch or the built-in backend, MindSpore's own keys with them."""
    traits = ProfilerConfig.class_traits()
    window = [k for k in ProfilerConfig.keys() if k in WINDOW_KEYS or k == "ranks"]
    ascend = [
        k
        for k in ProfilerConfig.keys()
        if "(Ascend)" in traits[k].metadata.get("help", "")
        or k == "host_sys"
        or (backend in NOT_ASCEND and k in MINDSPORE_ONLY)
    ]
    rest = [k for k in ProfilerConfig.keys() if k not in window and k not in ascend]
    return [("Window", window), ("Recording and output", rest), ("Ascend", ascend)]


def job_backend(job: Any) -> str | None:
    """The profiler the job's ranks record with, as its newest window says (``torch``,
    ``builtin``, ``mindspore``); None before its first window, or where the handle lists none."""
    try:
        groups = window_groups(job.windows())
    except Exception:  # a handle that cannot list windows: the form keeps every section
        return None
    for group in groups:  # newest first
        backend = str(group.get("backend") or "")
        if backend:
            return backend.split()[0]
    return None


def recorder_set_by_monitor(job: Any) -> bool:
    """Whether a live rank's Flight Recorder is on though the job's config leaves it off: its
    Monitor set it (``Monitor(flight_recorder=True)``), which no config edit turns off."""
    from dynprof_nb.control.hang import wants_report

    try:
        return not job.config.flight_recorder and wants_report(job)
    except Exception:  # no stack directory, a file-mode job: nothing announced
        return False


class Toggles(widgets.HBox):
    """A multiple choice as toggle buttons (no Ctrl-click list): ``value`` is the tuple of
    the chosen options, in their order."""

    value = traitlets.Tuple()

    def __init__(self, options: tuple[str, ...], description: str = "", tooltip: str = "") -> None:
        self.options = tuple(options)
        self.description = description
        self.buttons = [
            widgets.ToggleButton(
                description=o, tooltip=tooltip, layout=widgets.Layout(width="auto")
            )
            for o in self.options
        ]
        label = widgets.Label(
            description, tooltip=tooltip, layout=widgets.Layout(width=LABEL_WIDTH)
        )
        # no tooltip on the box itself: JupyterLab's Box view fails to render with one
        super().__init__([label, *self.buttons], layout=widgets.Layout(width=FIELD_WIDTH))
        self.tooltip_text = tooltip
        self._syncing = False
        for button in self.buttons:
            button.observe(self._from_buttons, "value")

    def _from_buttons(self, _change: Any) -> None:
        self._paint()
        if not self._syncing:
            self.value = tuple(
                o for o, b in zip(self.options, self.buttons, strict=True) if b.value
            )

    @traitlets.observe("value")
    def _to_buttons(self, change: Any) -> None:
        self._syncing = True
        try:
            for option, button in zip(self.options, self.buttons, strict=True):
                button.value = option in change["new"]
        finally:
            self._syncing = False
        self._paint()

    def _paint(self) -> None:
        """Chosen options in colour: a pressed grey button is easy to miss."""
        for button in self.buttons:
            style = "info" if button.value else ""
            if button.button_style != style:
                button.button_style = style


class TextField(widgets.Text):
    """A text field that also takes a number or a list from code (``field.value = 209``),
    as the form's text: steps and lists are typed, then parsed on Apply."""

    value = traitlets.CUnicode(help="String value").tag(sync=True)


def _widget_for(key: str, trait: traitlets.TraitType) -> widgets.Widget:
    """A widget chosen from the kind of field the trait declares, labelled with the key."""
    help_text = trait.metadata.get("help", "")
    kind = getattr(trait, "widget", "text")
    common = {
        "description": key,
        "tooltip": help_text,
        "style": {"description_width": LABEL_WIDTH},
        "layout": widgets.Layout(width=FIELD_WIDTH),
    }
    if kind == "checkbox":
        widget: widgets.Widget = widgets.Checkbox(indent=True, **common)
    elif kind == "dropdown":
        widget = widgets.Dropdown(options=trait.choices, **common)
    elif kind == "toggles":
        widget = Toggles(trait.choices, key, help_text)
    else:  # int and text: typed text, synced on every keystroke, parsed on Apply
        # short enough to show whole in a 320 px field
        hint = {
            "start_step": "step, or +N from now",
            "stop_step": "step, or +N from now",
            "ranks": "e.g. 0,3; empty = all",
        }
        placeholder = hint.get(key) or (
            "a,b,...; empty = none" if isinstance(trait.default_value, list) else ""
        )
        widget = TextField(continuous_update=True, placeholder=placeholder, **common)
    widget.add_class(f"dynprof-field-{key}")
    return widget


def _form_trait(trait: traitlets.TraitType) -> traitlets.TraitType:
    kind = getattr(trait, "widget", "text")
    if kind == "checkbox":
        return traitlets.Bool(False)
    if kind == "toggles":
        return traitlets.Tuple()
    return traitlets.CUnicode("")


Draft = type(
    "Draft",
    (traitlets.HasTraits,),
    {key: _form_trait(trait) for key, trait in ProfilerConfig.class_traits().items()},
)
Draft.__doc__ = "The form's values as the widgets hold them (text as typed; parsed on Apply)."


def to_form(key: str, value: Any) -> Any:
    """A config value as its field holds it."""
    trait = ProfilerConfig.class_traits()[key]
    kind = getattr(trait, "widget", "text")
    if kind in ("checkbox", "dropdown"):
        return value
    if kind == "toggles":
        return tuple(value)
    return trait.to_string(value) if hasattr(trait, "to_string") else str(value)


def from_form(key: str, value: Any) -> Any:
    """A field's value as a config value (``"+N"`` kept for the window's steps); raises
    ConfigError naming the key ("not a number")."""
    trait = ProfilerConfig.class_traits()[key]
    kind = getattr(trait, "widget", "text")
    if kind in ("checkbox", "dropdown"):
        return value
    if kind == "toggles":
        return list(value)
    text = str(value).strip()
    if key in WINDOW_KEYS and text and (text.startswith("+") or not text.lstrip("-").isdigit()):
        # "1O" gets the same sentence as "+x": the window's steps, not "an integer >= -1"
        if not text.startswith("+") or not text[1:].isdigit():
            raise ConfigError(
                f"{key}: {value!r} is not a number; expected a step like 20 or "
                "+10 (ten steps from now)."
            )
        return text
    if not text:
        if isinstance(trait.default_value, list):
            return []
        if kind == "int":
            raise ConfigError(f"{key}: empty; expected a number.")
    return trait.from_string(text if kind != "text" else str(value))


def _error_key(message: str) -> str | None:
    """ConfigError messages start with the key they are about (``stop_step: got ...``)."""
    head = message.split(":", 1)[0].strip()
    if head in ("start", "stop"):
        head += "_step"
    return head if head in ProfilerConfig.keys() else None


def _fmt(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


class Panel(widgets.VBox):
    """The panel of one job. Close it (``panel.close()``) to stop its poller."""

    def __init__(self, job: Any, interval: float = 1.0, poll: bool = True) -> None:
        self.job = job
        self.interval = interval
        self.trace: Any = None  # the last TraceWindow loaded with Load, Summary or Compare
        self._make_form()
        self._base: dict[str, Any] = {}  # the job's values when the form last matched them
        self._make_buttons()
        self._make_views()
        self.step_section = StepTimesSection(job, self._say, show=self.show_record)
        boxes = self._section_boxes()
        super().__init__(
            children=[
                widgets.HTML(f"<b>dynprof</b> job <code>{escape(job.name)}</code>"),
                widgets.HBox([self.progress, self.progress_label]),
                self.stall,
                self.ranks,
                *boxes,
                widgets.HBox(
                    [self.apply_button, self.revert_button, self.stop_button, self.stacks_button]
                ),
                self.message,
                FormSync(self.fields),
                self.step_section,
                widgets.HTML("<b>Windows</b> (newest first)"),
                self.window_rows,
                self.output,
            ]
        )
        self.add_class("dynprof-panel")
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.revert()
        self.refresh(windows=True)
        if poll:
            self._thread = threading.Thread(target=self._poll, name="dynprof_nb-panel", daemon=True)
            self._thread.start()

    def _make_form(self) -> None:
        """The config fields (one widget per key, linked to the draft) and their error lines."""
        self.draft = Draft()
        traits = ProfilerConfig.class_traits()
        self.fields = {k: _widget_for(k, traits[k]) for k in ProfilerConfig.keys()}
        self.errors = {
            k: widgets.HTML(
                layout=widgets.Layout(width=FIELD_WIDTH, height="16px", overflow="hidden")
            )
            for k in self.fields
        }
        for key, box in self.errors.items():
            box.add_class(f"dynprof-error-{key}")
        self.links = [traitlets.link((w, "value"), (self.draft, k)) for k, w in self.fields.items()]
        self._recorder_by_monitor = recorder_set_by_monitor(self.job)
        if self._recorder_by_monitor:
            recorder = self.fields["flight_recorder"]
            recorder.disabled = True
            recorder.tooltip = "on: the job's Monitor(flight_recorder=True) set it"
            recorder.description = "flight_recorder (set by the Monitor)"

    def _make_buttons(self) -> None:
        """Apply, Revert, Stop and Stacks, wired to their methods."""
        self.apply_button = self._button(
            "Apply", "send the fields you edited to every rank", "primary"
        )
        self.revert_button = self._button("Revert", "reload the job's current config")
        self.stop_button = self._button(  # "Stop" alone read as stopping the job or the panel
            "Stop window",
            "stop the current window now (what was recorded is saved) or cancel a pending one; "
            "training goes on",
            "warning",
            css="stop",
        )
        self.stacks_button = self._button(
            "Stacks",
            "where every thread of every live rank is now (even a rank stuck in C code), merged",
        )
        self.apply_button.on_click(lambda _b: self.apply())
        self.revert_button.on_click(lambda _b: self.revert())
        self.stop_button.on_click(lambda _b: self.stop())
        self.stacks_button.on_click(lambda _b: self.stacks())

    def _make_views(self) -> None:
        """What the panel shows of the job: its stall, message, window progress, ranks, windows."""
        self.stacks_frame: Any = None  # the last stacks taken with the Stacks button
        self.hang_report: Any = None  # and the hang report, where a rank records collectives
        self.stall = widgets.HTML()  # "stalled since step N (X s)" while the job is stalled
        self.stall.add_class("dynprof-stall")
        self.message = widgets.HTML(layout=widgets.Layout(min_height="20px"))
        self.message.add_class("dynprof-message")
        self.progress = widgets.FloatProgress(
            min=0.0, max=1.0, description="window", bar_style="info"
        )
        self.progress_label = widgets.Label()
        self.progress_label.add_class("dynprof-progress")
        self.ranks = widgets.HTML(layout=widgets.Layout(max_height="240px", overflow="auto"))
        self.ranks.add_class("dynprof-ranks")
        self.window_rows = widgets.VBox(layout=widgets.Layout(max_height="320px", overflow="auto"))
        self.window_rows.add_class("dynprof-windows")
        self.windows: list[dict[str, Any]] = []  # what window_rows shows, newest first
        self.output = widgets.Output()
        self.output.add_class("dynprof-output")

    def _section_boxes(self) -> list[widgets.Widget]:
        """The fields in their sections, as many columns as fit (Ascend's folded; with it,
        for a job that records with torch or the built-in backend, MindSpore's own keys)."""
        backend = job_backend(self.job)
        boxes = []
        for title, keys in sections(backend):
            cells = [
                widgets.VBox(
                    [self.fields[k], self.errors[k]],
                    layout=widgets.Layout(width=CELL_WIDTH, overflow="hidden"),
                )
                for k in keys
            ]
            # as many columns as fit (3 on a wide notebook): a fixed 3 overflowed JupyterLab's
            # default notebook width and put a scroll bar under each section
            grid = widgets.GridBox(
                cells,
                layout=widgets.Layout(grid_template_columns=GRID_COLUMNS, grid_gap="2px 16px"),
            )
            if title == "Ascend":
                folded = "Ascend: used by MindSpore and torch_npu on Ascend only"
                if backend in NOT_ASCEND:
                    folded = f"Ascend and MindSpore only: not read by this job's {backend} profiler"
                box = widgets.Accordion([grid], titles=(folded,))
                box.selected_index = None
                self.ascend = box
            else:
                box = widgets.VBox([widgets.HTML(f"<b>{escape(title)}</b>"), grid])
            box.add_class(f"dynprof-section-{title.split()[0].lower()}")
            boxes.append(box)
        return boxes

    @staticmethod
    def _button(name: str, tooltip: str, style: str = "", css: str = "") -> widgets.Button:
        button = widgets.Button(description=name, tooltip=tooltip, button_style=style)
        button.add_class(f"dynprof-{css or name.lower()}")
        return button

    # -- config ---------------------------------------------------------------------------

    def _job_form(self) -> dict[str, Any]:
        cfg = self.job.config
        form = {k: to_form(k, getattr(cfg, k)) for k in ProfilerConfig.keys()}
        if self._recorder_by_monitor:  # on as the Monitor set it, whatever the config says
            form["flight_recorder"] = True
        return form

    def edited(self) -> list[str]:
        """The fields whose value differs from the job's config as the form last saw it."""
        return [k for k in ProfilerConfig.keys() if getattr(self.draft, k) != self._base.get(k)]

    def revert(self) -> None:
        """Load the job's current config into the form; clear the errors and edits."""
        with self._lock:
            current = self._job_form()
            with self.draft.hold_trait_notifications():
                for key, value in current.items():
                    setattr(self.draft, key, value)
            self._base = current
            self._show_errors({})
            self.message.value = ""

    def follow(self) -> list[str]:
        """Bring the form up to date with the job (the poller calls this): a key changed
        elsewhere updates its field unless the field is being edited; an edited field that
        the job changed too is marked as a conflict. Returns the keys updated."""
        with self._lock:
            current = self._job_form()
            updated, conflicts = [], {}
            for key, now in current.items():
                base, mine = self._base.get(key), getattr(self.draft, key)
                if now == base:
                    continue
                if mine == base:  # not being edited: follow the job
                    setattr(self.draft, key, now)
                    self._base[key] = now
                    updated.append(key)
                elif mine == now:  # edited to what the job now has anyway
                    self._base[key] = now
                else:
                    conflicts[key] = f"{CONFLICT} (now {_fmt(now)}): Revert?"
            if conflicts:
                self._show_errors(conflicts, keep=True)
            return updated

    def check(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The edited fields as config values, and the error of each edited field that is
        wrong (an edit that conflicts with a change made elsewhere is an error too)."""
        current = self._job_form()
        values: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for key in self.edited():
            mine = getattr(self.draft, key)
            if current[key] != self._base.get(key) and mine != current[key]:
                errors[key] = f"{CONFLICT} (now {_fmt(current[key])}): Revert?"
                continue
            try:
                value = from_form(key, mine)
                if not (key in WINDOW_KEYS and isinstance(value, str)):
                    ProfilerConfig(**{key: value})  # this key alone
                values[key] = value
            except ConfigError as exc:
                errors[key] = str(exc)
        return values, errors

    def apply(self) -> int | None:
        """Send the edited fields to the job in one write; returns the new generation.

        Nothing is written when an edited field is wrong or conflicts with a change made
        elsewhere: its error shows under it. Keys nobody edited here are never sent, so a
        key set from a cell and a window started from a cell survive.
        """
        with self._lock:
            self.follow()
            values, errors = self.check()
            self._show_errors(errors)
            if errors:
                conflict = [k for k, e in errors.items() if CONFLICT in e]
                if conflict:
                    what = (
                        f"{', '.join(conflict)} changed since you loaded it: Revert? (the "
                        "job's new value shows under the field)"
                    )
                else:
                    what = (
                        next(iter(errors.values()))
                        if len(errors) == 1
                        else f"fix the fields marked ({', '.join(errors)})"
                    )
                self._say(f"not applied: {what}", error=True)
                return None
            if not values:
                self._say("nothing changed")
                return None
            try:
                gen = self.job.set(**values)
            except (ConfigError, ValueError, RuntimeError) as exc:
                key = _error_key(str(exc))
                self._show_errors({key: str(exc)} if key else {})
                self._say(f"not applied: {exc}", error=True)
                return None
            current = self._job_form()
            for key in values:  # "+10" becomes the step it meant
                setattr(self.draft, key, current[key])
            self._base = current
            written = ", ".join(f"{k}={_fmt(getattr(self.job.config, k))}" for k in values)
            self._say(f"applied {written} (config edit #{gen})")
        self.refresh()
        return gen

    def stop(self) -> int | None:
        """End or cancel the job's window; the message says what it stopped, or that there
        was nothing."""
        try:
            what = self.job.describe_stop()
            gen = self.job.stop()
        except (ConfigError, ValueError, RuntimeError) as exc:
            self._say(f"not stopped: {exc}", error=True)
            return None
        self._say(f"{what} (config edit #{gen})")
        with self._lock:
            self.follow()
            # the person's own Stop is no conflict with a window they are typing: their text
            # stays an edit against the job's new (stopped) steps, and Apply sends it
            current = self._job_form()
            for key in WINDOW_KEYS:
                self._base[key] = current[key]
        self.refresh()
        return gen

    def stacks(self) -> Any:
        """Take every rank's stacks and show the merged tree below (kept in
        ``self.stacks_frame``)."""
        from dynprof_nb.control.hang import wants_report

        self.output.clear_output()
        try:
            # a rank with its Flight Recorder on: the hang report, its stacks below it
            self.hang_report = self.job.hang_report() if wants_report(self.job) else None
            frame = self.hang_report.stacks if self.hang_report else self.job.stacks()
        except Exception as exc:
            self._say(f"no stacks: {exc}", error=True)
            return None
        self.stacks_frame = frame
        if self.hang_report is not None:
            self.output.append_display_data(self.hang_report.findings_html())
        self.output.append_display_data(frame.tree())
        self._say(
            f"stacks of {frame['rank'].nunique()} rank(s)"
            + (f", {len(frame.silent)} silent" if frame.silent else "")
            + "; in panel.stacks_frame"
        )
        return frame

    def _show_errors(self, errors: dict[str, str], keep: bool = False) -> None:
        for key, box in self.errors.items():
            text = errors.get(key)
            if text is None and keep:
                continue
            # under its field the key is redundant and pushed the useful end out of the line
            short = text.removeprefix(f"{key}: ") if text else ""
            box.value = (
                f'<span style="{ERROR_STYLE}" title="{escape(text)}">{escape(short)}</span>'
                if text
                else ""
            )

    def _say(self, text: str, error: bool = False) -> None:
        color = "#c62828" if error else "#2e7d32"
        self.message.value = f'<span style="color:{color}">{escape(text)}</span>'

    # -- live status ----------------------------------------------------------------------

    def refresh(self, windows: bool = False) -> None:
        """Re-read the ranks (and, with ``windows``, the window list); sets traits only."""
        with self._lock:
            status = self.job.status()
            table = TABLE_STYLE + frame_html(
                status_view(with_notes(status[STATUS_SHOWN])),
                index=False,
                border=0,
                na_rep="",
                classes="dynprof-status",
            )
            if self.ranks.value != table:
                self.ranks.value = table
            stalled = sorted(  # the first rank to stop leads: the others wait for it
                (
                    "the first rank to stop" not in e,
                    (f"rank {r}: " if r >= 0 else "") + e.split(": job.stacks")[0],
                )
                for r, e in zip(status["rank"], status["error"].fillna(""), strict=True)
                if "stalled since" in e
            )
            banner = (
                f'<span style="{ERROR_STYLE}">{escape(stalled[0][1].split("; ")[0])}'
                + ("; the first rank to stop" if not stalled[0][0] else "")
                + "</span>"
                if stalled
                else ""
            )
            if self.stall.value != banner:
                self.stall.value = banner
            self.step_section.refresh()
            done, total = self.job.progress()
            cfg = self.job.config
            self.progress.value = done / total if total else 0.0
            self.progress.bar_style = "success" if total and done >= total else "info"
            options = getattr(self.job, "window_options", {})
            only = (
                f"; this window only: {', '.join(f'{k}={_fmt(v)}' for k, v in options.items())}"
                if options
                else ""
            )
            if cfg.has_window:
                self.progress_label.value = (
                    f"steps {cfg.start_step}-{cfg.stop_step}: {done}/{total} rank-steps, "
                    f"config edit #{self.job.generation}{only}"
                )
            else:  # not "none: 0/0 rank-steps"
                self.progress_label.value = (
                    f"no window asked for (config edit #{self.job.generation})"
                )
            if windows:
                self._refresh_windows()

    def _refresh_windows(self) -> None:
        groups = window_groups(self.job.windows())[:WINDOW_ROWS]
        if [g["key"] for g in groups] == [g["key"] for g in self.windows] and all(
            g["label"] == o["label"] for g, o in zip(groups, self.windows, strict=True)
        ):
            return
        old = self.window_rows.children
        self.windows = groups
        self.window_rows.children = [self._window_row(i, g) for i, g in enumerate(groups)] or [
            widgets.HTML("<i>no window on disk yet</i>")
        ]
        for row in old:
            for widget in [*_descendants(row), row]:
                widget.close()
        backends = {g["backend"] for g in groups}
        if "mindspore" in backends and self.ascend.selected_index is None:
            self.ascend.selected_index = 0

    def _window_row(self, index: int, group: dict[str, Any]) -> widgets.HBox:
        label = widgets.HTML(escape(group["label"]), layout=widgets.Layout(width="640px"))
        buttons = []
        for name, tip, action in (
            ("Load", "load this window into panel.trace", lambda: self.show(index, summary=False)),
            ("Summary", "summary and plots of this window", lambda: self.show(index)),
            (
                "Compare",
                "compare with the window loaded last (or the one before this)",
                lambda: self.compare(index),
            ),
            (
                "Advice",
                "what msprof-analyze's advisor and HTA would flag here (w.advise())",
                lambda: self.advise(index),
            ),
        ):
            button = widgets.Button(
                description=name, tooltip=tip, layout=widgets.Layout(width="90px")
            )
            button.add_class(f"dynprof-window-{name.lower()}")
            button.on_click(lambda _b, act=action: act())
            buttons.append(button)
        row = widgets.HBox([label, *buttons])
        row.add_class("dynprof-window-row")
        return row

    def _poll(self) -> None:
        """Background refresh: sets traits only; ends when the panel closes."""
        n = 0
        while not self._stop.wait(self.interval):
            if self.comm is None:  # closed
                return
            try:
                self.follow()
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
        self.step_section.wait(timeout=5)
        for link in self.links:
            link.unlink()
        for widget in _descendants(self):
            widget.close()
        super().close()

    @property
    def polling(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- windows --------------------------------------------------------------------------

    def _load(self, index: int | None) -> Any:
        if index is None or not self.windows:
            return self.job.load()
        group = self.windows[index]
        paths = group["complete"] or group["paths"]
        return self.job.load(paths[0] if len(paths) == 1 else paths)

    def show(self, index: int | None = None, summary: bool = True) -> Any:
        """Load window row ``index`` (default: the latest complete window) into
        ``self.trace`` and render it below: its summary and plots, or just the window."""
        out = _cleared(self.output)
        try:
            trace = self._load(index)
        except Exception as exc:
            out.append_stdout(f"could not load the window: {exc}\n")
            return None
        self.trace = trace
        recorded = describe_config(getattr(trace, "config", None))
        if summary:  # one update: each one re-creates every output the frontend shows
            shown = [_stdout(f"recorded with {recorded}\n")] if recorded else []
            out.outputs = (*shown, _display(trace.summary()), *_figures(trace))
            return trace
        if recorded:
            out.append_stdout(f"recorded with {recorded}\n")
        out.append_display_data(trace)
        out.append_stdout("loaded into panel.trace\n")
        return trace

    def show_record(self, trace: Any) -> None:
        """A recent-steps record kept with "Keep recent steps" (``job.recent(N)``) as
        ``self.trace``, rendered below: why its slow steps were slow (``w.explain()``, against
        its own normal steps) and its summary."""
        self.trace = trace
        out = _cleared(self.output)
        try:
            why = f"why: {trace.explain().text}\n"
        except Exception as exc:  # a record too short to judge: said, the summary still shown
            why = f"why: {exc}\n"
        try:
            out.outputs = (_stdout(why), _display(trace.summary()))
        except Exception as exc:
            out.outputs = (_stdout(why), _stdout(f"no summary: {exc}\n"))

    def advise(self, index: int | None = None) -> Any:
        """Load window row ``index`` into ``self.trace`` and render its findings
        (``w.advise()``; a triggered window's ``w.explain()`` first)."""
        out = _cleared(self.output)
        try:
            trace = self._load(index)
            self.trace = trace
            from dynprof_nb.analysis.explain import explain, triggered_reason

            if triggered_reason(trace):
                try:
                    out.append_stdout(f"why: {explain(trace)}\n")
                except (ValueError, OSError) as exc:
                    out.append_stdout(f"why: {exc}\n")
            findings = trace.advise()
        except Exception as exc:
            out.append_stdout(f"could not advise on the window: {exc}\n")
            return None
        out.append_display_data(findings)
        return findings

    def compare(self, index: int) -> Any:
        """Compare window row ``index`` with the window loaded last (or, when that is the
        same one or none, the window before it): per step per rank (``analysis.compare``),
        saying so; warns when their configs differ in a key that changes timings."""
        from dynprof_nb.analysis.configdiff import config_warning
        from dynprof_nb.analysis.summary import compare

        out = _cleared(self.output)
        try:
            b = self._load(index)
            a = self.trace
            if a is None or str(a.path) == str(b.path):
                if index + 1 >= len(self.windows):
                    out.append_stdout(
                        "nothing to compare with: load another window first, "
                        "or record an earlier one.\n"
                    )
                    return None
                a = self._load(index + 1)
        except Exception as exc:
            out.append_stdout(f"could not load the windows to compare: {exc}\n")
            return None
        self.trace = b
        out.append_stdout(f"a = {_window_name(a)}\nb = {_window_name(b)}\n")
        # a warning raised in a button's callback goes to stderr under the click's message,
        # and the notebook then blanks this Output area: the panel says it here instead
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warning = config_warning(a, b)
            if warning:
                out.append_stdout(f"warning: {warning}\n")
            try:
                table = compare(a, b)
            except Exception as exc:
                out.append_stdout(f"could not compare: {exc}\n")
                return None
        # what the numbers are (per step per rank, or totals for bare traces): the note is
        # also the text of compare's WindowLengthWarning, said once
        note = table.attrs.get("note")
        if note:
            out.append_stdout(f"note: {note}\n")
        for message in {str(w.message) for w in caught} - {warning, note}:
            out.append_stdout(f"warning: {message}\n")
        out.append_display_data(table)
        return table

    # -- text repr for frontends without widgets ------------------------------------------

    def __repr__(self) -> str:
        try:
            status = status_view(self.job.status()[STATUS_SHOWN]).to_string(index=False)
            done, total = self.job.progress()
        except Exception as exc:
            return f"<dynprof panel for job {self.job.name!r}: {exc}>"
        return (
            f"{self.job!r}\nwindow progress: {done}/{total} rank-steps\n{status}\n"
            "(the interactive panel needs a frontend with ipywidgets)"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is not None:
            bundle["text/plain"] = repr(self)
        return bundle


def window_groups(frame: Any) -> list[dict[str, Any]]:
    """``windows()`` rows (one per rank) as one entry per window, newest first: its steps,
    ranks done/total, backend, config, and the rank directories."""
    import pandas as pd

    from dynprof_nb.control.base import SAME_WINDOW_SLACK_S

    if frame is None or not len(frame):
        return []
    groups: list[dict[str, Any]] = []
    slack = pd.Timedelta(seconds=SAME_WINDOW_SLACK_S)
    for row in frame.itertuples():
        started = row.started_at
        group = next(
            (
                g
                for g in groups
                if g["start"] == row.start  # a rank that ended it elsewhere: the same window
                and g["recent"] == (getattr(row, "recent", "") or "")
                and _same_run(g["run"], getattr(row, "run", None))
                and (
                    pd.isna(started)
                    or pd.isna(g["started_at"])
                    or abs(started - g["started_at"]) <= slack
                )
            ),
            None,
        )
        if group is None:
            group = {
                "start": row.start,
                "stop": row.stop,
                "started_at": started,
                "paths": [],
                "complete": [],
                "ranks": [],
                "stops": [],
                "statuses": [],
                "backend": getattr(row, "backend", None),
                "config": getattr(row, "config", "") or "",
                "reason": "",
                "run": getattr(row, "run", None),
                # a recent-steps record's kind ("trigger", "asked"), "" for a window
                "recent": getattr(row, "recent", "") or "",
            }
            groups.append(group)
        group["paths"].append(row.path)
        group["stops"].append(row.stop)
        reason = getattr(row, "reason", "")
        if isinstance(reason, str) and reason and not group["reason"]:
            group["reason"] = reason
        group["ranks"].append(row.rank)
        group["statuses"].append(row.status)
        if row.status == "complete":
            group["complete"].append(row.path)
    for g in groups:
        _label(g)
    return groups[::-1]


def _same_run(a: Any, b: Any) -> bool:
    """Two windows' runs do not tell them apart (equal, or either unknown: an older window)."""
    import pandas as pd

    return a is None or b is None or pd.isna(a) or pd.isna(b) or a == b


# a recent-steps record's kind (training/recent.py) as its row says it
RECORD_WORDS = {
    "trigger": " (kept when the trigger fired)",
    "asked": " (asked for)",
    "hang": " (kept when the job stalled, with its stacks)",
}


def _label(g: dict[str, Any]) -> None:
    """A window group's key and the one line its row shows: when, whether it is a record of
    recent steps (kept after the fact, not recorded by a profiler), the job's run, which steps
    (per rank where they ended it at different steps), ranks done/total, backend, config, a
    trigger's reason."""
    import pandas as pd

    g["key"] = (g["start"], g["stop"], str(g["started_at"]))
    done, total = len(g["complete"]), len(g["paths"])
    steps = f"steps {g['start']}-{g['stop']}"
    if len(set(g["stops"])) > 1:  # the ranks ended it at different steps: say which
        g["stop"] = max(g["stops"])
        steps = "steps " + ", ".join(
            f"{g['start']}-{stop} (rank {rank})"
            for rank, stop in sorted(zip(g["ranks"], g["stops"], strict=True))
        )
    state = (
        "complete"
        if done == total
        else next((s for s in ("recording", "incomplete") if s in g["statuses"]), "incomplete")
    )
    kept = RECORD_WORDS.get(g["recent"], "")
    parts = [
        "" if pd.isna(g["started_at"]) else f"{g['started_at']:%H:%M:%S}",
        f"RECENT STEPS{kept}" if g["recent"] else "",
        "" if g["run"] is None or pd.isna(g["run"]) else f"run {g['run']}",
        steps,
        f"ranks {done}/{total} {state}",
        g["backend"] or "",
        g["config"] or "",
        f"TRIGGERED: {g['reason']}" if g["reason"] else "",
    ]
    g["label"] = " · ".join(p for p in parts if p)


def _window_name(trace: Any) -> str:
    """``steps 435..444, ranks 0,1 (path)``: the ranks of one job share a root directory, so
    the path alone does not tell two windows apart."""
    steps = (
        f"steps {trace.start_step}..{trace.stop_step}"
        if getattr(trace, "start_step", None) is not None
        else ""
    )
    try:
        ranks = ", ranks " + ",".join(map(str, sorted(trace.ranks)))
    except Exception:
        ranks = ""
    return f"{steps}{ranks} ({trace.path})" if steps else str(trace.path)


def _cleared(out: widgets.Output) -> widgets.Output:
    """``out`` emptied through its state only. ``Output.clear_output()`` sends a clear_output
    message that the frontend answers by writing its (empty) outputs back to the kernel: when
    that write-back arrives after what the button's callback appended since (it does after a
    Summary, whose images keep the frontend busy), it erased the first lines, Compare's a=/b=
    labels and its config warning. Setting the state is one ordered update with no echo."""
    out.outputs = ()
    return out


def _descendants(widget: widgets.Widget) -> list[widgets.Widget]:
    out = []
    for child in getattr(widget, "children", ()):
        out.append(child)
        out.extend(_descendants(child))
    return out


def _figures(trace: Any) -> list[dict[str, Any]]:
    """The window's standard plots as PNG outputs (whatever matplotlib backend is active); a
    plot that has nothing to show (no memory recorded, say) is replaced by a one-line note."""
    import matplotlib.pyplot as plt

    shown = []
    for name in ("plot_timeline", "plot_ops", "plot_steps", "plot_memory"):
        try:
            figure = getattr(trace, name)()
        except Exception as exc:
            shown.append(_stdout(f"{name}: {exc}\n"))
            continue
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", bbox_inches="tight", dpi=80)
        plt.close(figure)
        png = base64.b64encode(buffer.getvalue()).decode("ascii")
        shown.append(
            {
                "output_type": "display_data",
                "metadata": {},
                "data": {"image/png": png, "text/plain": f"<{name} figure>"},
            }
        )
    return shown


def _stdout(text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _display(obj: Any) -> dict[str, Any]:
    """``obj`` as an Output's display_data entry, formatted as ``append_display_data`` does."""
    from IPython.core.interactiveshell import InteractiveShell

    data, metadata = InteractiveShell.instance().display_formatter.format(obj)
    return {"output_type": "display_data", "data": data, "metadata": metadata}


def panel(job: Any, interval: float = 1.0) -> Panel:
    """The interactive panel of ``job`` (a controller, or the name of a running job)."""
    if isinstance(job, str):
        from dynprof_nb.control.registry import attach

        job = attach(job)
    return Panel(job, interval=interval)
