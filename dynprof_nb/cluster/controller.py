"""``ClusterJob``: one job on every node of a Dask cluster, with the interface of ``Job``.

``dynprof_nb.attach("llama", cluster=client_or_address)`` returns one. Commands fan out with
``Client.run`` to every node's agent (:mod:`dynprof_nb.cluster.agent`), which applies them to its
node's job segment; the job's current command is kept in a Dask ``Variable`` so that a node
joining late (and a second notebook) sees it. Status is pushed by the agents and kept in a
table (:mod:`dynprof_nb.cluster.feed`); ``status()`` and ``wait()`` read that table and never
ask the nodes. ``windows()`` and ``load()`` run on the nodes; only results travel.

Same step everywhere: ``start("+k", ...)`` first asks every node for its ranks' steps and step
rates (one fan-out, timed), puts the window ``k`` steps after the most advanced rank of the
whole cluster, but never closer than the margin the measured fan-out latency and the step rates
need (:meth:`ClusterJob.margin_steps`), then sends it. Each agent waits until its ranks have
read it and answers with what they armed; the window stands only if every live rank armed the
same ``(start, stop)``. Otherwise it is cancelled on every rank and ``start`` raises
``JobError`` saying which ranks failed.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynprof_nb.cluster.access import (
    PLAIN_SCHEMES,
    InsecureClusterError,
    check_transport,
    plain_tcp_opted_in,
)
from dynprof_nb.cluster.fanout import Agents
from dynprof_nb.cluster.feed import feed_of
from dynprof_nb.cluster.stacks import cluster_hang_report, cluster_stacks, cluster_stall
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.rows import RankRow
from dynprof_nb.contract.segment import SegmentError, check_job_name
from dynprof_nb.control.asks import armed_other, overlap, refuse_passed, warn_replaced
from dynprof_nb.control.base import (
    WINDOW_COLUMNS,
    WINDOW_EXTRA_COLUMNS,
    Controller,
    JobError,
    WindowConflict,
    latest_window_paths,
    resolve_step,
)
from dynprof_nb.control.progress import Progress
from dynprof_nb.control.registry import register_cluster_attach
from dynprof_nb.control.stacks import DUMP_TIMEOUT_S, HANG_AFTER, HANG_MIN_S, HangWatch
from dynprof_nb.control.status import status_frame

if TYPE_CHECKING:
    import pandas as pd

    from dynprof_nb.analysis.stacks import StackFrame
    from dynprof_nb.cluster.cluster_window import ClusterWindow

log = logging.getLogger("dynprof_nb")
ARMED_STATES = ("armed", "recording", "excluded")
BUSY_STATES = ("armed", "recording", "saving")
MARGIN_SAFETY_S = 0.5  # on top of two fan-outs and two steps of the slowest rank (s)
# a triggered window's safety time instead: this many measured fan-outs, within these bounds
# (a slowdown is worth profiling while it lasts; see docs/trigger.md)
TRIGGER_SAFETY_RTTS = 3
TRIGGER_SAFETY_MIN_S = 0.03
ARM_WAIT_MAX_S = 10.0
RATE_HORIZON_S = 5.0


def attach_cluster(
    job: str, cluster: Any, security: Any = None, allow_insecure: bool = False
) -> ClusterJob:
    """``cluster`` is a ``distributed.Client`` or a scheduler address (``tls://host:8786``,
    with ``security``: a ``distributed.security.Security``; without it Dask's config is used).
    A plain ``tcp://`` address off this machine is refused before anything is sent unless
    ``allow_insecure`` (then it warns): see :mod:`dynprof_nb.cluster.access`."""
    from distributed import Client

    try:
        check_job_name(job)
    except SegmentError as exc:
        raise JobError(str(exc)) from None
    if isinstance(cluster, Client):  # connected with its own security (security= unused)
        address = str(getattr(cluster.scheduler, "address", "") or "")
        if address:
            _check(address, allow_insecure)
        return ClusterJob(job, cluster)
    if not isinstance(cluster, str) or not cluster.strip():
        raise JobError(
            f"cluster: got {cluster!r}; expected a distributed.Client or a "
            "scheduler address like 'tls://host:8786'."
        )
    address = _as_tls(_check(cluster.strip(), allow_insecure), allow_insecure)
    if security is None and address.startswith("tls://"):
        security = default_security()
    try:
        client = Client(address, set_as_default=False, timeout=10, security=security)
    except Exception as exc:  # OSError, TimeoutError, a TLS context Dask refuses (TypeError)
        upgraded = "" if address == cluster.strip() else f" (connected as {address})"
        raise JobError(
            f"cannot reach the Dask scheduler at {cluster}{upgraded}: {exc}. Is `dask "
            "scheduler` running there, and (for tls://) are security=... the "
            "cluster's certificates? Nothing it sent was read."
        ) from None
    return ClusterJob(job, client, own_client=True)


def _as_tls(address: str, allow_insecure: bool) -> str:
    """A loopback ``tcp://`` address as ``tls://`` (a gated cluster serves ``tcp://`` as
    mutual TLS: in plain text, whoever listens there, another user's fake scheduler among
    them, would have its handshake unpickled in this notebook); a loopback ``ws://`` or
    ``ucx://``, which no gated cluster serves, refused. Unless ``allow_insecure`` or the
    plain-TCP opt-in (``DYNPROF_NB_UNSAFE_PLAIN_TCP=1``)."""
    scheme, _, rest = address.rpartition("://")
    scheme = scheme or "tcp"
    if allow_insecure or plain_tcp_opted_in() or scheme not in PLAIN_SCHEMES:
        return address
    if scheme != "tcp":
        raise JobError(
            f"{address}: no dynprof_nb cluster serves {scheme}://, and whoever listens there "
            "(another user of this machine, say) would be read as you; use tls:// (or "
            "allow_insecure=True)"
        )
    return f"tls://{rest}"


def default_security() -> Any:
    """Dask's TLS config if it names a client certificate, else this user's own mutual-TLS
    certificates (what a gated cluster uses with no flags: :mod:`dynprof_nb.cluster.tls`)."""
    from distributed.security import Security

    from dynprof_nb.cluster import tls

    configured = Security()
    if getattr(configured, "tls_client_cert", None):
        return configured
    return tls.security()


def _check(address: str, allow_insecure: bool) -> str:
    try:
        return check_transport(address, allow_insecure)
    except InsecureClusterError as exc:
        raise JobError(str(exc)) from None


class ClusterJob(Controller):
    """A job whose ranks run on the nodes of a Dask cluster (the interface of ``Job``)."""

    hang_after = HANG_AFTER  # see Job.hang_after
    hang_min_s = HANG_MIN_S

    def __init__(
        self,
        name: str,
        client: Any,
        own_client: bool = False,
        install: bool = True,
        probe: bool = True,
    ) -> None:
        """``probe=False``: an agent's own ClusterJob (its trigger's): the agents are in place
        and ``start()`` reads every node's rows itself, so neither the agents' hello nor the
        first pull is made (two fan-outs, ~45 ms on the firing path of a trigger's first
        window: 4-5 steps at 10 ms, with the slowdown going on)."""
        self.name = name
        self.client = client
        self._own_client = own_client
        self.last_start: dict[str, Any] = {}
        self._hang = HangWatch(f"@cluster.{name}")
        self.feed = feed_of(client)
        self.feed.watch(name)
        self._agents = Agents(name, client, self.feed)
        self.unreachable = self._agents.unreachable  # worker address -> the last error, dead
        self.refused = self._agents.refused  # worker address -> why its agent (another user's)
        if probe:
            self._agents.ensure(install)
            self.refresh()

    def refresh(self) -> None:
        """Pull every node's rows once (attach does; afterwards the agents push)."""
        answers, _ = self._agents.run("status", {"job": self.name})
        for answer in answers:
            self.feed.store(self.name, answer)

    # -- what is published -------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """The cluster's command sequence number (the same on every node and notebook)."""
        cmd = self._agents.command()
        return int(cmd["seq"]) if cmd else 0

    @property
    def config(self) -> ProfilerConfig:
        """The config of the job's current command (defaults before the first one)."""
        cmd = self._agents.command()
        return ProfilerConfig.from_dict(cmd["config"]) if cmd else ProfilerConfig()

    def _publish(self, action: str, cfg: ProfilerConfig) -> int:
        with self._agents.locked():
            seq = self.generation + 1
            answers, errors = self._agents.send(action, cfg, seq)
            if answers:
                self._agents.remember(seq, action, cfg)
        if errors:
            raise JobError(f"{action} (generation {seq}) failed on: " + "; ".join(errors))
        return seq

    def set(self, **changes: Any) -> int:
        """Change config keys on every node; window keys behave as in ``Job.set``."""
        if {"start_step", "stop_step"} & set(changes):
            cfg = self.config.update(**changes)
            if not cfg.has_window:
                return self._write("stop", cfg)
            rest = {k: v for k, v in changes.items() if k not in ("start_step", "stop_step")}
            return self.start(cfg.start_step, cfg.stop_step, **rest)
        return self._write("set", self.config.update(**changes))

    def stop(self) -> int:
        """End the window, or cancel a pending one. A window that several ranks record ends
        on every rank at one step, as ``Job.stop`` does: the most advanced rank's step plus
        the margin a triggered start keeps (two fan-outs, two slow steps, the trigger's
        safety time), so the nodes' directories are one window."""
        cfg = self.config
        busy = [
            r
            for r in self.status_rows()
            if r.get("alive") and r.get("state") in ("armed", "recording")
        ]
        if not cfg.has_window or len(busy) < 2 or all(r["state"] != "recording" for r in busy):
            return self._write("stop", cfg.update(start_step=-1, stop_step=-1))
        ahead = max(int(r.get("step") or 0) for r in busy)
        at = ahead + self.margin_steps(
            busy, self._agents.rtt, self.trigger_safety_s(self._agents.rtt)
        )
        at = min(max(at, cfg.start_step), cfg.stop_step)
        return self._write("stop", cfg.update(stop_step=at))

    # -- same step everywhere ----------------------------------------------------------------

    def margin_steps(
        self, rows: list[dict[str, Any]], rtt_s: float, safety_s: float = MARGIN_SAFETY_S
    ) -> int:
        """Steps between the most advanced rank and the earliest safe start: two fan-outs
        (send, answer) plus two steps of the slowest rank (it reads a command at a step's end)
        plus ``safety_s`` (:data:`MARGIN_SAFETY_S`; a trigger's: :meth:`trigger_safety_s`), at
        the fastest rank's step rate."""
        rates = [r["rate"] for r in rows if r.get("rate")]
        if not rates:
            return 2
        seconds = 2 * max(rtt_s, self._agents.rtt) + 2 / min(rates) + safety_s
        return math.ceil(max(rates) * seconds) + 1

    def trigger_safety_s(self, rtt_s: float) -> float:
        """The safety time of a window a trigger starts: :data:`TRIGGER_SAFETY_RTTS` fan-outs
        as measured now (the larger of this one and the running mean), at least
        :data:`TRIGGER_SAFETY_MIN_S`, at most :data:`MARGIN_SAFETY_S`. The same-step,
        all-or-nothing rule is unchanged: an agent answers only once its ranks armed, and a
        cancel still has one fan-out, one slow step and half this time before the start."""
        rtt = max(rtt_s, self._agents.rtt)
        return min(MARGIN_SAFETY_S, max(TRIGGER_SAFETY_MIN_S, TRIGGER_SAFETY_RTTS * rtt))

    def start(
        self,
        start: int | str,
        stop: int | str,
        *,
        reason: str = "",
        triggered: bool = False,
        requested_at: float | None = None,
        **changes: Any,
    ) -> int:
        """Ask every rank of every node to record steps ``start``..``stop`` (inclusive).

        ``"+k"`` counts from the most advanced rank of the whole cluster; the window moves
        later (keeping its length) if ``k`` is inside the safety margin, and
        ``last_start`` says what was measured and chosen. ``triggered``: a trigger's window,
        whose safety time is measured (:meth:`trigger_safety_s`), not fixed;
        ``requested_at``: the ``time.monotonic()`` by which its request had been raised, so
        ``last_start["waited_s"]`` says how long it waited before the ranks' steps were read
        for its placement (``read_at``: that read's ``time.monotonic()`` on the machine that
        started it). Returns the new
        generation, once
        every live rank has armed the same window; raises ``JobError`` after cancelling it
        everywhere otherwise.
        """
        for key, value in (("start", start), ("stop", stop)):  # bad input: nothing is sent
            resolve_step(key, value, 0)
        base = self.config.update(**changes)
        base.update(
            start_step=resolve_step("start", start, 1), stop_step=resolve_step("stop", stop, 1)
        ).validate()
        with self._agents.locked():
            t0 = time.monotonic()
            answers, errors = self._agents.run("status", {"job": self.name})
            rtt = time.monotonic() - t0
            if errors:
                raise JobError("cannot read every node's ranks: " + "; ".join(errors))
            for answer in answers:
                self.feed.store(self.name, answer)
            live = [dict(r, node=a["node"]) for a in answers for r in a["rows"] if r["alive"]]
            current = max((_estimated(r, rtt) for r in live), default=0)
            first = resolve_step("start", start, current)
            last = resolve_step("stop", stop, current)
            safety = self.trigger_safety_s(rtt) if triggered else MARGIN_SAFETY_S
            margin = self.margin_steps(live, rtt, safety)
            shift = 0
            if _relative(start) and first < current + margin:
                shift = current + margin - first
                first += shift
                last += shift if _relative(stop) else 0
            cfg = base.update(start_step=first, stop_step=last)
            cfg.validate()
            rows = [RankRow.from_dict(r) for r in live]
            refuse_passed(rows, first, last, shown=16)  # the local controller's check
            _check_others(self.name, self._agents.command() or {}, first, last, rows)
            seq = self.generation + 1
            self.last_start = {
                "current": current,
                "margin_steps": margin,
                "shift": shift,
                "rtt_s": round(rtt, 4),
                "safety_s": round(safety, 4),
                "window": (first, last),
                "generation": seq,
            }
            if requested_at is not None:
                self.last_start["read_at"] = t0 + rtt
                self.last_start["waited_s"] = round(t0 + rtt - requested_at, 4)
            budget = _arm_budget(self._agents.rtt, live, first, current, rtt, safety)
            answers, errors = self._agents.send("start", cfg, seq, budget, reason=reason)
            problems = errors + _not_armed(answers, first, last)
            self.last_start.update(
                ranks=sum(len(a["ranks"]) for a in answers), nodes=len(answers), armed=not problems
            )
            if problems:
                stop_cfg = cfg.update(start_step=-1, stop_step=-1)
                self._agents.send("stop", stop_cfg, seq + 1)
                self._agents.remember(seq + 1, "stop", stop_cfg)
                raise JobError(
                    f"window {first}-{last} was cancelled on every rank: not every live rank "
                    f"armed it in time ({'; '.join(problems[:8])}"
                    f"{f'; and {len(problems) - 8} more' if len(problems) > 8 else ''}). "
                    "Ask again with a larger '+k'."
                )
            self._agents.remember(seq, "start", cfg)
        return seq

    # -- step times and the trigger (dynprof_nb.cluster.trigger) -----------------------------

    def trigger(
        self,
        slowdown: float | None = 1.5,
        steps: int = 10,
        cooldown_s: float | None = None,
        max_windows: int = 3,
        confirm: int = 5,
        disk_budget_mb: float | None = None,
        **window_options: Any,
    ) -> dict[str, Any]:
        """``Job.trigger`` across the cluster: the ranks of every node watch their steps; a
        node's agent starts the window on every node at one step (see
        :mod:`dynprof_nb.cluster.trigger`). ``trigger(None)`` disarms everywhere."""
        from dynprof_nb.cluster import trigger as cluster_trigger
        from dynprof_nb.control import trigger

        d = None
        if slowdown is not None:
            try:
                self.config.update(**window_options)
                d = trigger.definition(
                    slowdown,
                    steps,
                    cooldown_s,
                    max_windows,
                    confirm,
                    disk_budget_mb,
                    mode="cluster",
                    **window_options,
                )
            except (trigger.TriggerError, ValueError) as exc:
                raise JobError(str(exc)) from None
        cluster_trigger.store(
            self.client, self.name, {"definition": d, "fired": 0, "last_fire": 0.0} if d else None
        )
        _, errors = self._agents.run("trigger", {"job": self.name, "definition": d})
        if errors:
            raise JobError("the trigger could not be stored on: " + "; ".join(errors))
        return self.triggers

    @property
    def triggers(self) -> dict[str, Any]:
        """The job's trigger: options, windows fired across the cluster, the last reason."""
        from dynprof_nb.cluster import trigger as cluster_trigger

        value = cluster_trigger.read(self.client, self.name)
        if value is None:
            return {"armed": False}
        d = value["definition"]
        from dynprof_nb.contract.shared_layout import cooldown_s as pause_of

        left = max(0.0, pause_of(d, 0) - (time.time() - value.get("last_fire", 0.0)))
        fired = value.get("fired", 0)
        state = (
            "spent"
            if fired >= d["max_windows"]
            else "cooling down"
            if (value.get("last_fire") and left > 0)
            else "watching"
        )
        return {
            "armed": True,
            "state": state,
            **{k: v for k, v in d.items() if k != "window"},
            "window_options": d.get("window", {}),
            "fired": fired,
            "cooldown_left_s": round(left, 1) if value.get("last_fire") else 0.0,
            "last_reason": value.get("last_reason", ""),
            "last_start": value.get("last_start", {}),
        }

    def step_times(self, last: int = 100) -> pd.DataFrame:
        """Every node's ranks' last ``last`` step times (``Job.step_times``; ``end_s`` is on
        each node's own monotonic clock)."""
        import pandas as pd

        from dynprof_nb.control import trigger

        answers, errors = self._agents.run("step_times", {"job": self.name, "last": int(last)})
        if errors:
            raise JobError("cannot read step times on: " + "; ".join(errors))
        labels = self.feed.labels()
        frames = [  # a frame per node from its columns: no Python loop over the steps
            pd.DataFrame(a["columns"]).assign(node=labels.get(a["key"], a["node"]))
            for a in answers
            if a["columns"]["rank"]  # a node without the job's ranks: no empty, untyped frame
        ]
        return trigger.step_frame(pd.concat(frames, ignore_index=True) if frames else [])

    # -- what the ranks do -------------------------------------------------------------------

    def status_rows(self) -> list[dict[str, Any]]:
        """The pushed rows behind ``status()``, as dicts (the agents' trigger reads them)."""
        return self.feed.rows(self.name)

    def status(self) -> pd.DataFrame:
        """One row per rank of every node, the usual columns plus ``node``; pushed by the
        agents, so reading it costs no round trip. A node not heard from for a few seconds
        shows its ranks ``dead``. A stalled job says so in the live rows' ``error`` (see
        :meth:`stacks`)."""
        rows = self.status_rows()
        found, since = cluster_stall(rows, self.hang_after, self.hang_min_s)
        self._hang.note(found, rows, since, self.stacks)
        return status_frame(rows)

    def stacks(self, timeout: float = DUMP_TIMEOUT_S) -> StackFrame:
        """The stack of every thread of every live rank on every node, each node's agent
        taking its own (see ``Job.stacks``); ranks no node answered for are in ``.silent``."""
        return cluster_stacks(
            self.name, self._agents.run, self.status_rows, self.feed.labels, timeout
        )

    def hang_report(self, timeout: float = DUMP_TIMEOUT_S, keep: Any = None) -> Any:
        """Which collective the job waits in, which ranks never arrived and where they are,
        from every node's ranks (see ``Job.hang_report``)."""
        return cluster_hang_report(
            self.name, self._agents.run, self.status_rows, self.feed.labels, timeout, keep
        )

    @property
    def last_stacks(self) -> StackFrame | None:
        """The stacks taken when ``status()`` last found the job stalled, or None."""
        return self._hang.last_stacks()

    def live_ranks(self) -> list[int]:
        return sorted({r["rank"] for r in self.status_rows() if r["alive"]})

    def progress(self) -> tuple[int, int]:
        cfg, target = self.config, self.generation
        if not cfg.has_window:
            return 0, 0
        live = [r for r in self.status_rows() if r["alive"]]
        length = cfg.stop_step - cfg.start_step + 1
        return sum(_done(r, cfg, target) for r in live), length * len(live)

    def wait(self, timeout: float | None = None, progress: bool = True) -> pd.DataFrame:
        """Block until every live rank of every node has applied the latest command and
        finished its window (reads the pushed table). ``TimeoutError`` names the laggards."""
        target, cfg = self.generation, self.config
        deadline = None if timeout is None else time.monotonic() + timeout
        window = f"window {cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "config"
        # the one reporter: a bar for a person, a few lines in a log (no carriage returns)
        report = Progress(f"job {self.name}: {window}", enabled=progress, unit="rank-step")
        try:
            while True:
                rows = self.status_rows()
                live = [r for r in rows if r["alive"]]
                if not rows:
                    raise JobError(
                        f"job {self.name!r} has no rank on any node: start the "
                        "training side, then wait."
                    )
                pending = [r for r in live if r["generation"] < target or r["state"] in BUSY_STATES]
                if not pending:
                    report.close("done")
                    return self.status()
                if live:
                    length = cfg.stop_step - cfg.start_step + 1 if cfg.has_window else 0
                    states = {
                        r["state"] if r["generation"] >= target else "applying" for r in pending
                    }
                    phase = next(
                        (x for x in ("applying", "armed", "recording", "saving") if x in states),
                        "waiting",
                    )
                    nodes = len({r["node"] for r in live})
                    report.update(
                        sum(_done(r, cfg, target) for r in live) if length else 0,
                        length * len(live),
                        phase,
                        f"{len(live)} ranks on {nodes} node{'s' if nodes > 1 else ''}",
                    )
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(
                        f"job {self.name!r}: still waiting after {timeout} s for "
                        + ", ".join(
                            f"rank {r['rank']} on {r['node']} ({r['state']}, step {r['step']})"
                            for r in pending[:16]
                        )
                        + ". The window goes on; call wait() again or stop()."
                    )
                self.feed.wait_for(lambda: False, min(0.25, left if left else 0.25))
        finally:
            report.close()

    # -- what the ranks wrote ------------------------------------------------------------

    def roots(self) -> list[Path]:
        """Window directories are node-local paths: see ``windows()`` (with ``node``)."""
        return []

    def _window_rows(self) -> list[dict[str, Any]]:
        answers, errors = self._agents.run("windows", {"job": self.name})
        if errors:
            raise JobError("cannot list windows on: " + "; ".join(errors))
        labels = self.feed.labels()
        rows, seen = [], set()
        for answer in answers:
            for row in answer["windows"]:
                if row["path"] in seen:  # a shared filesystem: listed by several nodes
                    continue
                seen.add(row["path"])
                rows.append(
                    dict(row, node=labels.get(answer["key"], answer["node"]), addr=answer["addr"])
                )
        rows.sort(key=lambda r: (r["started_at"] or 0, r["rank"]))
        return rows

    def windows(self) -> pd.DataFrame:
        """Every node's windows of this job: the usual columns plus ``node`` (listed on each
        node by its agent)."""
        import pandas as pd

        frame = pd.DataFrame(
            self._window_rows(), columns=WINDOW_COLUMNS + WINDOW_EXTRA_COLUMNS + ["node", "addr"]
        )
        for col in ("started_at", "ended_at"):
            frame[col] = pd.to_datetime(frame[col], unit="s", errors="coerce")
        self._last_windows = frame
        return frame.drop(columns="addr")

    def load(
        self, window: int | str | os.PathLike[str] | None = None, **choice: Any
    ) -> ClusterWindow:
        """The latest complete window of every rank (or row ``window`` of ``windows()``, or the
        rank window at that path) as one :class:`~dynprof_nb.cluster.cluster_window.ClusterWindow`,
        reduced on the nodes that wrote it. (A job's ``run``/``steps``/``wait`` choices are not
        offered here: pick a row of ``windows()``.)"""
        from dynprof_nb.cluster.cluster_window import ClusterWindow

        if choice:
            raise JobError(
                f"a cluster window is chosen by its row of windows() or its path; "
                f"{', '.join(sorted(choice))} are not offered for a cluster job yet."
            )

        self.windows()
        frame = self._last_windows
        if window is None:
            paths = set(latest_window_paths(frame))
            if not paths:
                raise JobError(
                    f"job {self.name!r} has no complete window on any node yet; "
                    "start one and wait() for it."
                )
            chosen = frame[frame.path.isin(paths)]
        elif isinstance(window, int) and not isinstance(window, bool):
            if not -len(frame) <= window < len(frame):
                raise JobError(f"no window {window}: windows() lists {len(frame)}.")
            chosen = frame.iloc[[window]]
        else:
            chosen = frame[frame.path == os.fspath(window)]
            if chosen.empty:
                raise JobError(
                    f"{os.fspath(window)!r} is not one of job {self.name!r}'s "
                    "windows; windows() lists them."
                )
        parts = [
            {"rank": int(r.rank), "node": r.node, "addr": r.addr, "path": r.path}
            for r in chosen.itertuples()
        ]
        return ClusterWindow(self.client, self.name, parts)

    # -- display -------------------------------------------------------------------------

    def _describe(self) -> str:
        cfg = self.config
        rows = self.status_rows()
        window = f"{cfg.start_step}-{cfg.stop_step}" if cfg.has_window else "none"
        nodes = {r["node"] for r in rows if r["alive"]}
        return (
            f"ClusterJob {self.name!r}: {sum(r['alive'] for r in rows)} live rank(s) on "
            f"{len(nodes)} node(s), window {window}, generation {self.generation}"
        )

    def close(self) -> None:
        if self._own_client:
            self.client.close()


