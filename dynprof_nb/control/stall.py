"""Which ranks are hung: each rank against its own step time, from its step-time ring.

A live rank whose last step ended more than :data:`STALL_AFTER` x its own median step time
ago, and at least :data:`STALL_MIN_S` ago, is ``stalled``: its ``state`` says so, and its
error says since which of *its* steps and for how long. When several ranks are stalled, the one
whose last step ended first is named as the first to stop (in a collective, the others then
wait for it). The ring's end times are the steps' own (the training thread's clock, see
:mod:`dynprof_nb.training.steptimes`), so "for how long" is exact, not a heartbeat's guess.

A rank whose process still runs but no longer holds its Monitor's doorbell (it ``exec``'d,
or closed every fd) no longer runs this Monitor: it is named so at once, not after the stall
bound (see :func:`lost_monitor`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dynprof_nb.contract.segment import Segment, SlotView, pid_alive
from dynprof_nb.contract.shared_layout import R_MEDIAN_NS, last_end

STALL_AFTER = 20.0  # x the rank's own median step time...
STALL_MIN_S = 5.0  # ...and at least this long without a step (a checkpoint, a slow batch)
LOST_AFTER_S = 1.0  # no step this long and no doorbell: the process no longer runs a Monitor


@dataclass
class Stall:
    """One stalled rank: its last step, how long ago it ended, and its median step (s)."""

    rank: int
    step: int
    seconds: float
    median_s: float
    first: bool = False  # the first of the stalled ranks to stop

    def text(self, bound_s: float) -> str:
        """ "stalled since step N (X s; ...)": N is *this* rank's last step ended."""
        median = f"{self.median_s * 1e3:.1f} ms" if self.median_s else "unknown"
        head = (
            f"stalled since step {self.step} ({self.seconds:.1f} s, its own median step "
            f"{median}, stalled after {bound_s:.1f} s)"
        )
        if self.first:
            head += "; the first rank to stop"
        return head + ": job.stacks() shows where each rank is"


def stalls(
    seg: Segment | None,
    slots: list[SlotView],
    now_ns: int,
    after: float = STALL_AFTER,
    min_s: float = STALL_MIN_S,
) -> dict[int, tuple[Stall, float]]:
    """``{slot index: (Stall, its bound in s)}`` for the live ranks that are stalled."""
    found: dict[int, tuple[Stall, float]] = {}
    if seg is None:
        return found
    for s in slots:
        if not s.live or s.state in ("closed", "saving"):
            continue
        ring = seg.ring_base(s.index)
        end = last_end(seg.words, ring)
        if end is None or end[0] < 1:
            continue  # no step ended yet: starting up is not a stall
        step, end_ns = end
        median_s = seg.words[ring + R_MEDIAN_NS] / 1e9
        bound = max(min_s, after * median_s)
        seconds = (now_ns - end_ns) / 1e9
        if seconds >= bound:
            found[s.index] = (Stall(s.rank, step, seconds, median_s), bound)
    if len(found) > 1:  # the one that stopped first (its last step ended earliest)
        first = max(found.values(), key=lambda v: v[0].seconds)[0]
        first.first = True
    return found


def named(
    seg: Segment | None,
    slots: list[SlotView],
    now_ns: int,
    after: float = STALL_AFTER,
    min_s: float = STALL_MIN_S,
    lost: set[int] | None = None,
) -> dict[int, tuple[Stall, float]]:
    """The stalls a controller reports, in ``status()`` and ``step_times()`` alike: those of
    :func:`stalls` among the ranks that still run their Monitor. A rank that ``exec``'d stops
    stepping too, but it is dead (:func:`lost_monitor`), not stalled: ``step_times()`` named
    it stalled while ``status()`` said dead. ``lost``: the slot indices the caller already
    found so (looked up here when None). Both callers read the slots first and ``now_ns``
    after them, so one snapshot gives one answer."""
    if lost is None:
        lost = {s.index for s in slots if s.live and lost_monitor(s, now_ns)}
    return stalls(seg, [s for s in slots if s.index not in lost], now_ns, after, min_s)


def lost_monitor(slot: SlotView, now_ns: int) -> str:
    """Why a live slot's process no longer runs its Monitor ("" when it does): it has not
    stepped for :data:`LOST_AFTER_S` and no longer holds the doorbell the slot names (an
    ``exec`` closes it: the fd is close-on-exec)."""
    from dynprof_nb.contract.segment import open_bell

    if slot.state == "closed" or not slot.bell_fd or not pid_alive(slot.pid):
        return ""
    if (now_ns - slot.heartbeat_ns) / 1e9 < LOST_AFTER_S:
        return ""
    fd = open_bell(slot)
    if fd is not None:
        import os

        os.close(fd)
        return ""
    return (
        f"pid {slot.pid} no longer runs its Monitor (it exec'd another program, or closed "
        f"the Monitor's files) after step {slot.step}"
    )


def mark(rows: list[dict[str, Any]], slots: list[SlotView], found: dict[int, Any]) -> None:
    """Put each stall into its rank's row: ``state`` "stalled", the error first."""
    for s, row in zip(slots, rows, strict=True):
        if s.index not in found or row.get("alive") is not True:
            continue
        stall, bound = found[s.index]
        text = stall.text(bound)
        row["state"] = "stalled"
        row["error"] = f"{text}; {row['error']}" if row.get("error") else text


class StallCapture:
    """What a named stall takes, once per stall (``HangWatch.note`` calls :meth:`take`): the
    hang report where a rank has its Flight Recorder on (kept as :attr:`last_report`; its
    stacks are the ones kept), else the stacks; and each rank's recent-steps record, asked
    for beside them (``attrs["recent"]`` says where it is). The controller is given at each
    call, not held (this module imports no controller, and a handle dropped is freed at once)."""

    def __init__(self) -> None:
        self.last_report: Any = None  # the hang report taken at the last stall

    def take(self, job: Any) -> Any:
        """The stacks (or the hang report's) of ``job``, a ``Job``, now."""
        from dynprof_nb.control import hang
        from dynprof_nb.control.recent import keep_at_hang

        if not hang.any_recorder(job.name, job.live_slots()):
            frame = job.stacks()
        else:
            self.last_report = job.hang_report()
            frame = self.last_report.stacks
        # the steps leading up to the hang, kept by each rank beside these stacks
        frame.attrs["recent"] = keep_at_hang(job)
        return frame
