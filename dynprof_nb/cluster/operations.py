"""What a node agent can do, and nothing else: the fixed set of operations (no Dask here).

The cluster controller calls :meth:`NodeOperations.call` with an operation name from
:data:`OPERATIONS` and a payload of plain data (strings, numbers, dicts of them): apply a
command to a job's segment, report a job's rank slots, list a job's windows, check a window path,
take the stacks of the job's ranks on this node, collect their Flight Recorder dumps.
Reading a window's tables is a task (:mod:`dynprof_nb.cluster.reduce`) that first asks
:meth:`NodeOperations.window_path` whether the path is one of the job's windows on this node. A
fixed surface is what lets the access check sit in one place: every operation names the requesting
user, and an agent acts only for the user it runs as (:mod:`dynprof_nb.cluster.access`).

Commands go through the node's :class:`~dynprof_nb.control.job.Job`, so a node validates and
publishes exactly as a local ``Job`` does. The cluster's generation (``seq``) is not the
segment's: each node maps the segment generations it wrote to the cluster ``seq`` they carried,
so status rows from every node speak of one generation.

**Adding an operation** (three places, nothing else):

1. here, a method ``op_<name>(self, job: str, ...) -> dict`` on :class:`NodeOperations`: its
   keyword arguments are the payload, its answer plain data (no pickles cross the gate:
   :mod:`dynprof_nb.cluster.wire`); ranks travel as :class:`~dynprof_nb.contract.rows.RankRow`
   ``.to_dict()``;
2. here, its name in :data:`OPERATIONS` (the one dispatch table; the access check in
   :meth:`NodeOperations.call` covers it);
3. in :mod:`dynprof_nb.cluster.controller`, a method that calls
   ``self._agents.run("<name>", {"job": self.name, ...})`` and merges the nodes' answers.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dynprof_nb.cluster.access import refusal, user_name
from dynprof_nb.contract import window_dirs
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.protocol import ACTIONS, check_reason
from dynprof_nb.contract.rows import StepWindow, window_text
from dynprof_nb.contract.segment import check_job_name, list_jobs
from dynprof_nb.contract.shared_layout import check_definition, durations, read_entries
from dynprof_nb.control import trigger
from dynprof_nb.control.base import JobError
from dynprof_nb.control.job import Job
from dynprof_nb.control.stacks import DUMP_TIMEOUT_S, collect, progress_fields
from dynprof_nb.control.status import age_s

ARM_POLL_S = 0.005
STEP_COLUMNS = ("rank", "step", "end_s", "duration_s", "kind")  # durations()' order, rank first
ARM_WAIT_MAX_S = 10.0


class OperationError(ValueError):
    """A payload the agent refuses (the message says what was wrong)."""


class NotYourJob(OperationError):
    """An operation from a user other than the one the agent runs as."""


class NodeOperations:
    """The node's jobs as the agent sees them: open ``Job`` handles and the seq map."""

    def __init__(self, name: str, key: str) -> None:
        self.name = name
        self.key = key
        self._seqs: dict[str, list[tuple[int, int]]] = {}  # job -> [(segment gen, seq)]
        self._lock = threading.Lock()

    # -- the one entry point ----------------------------------------------------------------

    def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Run one operation for the user the payload names (``user``: uid and name, added by
        the controller); the answer always names the node. Another user's operation raises
        :class:`NotYourJob`, except ``hello``, which says whose agent this is and nothing
        more."""
        if op not in OPERATIONS:
            raise OperationError(f"unknown operation {op!r}; an agent does {tuple(OPERATIONS)}.")
        if not isinstance(payload, dict):
            raise OperationError(f"payload must be a dict, got {type(payload).__name__}.")
        payload = dict(payload)
        user = payload.pop("user", None)
        uid = os.getuid()
        who = {"node": self.name, "key": self.key, "uid": uid, "user": user_name(uid)}
        why = refusal(user, op, payload.get("job"), self.name)
        if why is not None:
            if op == "hello":
                return {**who, "foreign": True}
            raise NotYourJob(why)
        answer = OPERATIONS[op](self, **payload)
        return {**who, **answer}

    def op_hello(self) -> dict[str, Any]:
        return {"jobs": list_jobs()}

    def op_apply(
        self,
        job: str,
        action: str,
        config: dict[str, Any],
        seq: int,
        arm_wait_s: float = 0.0,
        reason: str = "",
    ) -> dict[str, Any]:
        if action not in ACTIONS:
            raise OperationError(f"action {action!r}: expected one of {ACTIONS}.")
        cfg = ProfilerConfig.from_dict(config, strict=True)
        with self.job(job, create=True) as handle:
            with self._lock:
                # validate, then publish: as a local Job does
                gen = handle.publish(action, cfg, reason=check_reason(reason))
                self._seqs.setdefault(job, []).append((gen, int(seq)))
                del self._seqs[job][:-64]
            slots = self._wait_applied(handle, gen, min(float(arm_wait_s), ARM_WAIT_MAX_S))
        return {"gen": gen, "ranks": [self._slot_info(s, gen) for s in slots]}

    def op_status(self, job: str) -> dict[str, Any]:
        segment = 0
        if job in list_jobs():
            try:
                with self.job(job) as handle:
                    segment = handle.generation
            except JobError:
                pass
        return {"rows": self.rows(job), "segment_generation": segment}

    def op_windows(self, job: str) -> dict[str, Any]:
        return {"windows": self.window_rows(job)}

    def op_trigger(self, job: str, definition: dict[str, Any] | None) -> dict[str, Any]:
        """Store (or, with None, clear) the job's trigger on this node, in cluster mode: the
        node's ranks ask this node's agent, which starts the window on every node."""
        d = None
        if definition is not None:
            d = check_definition(dict(definition, mode="cluster"))
        with self.job(job, create=True) as handle:
            trigger.arm(handle.segment(create=True), d)
        return {"armed": d is not None}

    def op_step_times(self, job: str, last: int = 100) -> dict[str, Any]:
        """The node's ranks' last ``last`` step times as columns (one list per column of
        ``STEP_TIME_COLUMNS`` but ``node``): a few lists cross the wire, not a dict per step."""
        if job not in list_jobs():
            return {"columns": step_columns(None, 0)}
        with self.job(job) as handle:
            return {"columns": step_columns(handle.segment(), int(last))}

    def op_stacks(self, job: str, timeout_s: float = DUMP_TIMEOUT_S) -> dict[str, Any]:
        """Every thread's stack of the job's live ranks on this node (see
        :mod:`dynprof_nb.control.stacks`): rows, and the ranks that did not answer."""
        if job not in list_jobs():
            return {"rows": [], "silent": []}
        with self.job(job) as handle:
            slots = handle.live_slots()
        rows, silent = collect(job, slots, min(float(timeout_s), DUMP_TIMEOUT_S), self.name)
        return {"rows": rows, "silent": silent}

    def op_flight_recorder(
        self, job: str, timeout_s: float = DUMP_TIMEOUT_S, stack_traces: bool = False
    ) -> dict[str, Any]:
        """The Flight Recorder dumps of the job's live ranks on this node that have one (see
        :mod:`dynprof_nb.control.hang`), read with the safe reader and sent as plain data;
        the others' reasons."""
        from dynprof_nb.control import hang
        from dynprof_nb.flight_recorder.reader import read_dump

        if job not in list_jobs():
            return {"dumps": [], "notes": {}}
        with self.job(job) as handle:
            slots = handle.live_slots()
        asked, notes = hang.ask(job, slots, bool(stack_traces))
        paths, more = hang.collect(asked, min(float(timeout_s), DUMP_TIMEOUT_S))
        notes.update(more)
        dumps = []
        for rank, path in sorted(paths.items()):
            try:
                dumps.append(hang.as_plain(read_dump(path)))
            except (OSError, ValueError) as exc:
                notes[rank] = f"its dump could not be read: {exc}"
        return {"dumps": dumps, "notes": {str(r): why for r, why in notes.items()}}

    # -- helpers ----------------------------------------------------------------------------

    def job(self, name: str, create: bool = False) -> Job:
        """The job's segment on this node, opened for one operation (close it: ``with``).
        Not cached: a job run again under the same name gets a new segment."""
        check_job_name(name)
        return Job.open(name, create=create)

    def known_jobs(self) -> list[str]:
        return list_jobs()

    def record(self, job: str, gen: int, seq: int) -> None:
        """Remember that segment generation ``gen`` carries cluster ``seq`` (a catch-up)."""
        with self._lock:
            self._seqs.setdefault(job, []).append((gen, int(seq)))

    def seq_of(self, job: str, applied: int) -> int:
        """The cluster seq a rank that applied segment generation ``applied`` has seen."""
        best = 0
        for gen, seq in self._seqs.get(job, ()):
            if gen <= applied:
                best = max(best, seq)
        return best

    @staticmethod
    def _wait_applied(handle: Job, gen: int, wait_s: float) -> list[Any]:
        deadline = time.monotonic() + wait_s
        while True:
            slots = handle.live_slots()
            if all(s.applied >= gen for s in slots) or time.monotonic() >= deadline:
                return slots
            time.sleep(ARM_POLL_S)

    @staticmethod
    def _slot_info(slot: Any, gen: int) -> dict[str, Any]:
        return {
            "rank": slot.rank,
            "pid": slot.pid,
            "step": slot.step,
            "state": slot.state,
            "start": slot.start,
            "stop": slot.stop,
            "applied": slot.applied >= gen,
            "error": slot.error,
        }

    def rows(self, job: str) -> list[dict[str, Any]]:
        """The job's rank slots on this node as status rows (plus the step rate), live and dead;
        no rows when the job has no segment here."""
        if job not in list_jobs():
            return []
        try:
            with self.job(job) as handle:
                slots = handle.slots()
                seg = handle.segment()
                steps = {s.index: trigger.recent_step_s(seg, s.index) for s in slots}
        except JobError:  # removed since it was listed
            return []
        now = time.monotonic_ns()
        rows = []
        for s in slots:
            closed = s.state == "closed"
            alive = not closed and s.alive
            extra = progress_fields(job, s)  # the stall's inputs, from the rank's side file
            ring_s = steps.get(s.index) if alive else None  # from the step-time ring
            rows.append(
                {
                    "rank": s.rank,
                    "pid": s.pid,
                    "step": s.step,
                    "state": s.state if alive or closed else "dead",
                    "window": window_text(StepWindow.of(s.start, s.stop)),
                    "generation": self.seq_of(job, s.applied),
                    "local_gen": s.applied,
                    "heartbeat_age_s": age_s(now, s.heartbeat_ns),
                    "alive": alive,
                    "error": s.error,
                    "rate": s.rate_milli / 1000.0,
                    "step_s": ring_s if ring_s is not None else extra.get("step_s"),
                    "last_step_wall": extra.get("last_step_wall"),
                }
            )
        return rows

    def window_rows(self, job: str) -> list[dict[str, Any]]:
        """The windows of the job's ranks on this node, under the roots they published. Only
        this node's ranks: on a shared filesystem every node sees every rank's directory, and
        each window must be listed (and read) by the node that wrote it."""
        if job not in list_jobs():
            return []
        try:
            with self.job(job) as handle:
                ranks = {s.rank for s in handle.slots()}
                roots = handle.roots()
        except JobError:
            return []
        return [row for row in window_dirs.find_windows(roots, job=job) if row["rank"] in ranks]

    def window_path(self, job: str, path: str, user: Any = None) -> Path:
        """``path`` if it is one of ``job``'s windows on this node (see :meth:`window_paths`)."""
        return self.window_paths(job, [path], user)[0]

    def window_paths(self, job: str, paths: list[str], user: Any = None) -> list[Path]:
        """``paths`` if each is one of ``job``'s windows on this node, asked for by the user the
        agent runs as, else OperationError: the agent reads only what the job's own ranks
        wrote, under the roots they published; nothing in it may lead out of those roots (a
        symlinked window or file). The node's windows are listed once for all ``paths`` (a
        listing reads every window's manifest: once per path would cost ranks squared)."""
        why = refusal(user, "load", job, self.name)
        if why is not None:
            raise NotYourJob(why)
        for path in paths:
            if not isinstance(path, str) or "\0" in path:
                raise OperationError(f"window path {path!r}: expected a path string.")
        check_job_name(job)
        with self.job(job) as handle:  # the roots the ranks published, not the config's
            slots = handle.slots()
        roots = sorted(
            {os.path.realpath(s.root) for s in slots if s.root}
            | {os.path.realpath(os.path.dirname(s.window)) for s in slots if s.window}
        )
        listed = {row["path"] for row in self.window_rows(job)}
        for path in paths:
            if path not in listed or not _inside(path, roots):
                raise OperationError(
                    f"{path!r} is not a window of job {job!r} on node "
                    f"{self.name}; windows() lists the ones there are."
                )
            _no_link_out(path, roots, self.name)
        return [Path(p) for p in paths]

    def close(self) -> None:
        """Nothing held between operations (kept for symmetry with the agent)."""


