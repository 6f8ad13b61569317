"""One rank's slot in the job segment, as the rank writes it: :class:`RankSlot`.

A rank alone writes its slot (so status flows back to the controllers without a lock): its
state, step, heartbeat and step rate, the generation it applied, its window, its doorbell, the
run it joined and its text fields (error, output root, last window). The word offsets
(``S_*``, :mod:`~dynprof_nb.contract.segment`) are this class's business; the rank's parts
(:mod:`dynprof_nb.training`) call its methods and never compute ``base + S_*``.

A RankSlot is this rank's slot for the life of its Monitor. Before the rank joins a job, and
after it leaves, it is *detached*: its words are a private list, so the step path writes
somewhere harmless rather than test for a segment on every step. When the segment is
republished (truncated or removed under the job, see the heartbeat) the same RankSlot is
re-pointed at the new one (:meth:`attach`), so every part built with it follows.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import time
from typing import Any

from dynprof_nb.contract.segment import (
    H_GEN,
    H_RUN,
    H_RUN_STARTED,
    RING_BYTES,
    S_APPLIED,
    S_BEAT_NS,
    S_BELL_FD,
    S_BELL_TOKEN,
    S_ERR_GEN,
    S_PID,
    S_PID_START,
    S_RANK,
    S_RATE,
    S_RUN,
    S_SEQ,
    S_START,
    S_STATE,
    S_STEP,
    S_STOP,
    SLOT_BYTES,
    SLOT_COUNT,
    SLOT_WORDS,
    STATE,
    TEXT_FIELDS,
    Segment,
    SegmentError,
    pid_start_time,
    process_alive,
    slot_area,
    slot_base,
)

log = logging.getLogger("dynprof_nb")
#: runs are numbered from 1 and bumped once per restart of the job: a counter at or past this
#: (or negative) was never written by a rank; it is corrupt or hostile (:func:`_rescued_run`)
RUN_MAX = 2**62


class RankSlot:
    """This rank's words in the job segment (``seg``, slot ``index``), or a private stand-in
    while it is detached (``seg`` None)."""

    __slots__ = ("seg", "index", "base", "words")

    def __init__(self) -> None:
        self.seg: Segment | None = None
        self.index = -1
        self.base = 0
        self.words: Any = [0] * SLOT_WORDS  # stands in for the segment when there is none

    # -- joining and leaving --------------------------------------------------------------

    def attach(self, seg: Segment, index: int) -> None:
        """Point this slot at slot ``index`` of ``seg`` (the words last: a step that writes
        in between lands in the old segment, which is still open)."""
        self.seg, self.index, self.base = seg, index, slot_base(index)
        self.words = seg.words

    def detach(self) -> None:
        self.seg, self.index, self.base, self.words = None, -1, 0, [0] * SLOT_WORDS

    def claim(self, seg: Segment, rank: int, keep: int = -1) -> None:
        """Take a slot of ``seg`` for this process and attach to it: ``keep`` when this process
        already holds it (a segment republished from a copy of ours), else its rank's dead
        slot, a free one, or any dead one. The first rank to join when no rank of the current
        run is live begins a new run (:func:`~dynprof_nb.contract.segment.run_of`); the slot
        records the run its rank joined."""
        if keep >= 0 and seg.words[slot_base(keep)] == os.getpid():
            self.attach(seg, keep)
        else:
            self.attach(seg, _claim(seg, rank))

    def release(self) -> None:
        """Mark the slot closed (the rank left; its words stay for the controllers)."""
        self.words[self.base + S_STATE] = STATE["closed"]

    def owned(self) -> bool:
        """The slot still names this process (another may have taken it over)."""
        return self.words[self.base + S_PID] == os.getpid()

    def lost(self) -> bool:
        """The segment's descriptor was closed under the job, or now names another file."""
        return self.seg is not None and self.seg.words.lost()

    @property
    def ring_base(self) -> int:
        """Index of this slot's step-time ring's first word in the segment's words."""
        return self.seg.ring_base(self.index)

    # -- what the rank publishes ----------------------------------------------------------

    def set_state(self, state: str) -> None:
        self.words[self.base + S_STATE] = STATE[state]

    def set_step(self, step: int) -> None:
        self.words[self.base + S_STEP] = step

    def beat(self, step: int, now_ns: int, rate: float) -> None:
        """The heartbeat: the step, when it was seen (monotonic ns) and the step rate."""
        w, b = self.words, self.base
        w[b + S_STEP] = step
        w[b + S_BEAT_NS] = now_ns
        w[b + S_RATE] = int(rate * 1000)

    def set_applied(self, generation: int) -> None:
        self.words[self.base + S_APPLIED] = generation

    def set_window(self, start: int, stop: int) -> None:
        self.words[self.base + S_START] = start
        self.words[self.base + S_STOP] = stop

    def set_stop(self, stop: int) -> None:
        self.words[self.base + S_STOP] = stop

    def set_error(self, text: str, generation: int | None = None) -> None:
        """The error text; with ``generation``, the config generation it belongs to."""
        self.write_text("error", text)
        if generation is not None:
            self.words[self.base + S_ERR_GEN] = generation

    def set_bell(self, token: int, fd: int) -> None:
        """Where controllers ring this rank's doorbell (its token and descriptor number)."""
        self.words[self.base + S_BELL_TOKEN] = token
        self.words[self.base + S_BELL_FD] = fd

    @property
    def run(self) -> int:
        """The run this slot's rank joined."""
        return self.words[self.base + S_RUN]

    def set_run(self, run: int) -> None:
        """Record the run this rank joined, in the slot and (when it is newer) the header:
        a segment made again from a config alone must not start the runs over."""
        w = self.words
        w[self.base + S_RUN] = run
        if w[H_RUN] < run:
            w[H_RUN] = run

    def generation(self) -> int:
        """The job's config generation (the segment header's)."""
        return self.words[H_GEN]

    def write_text(self, field: str, text: str) -> None:
        """Write a text field (error, root, window) under the slot's own seqlock; nothing
        while detached."""
        if self.seg is None:
            return
        offset, size = TEXT_FIELDS[field]
        raw = text.encode("utf-8", "replace")[: size - 1]
        b = self.base
        start = b * 8 + offset
        w = self.words
        w[b + S_SEQ] += 1
        self.seg.raw[start : start + size] = raw + bytes(size - len(raw))
        w[b + S_SEQ] += 1


