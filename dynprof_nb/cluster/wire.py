"""What a controller and the node agents share: channel names, the agent registry and the
one entry point :func:`call` that ``Client.run`` ships to every worker.

It sits below both :mod:`.agent` and :mod:`.controller` so that neither imports the other's
module: the agent's trigger firer starts windows through a ``ClusterJob``, and a
``ClusterJob`` reaches the agents only through these names (and installs them through
:data:`install_agents`, which :mod:`.agent` sets when it is imported).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

# per user: an agent pushes on its own uid's channels and a notebook listens on its own, so two
# users with a job of the same name on one cluster never see each other's rows or commands
BEAT_TOPIC = f"dynprof_nb.beat.{os.getuid()}"
PLUGIN_NAME = "dynprof_nb-agent"
AGENTS: dict[str, Any] = {}  # worker id -> its Agent (see agent.start_agent)
AGENTS_LOCK = threading.Lock()
# registers the agent plugin on a client's workers; set by dynprof_nb.cluster.agent
install_agents: Callable[[Any], None] | None = None


def status_topic(job: str) -> str:
    """The event topic a job's status rows are pushed on (this process's user's job)."""
    return f"dynprof_nb.status.{os.getuid()}.{job}"


def command_variable(job: str) -> str:
    """The Dask ``Variable`` holding a job's current command (seq, action, config)."""
    return f"dynprof_nb.command.{os.getuid()}.{job}"


def lock_name(job: str) -> str:
    """The Dask ``Lock`` around each write of a job's command."""
    return f"dynprof_nb.lock.{os.getuid()}.{job}"


class UngatedCluster(PermissionError):
    """The agent's scheduler admits others than this agent's user (see :mod:`.gate`)."""


def agent_of(worker: Any) -> Any | None:
    """The agent started in ``worker``, or None."""
    return AGENTS.get(getattr(worker, "id", None))


async def call(op: str, payload: dict[str, Any], dask_worker: Any = None) -> dict[str, Any]:
    """What ``Client.run`` runs on each worker: one operation of the worker's agent, on a
    thread (so the worker's event loop keeps beating while a command waits for its ranks)."""
    agent = agent_of(dask_worker)
    if agent is None:
        return {"missing": True, "addr": getattr(dask_worker, "address", "")}
    why = await agent.scheduler_refusal()
    if why is not None:
        raise UngatedCluster(why)
    return await asyncio.to_thread(agent.call, op, payload)
