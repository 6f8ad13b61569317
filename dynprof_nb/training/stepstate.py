"""The state a Monitor's step path shares with its parts, handed to each part when built.

``Monitor.step()`` reads three of its own slots and nothing else (the count, the doorbell's
words, the generation it watches). Everything the slow path and the Monitor's parts (its
:class:`~dynprof_nb.training.heartbeat.RankStatus`, its
:class:`~dynprof_nb.training.config_reader.CommandReader`, its
:class:`~dynprof_nb.training.window_io.Windows` and file mode's
:class:`~dynprof_nb.training.filerelay.FileRelay`) read and write together lives here, in one
object each of them is given, so no part reaches into the Monitor's private fields.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from dynprof_nb.contract.segment import Doorbell
from dynprof_nb.training.steptimes import ENDS


class StepState:
    """One Monitor's shared step-path state (see the module). Attributes, by who writes them:

    - ``applied``, ``kept``, ``suspect``: the config generation this rank read, its bytes,
      and "rung for a generation our segment lacks" (the config reader; the heartbeat mends).
    - ``bell``, ``doorbell``: the doorbell's words (the same list as the Monitor's ``step()``
      reads; swapped only through the Monitor's ``use_bell`` callback) and the doorbell.
    - ``recording``: the window being recorded (the window writer).
    - ``fork_job``, ``closing``: the writer-process fork asked of the training thread, and
      "no step comes any more" (close()).
    - ``rate``, ``ends``, ``exact_from``: the step rate the heartbeat measured; each step's end
      time (written by the timed ``step()``), valid from step ``exact_from`` on (None: untimed).
    - ``history``, ``fr``: the kept last steps (or None) and the Flight Recorder's responder.
    - ``lock``, ``closed``, ``pid``: the step path's lock, the Monitor's end, its process.
    - ``dozing``, ``wake``: the heartbeat waits on ``wake`` for the next step (set by the slow
      path, and by close()) while an idle rank's step stands still.
    """

    __slots__ = (
        "applied",
        "kept",
        "suspect",
        "bell",
        "doorbell",
        "recording",
        "fork_job",
        "closing",
        "rate",
        "ends",
        "exact_from",
        "history",
        "fr",
        "lock",
        "closed",
        "pid",
        "dozing",
        "wake",
    )

    def __init__(self, history: Any = None) -> None:
        self.applied = 0  # the generation this rank has read
        self.kept: tuple[int, bytes] | None = None  # the last config read: (generation, bytes)
        self.suspect = False  # rung with a generation our segment lacks: check it now
        self.bell: Any = [0] * 16  # stands in for the doorbell's words when there is none
        self.doorbell: Doorbell | None = None
        self.recording: dict[str, Any] | None = None
        # a writer process is forked on the training thread, between steps (Windows.fork_here)
        self.fork_job: dict[str, Any] | None = None
        self.closing = False
        self.rate = 0.0  # steps per second, as the heartbeat last measured it
        self.ends = [0] * ENDS
        self.exact_from: int | None = None
        self.history = history
        self.fr: Any = None
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.pid = os.getpid()
        self.dozing = False
        self.wake = threading.Event()

    def owned_here(self) -> bool:
        """True in the process that made the Monitor (not in a forked child)."""
        return os.getpid() == self.pid
