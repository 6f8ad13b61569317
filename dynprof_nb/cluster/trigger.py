"""The trigger across nodes: stored in a Dask ``Variable``, fired by a node agent.

``ClusterJob.trigger(...)`` stores the definition in the job's trigger ``Variable`` and on every
node (in cluster mode). A node's ranks then only *request* a window (a word in their segment,
see :mod:`dynprof_nb.training.steptimes`); the node's acting agent sees the request within
:data:`POLL_S` and, holding the job's trigger ``Lock`` (so two nodes' requests make one window),
checks the cluster-wide bounds kept in the ``Variable`` (windows fired, cooldown, a window
already pending or recording) and starts the window on every node at one step, with the
cluster's same-step, all-or-nothing start (``ClusterJob.start``). No notebook is needed: the
agent has its own client to the scheduler.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from dynprof_nb.contract.shared_layout import cooldown_s

log = logging.getLogger("dynprof_nb")

POLL_S = 0.02  # how often an agent looks for a request while its node has an armed trigger
BUSY_STATES = ("armed", "recording", "saving")
CANCEL_RETRIES = 2  # a triggered window cancelled everywhere is asked again this many times


def trigger_variable(job: str) -> str:
    """The Dask ``Variable`` holding a job's trigger (definition and cluster-wide counters)."""
    return f"dynprof_nb.trigger.{os.getuid()}.{job}"


def trigger_lock(job: str) -> str:
    return f"dynprof_nb.trigger-lock.{os.getuid()}.{job}"


def read(client: Any, job: str) -> dict[str, Any] | None:
    from distributed import Variable

    try:
        value = Variable(trigger_variable(job), client=client).get(timeout=0.5)
    except Exception:  # never set
        return None
    return value if isinstance(value, dict) and value.get("definition") else None


def store(client: Any, job: str, value: dict[str, Any] | None) -> None:
    from distributed import Variable

    Variable(trigger_variable(job), client=client).set(value or {})


class Firer:
    """An agent's trigger duties: look for its node's requests; start windows on a thread."""

    def __init__(self, operations: Any, client_of: Any, job_of: Any) -> None:
        self.operations = operations
        self.client_of = client_of  # () -> a distributed.Client to the scheduler, or None
        # (job, client) -> a ClusterJob that installs nothing; given by the agent, so this
        # module needs no import of the controller (which imports this one)
        self.job_of = job_of
        self.jobs: dict[str, Any] = {}  # job -> its ClusterJob, made on the first request
        self.pending: dict[str, str] = {}  # job -> a reason waiting for a window to end
        self.armed: set[str] = set()
        self.cancelled: dict[str, int] = {}  # job -> windows cancelled in a row (retried)
        # job -> the monotonic time of the look before the one that took its request (the
        # request was raised after it): kept over retries, so last_start's waited_s is the
        # whole wait of the window, measured, not a poll period assumed
        self.requested: dict[str, float] = {}
        self._looked = 0.0
        self._busy = threading.Lock()

    def look(self, jobs: list[str]) -> bool:
        """One look at each job's segment; True while some job here has a trigger armed (the
        agent then looks again every POLL_S)."""
        from dynprof_nb.control import trigger

        armed = set()
        now = time.monotonic()
        before, self._looked = self._looked or now, now
        for job in jobs:
            try:
                with self.operations.job(job) as handle:
                    seg = handle.segment()
                    if seg is None or not trigger.describe(seg).get("armed"):
                        continue
                    armed.add(job)
                    reason = trigger.take_request(seg)
            except Exception:
                continue
            if reason:
                self.pending[job] = reason
                self.requested.setdefault(job, before)
        self.armed = armed
        for job, reason in list(self.pending.items()):
            if self._busy.acquire(blocking=False):  # one start at a time, off the beat thread
                del self.pending[job]
                threading.Thread(
                    target=self._fire, args=(job, reason), daemon=True, name="dynprof_nb-trigger"
                ).start()
        return bool(armed)

    def _fire(self, job: str, reason: str) -> None:
        from dynprof_nb.control.base import JobError

        try:
            outcome = self.fire(job, reason)
            log.info(
                "dynprof_nb agent on %s: trigger of job %r: %s (%s)",
                self.operations.name,
                job,
                outcome,
                reason,
            )
            self.cancelled.pop(job, None)
            if outcome == "busy":
                self.pending.setdefault(job, reason)
            else:
                self.requested.pop(job, None)
        except JobError as exc:  # cancelled everywhere (a rank did not arm in time)
            tries = self.cancelled[job] = self.cancelled.get(job, 0) + 1
            again = tries <= CANCEL_RETRIES
            log.warning(
                "dynprof_nb agent on %s: the trigger's window of job %r was not "
                "armed everywhere%s: %s",
                self.operations.name,
                job,
                ", trying again" if again else "",
                exc,
            )
            if again:
                self.pending.setdefault(job, reason)
            else:
                self.requested.pop(job, None)
        except Exception as exc:
            self.requested.pop(job, None)
            log.warning(
                "dynprof_nb agent on %s: the trigger of job %r could not start a window: %r",
                self.operations.name,
                job,
                exc,
            )
        finally:
            self._busy.release()

    def fire(self, job: str, reason: str) -> str:
        """Start the trigger's window on every node if the cluster-wide bounds allow."""
        from distributed import Lock

        from dynprof_nb.control import trigger
        from dynprof_nb.control.base import WindowConflict

        t0 = time.monotonic()
        client = self.client_of()
        if client is None:
            return "no client"
        lock = Lock(trigger_lock(job), scheduler_rpc=client.scheduler, loop=client.loop)
        if not lock.acquire(timeout=10):
            return "busy"
        try:
            value = read(client, job)
            if value is None:
                return "disarmed"
            d = value["definition"]
            if value.get("fired", 0) >= d["max_windows"]:
                return "spent"
            if time.time() - value.get("last_fire", 0) < cooldown_s(d, 0):
                return "cooldown"
            cj = self.jobs.get(job)
            if cj is None:
                cj = self.jobs[job] = self.job_of(job, client)
            # the pushed rows (at most a beat old) tell a window in the way; start()'s own
            # fan-out refuses one that began since (WindowConflict): no extra fan-out here
            if any(r["alive"] and r["state"] in BUSY_STATES for r in cj.status_rows()):
                return "busy"
            try:
                cj.start(
                    "+1",
                    f"+{d['steps']}",
                    reason=reason,
                    triggered=True,
                    requested_at=self.requested.get(job),
                    **d.get("window", {}),
                )
            except WindowConflict:
                return "busy"
            store(
                client,
                job,
                dict(
                    value,
                    fired=value.get("fired", 0) + 1,
                    last_fire=time.time(),
                    last_reason=reason,
                    last_start=dict(
                        cj.last_start,
                        fired_s=round(time.monotonic() - t0, 4),
                        tries=self.cancelled.get(job, 0) + 1,
                    ),
                ),
            )
        finally:
            lock.release()
        with self.operations.job(job) as handle:
            trigger.note_fired(handle.segment(create=True), reason)
        return "fired"

    def close(self) -> None:
        self.jobs.clear()
