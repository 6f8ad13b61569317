"""The node agent: one per node, inside a Dask worker; ranks never import Dask.

Start it with the worker (``dask worker SCHED --preload dynprof_nb.cluster.agent``) or from a
client (``client.register_plugin(AgentPlugin())``, which ``attach(job, cluster=...)`` does by
itself when a worker has no agent). It serves every job on its node:

* **commands**: the controller calls :func:`call` through ``Client.run`` with an operation of
  :data:`~dynprof_nb.cluster.operations.OPERATIONS`; the agent applies it to the node's job segment
  through the node's ``Job`` (same validation, same semantics as a local ``Job``);
* **status, pushed**: every :data:`BEAT_S` the agent reads its jobs' rank slots and, when they
  changed, sends them with ``Worker.log_event`` on :func:`status_topic`; every
  :data:`ALIVE_EVERY_S` it sends a beat on :data:`BEAT_TOPIC` (nodes that stop beating are
  shown dead by the controller);
* **late joiners**: the first time the agent sees a job's segment on its node it reads the job's
  current command from the job's Dask ``Variable`` (:func:`command_variable`) and applies it, so
  a node that joins late arms the same window as the others, and the job's armed trigger
  (:mod:`dynprof_nb.cluster.trigger`);
* **one per node**: workers that share ``/dev/shm`` elect one acting agent
  (:class:`~dynprof_nb.cluster.node.ElectionLock`); the others answer ``standby`` and take over
  when it dies.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from dynprof_nb.cluster import gate, wire
from dynprof_nb.cluster.access import client_security, refusal, requester
from dynprof_nb.cluster.node import ElectionLock, node_key, node_name
from dynprof_nb.cluster.operations import NodeOperations
from dynprof_nb.cluster.trigger import Firer
from dynprof_nb.cluster.wire import (  # noqa: F401  (call, UngatedCluster: this module's API)
    AGENTS,
    AGENTS_LOCK,
    BEAT_TOPIC,
    PLUGIN_NAME,
    UngatedCluster,
    agent_of,
    call,
    command_variable,
    lock_name,
    status_topic,
)

log = logging.getLogger("dynprof_nb")

BEAT_S = float(os.environ.get("DYNPROF_AGENT_BEAT_S", "0.25"))  # status push interval
# after a command, look every HURRY_S for HURRY_FOR_S and push as soon as a rank's generation,
# state, window or error changes (not its step): the notebook sees "applied" within a step
HURRY_S = 0.02
HURRY_FOR_S = 2.0
ALIVE_EVERY_S = 1.0  # a beat at least this often, changed or not
RESEND_EVERY_S = 5.0  # unchanged rows are sent again this often (a controller may have missed)


class Agent:
    """The agent of one worker: the node's operations, its beat thread and its election."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.operations = NodeOperations(node_name(getattr(worker, "name", None)), node_key())
        self.election = ElectionLock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._hurry_until = 0.0
        self._sent: dict[str, tuple[Any, Any, float]] = {}
        self._seen: set[str] = set()
        self._client: Any = None
        self.gate_ok = False  # the scheduler (and nanny) answered gated: see scheduler_refusal
        self.exposed: str | None = None  # why this worker is being stopped (open to others)
        self.firer = Firer(self.operations, self._scheduler_client, _cluster_job)
        self._thread = threading.Thread(target=self._run, name="dynprof_nb-agent", daemon=True)

    def start(self) -> Agent:
        self._thread.start()
        return self

    @property
    def address(self) -> str:
        return str(self.worker.address)

    async def scheduler_refusal(self) -> str | None:
        """Why this agent must not act on its cluster (its scheduler admits others), or
        None; asked of the scheduler until it once answers with this agent's uid."""
        if self.exposed:
            return f"node {self.operations.name}: refused: this worker is open to others: " + (
                self.exposed
            )
        if self.gate_ok:
            return None
        try:
            answer = await getattr(self.worker.scheduler, gate.GATE_HANDLER)()
        except Exception as exc:  # no such handler: an ungated scheduler
            answer = exc
        why = gate.scheduler_refusal(answer)
        nanny = getattr(self.worker, "nanny", None)
        if why is None and nanny:  # a nanny answers its own `run` handler too
            try:
                answer = await getattr(self.worker.rpc(nanny), gate.GATE_HANDLER)()
            except Exception as exc:
                answer = exc
            if gate.scheduler_refusal(answer) is not None:
                why = (
                    "this worker's nanny runs no dynprof_nb gate (anyone who can reach it "
                    "can run code as this user): start the worker with `--preload-nanny "
                    "dynprof_nb.cluster.gate` too, or with --no-nanny."
                )
        self.gate_ok = why is None
        return None if why is None else f"node {self.operations.name}: refused: {why}"

    @property
    def leader(self) -> bool:
        return self.election.try_acquire()

    def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        """One operation, if this agent is its node's acting agent."""
        if not self.leader:
            return {
                "node": self.operations.name,
                "key": self.operations.key,
                "standby": True,
                "why": self.election.why,
            }
        try:
            return self.operations.call(op, payload)
        finally:
            if op == "apply":
                self._hurry_until = time.monotonic() + HURRY_FOR_S
                self._wake.set()

    # -- the beat ---------------------------------------------------------------------------

    def _run(self) -> None:
        last_alive = last_full = 0.0
        while not self._stop.is_set():
            hurry = time.monotonic() < self._hurry_until or bool(self.firer.armed)
            self._wake.wait(HURRY_S if hurry else BEAT_S)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                now = time.monotonic()
                full = now - last_full >= BEAT_S * 0.9
                last_full = now if full else last_full
                leader = self.leader
                jobs = self.operations.known_jobs() if leader else []
                for job in jobs:
                    if job not in self._seen:
                        self._seen.add(job)
                        self._catch_up(job)
                    if full or now < self._hurry_until or not self.firer.armed:
                        self._push_rows(job, now, full)
                if leader:
                    for job in [j for j in self._sent if j not in jobs]:
                        self._push_gone(job)
                if leader and (full or self.firer.armed):
                    self.firer.look(jobs)  # a rank's trigger request (cluster mode)
                if now - last_alive >= ALIVE_EVERY_S:
                    self._emit(
                        BEAT_TOPIC,
                        {
                            "node": self.operations.name,
                            "key": self.operations.key,
                            "addr": self.address,
                            "leader": leader,
                            "jobs": jobs,
                            "t": time.time(),
                        },
                    )
                    last_alive = now
            except Exception as exc:  # the agent outlives any one bad beat
                log.warning("dynprof_nb agent on %s: %r", self.operations.name, exc, exc_info=True)

    def _push_rows(self, job: str, now: float, full: bool) -> None:
        """Send the job's rows if what a command changes changed (any look), or anything
        but the ages changed (full beats), or nothing was sent for RESEND_EVERY_S."""
        rows = self.operations.rows(job)
        changing = [
            {k: v for k, v in r.items() if k not in ("heartbeat_age_s", "rate")} for r in rows
        ]
        command = [{k: v for k, v in r.items() if k != "step"} for r in changing]
        sent = self._sent.get(job)
        if (
            sent is not None
            and command == sent[1]
            and not (full and (changing != sent[0] or now - sent[2] >= RESEND_EVERY_S))
        ):
            return
        self._sent[job] = (changing, command, now, rows)
        self._emit(
            status_topic(job),
            {
                "job": job,
                "node": self.operations.name,
                "key": self.operations.key,
                "addr": self.address,
                "rows": rows,
                "t": time.time(),
            },
        )

    def _push_gone(self, job: str) -> None:
        """The job's segment is gone from this node (its last process removed it, or someone
        did): say once that its ranks here no longer report, or the controller would show
        the last rows it got, alive, for as long as this node beats. A rank still running
        republishes its segment (training.heartbeat), and the next beat sees the job again,
        catches it up like a new one and pushes its rows."""
        rows = self._sent.pop(job)[3]
        self._seen.discard(job)  # a job run again under this name is caught up again
        why = (
            f"the job's segment on node {self.operations.name} is gone (the job ended, or "
            "its segment was removed): its ranks there no longer report"
        )
        gone = [
            r
            if r.get("state") == "closed"
            else dict(r, state="dead", alive=False, error=r.get("error") or why)
            for r in rows
        ]
        self._emit(
            status_topic(job),
            {
                "job": job,
                "node": self.operations.name,
                "key": self.operations.key,
                "addr": self.address,
                "rows": gone,
                "t": time.time(),
            },
        )

    def _emit(self, topic: str, msg: dict[str, Any]) -> None:
        self.worker.log_event(topic, msg)

    def _scheduler_client(self) -> Any:
        """This agent's own client to the scheduler (made once), or None if it fails."""
        from distributed import Client

        if self._client is None:
            try:
                self._client = Client(
                    self.worker.scheduler.address,
                    set_as_default=False,
                    timeout=10,
                    security=client_security(self.worker.security),
                )
            except Exception as exc:  # say so: a late node would miss the current window
                log.warning(
                    "dynprof_nb agent on %s: a client to the scheduler failed: %r",
                    self.operations.name,
                    exc,
                )
        return self._client

    def _catch_up(self, job: str) -> None:
        """A job first seen here gets the cluster's current command (a late node)."""
        from distributed import Variable

        if self._scheduler_client() is None:
            log.warning(
                "dynprof_nb agent on %s: cannot read job %r's current command",
                self.operations.name,
                job,
            )
            return
        self._catch_up_trigger(job)
        try:
            cmd = Variable(command_variable(job), client=self._client).get(timeout=0.5)
        except Exception:  # no command yet (or the scheduler is away): nothing to catch up
            return
        if not isinstance(cmd, dict) or "config" not in cmd:
            return
        if not self.gate_ok:  # set by the first operation's check of the scheduler
            try:
                from distributed.utils import sync

                why = sync(self.worker.loop, self.scheduler_refusal)
            except Exception as exc:
                why = f"cannot ask the scheduler whether it is gated ({exc!r})"
            if why is not None:
                log.warning("dynprof_nb agent: not catching up job %r: %s", job, why)
                return
        why = refusal(cmd.get("user"), "catch up", job, self.operations.name)
        if why is not None:  # written by another user's client: not this agent's to apply
            log.warning("dynprof_nb agent: %s", why)
            return
        with self.operations.job(job) as handle:
            gen, current = handle.generation, handle.config.to_dict()
        if gen > 0 and current == cmd["config"]:
            self.operations.record(job, gen, cmd["seq"])  # already there (an agent that restarted)
            return
        try:
            self.operations.call(
                "apply",
                {
                    "job": job,
                    "action": cmd["action"],
                    "config": cmd["config"],
                    "seq": cmd["seq"],
                    "user": requester(),
                },
            )
            log.info(
                "dynprof_nb agent on %s: job %r caught up with command %d",
                self.operations.name,
                job,
                cmd["seq"],
            )
        except Exception as exc:
            log.warning(
                "dynprof_nb agent on %s: catching up job %r: %s", self.operations.name, job, exc
            )

    def _catch_up_trigger(self, job: str) -> None:
        """A job first seen here gets the cluster's armed trigger (a node that joined after
        ``trigger(...)``): its ranks then ask this agent for a window like the others'. The
        Variable is named with this user's uid, so it holds only this user's trigger."""
        from dynprof_nb.cluster import trigger as cluster_trigger
        from dynprof_nb.control import trigger

        value = cluster_trigger.read(self._client, job)
        if value is None:
            return
        try:
            with self.operations.job(job) as handle:
                seg = handle.segment()
                if seg is not None and trigger.describe(seg).get("armed"):
                    return  # already here (the arming fan-out reached this node)
            self.operations.call(
                "trigger", {"job": job, "definition": value["definition"], "user": requester()}
            )
            log.info(
                "dynprof_nb agent on %s: job %r caught up with its trigger",
                self.operations.name,
                job,
            )
        except Exception as exc:
            log.warning(
                "dynprof_nb agent on %s: catching up job %r's trigger: %s",
                self.operations.name,
                job,
                exc,
            )

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self.election.release()
        self.operations.close()
        if self._client is not None:
            try:
                self._client.close(timeout=2)
            except Exception:
                pass


