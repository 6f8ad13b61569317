"""One controller interface: what the magics, the panel and the CLI drive.

A controller turns a person's request into a validated config and publishes it to the training
ranks, then reports what the ranks do and what they wrote. ``Job`` publishes through a
node-local shared-memory segment, ``FileJob`` through MindSpore's ``profiler_config.json``; a
third implementation (a cluster) subclasses :class:`Controller` the same way and every user
interface works with it unchanged.

What an implementation provides: ``config`` and ``generation`` (what is published),
``_publish(action, cfg)`` (write an already-validated config), ``start``/``stop``/``set``
(what they mean where it publishes), ``status()``, ``wait()`` and ``roots()`` (where windows
are written). What it inherits: validate-then-publish, ``windows()``, ``load()``, the reprs.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynprof_nb.contract import window_dirs
from dynprof_nb.contract.config import ConfigError, ProfilerConfig
from dynprof_nb.control import loading
from dynprof_nb.control.errors import JobError
from dynprof_nb.control.loading import (  # noqa: F401 (re-exported: the panel, the cluster)
    SAME_WINDOW_SLACK_S,
    WINDOW_COLUMNS,
    WINDOW_EXTRA_COLUMNS,
    latest_window,
    latest_window_paths,
)
from dynprof_nb.safetext import escape, frame_html

if TYPE_CHECKING:
    import pandas as pd

    from dynprof_nb.traces import TraceWindow


class WindowRefused(JobError, ValueError):
    """``start`` asked for a window that every live rank has already passed."""


class WindowConflict(JobError, ValueError):
    """``start`` asked for a window that overlaps one the ranks are recording now (another
    controller's, or this one's): a rank records one window at a time, so the new one would
    be skipped. The message names the window, its steps and its ranks, and what to do."""


class WindowQueued(UserWarning):
    """``start`` was accepted, but the ranks are recording another window: the new one arms
    when that one ends."""


class WindowReplaced(UserWarning):
    """``start`` replaced a window another controller had armed (not begun): that one will
    not be recorded."""


class RankClaimedTwice(UserWarning):
    """``start`` was accepted while two live processes claim one rank (a setup cell or a
    script run twice under one job name): each of them records the window, and ``+N``
    counts from the most advanced."""


class WaitInterrupted(KeyboardInterrupt):
    """Ctrl-C (or Jupyter's stop button) during ``wait()``: only the waiting stopped.

    Still a KeyboardInterrupt, so a script stops; IPython shows just the message (via
    ``_render_traceback_``), which says what the job is doing, instead of a traceback.
    """

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


class Controller(ABC):
    """A training job seen from a notebook or a terminal: its config, its ranks, its windows."""

    name: str

    # -- what is published ---------------------------------------------------------------

    @property
    @abstractmethod
    def generation(self) -> int:
        """Bumped by every write; a rank that has applied it has seen the latest config."""

    @property
    @abstractmethod
    def config(self) -> ProfilerConfig:
        """The config the ranks are asked to follow (a copy: change it through set/start)."""

    @abstractmethod
    def start(self, start: int | str, stop: int | str, **changes: Any) -> int:
        """Ask the ranks to record steps ``start``..``stop`` (inclusive); the new generation."""

    @abstractmethod
    def stop(self) -> int:
        """End or cancel the current window; the new generation."""

    @abstractmethod
    def set(self, **changes: Any) -> int:
        """Change config keys for every rank; the new generation."""

    @property
    def window_options(self) -> dict[str, Any]:
        """Options ``start`` gave the current window only (``{}`` where every key stands)."""
        return {}

    @property
    def window_config(self) -> ProfilerConfig:
        """The config the current window records with: ``config`` and ``window_options``."""
        options = self.window_options
        return self.config.update(**options) if options else self.config

    def describe_stop(self) -> str:
        """What ``stop()`` would end or cancel now, in words (call it before ``stop()``)."""
        cfg = self.config
        if not cfg.has_window:
            return "nothing to stop: no window is pending or recording"
        return f"window {cfg.start_step}-{cfg.stop_step} cancelled (or ended, if it had begun)"

    def _write(self, action: str, cfg: ProfilerConfig, **extra: Any) -> int:
        """Validate, then publish: a bad value never reaches a rank. ``extra`` goes to
        ``_publish`` (``Job``: ``window=`` the options of this window only)."""
        cfg.validate()
        return self._publish(action, cfg, **extra)

    @abstractmethod
    def _publish(self, action: str, cfg: ProfilerConfig) -> int:
        """Write a validated config with its action where the ranks read it."""

    # -- what the ranks do ---------------------------------------------------------------

    @abstractmethod
    def status(self) -> pd.DataFrame:
        """One row per rank, the columns of :data:`dynprof_nb.control.status.STATUS_COLUMNS`."""

    @abstractmethod
    def wait(self, timeout: float | None = None, progress: bool = True) -> pd.DataFrame:
        """Block until the ranks have finished the current window; returns ``status()``."""

    def progress(self) -> tuple[int, int]:
        """Steps of the current window done so far and the total (``(0, 0)`` when unknown)."""
        return 0, 0

    def live_ranks(self) -> list[int]:
        """Ranks known to be running now (empty where the controller cannot see them)."""
        return []

    def trigger(self, slowdown: float | None = 1.5, **options: Any) -> dict[str, Any]:
        """Arm a window that starts by itself when a step slows (``Job.trigger``)."""
        raise JobError(
            f"{type(self).__name__} cannot watch step times: a trigger needs the "
            "job's segment (attach(job)) or a cluster (attach(job, cluster=...))."
        )

    @property
    def triggers(self) -> dict[str, Any]:
        """The job's trigger (``{"armed": False}`` where there can be none)."""
        return {"armed": False}

    def step_times(self, last: int = 100) -> pd.DataFrame:
        """Every rank's last step times (``Job.step_times``); empty where none are kept."""
        from dynprof_nb.control.trigger import step_frame

        return step_frame([])

    def plot_step_times(self, last: int = 100) -> Any:
        """Ranks x recent steps as a heat map, stragglers marked (above 64 ranks at most 64
        rows, nodes or blocks of ranks, each naming its straggler ranks):
        :func:`dynprof_nb.analysis.steptimes.plot_step_times`."""
        from dynprof_nb.analysis.steptimes import plot_step_times

        return plot_step_times(self.step_times(last))

    def stacks(self, timeout: float = 5.0) -> Any:
        """Every thread's stack of every live rank (``Job`` and ``ClusterJob`` take them)."""
        raise JobError(
            f"{type(self).__name__} cannot take stacks: its ranks publish no pid "
            "(attach by job name, not by --cfg-path)."
        )

    @property
    def last_stacks(self) -> Any:
        """The stacks taken when the job was last found stalled (None where unsupported)."""
        return None

    # -- what the ranks wrote ------------------------------------------------------------

    @abstractmethod
    def roots(self) -> list[Path]:
        """Directories the ranks write windows into."""

    def _window_rows(self) -> list[dict[str, Any]]:
        return window_dirs.find_windows(self.roots(), job=self.name)

    def windows(self) -> pd.DataFrame:
        """Every window of this job on disk: ``rank, start, stop, status, path`` (+ times, the
        run)."""
        return loading.window_frame(self._window_rows())

    def load(
        self,
        window: int | str | os.PathLike[str] | list[str] | None = None,
        *,
        index: int | None = None,
        run: int | None = None,
        steps: tuple[int, int] | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ) -> TraceWindow:
        """Load a window into a ``TraceWindow``, every rank of it together.

        By default the window the job was last asked for (``start()``): while it is pending,
        ``load()`` waits for it with ``wait()``'s progress (``timeout`` seconds at most;
        Ctrl-C stops only the waiting), or with ``wait=False`` raises
        :class:`~dynprof_nb.control.loading.WindowPending` naming it; with no window asked,
        the latest complete one. Any other window is a choice: ``index`` (a row of
        ``windows()``, one rank; a bare int ``window`` too), ``run`` (the job's run) and/or
        ``steps=(first, last)``; a path loads that directory, a list of paths those ranks
        together. See :mod:`dynprof_nb.control.loading`."""
        if isinstance(window, int) and not isinstance(window, bool):
            index, window = window, None
        if window is not None:
            return loading.load_paths(window, [])
        frame = self.windows()
        if index is not None:
            return loading.load_paths(loading.choose(frame, index, run, steps).iloc[0].path, [])
        if run is not None or steps is not None:
            rows = loading.choose(frame, None, run, steps)
            what = f"the window with {loading.describe_choice(run, steps)}"
            return loading.load_paths(*loading.paths_of(self.name, rows, what), name=self.name)
        cfg = self.config
        if cfg.has_window:
            return loading.load_asked(self, (cfg.start_step, cfg.stop_step), wait, timeout)
        paths, missing = latest_window(frame)
        if not paths:
            raise JobError(
                f"job {self.name!r} has no complete window yet; start one and wait() for it."
            )
        loading.warn_other_run(frame, paths, self.status().attrs.get("run_started_at"))
        return loading.load_paths(paths, missing, name=self.name)

    # -- display -------------------------------------------------------------------------

    def _describe(self) -> str:
        """The one-line description the reprs show."""
        cfg = self.config
        window = f"{cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "none"
        return f"{type(self).__name__} {self.name!r}: window {window}"

    def __repr__(self) -> str:
        return f"<{self._describe()}>"

    def _repr_html_(self) -> str:
        head = f"<p><b>{escape(self._describe())}</b></p>"
        try:
            return head + frame_html(self.status(), index=False)
        except JobError:  # a closed handle (its description says so): a repr never raises
            return head

    def close(self) -> None:  # noqa: B027 (an optional hook, not abstract)
        """Release what this controller holds (the job itself goes on)."""

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ranks_text(labels: list[str], limit: int = 8) -> str:
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more


def window_conflict(
    first: int,
    last: int,
    recording: list[tuple[str, int, int, int]],
    asked_by: dict[tuple[int, int], str] | None = None,
    can_queue: bool = True,
) -> tuple[str, bool] | None:
    """What to tell a controller asking for window ``first``-``last`` while ranks record.

    ``recording``: ``(rank label, start, stop, step)`` of every live rank recording now
    (the label: ``"3"``, or ``"3 on node1"``).
    A rank records one window at a time and takes a new one only when it ends, so a window
    that begins before every recorded one has ended would be skipped: ``(message, False)``,
    a refusal. One that begins after it is queued, ``(message, True)``, where ``can_queue``
    (a cluster window must be armed on every rank at once, so it cannot be). None when no
    rank records. ``asked_by``: who asked for each recorded window, in words.
    """
    if not recording:
        return None
    groups: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for label, start, stop, step in recording:
        groups.setdefault((start, stop), []).append((label, step))
    parts = []
    for (start, stop), ranks in sorted(groups.items()):
        who = (asked_by or {}).get((start, stop))
        one = len(ranks) == 1
        parts.append(
            f"window {start}-{stop}, which rank{'' if one else 's'} "
            f"{_ranks_text([r for r, _ in ranks])} {'is' if one else 'are'} "
            "recording now (at step"
            f"{'s' if len(ranks) > 1 else ''} "
            f"{_ranks_text([str(s) for _, s in ranks])}"
            f"{f'; asked for by {who}' if who else ''})"
        )
    others = " and ".join(parts)
    end = max(stop for _, stop in groups)
    if can_queue and first > end:
        return (
            f"window {first}-{last} is queued behind {others}: the ranks arm it when that "
            f"ends at step {end}; wait() waits for both.",
            True,
        )
    length = last - first
    why = (
        "a rank records one window at a time, so it would be skipped"
        if can_queue
        else "a cluster window must be armed on every rank at once, and a rank takes no new "
        "window until the one it records ends"
    )
    return (
        f"window {first}-{last} refused: it conflicts with {others}; {why}. Wait for "
        f"that window to end (wait(), at step {end}) and start again, or stop() it first "
        "(what it recorded is saved)"
        + (
            f", or ask for one after it, e.g. start({end + 2}, {end + 2 + length})"
            if can_queue
            else ""
        )
        + ".",
        False,
    )


def absolute_step(key: str, value: int | str) -> int:
    """A step number >= 1 from an int or its digits (no ``+N``)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"{key}: got {value!r} ({type(value).__name__}); expected a step "
            "number like 20 or '+10'."
        )
    if value < 1:
        raise ConfigError(f"{key}: got {value}; steps are counted from 1.")
    return value


def resolve_step(key: str, value: int | str, current: int) -> int:
    """``"+N"`` is N steps after ``current``; anything else is an absolute step."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("+") and text[1:].isdigit():
            return current + int(text[1:])
        if not text.isdigit():
            raise ConfigError(
                f"{key}: got {value!r}; expected a step number like 20 or a "
                "relative step like '+10' (ten steps after the most advanced "
                "rank)."
            )
    return absolute_step(key, value)