def step_columns(seg: Any, last: int) -> dict[str, list[Any]]:
    """Every rank's last ``last`` step times of segment ``seg`` (None: none), column-wise."""
    cols: dict[str, list[Any]] = {c: [] for c in STEP_COLUMNS}
    for s in seg.slots() if seg is not None else ():
        rows = durations(read_entries(seg.words, seg.ring_base(s.index), last))[-last:]
        cols["rank"] += [s.rank] * len(rows)
        for name, values in zip(STEP_COLUMNS[1:], zip(*rows, strict=True), strict=False):
            cols[name] += values
    cols["end_s"] = [ns / 1e9 for ns in cols["end_s"]]
    return cols


def _no_link_out(path: str, roots: list[str], node: str) -> None:
    """OperationError when anything in window ``path`` is a symlink out of ``roots``."""
    for parent, dirs, files in os.walk(path):
        for entry in dirs + files:
            full = os.path.join(parent, entry)
            if os.path.islink(full) and not _inside(full, roots):
                raise OperationError(
                    f"window {path!r} on node {node}: {full} is a "
                    "symlink out of the job's output roots; refusing to "
                    "read through it."
                )


def _inside(path: str, roots: list[str]) -> bool:
    """``path``, symlinks resolved, is one of ``roots`` or under one (also resolved)."""
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)


# Every operation an agent does, by the name the controller sends: the one dispatch table (an
# operation not listed here cannot be called, and "find usages" reaches every handler).
OPERATIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "hello": NodeOperations.op_hello,
    "apply": NodeOperations.op_apply,
    "status": NodeOperations.op_status,
    "windows": NodeOperations.op_windows,
    "trigger": NodeOperations.op_trigger,
    "step_times": NodeOperations.op_step_times,
    "stacks": NodeOperations.op_stacks,
    "flight_recorder": NodeOperations.op_flight_recorder,
}
