"""Progress that fits where it runs: a bar for a person, a few lines for a log.

* In Jupyter, a widget bar (``tqdm.auto``); in a terminal, a text bar on stderr.
* Anywhere else (stderr is a file, a pipe, CI), one line per meaningful change: a new phase
  (applying, armed, recording, saving, done) or another quarter of the steps; never a
  carriage-return refresh. A ten-step window is a handful of lines.

``DYNPROF_PROGRESS=bar|lines|off`` overrides the choice. ``Job.wait()``, ``dynprof wait``, the
demo and any other controller's wait report through :class:`Progress`.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

MODES = ("notebook", "bar", "lines", "off")
BAR_REFRESH_S = 0.2  # a widget bar redrawn every poll would flood the notebook's channel


def _in_notebook() -> bool:
    """A Jupyter kernel (where a widget bar renders), as ``tqdm.autonotebook`` decides it."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
        return shell is not None and "IPKernelApp" in shell.config
    except Exception:
        return False


def progress_mode(stream: TextIO | None = None) -> str:
    """``notebook``, ``bar`` (a terminal), ``lines`` (a log) or ``off`` (``DYNPROF_PROGRESS``)."""
    forced = os.environ.get("DYNPROF_PROGRESS", "").strip().lower()
    if forced in MODES:
        return forced
    if _in_notebook():
        return "notebook"
    stream = sys.stderr if stream is None else stream
    try:
        return "bar" if stream.isatty() else "lines"
    except (AttributeError, ValueError):
        return "lines"


def format_eta(seconds: float | None) -> str:
    """``ETA 12 s`` / ``ETA 3 min`` / ``""`` when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return ""
    if seconds < 1:
        return "ETA <1 s"
    if seconds < 90:
        return f"ETA {seconds:.0f} s"
    if seconds < 5400:
        return f"ETA {seconds / 60:.0f} min"
    return f"ETA {seconds / 3600:.1f} h"


def _keep_texts_on_one_line(bar: Any) -> None:
    """A widget bar's two texts keep their width and the bar takes what is left: by default
    the texts shrank first, so "job x: window 31741-31750: 0%" and the ranks' steps wrapped
    onto two ragged lines around the bar."""
    container = getattr(bar, "container", None)
    children = getattr(container, "children", ())
    if len(children) != 3:
        return
    left, progress, right = children
    for text in (left, right):
        text.layout.flex = "0 0 auto"
    progress.layout.flex = "1 1 auto"
    progress.layout.min_width = "60px"


class Progress:
    """One wait's progress: ``update()`` every poll, ``note()`` for an event, ``close()``.

    ``update`` is cheap to call often: the bar is redrawn at most every 0.2 s, and in lines
    mode a line is written only when the phase changes or another quarter is done.
    """

    def __init__(
        self,
        desc: str,
        *,
        enabled: bool = True,
        unit: str = "step",
        stream: TextIO | None = None,
        mode: str | None = None,
    ) -> None:
        self.desc = desc
        self.stream = stream
        self.mode = "off" if not enabled else (mode or progress_mode(stream))
        self.unit = unit
        self.lines: list[str] = []  # what lines mode wrote (for tests and logs)
        self._bar: Any = None
        self._phase: str | None = None
        self._quarter = -1
        self._drawn = 0.0
        self._done = self._total = 0
        self._t0 = time.monotonic()

    @property
    def _out(self) -> TextIO:
        return sys.stderr if self.stream is None else self.stream

    def _write(self, text: str) -> None:
        self.lines.append(text)
        print(text, file=self._out, flush=True)

    def _make_bar(self, total: int) -> Any:
        if self.mode == "notebook":
            from dynprof_nb.optional import available

            if not available("notebook widgets"):  # tqdm's widget bar would raise: lines
                self.mode = "lines"
                return None
            try:
                from tqdm.auto import tqdm
            except ImportError:  # pragma: no cover - tqdm is a dependency
                self.mode = "lines"
                return None
        else:
            from tqdm import tqdm
        bar = tqdm(
            total=max(1, total),
            desc=self.desc,
            unit=self.unit,
            leave=True,
            file=None if self.mode == "notebook" else self._out,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}{postfix}]",
        )
        _keep_texts_on_one_line(bar)
        return bar

    def update(self, done: int, total: int, phase: str = "", detail: str = "") -> None:
        """``done`` of ``total`` units; ``phase`` a word or two (a change is worth a line in a
        log); ``detail`` what a bar shows beside it (ranks' steps, the ETA)."""
        self._done, self._total = done, total
        if self.mode == "off":
            return
        if self.mode in ("notebook", "bar"):
            if self._bar is None:
                self._bar = self._make_bar(total)
            if self._bar is not None:
                now = time.monotonic()
                if phase != self._phase or now - self._drawn >= BAR_REFRESH_S:
                    self._phase, self._drawn = phase, now
                    self._bar.total = max(1, total)
                    self._bar.n = min(done, max(1, total))
                    self._bar.set_postfix_str(
                        ", ".join(p for p in (phase, detail) if p), refresh=False
                    )
                    self._bar.refresh()
                return
        quarter = 4 * done // total if total > 0 else 0
        if phase != self._phase or quarter > self._quarter:
            self._phase, self._quarter = phase, max(quarter, self._quarter)
            counted = f" {done}/{total} {self.unit}s" if total > 0 else ""
            self._write(f"{self.desc}: {phase}{counted}" + (f" ({detail})" if detail else ""))

    def note(self, text: str) -> None:
        """A one-off event (a rank that vanished), on its own line in every mode but off."""
        if self.mode == "off":
            return
        if self._bar is not None and self.mode == "bar":
            self._bar.write(text, file=self._out)
            self.lines.append(text)
        else:
            self._write(text)

    def close(self, final: str | None = None) -> None:
        """End the display; ``final`` (e.g. ``done``) completes the bar, or is the last line."""
        if self._bar is not None:
            if final is not None:
                self._bar.n = self._bar.total
                self._bar.set_postfix_str(final, refresh=False)
                self._bar.refresh()
            self._bar.close()
            self._bar = None
        elif final is not None and self.mode == "lines":
            took = time.monotonic() - self._t0
            counted = f" {self._total}/{self._total} {self.unit}s" if self._total else ""
            self._write(f"{self.desc}: {final}{counted} in {took:.1f} s")
        self.mode = "off"

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
