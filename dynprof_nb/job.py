"""The control side: ``Job``, the one API the magics, the panel and the CLI are built on.

A Job validates before it writes (a bad value never reaches the segment, so the config in the
segment is always the last good one), writes a command into the job segment, and reads the
ranks' slots back as a DataFrame.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import windows
from .config import ConfigError, ProfilerConfig
from .protocol import command, decode
from .segment import Segment, SegmentError, SlotView, list_jobs

if TYPE_CHECKING:
    import pandas as pd

STATUS_COLUMNS = ["rank", "pid", "step", "state", "window", "generation", "heartbeat_age_s",
                  "alive", "error"]
WINDOW_COLUMNS = ["rank", "start", "stop", "status", "path"]
BUSY_STATES = ("armed", "recording", "saving")
# ranks' windows with the same steps started this close together are one window
SAME_WINDOW_SLACK = np.timedelta64(10, "m")


class JobError(RuntimeError):
    """A request that cannot be carried out as asked (the message says what to do)."""


class WindowRefused(JobError, ValueError):
    """``start`` asked for a window that every live rank has already passed."""


class Job:
    """A training job seen from the notebook: its config, its ranks, its windows."""

    def __init__(self, name: str, segment: Segment) -> None:
        self.name = name
        self._seg = segment
        self._last_good: ProfilerConfig | None = None

    # -- config ---------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Bumped by every write; a rank whose ``generation`` equals it has seen the latest."""
        return self._seg.generation

    @property
    def config(self) -> ProfilerConfig:
        """The config currently in the segment (a copy: change it through set/start).

        If the segment holds no consistent config (a controller died in the middle of writing
        it) or bytes that are not a valid command, this is the last good config this Job read
        or wrote, with a warning: the ranks keep their last good config too, and ``set()`` on
        top of it must not silently reset every other key to its default.
        """
        got = self._seg.read_config()
        problem = None
        if got is None:
            problem = "was left half-written (a controller probably died mid-write)"
        elif got[0] == 0:
            return ProfilerConfig()
        else:
            try:
                cfg = decode(got[1]).config
            except ConfigError as exc:  # bytes no Job wrote: set()/stop() must still work
                problem = f"cannot be used ({exc})"
            else:
                self._last_good = cfg.copy()
                return cfg
        known = self._last_good is not None
        warnings.warn(
            f"job {self.name!r}: the config in the segment {problem}; the ranks keep their "
            f"last good config. Showing {'the last config this notebook saw' if known else 'the defaults'}; "
            "the next set() or start() writes a whole config again.", stacklevel=2)
        return self._last_good.copy() if known else ProfilerConfig()

    def set(self, **changes: Any) -> int:
        """Change config keys (not the window) for every rank; returns the new generation.

        Setting ``start_step``/``stop_step`` here is the same as ``start()``; setting both to
        -1 is ``stop()`` with the other changes, still in one write.
        """
        if {"start_step", "stop_step"} & set(changes):
            cfg = self.config.update(**changes)
            if not cfg.has_window:
                return self._write("stop", cfg)
            return self.start(cfg.start_step, cfg.stop_step,
                              **{k: v for k, v in changes.items()
                                 if k not in ("start_step", "stop_step")})
        return self._write("set", self.config.update(**changes))

    def start(self, start: int | str, stop: int | str, **changes: Any) -> int:
        """Ask every rank to record steps ``start``..``stop`` (inclusive, 1-based).

        ``"+10"`` means ten steps after the most advanced live rank. Refused, with the ranks'
        steps in the message, when every live rank has already begun step ``start``.
        """
        slots = self.live_slots()
        now = time.time_ns()
        current = max((s.estimated_step(now) for s in slots), default=0)
        first = _resolve_step("start", start, current)
        last = _resolve_step("stop", stop, current)
        cfg = self.config.update(start_step=first, stop_step=last, **changes)
        if slots and all(s.step >= first for s in slots):
            where = ", ".join(f"rank {s.rank} at step {s.step}" for s in slots)
            raise WindowRefused(
                f"window {first}-{last} has already begun on every rank ({where}). "
                f"Ask for a later one, e.g. start('+5', '+{last - first + 5}').")
        return self._write("start", cfg)

    def stop(self) -> int:
        """End an active window at once (what was recorded is saved) or cancel a pending one."""
        cfg = self.config.update(start_step=-1, stop_step=-1)
        return self._write("stop", cfg)

    def _write(self, action: str, cfg: ProfilerConfig) -> int:
        cfg.validate()
        gen = self._seg.write_config(command(action, cfg).encode())
        self._last_good = cfg.copy()
        return gen

    # -- ranks ----------------------------------------------------------------------------

    def slots(self) -> list[SlotView]:
        return sorted(self._seg.slots(), key=lambda s: (s.rank, -s.heartbeat_ns))

    def live_slots(self) -> list[SlotView]:
        return [s for s in self.slots() if s.live]

    def status(self) -> pd.DataFrame:
        """One row per rank: ``rank, pid, step, state, window, generation, heartbeat_age_s,
        alive, error``. Dead ranks stay listed (``alive`` False) until they are replaced."""
        import pandas as pd

        now = time.time_ns()
        rows = []
        for s in self.slots():
            closed = s.state == "closed"
            alive = not closed and s.alive  # one liveness check per rank
            rows.append({
                "rank": s.rank, "pid": s.pid, "step": s.step,
                "state": s.state if alive or closed else "dead",
                "window": f"{s.start}-{s.stop}" if s.start >= 1 else "",
                "generation": s.applied,
                "heartbeat_age_s": round(max(0, now - s.heartbeat_ns) / 1e9, 3),
                "alive": alive, "error": s.error,
            })
        from .relay import relay_rows

        rows += relay_rows(self._seg, now)  # a relay's row: rank -1, state "relay"
        return pd.DataFrame(rows, columns=STATUS_COLUMNS)

    def progress(self) -> tuple[int, int]:
        """Steps of the current window done so far, summed over live ranks, and the total.

        ``(0, 0)`` without a window. The same count ``wait()``'s bar shows, for the panel.
        """
        cfg, target = self.config, self.generation
        if not cfg.has_window:
            return 0, 0
        live = self.live_slots()
        length = cfg.stop_step - cfg.start_step + 1
        return sum(_window_progress(s, cfg, target) for s in live), length * len(live)

    def wait(self, timeout: float | None = None, progress: bool = True,
             poll: float = 0.05) -> pd.DataFrame:
        """Block until every live rank has applied the latest config and finished its window.

        Shows a progress bar over the window's steps. Returns ``status()``; raises
        ``TimeoutError`` (with the ranks' state) when ``timeout`` seconds pass first.
        """
        target = self.generation
        cfg = self.config
        length = cfg.stop_step - cfg.start_step + 1 if cfg.has_window else 0
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = _progress_bar(progress, length, f"job {self.name}")
        try:
            while True:
                live = self.live_slots()
                if not live and not self.slots():
                    raise JobError(f"job {self.name!r} has no rank: start the training side, "
                                   "then wait.")
                pending = [s for s in live if s.applied < target or s.state in BUSY_STATES]
                if bar is not None and live:
                    done = [_window_progress(s, cfg, target) for s in live]
                    bar.total = max(1, length * len(live))
                    bar.n = sum(done)
                    bar.set_postfix_str(", ".join(f"r{s.rank}:{s.step}" for s in live[:8]))
                    bar.refresh()
                if not pending:
                    if bar is not None:
                        bar.n = bar.total
                        bar.refresh()
                    return self.status()
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(
                        f"job {self.name!r}: still waiting after {timeout} s for "
                        + ", ".join(f"rank {s.rank} ({s.state}, step {s.step})" for s in pending)
                        + ". The window goes on; call wait() again or stop().")
                time.sleep(poll)
        finally:
            if bar is not None:
                bar.close()

    # -- windows --------------------------------------------------------------------------

    def roots(self) -> list[Path]:
        """Directories the ranks write windows into (their slots say so)."""
        roots = {Path(s.root) for s in self.slots() if s.root}
        roots |= {Path(s.window).parent for s in self.slots() if s.window}
        prof = self.config.prof_path
        if os.path.isabs(prof):
            roots.add(Path(prof))
        return sorted(roots)

    def windows(self) -> pd.DataFrame:
        """Every window of this job on disk: ``rank, start, stop, status, path`` (+ times)."""
        import pandas as pd

        rows = self._window_rows()
        extra = ["backend", "started_at", "ended_at", "error"]
        frame = pd.DataFrame(rows, columns=WINDOW_COLUMNS + extra)
        for col in ("started_at", "ended_at"):
            frame[col] = pd.to_datetime(frame[col], unit="s", errors="coerce")
        return frame

    def _window_rows(self) -> list[dict[str, Any]]:
        return windows.find_windows(self.roots(), job=self.name)

    def load(self, window: int | str | os.PathLike[str] | None = None) -> Any:
        """Load a window into a ``TraceWindow``: the latest complete one by default, every rank
        of it together; an int picks a row of ``windows()``; a path loads that directory."""
        from .traces import load_window

        frame = self.windows()
        complete = frame[frame.status == "complete"]
        if window is None:
            if complete.empty:
                raise JobError(f"job {self.name!r} has no complete window yet; start one and "
                               "wait() for it.")
            latest = complete.iloc[-1]
            group = complete[(complete.start == latest.start) & (complete.stop == latest.stop)
                             & (complete.started_at >= latest.started_at - SAME_WINDOW_SLACK)]
            group = group.drop_duplicates("rank", keep="last").sort_values("rank")
            paths = list(group.path)
            return load_window(paths[0] if len(paths) == 1 else paths)
        if isinstance(window, int) and not isinstance(window, bool):
            if not 0 <= window < len(frame) and not -len(frame) <= window < 0:
                raise JobError(f"no window {window}: windows() lists {len(frame)}.")
            return load_window(frame.iloc[window].path)
        return load_window(window)

    # -- display --------------------------------------------------------------------------

    def __repr__(self) -> str:
        live = self.live_slots()
        cfg = self.config
        window = f"{cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "none"
        return (f"<Job {self.name!r}: {len(live)} live rank(s), window {window}, "
                f"generation {self.generation}>")

    def _repr_html_(self) -> str:
        return f"<p><b>{repr(self)[1:-1]}</b></p>" + self.status().to_html(index=False)

    def close(self) -> None:
        self._seg.close()


