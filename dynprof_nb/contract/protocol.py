"""What crosses processes besides the segment layout: the command a controller writes (a
config plus what to do with it) and the step marker every backend writes into a trace.

``start`` arms the config's window (even the same window again), ``stop`` ends the active
window at once, ``set`` changes keys without arming a window again. The segment carries these
bytes without reading them; the Monitor decodes them once per change.

A command's ``config`` is the *standing* config (what ``set`` made so, plus the window's steps);
``window`` holds the options given to ``start`` for that window only. A rank records the window
with ``config`` updated by ``window`` and is back on the standing config when it ends, so
``start +5 +9 --stack`` does not leave the stack tracer on for every later window.

``late`` says what a rank does with a window whose first step has already begun when the
command reaches it: ``"skip"`` (the default: windows are exact, the rank says why it skipped)
or ``"shift"`` (file mode, written by the relay of a MindSpore ``profiler_config.json``: the
window begins at the rank's next step with the same length, as MindSpore's own ``step()`` does;
see :func:`dynprof_nb.training.config_reader.shifted_window`).

``run`` is the run of the job the command was written for (:attr:`.segment.Segment.run`:
the run whose ranks were live then, or the next one when none was). A rank of a later run
never arms a window asked of an earlier one: a job restarted under its name inherits nothing
of the run that ended. 0: written without a run (any run takes it).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from traitlets import TraitError

from dynprof_nb.contract.config import ConfigError, ProfilerConfig

ACTIONS = ("start", "stop", "set")
LATE = ("skip", "shift")  # what a rank does with a window that has begun when it arrives

# Every backend names step N's span ``STEP_PREFIX + str(N)`` (N = the global, 1-based step), as
# Kineto does; the readers find steps by it and torch's key_averages() folds them into
# ``STEP_FOLDED``. This is the one place the marker is spelled.
STEP_PREFIX = "ProfilerStep#"
STEP_FOLDED = "ProfilerStep*"
STEP_RE = re.compile(rf"^{re.escape(STEP_PREFIX)}([0-9]+)\Z")  # whole, ASCII digits


# Where a backend whose framework writes no step spans (MindSpore on CPU) records them instead:
# one row per step marker and user range (name, cat, start_ns, end_ns, tid).
STEPS_FILE = "dynprof_steps.csv"

# What every backend writes beside its trace: the training thread's on-CPU time and run-queue
# delay over the window (:mod:`dynprof_nb.training.threadcpu`; read by
# :mod:`dynprof_nb.traces.formats.common.threadcpu`), so a rank slowed by waiting for a core is
# told apart from a rank with more work.
THREAD_CPU_FILE = "thread_cpu.json"


def step_marker(step: int) -> str:
    """The name of step ``step``'s span in a trace."""
    return f"{STEP_PREFIX}{step}"


@dataclass(frozen=True)
class Command:
    action: str
    config: ProfilerConfig
    by: int = 0
    at: float = 0.0
    window: dict[str, Any] = field(default_factory=dict)
    late: str = "skip"
    reason: str = ""  # why the window was asked for (a trigger's words); kept in its manifest
    run: int = 0  # the job's run it was written for (0: any)

    def encode(self) -> bytes:
        body = {
            "action": self.action,
            "config": self.config.to_dict(),
            "by": self.by,
            "at": self.at,
        }
        if self.window:
            body["window"] = self.window
        if self.late != "skip":
            body["late"] = self.late
        if self.reason:
            body["reason"] = self.reason
        if self.run:
            body["run"] = self.run
        return json.dumps(body, separators=(",", ":")).encode()

    def window_config(self) -> ProfilerConfig:
        """The config the window records with: the standing config and the window's options."""
        return self.config.update(**self.window) if self.window else self.config


def command(
    action: str,
    config: ProfilerConfig,
    window: dict[str, Any] | None = None,
    late: str = "skip",
    reason: str = "",
    run: int = 0,
) -> Command:
    """A command stamped with this process; ``window``: options for this window only;
    ``late``: what a rank does with a window that has begun when it arrives (see above);
    ``reason``: why the window is asked for, kept in its manifest; ``run``: the job's run it
    is for (see above)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; expected one of {ACTIONS}.")
    if late not in LATE:
        raise ValueError(f"late: got {late!r}; expected one of {LATE}.")
    return Command(
        action,
        config,
        os.getpid(),
        time.time(),
        window_options(config, window),
        late,
        check_reason(reason),
        run,
    )


REASON_LIMIT = 500


def check_reason(reason: Any) -> str:
    """A window's reason: a short string (a trigger's sentence, or a person's note)."""
    if not isinstance(reason, str):
        raise ConfigError(f"reason: got {type(reason).__name__}; expected a short text.")
    if len(reason) > REASON_LIMIT:
        raise ConfigError(f"reason: {len(reason)} characters; at most {REASON_LIMIT}.")
    return reason


def window_options(config: ProfilerConfig, window: dict[str, Any] | None) -> dict[str, Any]:
    """``window`` checked against ``config`` and normalised (``"cpu"`` -> ``"CPU"``); the
    window's own steps are not options of it. Raises ConfigError naming a bad key."""
    if not window:
        return {}
    if not isinstance(window, dict):
        raise ConfigError(
            f"the window's options must be a JSON object, got "
            f"{type(window).__name__}; write the command again."
        )
    steps = sorted({"start_step", "stop_step"} & set(window))
    if steps:
        raise ConfigError(
            f"{steps[0]}: the window's steps are in the config, not among the window's options."
        )
    full = config.update(**window)
    return {k: getattr(full, k) for k in window}


def decode(data: bytes) -> Command:
    """Parse and fully validate segment bytes; raises ConfigError saying what was wrong.

    Nothing else may escape: these bytes come from shared memory, and the Monitor decodes them
    inside the training loop (deep nesting is a RecursionError, a bad ``by`` a TypeError).
    """
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(
            f"the job's config is not valid JSON ({str(exc)[:120]}); write it again."
        ) from None
    if not isinstance(raw, dict) or raw.get("action") not in ACTIONS:
        raise ConfigError(
            "the job's config has no valid action; write it again with job.set() or job.start()."
        )
    by, at = raw.get("by") or 0, raw.get("at") or 0.0
    if (
        isinstance(by, bool)
        or not isinstance(by, int)
        or isinstance(at, bool)
        or not isinstance(at, (int, float))
    ):
        raise ConfigError(
            f"the job's config has a bad writer stamp (by={str(by)[:40]!r}, "
            f"at={str(at)[:40]!r}); write it again with job.set() or job.start()."
        )
    try:
        cfg = ProfilerConfig.from_dict(raw.get("config") or {}, strict=True)
        window = window_options(cfg, raw.get("window"))
    except TraitError as exc:  # a plain traitlets error (e.g. prof_path not a string)
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"the job's config: {exc}") from None
    late = raw.get("late", "skip")
    if late not in LATE:
        raise ConfigError(
            f"the job's config has late={str(late)[:40]!r}; expected one of "
            f"{LATE}. Write it again with job.set() or job.start()."
        )
    run = raw.get("run", 0)
    if isinstance(run, bool) or not isinstance(run, int) or run < 0:
        raise ConfigError(
            f"the job's config has run={str(run)[:40]!r}; expected a run number. Write it "
            "again with job.set() or job.start()."
        )
    return Command(
        raw["action"], cfg, by, float(at), window, late, check_reason(raw.get("reason", "")), run
    )
