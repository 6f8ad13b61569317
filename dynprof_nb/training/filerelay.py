"""File mode's part of a Monitor: relaying MindSpore's ``profiler_config.json`` into the job.

A Monitor given ``cfg_path`` holds one :class:`FileRelay`. It elects one process per node to
relay the file into the job's segment every ``poll_interval`` seconds
(:mod:`dynprof_nb.control.relay`), and for :class:`~dynprof_nb.training.monitor.FileModeMonitor`
it also relays on the training thread, at the ``step()`` whose ``fstat`` saw the file change, so
that step applies the edit (see :meth:`FileRelay.relay_now`).
"""

from __future__ import annotations

import os
from typing import Any

from dynprof_nb.contract.segment import BELL_GEN
from dynprof_nb.contract.slot import RankSlot
from dynprof_nb.training.stepstate import StepState


class NoFile:
    """The watch of a file-mode monitor that has no relay (it reported why)."""

    @staticmethod
    def changed() -> bool:
        return False


class FileRelay:
    """The relay of one Monitor ``m`` (``relay`` is None when it could not be made)."""

    __slots__ = ("m", "slot", "state", "status", "relay", "path")

    def __init__(
        self,
        monitor: Any,
        slot: RankSlot,
        state: StepState,
        status: Any,
        cfg_path: str | os.PathLike[str],
    ) -> None:
        self.m = monitor  # its job and step_count
        self.slot = slot
        self.state = state  # the doorbell's words, raised here when a ring was missed
        self.status = status
        self.relay: Any = None
        self.path = cfg_path

    def start(self, poll_interval: float | None) -> None:
        """Relay the file into this job from one process per node (an election)."""
        from dynprof_nb.control.relay import POLL_INTERVAL_S, Relay

        try:
            self.relay = Relay(self.path, self.m.job, poll_interval or POLL_INTERVAL_S)
            self.relay.poll()  # the first look, here: a window asked for before step 1 is in
            self.relay.start(elect=True, first_look_s=0)
        except Exception as exc:
            self.relay = None
            self.status.report(f"cannot relay {self.path}: {exc}")

    @property
    def watch(self) -> Any:
        """What a file-mode ``step()`` asks ``changed()`` of: the relay's file watch."""
        return self.relay.watch if self.relay is not None else NoFile

    def relay_now(self) -> None:
        """The file changed: relay it now, on the training thread, so this step applies it."""
        bell = self.state.bell
        try:
            self.slot.set_step(self.m.step_count)  # the relay checks where ranks are
            if self.relay.poll():
                gen = self.slot.generation()
                if gen > bell[BELL_GEN]:  # our own doorbell, in case the ring missed
                    bell[BELL_GEN] = gen
        except Exception as exc:  # never into the training loop
            self.status.report(f"cannot relay {self.relay.path}: {exc!r}")

    def stop(self) -> None:
        if self.relay is not None:
            self.relay.stop()
