"""What crosses processes besides the segment layout: the command a controller writes (a
config plus what to do with it) and the step marker every backend writes into a trace.

``start`` arms the config's window (even the same window again), ``stop`` ends the active
window at once, ``set`` changes keys without arming a window again. The segment carries these
bytes without reading them; the Monitor decodes them once per change.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass

from traitlets import TraitError

from dynprof_nb.config import ConfigError, ProfilerConfig

ACTIONS = ("start", "stop", "set")

# Every backend names step N's span ``STEP_PREFIX + str(N)`` (N = the global, 1-based step), as
# Kineto does; the readers find steps by it and torch's key_averages() folds them into
# ``STEP_FOLDED``. This is the one place the marker is spelled.
STEP_PREFIX = "ProfilerStep#"
STEP_FOLDED = "ProfilerStep*"
STEP_RE = re.compile(rf"^{re.escape(STEP_PREFIX)}(\d+)$")


# Where a backend whose framework writes no step spans (MindSpore on CPU) records them instead:
# one row per step marker and user range (name, cat, start_ns, end_ns, tid).
STEPS_FILE = "dynprof_steps.csv"


def step_marker(step: int) -> str:
    """The name of step ``step``'s span in a trace."""
    return f"{STEP_PREFIX}{step}"


@dataclass(frozen=True)
class Command:
    action: str
    config: ProfilerConfig
    by: int = 0
    at: float = 0.0

    def encode(self) -> bytes:
        return json.dumps(
            {"action": self.action, "config": self.config.to_dict(), "by": self.by,
             "at": self.at}, separators=(",", ":")).encode()


def command(action: str, config: ProfilerConfig) -> Command:
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; expected one of {ACTIONS}.")
    return Command(action, config, os.getpid(), time.time())


def decode(data: bytes) -> Command:
    """Parse and fully validate segment bytes; raises ConfigError saying what was wrong.

    Nothing else may escape: these bytes come from shared memory, and the Monitor decodes them
    inside the training loop (deep nesting is a RecursionError, a bad ``by`` a TypeError).
    """
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(f"the job's config is not valid JSON ({str(exc)[:120]}); write it "
                          "again.") from None
    if not isinstance(raw, dict) or raw.get("action") not in ACTIONS:
        raise ConfigError("the job's config has no valid action; write it again with "
                          "job.set() or job.start().")
    by, at = raw.get("by") or 0, raw.get("at") or 0.0
    if (isinstance(by, bool) or not isinstance(by, int)
            or isinstance(at, bool) or not isinstance(at, (int, float))):
        raise ConfigError(f"the job's config has a bad writer stamp (by={str(by)[:40]!r}, "
                          f"at={str(at)[:40]!r}); write it again with job.set() or job.start().")
    try:
        cfg = ProfilerConfig.from_dict(raw.get("config") or {}, strict=True)
    except TraitError as exc:  # a plain traitlets error (e.g. prof_path not a string)
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"the job's config: {exc}") from None
    return Command(raw["action"], cfg, by, float(at))