def _resolve_step(key: str, value: int | str, current: int) -> int:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("+") and text[1:].isdigit():
            return current + int(text[1:])
        if text.isdigit():
            return int(text)
        raise ConfigError(f"{key}: got {value!r}; expected a step number like 20 or a relative "
                          "step like '+10' (ten steps after the most advanced rank).")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key}: got {value!r} ({type(value).__name__}); expected a step "
                          "number like 20 or '+10'.")
    if value < 1:
        raise ConfigError(f"{key}: got {value}; steps are counted from 1.")
    return value


def _window_progress(slot: SlotView, cfg: ProfilerConfig, target: int) -> int:
    length = cfg.stop_step - cfg.start_step + 1
    if slot.applied >= target and slot.state not in BUSY_STATES:
        return length
    return max(0, min(length, slot.step - cfg.start_step + 1))


def _progress_bar(enabled: bool, total: int, desc: str) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=max(1, total), desc=desc, unit="step", leave=True)


def attach(job: str = "default", *, create: bool = True,
           cfg_path: str | os.PathLike[str] | None = None,
           prof_path: str | os.PathLike[str] | None = None) -> Job:
    """Attach to a job by name. With ``create`` (the default) a job that has not started yet
    is created, so a window can be asked for before the training side runs.

    ``cfg_path`` instead: file mode, a ``FileJob`` over that directory's
    ``profiler_config.json`` for an unmodified MindSpore job (no live status; see
    :mod:`dynprof_nb.filemode`), with windows under ``prof_path``.
    """
    if cfg_path is not None:
        from .filemode import FileJob

        return FileJob(cfg_path, prof_path=prof_path)
    try:
        return Job(job, Segment.open(job, create=create))
    except SegmentError as exc:
        raise JobError(str(exc)) from None


def jobs() -> pd.DataFrame:
    """This user's jobs on this machine: ``job, ranks, live, generation``."""
    import pandas as pd

    rows = []
    for name in list_jobs():
        try:
            with Segment.open(name, create=False) as seg:
                slots = seg.slots()
                rows.append({"job": name, "ranks": len(slots),
                             "live": sum(s.live for s in slots),
                             "generation": seg.generation})
        except (SegmentError, OSError, ValueError):
            continue
    return pd.DataFrame(rows, columns=["job", "ranks", "live", "generation"])