def start_agent(worker: Any) -> Agent:
    """The worker's agent, started once (a preload and a plugin may both ask). A worker
    with a server open to others (a plain-TCP listener made before the gate, an ungated
    nanny) is stopped, with its nanny: refusing only the agent's operations would leave
    anyone who reaches it able to run code as this user."""
    with AGENTS_LOCK:
        agent = AGENTS.get(worker.id)
        if agent is None:
            owner = gate.install(worker)  # a worker answers its own `run` handler: gate it first
            agent = AGENTS[worker.id] = Agent(worker).start()
            _guard(agent, list(owner.get("exposed", ())))
        return agent


_GUARDS: set[Any] = set()  # the running exposure checks (a task is kept only while referenced)


def _guard(agent: Agent, exposed: list[str]) -> None:
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not on the worker's loop (a test calling start_agent directly)
        loop = None
    if loop is None:
        if exposed:
            log.error("dynprof_nb agent: this worker is open to others: %s", "; ".join(exposed))
        return
    task = loop.create_task(_stop_if_exposed(agent, exposed))
    _GUARDS.add(task)
    task.add_done_callback(_GUARDS.discard)


async def exposure(worker: Any) -> list[str]:
    """Why ``worker`` (or its nanny) can be reached ungated by another user, if it can."""
    why = list(gate.install(worker).get("exposed", ()))
    nanny = getattr(worker, "nanny", None)
    if nanny:
        try:
            answer = await getattr(worker.rpc(nanny), gate.GATE_HANDLER)()
        except Exception as exc:  # no such handler: an ungated nanny
            answer = exc
        if not isinstance(answer, dict) or answer.get("uid") != os.getuid():
            why.append(
                f"its nanny at {nanny} runs no dynprof_nb gate, so anyone who reaches it can "
                "run code as this user: start the worker with --no-nanny (as docs/cluster.md "
                "does), or with --preload-nanny dynprof_nb.cluster.gate"
            )
    return why


