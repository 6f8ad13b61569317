"""The notebook's live table of a cluster: status rows pushed by the agents, kept per job.

One :class:`Feed` per ``Client`` (``Client.subscribe_topic`` keeps one handler per topic, so two
controllers on one client share it). Handlers run on the client's event loop and only store
what arrived; ``status()`` reads the table, it never asks the nodes. A node whose acting agent
has not beaten for :data:`DEAD_AFTER_S` is shown dead, with every rank it reported.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from dynprof_nb.cluster.wire import BEAT_TOPIC, status_topic

DEAD_AFTER_S = 3.0
_FEEDS: weakref.WeakKeyDictionary[Any, Feed] = weakref.WeakKeyDictionary()
_FEEDS_LOCK = threading.Lock()


def feed_of(client: Any) -> Feed:
    """The client's feed (created and subscribed on first use)."""
    with _FEEDS_LOCK:
        feed = _FEEDS.get(client)
        if feed is None:
            feed = _FEEDS[client] = Feed(client)
        return feed


class Feed:
    """Nodes (by key: ``node``, ``addr``, last beat) and, per watched job, each node's rows."""

    def __init__(self, client: Any) -> None:
        self._client = weakref.ref(client)  # the client owns the feed (its handlers), not back
        self.nodes: dict[str, dict[str, Any]] = {}
        self.tables: dict[str, dict[str, dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self.updated = threading.Condition(self.lock)
        client.subscribe_topic(BEAT_TOPIC, self._on_beat)
        # the scheduler's own "a worker left" (a killed worker: at once, not after 3 s); a
        # client keeps one handler per topic, so one the user set on "all" is left alone
        if "all" not in getattr(client, "_event_handlers", {"all": None}):
            client.subscribe_topic("all", self._on_scheduler_event)

    def watch(self, job: str) -> None:
        with self.lock:
            if job in self.tables:
                return
            self.tables[job] = {}
        client = self._client()
        if client is not None:
            client.subscribe_topic(status_topic(job), lambda event: self._on_rows(job, event))

    # -- what arrives (on the client's event loop) ---------------------------------------

    def _on_beat(self, event: tuple[float, dict[str, Any]]) -> None:
        msg = event[1]
        if not isinstance(msg, dict) or not msg.get("leader"):
            return
        with self.updated:
            self._saw(msg)
            self.updated.notify_all()

    def _on_scheduler_event(self, event: tuple[float, Any]) -> None:
        msg = event[1]
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        with self.updated:
            for node in self.nodes.values():
                if node.get("addr") == msg.get("worker"):
                    node["seen"] = -float("inf")  # dead until its agent beats again
            self.updated.notify_all()

    def _on_rows(self, job: str, event: tuple[float, dict[str, Any]]) -> None:
        msg = event[1]
        if isinstance(msg, dict):
            self.store(job, msg)

    def store(self, job: str, msg: dict[str, Any]) -> None:
        """Keep a node's rows of ``job`` (from an event or from a pull)."""
        with self.updated:
            self._saw(msg)
            self.tables.setdefault(job, {})[msg["key"]] = {
                "rows": list(msg.get("rows") or []),
                "received": time.monotonic(),
            }
            self.updated.notify_all()

    def _saw(self, msg: dict[str, Any]) -> None:
        node = self.nodes.setdefault(msg["key"], {})
        node.update(node=msg.get("node", "?"), addr=msg.get("addr", ""), seen=time.monotonic())

    # -- what the controller reads --------------------------------------------------------

    def alive(self, key: str, now: float | None = None) -> bool:
        node = self.nodes.get(key)
        now = time.monotonic() if now is None else now
        return node is not None and now - node["seen"] <= DEAD_AFTER_S

    def labels(self) -> dict[str, str]:
        """Each node key's display name; names shared by several nodes (simulated nodes on one
        host) get the key's shared-memory device appended, so every node is distinct."""
        with self.lock:
            names = {key: info["node"] for key, info in self.nodes.items()}
        counts: dict[str, int] = {}
        for name in names.values():
            counts[name] = counts.get(name, 0) + 1
        return {
            key: name if counts[name] == 1 else f"{name}/shm{key.split(':', 1)[-1]}"
            for key, name in names.items()
        }

    def rows(self, job: str) -> list[dict[str, Any]]:
        """Every node's rows of ``job``, with ``node``/``addr``/``key`` and ages brought up to
        now; the ranks of a node that stopped beating are ``dead``."""
        now = time.monotonic()
        labels = self.labels()
        out = []
        with self.lock:
            table = {key: dict(entry) for key, entry in self.tables.get(job, {}).items()}
            nodes = {key: dict(info) for key, info in self.nodes.items()}
        for key, entry in table.items():
            alive_node = key in nodes and now - nodes[key]["seen"] <= DEAD_AFTER_S
            waited = now - entry["received"]
            for row in entry["rows"]:
                row = dict(
                    row, node=labels.get(key, key), key=key, addr=nodes.get(key, {}).get("addr", "")
                )
                if isinstance(row.get("heartbeat_age_s"), (int, float)):
                    row["heartbeat_age_s"] = round(row["heartbeat_age_s"] + waited, 3)
                if not alive_node and row.get("state") != "closed":
                    row.update(
                        state="dead",
                        alive=False,
                        error=row.get("error")
                        or _why(now, nodes.get(key, {}).get("seen", entry["received"])),
                    )
                out.append(row)
        out.sort(key=lambda r: (r["rank"], r["node"]))
        return out

    def wait_for(self, predicate: Any, timeout: float) -> bool:
        """Block until ``predicate()`` holds (re-checked on every arrival) or ``timeout``."""
        deadline = time.monotonic() + timeout
        with self.updated:
            while True:
                self.lock.release()
                try:
                    if predicate():
                        return True
                finally:
                    self.lock.acquire()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.updated.wait(min(left, 0.25))


def _why(now: float, seen: float) -> str:
    if seen == -float("inf"):
        return "the node's Dask worker left the cluster (its agent is gone)"
    return f"node not heard from for {now - seen:.1f} s (its agent or worker stopped)"
