"""File mode: drive an unmodified MindSpore job through its own ``profiler_config.json``.

``dynprof_nb.attach(cfg_path=DIR)`` returns a :class:`FileJob`: the controller interface over
the file
that MindSpore's ``DynamicProfilerMonitor`` polls (or that a ``dynprof relay`` mirrors into a
job segment). Writes are atomic (temp file + rename), so the polling process never reads half
a file, and every write is validated first.

What file mode cannot do, because the original has no back-channel:

* **no live status.** Nothing in the file says which ranks run, at which step, or whether a
  window started. ``status()`` has the usual columns but only what the disk shows: one row per
  rank that has written the current window (``state`` ``written`` or ``writing``), with
  ``pid``, ``step``, ``heartbeat_age_s`` and ``alive`` unknown (``<NA>``);
* **no relative windows** (``"+10"``): there is no current step to add to; give step numbers;
* **no early stop** of a running window with MindSpore's own monitor: ``stop()`` writes
  ``start_step = stop_step = -1``, which cancels a window that has not begun; one that is
  recording runs to its ``stop_step``;
* **a window written late is moved, not lost**: the file cannot be timed to a step, so a
  window whose first step has begun when a rank reads it (and whose last has not ended)
  starts at that rank's next step with the same length. MindSpore's own ``step()`` does this
  (its documented example writes 6..7 after step 6 has run); a dynprof_nb rank (the drop-in,
  or a Monitor with ``cfg_path``) does it for windows from the file, says so in its status
  and in the window's manifest (``start_step``/``stop_step`` the steps recorded,
  ``requested_start_step``/``requested_stop_step`` the window asked for, ``note`` why), and
  keeps the directory named after the window asked for (``rank0_start6_stop7``). Windows
  asked for from a notebook through the job segment stay exact;
* **the same window twice**: MindSpore never triggers the same (start, stop) pair again, so
  ``start()`` refuses it with a message instead of waiting forever;
* ``wait()`` can only watch the disk: it returns when a rank's window directory exists and has
  stopped changing (``settle_s``), and it cannot know how many ranks to expect unless told.

Windows are looked for under the config's ``prof_path``. MindSpore resolves a relative
``prof_path`` in the training process's working directory, which this process cannot see, so
``attach(cfg_path=..., prof_path=...)`` writes an absolute one into the file and looks there.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynprof_nb.contract import window_dirs
from dynprof_nb.contract.config import ConfigError, ProfilerConfig, config_file
from dynprof_nb.contract.rows import StepWindow
from dynprof_nb.control.base import Controller, JobError, absolute_step
from dynprof_nb.control.status import status_frame, status_row

if TYPE_CHECKING:
    import pandas as pd

SETTLE_S = 2.0
MINDSPORE_DEFAULT_OUTPUT = "dyn_profile_data"  # DynamicProfilerMonitor's output_path default


class FileJob(Controller):
    """A job seen only through its ``profiler_config.json``. See the module doc for limits."""

    def __init__(
        self,
        cfg_path: str | os.PathLike[str],
        prof_path: str | os.PathLike[str] | None = None,
        settle_s: float = SETTLE_S,
    ) -> None:
        self.path = config_file(cfg_path).resolve()
        self.name = f"file:{self.path.parent}"
        self.settle_s = settle_s
        self.prof_path = Path(prof_path).expanduser().resolve() if prof_path else None
        self._written = 0

    # -- config ---------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Writes made through this object (the file has no generation of its own)."""
        return self._written

    @property
    def config(self) -> ProfilerConfig:
        """The file's config, or the defaults when there is no file yet."""
        if not self.path.exists():
            return ProfilerConfig()
        return ProfilerConfig.load(self.path)

    def start(self, start: int | str, stop: int | str, **changes: Any) -> int:
        """Write a window of absolute steps (inclusive, 1-based) into the file."""
        first, last = (_file_step(k, v) for k, v in (("start", start), ("stop", stop)))
        old = self.config
        if (old.start_step, old.stop_step) == (first, last):
            raise JobError(
                f"window {first}-{last} is already in {self.path}; MindSpore's "
                "monitor never runs the same start/stop pair twice. Ask for "
                "another window (e.g. one step later)."
            )
        return self._write("start", old.update(start_step=first, stop_step=last, **changes))

    def set(self, **changes: Any) -> int:
        """Change keys in the file (``start_step``/``stop_step`` too: MindSpore reads them)."""
        return self._write("set", self.config.update(**changes))

    def stop(self) -> int:
        """Cancel a window that has not begun (see the module doc: no early stop here)."""
        return self._write("stop", self.config.update(start_step=-1, stop_step=-1))

    def _write(self, action: str, cfg: ProfilerConfig) -> int:
        if self.prof_path is not None:
            cfg = cfg.update(prof_path=str(self.prof_path))
        return super()._write(action, cfg)

    def _publish(self, action: str, cfg: ProfilerConfig) -> int:
        cfg.save(self.path)  # temp file + rename: the poller never reads half a file
        self._written += 1
        return self._written

    # -- what can be known ------------------------------------------------------------------

    def status(self) -> pd.DataFrame:
        """One row per rank that wrote the current window; the columns of ``Job.status()``,
        with what file mode cannot know left ``<NA>`` (no live status: see the module doc).

        A window is the current one by its directory's name (the window asked for), so one
        a rank moved to later steps is found too; its ``error`` column says which steps it
        recorded."""
        cfg = self.config
        frame = self.windows()
        asked = (cfg.start_step, cfg.stop_step)
        rows = [
            status_row(
                rank=r.rank,
                pid=None,
                step=None,
                state="written" if r.status == "complete" else "writing",
                window=str(StepWindow(*asked)),
                generation=self._written,
                error=r.error or _moved(asked, (r.start, r.stop)),
            )
            for r in frame.itertuples()
            if cfg.has_window and asked_window(r.path) == asked
        ]
        return status_frame(rows)

    def wait(
        self,
        timeout: float | None = None,
        progress: bool = False,
        poll: float = 0.25,
        ranks: int = 1,
    ) -> pd.DataFrame:
        """Block until ``ranks`` ranks have written the current window completely (their
        directory exists and has not changed for ``settle_s``). Returns ``status()``."""
        cfg = self.config
        if not cfg.has_window:
            raise JobError(f"{self.path} asks for no window; start() one first.")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status()
            if (status.state == "written").sum() >= ranks:
                return status
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.name}: window {cfg.start_step}-{cfg.stop_step} not written by "
                    f"{ranks} rank(s) after {timeout} s (found: {len(status)}). File mode "
                    "cannot see the ranks: check the training job is running and polling "
                    f"{self.path}, and that it has not passed step {cfg.start_step}."
                )
            time.sleep(poll)

    def roots(self) -> list[Path]:
        """Where windows are looked for: the config's ``prof_path`` (see the module doc)."""
        prof = self.config.prof_path
        if self.prof_path is not None:
            return [self.prof_path]
        if prof in ("", ".", "./"):
            return [Path(MINDSPORE_DEFAULT_OUTPUT).resolve()]
        return [Path(prof).expanduser().resolve()]

    def _window_rows(self) -> list[dict[str, Any]]:
        """Windows on disk, ours (with a manifest) and MindSpore's own (without one: complete
        once the directory has settled and holds MindSpore's output)."""
        rows = window_dirs.find_windows(self.roots(), job=None)
        now, analysed = time.time(), self.config.analyse
        for row in rows:
            if row["backend"] is None:  # written by MindSpore's own monitor
                row.update(_mindspore_window_state(Path(row["path"]), now, self.settle_s, analysed))
        rows.sort(key=lambda r: (r["started_at"] or 0, r["rank"]))
        return rows

    def load(self, window: Any = None, **choice: Any) -> Any:
        """``Controller.load``; a window MindSpore's own monitor wrote is labelled with the
        iterations it holds (:func:`own_monitor_note`): its name says the steps asked."""
        loaded = super().load(window, **choice)
        for part in getattr(loaded, "children", None) or [loaded]:
            if part.manifest is None and part.start_step is not None:
                part.step_note = own_monitor_note(part.start_step, part.stop_step)
        return loaded

    def _describe(self) -> str:
        cfg = self.config
        window = f"{cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "none"
        return (
            f"FileJob {self.path}: window {window}; file mode, no live status (the "
            "original has no back-channel)"
        )


