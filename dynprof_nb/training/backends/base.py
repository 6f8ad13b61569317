"""The contract every backend follows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from dynprof_nb.contract.config import ProfilerConfig

BUDGET_CHECK_STEPS = 16  # a framework's buffers are not ours to count: RSS growth stands for them


def process_rss() -> int:
    """This process's resident memory in bytes (one small /proc read); 0 where unknown."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def growth_over_budget(rss0: int, budget: int, step: int) -> str | None:
    """The ``full`` reason once the process has grown by more than ``budget`` bytes since the
    window began (``rss0``), checked every ``BUDGET_CHECK_STEPS`` steps; else None."""
    if not budget or step % BUDGET_CHECK_STEPS or process_rss() - rss0 <= budget:
        return None
    return (
        f"memory budget reached ({budget / 2**20:.0f} MB of growth since the window "
        f"began) at step {step}"
    )


class BackendError(RuntimeError):
    """A backend cannot start or save; the Monitor reports it and training goes on."""


@runtime_checkable
class Backend(Protocol):
    """Optional attributes the Monitor looks for:

    * ``save_in_child`` (bool): ``save()`` may run in a forked child process (plain data,
      no threads needed), so the training process never pays for it;
    * ``needs_directory_at_start`` (bool): ``start`` needs the window's directory; otherwise
      it may get ``None`` and ``directory`` is set before ``save()``;
    * ``full`` (str | None): set when the window's memory budget (``context["memory_budget"]``,
      bytes) is reached; the backend stops recording and the Monitor ends the window;
    * ``release()``: free the recording after a save in a child, a little at a time.
    """

    name: str

    def start(
        self,
        directory: Path,
        config: ProfilerConfig,
        first_step: int,
        context: dict[str, Any] | None = None,
    ) -> None:
        """Begin collecting; the next step to run is ``first_step``.

        ``context`` carries job, rank and world size for labelling the trace.
        """

    def step(self, step: int) -> None:
        """Step ``step`` (global, 1-based) has just ended; the next one begins."""

    def stop(self) -> None:
        """Stop collecting. Runs on the training thread, so it must be quick."""

    def save(self) -> list[str]:
        """Write the window's files into the directory; returns their relative paths."""