def _check_others(
    name: str, cmd: dict[str, Any], first: int, last: int, live: list[RankRow]
) -> None:
    """The local controller's checks (:mod:`dynprof_nb.control.asks`) on the nodes' rows:
    refuse (:class:`WindowConflict`) a window while any live rank records one (no queueing
    across nodes: a rank takes no new window until its window ends, so this one could not
    be armed everywhere, and cancelling it would end the other); warn
    (:class:`WindowReplaced`) when it replaces a window another controller armed, named by
    its user from the cluster's command record."""
    user = (cmd.get("user") or {}).get("name", "?")
    asked = {}
    cfg = cmd.get("config") or {}
    if cmd.get("action") == "start" and cmd.get("by"):
        mine = " (this process)" if cmd["by"] == os.getpid() else ""
        asked[(cfg.get("start_step"), cfg.get("stop_step"))] = f"pid {cmd['by']}{mine}, user {user}"
    found = overlap(live, first, last, asked, can_queue=False)
    if found is not None:
        raise WindowConflict(f"job {name!r}: {found[0]}")
    windows, armed = armed_other(live, first, last)
    if windows and cmd.get("by") and cmd["by"] != os.getpid():
        who = f"pid {cmd['by']} (user {user}, another controller)"
        warn_replaced(name, first, last, windows, who, ", ".join(r.name for r in armed))


