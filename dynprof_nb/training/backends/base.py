"""The contract every backend follows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from dynprof_nb.config import ProfilerConfig


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

    def start(self, directory: Path, config: ProfilerConfig, first_step: int,
              context: dict[str, Any] | None = None) -> None:
        """Begin collecting; the next step to run is ``first_step``.

        ``context`` carries job, rank and world size for labelling the trace.
        """

    def step(self, step: int) -> None:
        """Step ``step`` (global, 1-based) has just ended; the next one begins."""

    def stop(self) -> None:
        """Stop collecting. Runs on the training thread, so it must be quick."""

    def save(self) -> list[str]:
        """Write the window's files into the directory; returns their relative paths."""