def _claim(seg: Segment, rank: int) -> int:
    """Take a slot index under the segment's write lock (see :meth:`RankSlot.claim`)."""
    me, my_start = os.getpid(), pid_start_time(os.getpid())
    w = seg.words
    with seg.write_lock():
        free = reuse = dead = None
        run_live = False
        area = slot_area(seg)
        run = w[H_RUN]
        corrupt = None if 0 <= run < RUN_MAX else run  # bumping it would overflow its word
        if corrupt is not None:  # and turn the rank's profiler off for good (adversarial pass)
            run = _rescued_run(seg, area)
        for i in range(SLOT_COUNT):
            pid, slot_rank, _, state = struct.unpack_from("<4q", area, i * SLOT_BYTES)
            if pid == 0:
                free = i if free is None else free
                continue
            pid_start = struct.unpack_from("<q", area, i * SLOT_BYTES + S_PID_START * 8)[0]
            if process_alive(pid, pid_start):
                slot_run = struct.unpack_from("<q", area, i * SLOT_BYTES + S_RUN * 8)[0]
                run_live = run_live or (state != STATE["closed"] and slot_run == run)
                continue
            if slot_rank == rank and reuse is None:
                reuse = i
            elif dead is None:
                dead = i
        index = next((i for i in (reuse, free, dead) if i is not None), None)
        if index is None:
            raise SegmentError(
                f"all {SLOT_COUNT} rank slots of job {seg.job!r} are in use by live processes."
            )
        if not run_live or run < 1:  # every rank of the run before is gone: a new run
            run += 1
            w[H_RUN_STARTED] = time.time_ns()
            w[H_RUN] = run
        if corrupt is not None:
            w[H_RUN] = run  # joining a live run too: the counter is sound from now on
            log.warning(
                "dynprof_nb job %r: the segment's run counter was %d, which no rank wrote "
                "(corrupt or tampered with); this rank is in run %d (from the runs the "
                "segment still names) and profiles as usual",
                seg.job,
                corrupt,
                run,
            )
        b = slot_base(index)
        seg.raw[b * 8 : (b * 8) + SLOT_BYTES] = bytes(SLOT_BYTES)
        ring = seg.ring_base(index) * 8
        seg.raw[ring : ring + RING_BYTES] = bytes(RING_BYTES)
        w[b + S_RANK] = rank
        w[b + S_STATE] = STATE["idle"]
        w[b + S_START] = w[b + S_STOP] = -1
        w[b + S_BEAT_NS] = time.monotonic_ns()
        w[b + S_PID_START] = my_start
        w[b + S_RUN] = run
        w[b + S_PID] = me
    return index


def _rescued_run(seg: Segment, area: Any) -> int:
    """The run a corrupt run counter stands for: the newest run the segment still names, so
    that the claim's usual rule follows (join it while one of its ranks is live, else begin
    the next). That is the newest run a slot records (a slot keeps its run after its rank has
    gone), and the run before the one the pending command was written for (a window asked of
    run N is dropped by run N + 1; one asked while the job was down, for run N + 1, is taken).
    Never a run a slot or the command already names as ended, so no window of one run is
    recorded by another. The claim says so once, in the rank's log: the counter is sound
    afterwards."""
    known = [0]
    for i in range(SLOT_COUNT):
        if struct.unpack_from("<q", area, i * SLOT_BYTES + S_PID * 8)[0]:
            known.append(struct.unpack_from("<q", area, i * SLOT_BYTES + S_RUN * 8)[0])
    got = seg.read_config()
    try:
        asked = json.loads(got[1]).get("run", 0) if got is not None and got[1] else 0
    except (ValueError, AttributeError, RecursionError):  # not a command: it names no run
        asked = 0
    if type(asked) is int:
        known.append(asked - 1)
    return max(r for r in known if 0 <= r < RUN_MAX - 1)


def claim_slot(seg: Segment, rank: int) -> RankSlot:
    """A new RankSlot holding a freshly claimed slot of ``seg`` (tests, benchmarks, tools)."""
    slot = RankSlot()
    slot.claim(seg, rank)
    return slot