def asked_window(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """The window a window directory was asked for, from its name (MindSpore's, or ours,
    including the temporary and failed names)."""
    name = Path(path).name
    hidden = window_dirs.TMP_RE.match(name) or window_dirs.FAILED_RE.match(name)
    m = window_dirs.WINDOW_RE.match(hidden["name"] if hidden else name)
    return (int(m["start"]), int(m["stop"])) if m else None


def own_monitor_note(start: int, stop: int) -> str:
    """What a window of MindSpore's own ``DynamicProfilerMonitor`` holds: it is named after
    the steps asked, but its ``step()`` starts the profiler at the end of step ``start`` (a
    schedule that skips one step), so in ``step()`` mode it records iterations
    ``start+1..stop+1``; with ``Model.train(callbacks=[dp])`` it records ``start..stop``.
    Nothing in a CPU trace tells the two apart (no step markers), so both are said."""
    return (
        f"MindSpore's own monitor: iterations {start + 1}..{stop + 1} if the job calls "
        f"dp.step() (its step() is one late), {start}..{stop} with Model.train callbacks"
    )


def _moved(asked: tuple[int, int], recorded: tuple[int, int]) -> str:
    """What the status says about a window whose recorded steps are not the ones asked."""
    if recorded == asked:
        return ""
    if recorded[0] != asked[0]:
        return (
            f"recorded steps {recorded[0]}-{recorded[1]}: window {asked[0]}-{asked[1]} "
            "had begun when the rank read the file, so it started at the next step"
        )
    return f"recorded steps {recorded[0]}-{recorded[1]}: stopped early"


def _file_step(key: str, value: int | str) -> int:
    if isinstance(value, str) and value.strip().startswith("+"):
        raise ConfigError(
            f"{key}: got {value!r}; file mode needs a step number >= 1 (there "
            "is no live step to count '+N' from)."
        )
    return absolute_step(key, value)


def _mindspore_window_state(
    path: Path, now: float, settle_s: float, analysed: bool
) -> dict[str, Any]:
    """Status and times of a window MindSpore wrote itself (no manifest): complete when its
    data is there (the analysis output too, when ``analyse`` is on) and nothing changed for
    ``settle_s`` seconds."""
    files = [p for p in path.rglob("*") if p.is_file()]
    latest = max((p.stat().st_mtime for p in files), default=path.stat().st_mtime)
    wanted = ("ASCEND_PROFILER_OUTPUT",) if analysed else ("FRAMEWORK", "ASCEND_PROFILER_OUTPUT")
    has_data = any(p.parent.name in wanted for p in files)
    settled = now - latest >= settle_s
    return {
        "status": "complete" if has_data and settled else "recording",
        "backend": "mindspore (own monitor)",
        "started_at": path.stat().st_ctime,
        "ended_at": latest if settled else None,
    }
