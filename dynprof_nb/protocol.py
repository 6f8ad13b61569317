"""What a controller writes into the segment: a config plus what to do with it.

``start`` arms the config's window (even the same window again), ``stop`` ends the active
window at once, ``set`` changes keys without arming a window again. The segment carries these
bytes without reading them; the Monitor decodes them once per change.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from .config import ConfigError, ProfilerConfig

ACTIONS = ("start", "stop", "set")


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
    """Parse and fully validate segment bytes; raises ConfigError saying what was wrong."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the job's config is not valid JSON ({exc}); write it again.") from exc
    if not isinstance(raw, dict) or raw.get("action") not in ACTIONS:
        raise ConfigError("the job's config has no valid action; write it again with "
                          "job.set() or job.start().")
    cfg = ProfilerConfig.from_dict(raw.get("config") or {}, strict=True)
    return Command(raw["action"], cfg, int(raw.get("by") or 0), float(raw.get("at") or 0.0))