async def _stop_if_exposed(agent: Agent, exposed: list[str]) -> None:
    import asyncio

    worker = agent.worker
    try:
        exposed = exposed + [w for w in await exposure(worker) if w not in exposed]
    except Exception as exc:
        exposed.append(f"cannot check this worker's servers ({exc!r})")
    if not exposed:
        return
    why = "; ".join(exposed)
    agent.exposed = why
    log.error("dynprof_nb agent: stopping this worker (and its nanny): %s", why)
    for _ in range(600):  # a worker still starting cannot close its nanny yet
        if getattr(worker.status, "name", "") != "init":
            break
        await asyncio.sleep(0.05)
    await worker.close(nanny=True, reason=f"dynprof_nb: this worker is open to others: {why}")


def stop_agent(worker: Any) -> None:
    with AGENTS_LOCK:
        agent = AGENTS.pop(worker.id, None)
    if agent is not None:
        agent.stop()


class AgentPlugin(WorkerPlugin):
    """The agent as a worker plugin: ``client.register_plugin(AgentPlugin())`` starts one on
    every worker, including those that join later."""

    name = PLUGIN_NAME

    def setup(self, worker: Any) -> None:
        start_agent(worker)

    def teardown(self, worker: Any) -> None:
        stop_agent(worker)


def dask_setup(worker: Any) -> None:
    """``dask worker --preload dynprof_nb.cluster.agent``."""
    start_agent(worker)


def dask_teardown(worker: Any) -> None:
    stop_agent(worker)


def _cluster_job(job: str, client: Any) -> Any:
    """The ClusterJob a trigger firer starts its windows through (agents are in place)."""
    from dynprof_nb.cluster.controller import ClusterJob

    return ClusterJob(job, client, install=False, probe=False)


def _install_agents(client: Any) -> None:
    client.register_plugin(AgentPlugin(), name=PLUGIN_NAME)


wire.install_agents = _install_agents
