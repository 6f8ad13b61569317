"""A ClusterJob's link to the agent on every node of its Dask cluster.

Operations fan out with ``Client.run`` to every worker's agent
(:mod:`dynprof_nb.cluster.agent`); the answers of the agents acting for this job come back
with the errors of the others, apart from another user's agents (refused, not failures) and
nodes already shown dead. The fan-out's round trip is measured every time (the same-step rule
needs it). The job's current command is kept in a Dask ``Variable`` (a node joining late and a
second notebook see it) and written under a Dask ``Lock``: one writer at a time per job.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dynprof_nb.cluster import wire
from dynprof_nb.cluster.access import requester
from dynprof_nb.cluster.operations import NotYourJob
from dynprof_nb.cluster.wire import UngatedCluster, call, command_variable, lock_name
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.control.base import JobError

log = logging.getLogger("dynprof_nb")
LOCK_TIMEOUT_S = 30.0


class Agents:
    """Every node's agent, for job ``name`` on ``client``; ``feed`` tells which nodes beat."""

    def __init__(self, name: str, client: Any, feed: Any) -> None:
        from distributed import Lock, Variable

        self.name, self.client, self.feed = name, client, feed
        self.var = Variable(command_variable(name), client=client)
        self.lock = Lock(lock_name(name), scheduler_rpc=client.scheduler, loop=client.loop)
        self.rtt = 0.0  # the fan-out's round trip, a running mean (s)
        self.unreachable: dict[str, str] = {}  # worker address -> the last error, dead nodes
        self.refused: dict[str, str] = {}  # worker address -> why its agent (another user's)

    def run(self, op: str, payload: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
        """One operation on every node's agent: (answers of acting agents, errors)."""
        t0 = time.monotonic()
        raw = self.client.run(call, op, dict(payload, user=requester()), on_error="return")
        rtt = time.monotonic() - t0
        self.rtt = rtt if not self.rtt else 0.7 * self.rtt + 0.3 * rtt
        answers, errors, refused = [], [], {}
        for addr, answer in raw.items():
            if isinstance(answer, NotYourJob):  # another user's agent: not this job's node
                refused[addr] = str(answer)
            elif isinstance(answer, BaseException):
                if self.dead_worker(addr):  # a node already shown dead: not a live rank's
                    self.unreachable[addr] = repr(answer)
                    continue
                errors.append(f"{addr}: {answer}")
            elif (
                isinstance(answer, dict) and not answer.get("standby") and not answer.get("missing")
            ):
                answers.append(dict(answer, addr=addr))
        self.refused.clear()
        self.refused.update(refused)
        if refused and not answers:  # no agent of this user anywhere: say why, node by node
            errors += [f"{addr}: {why}" for addr, why in refused.items()]
        return answers, errors

    def dead_worker(self, addr: str) -> bool:
        """A worker whose node stopped beating (or never did): its errors are not failures
        of a live rank, they are why its ranks show ``dead``."""
        keys = [key for key, info in self.feed.nodes.items() if info.get("addr") == addr]
        return not any(self.feed.alive(key) for key in keys)

    def ensure(self, install: bool) -> None:
        """Every worker runs an agent (installed now with ``install``); warn when every agent
        runs as another user (they will refuse this job)."""
        raw = self.hello()
        if any(isinstance(r, dict) and r.get("missing") for r in raw.values()):
            # install_agents is set when dynprof_nb.cluster.agent is imported (attach does)
            if not install or wire.install_agents is None:
                raise JobError(
                    "some workers run no dynprof_nb agent: start them with "
                    "--preload dynprof_nb.cluster.agent."
                )
            wire.install_agents(self.client)
            raw = self.hello()  # the new agents check their scheduler's gate too
        foreign = sorted(
            {
                f"uid {r['uid']} ({r['user']})"
                for r in raw.values()
                if isinstance(r, dict) and r.get("foreign")
            }
        )
        if foreign and all(isinstance(r, dict) and r.get("foreign") for r in raw.values()):
            log.warning(
                "dynprof_nb: every agent of this cluster runs as %s, not as you (%s): "
                "they will refuse to drive job %r.",
                ", ".join(foreign),
                requester()["name"],
                self.name,
            )

    def hello(self) -> dict[str, Any]:
        """Every worker's answer to ``hello``; raises JobError for none, an agent that
        cannot be reached, or agents that refuse an ungated scheduler."""
        raw = self.client.run(call, "hello", {"user": requester()}, on_error="return")
        if not raw:
            raise JobError(
                "the Dask cluster has no worker: start `dask worker SCHED --preload "
                "dynprof_nb.cluster.agent` on every node."
            )
        bad = {a: r for a, r in raw.items() if isinstance(r, BaseException)}
        ungated = sorted({str(r) for r in bad.values() if isinstance(r, UngatedCluster)})
        if ungated:  # one cluster per user: the agents refuse a scheduler that admits others
            raise JobError(f"job {self.name!r}: " + "; ".join(ungated[:4]))
        if bad:
            raise JobError(
                "cannot reach the dynprof_nb agent on "
                + ", ".join(f"{a} ({r!r})" for a, r in bad.items())
                + ": install dynprof_nb[cluster] on every node."
            )
        return raw

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One writer at a time per job, across notebooks (a Dask ``Lock``)."""
        if not self.lock.acquire(timeout=LOCK_TIMEOUT_S):
            raise JobError(
                f"job {self.name!r}: another notebook has held the job's lock for "
                f"{LOCK_TIMEOUT_S:.0f} s; try again."
            )
        try:
            yield
        finally:
            self.lock.release()

    def command(self) -> dict[str, Any] | None:
        """The job's current command (seq, action, config, by, user, at), None before one."""
        try:
            cmd = self.var.get(timeout=0)
        except Exception:  # not set yet
            return None
        return cmd if isinstance(cmd, dict) else None

    def send(
        self, action: str, cfg: ProfilerConfig, seq: int, arm_wait_s: float = 0.0, reason: str = ""
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """Apply a command on every node (``arm_wait_s``: how long an agent may wait for its
        ranks to arm a window)."""
        payload = {
            "job": self.name,
            "action": action,
            "config": cfg.to_dict(),
            "seq": seq,
            "arm_wait_s": arm_wait_s,
        }
        if reason:
            payload["reason"] = reason
        answers, errors = self.run("apply", payload)
        if not answers and not errors:
            raise JobError("no dynprof_nb agent answered: is any worker running?")
        return answers, errors

    def remember(self, seq: int, action: str, cfg: ProfilerConfig) -> None:
        """Keep the command every node applied as the job's current one."""
        self.var.set(
            {
                "seq": seq,
                "action": action,
                "config": cfg.to_dict(),
                "by": os.getpid(),
                "user": requester(),
                "at": time.time(),
            }
        )