def _arm_budget(
    agents_rtt: float,
    live: list[dict[str, Any]],
    first: int,
    current: int,
    rtt: float,
    safety_s: float = MARGIN_SAFETY_S,
) -> float:
    """How long an agent may wait for its ranks to read the window: until the fastest
    rank is one fan-out, one slow step and half the safety time from the start, so that
    a cancel still reaches every rank before it begins."""
    rates = [r["rate"] for r in live if r.get("rate")]
    if not rates:
        return ARM_WAIT_MAX_S
    to_start = (first - 1 - current) / max(rates)
    keep = max(rtt, agents_rtt) + 1 / min(rates) + safety_s / 2
    return min(ARM_WAIT_MAX_S, max(0.05, to_start - keep))


def _relative(value: int | str) -> bool:
    return isinstance(value, str) and value.strip().startswith("+")


def _estimated(row: dict[str, Any], rtt: float) -> int:
    """Where a rank probably is now: its reported step plus its rate times the report's age
    (the age on the node plus the trip back)."""
    age = min((row.get("heartbeat_age_s") or 0.0) + rtt, RATE_HORIZON_S)
    return int(row["step"] + (row.get("rate") or 0.0) * age)


def _not_armed(answers: list[dict[str, Any]], first: int, last: int) -> list[str]:
    problems = []
    for answer in answers:
        for r in answer["ranks"]:
            where = f"rank {r['rank']} on {answer['node']}"
            if not r["applied"]:
                problems.append(f"{where} had not read it (step {r['step']}, {r['state']})")
            elif (r["start"], r["stop"]) != (first, last) or r["state"] not in ARMED_STATES:
                problems.append(
                    f"{where} is {r['state']} with window {r['start']}-{r['stop']}"
                    + (f": {r['error']}" if r["error"] else "")
                )
    return problems


def _done(row: dict[str, Any], cfg: ProfilerConfig, target: int) -> int:
    length = cfg.stop_step - cfg.start_step + 1
    if row["generation"] >= target and row["state"] not in BUSY_STATES:
        return length
    return max(0, min(length, row["step"] - cfg.start_step + 1))


register_cluster_attach(attach_cluster)  # what dynprof_nb.attach(cluster=...) calls
