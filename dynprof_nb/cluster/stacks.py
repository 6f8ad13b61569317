"""``ClusterJob.stacks()`` and the cluster's stall: every node's agent gathers its own ranks.

Each acting agent runs the ``stacks`` operation
(:meth:`~dynprof_nb.cluster.operations.NodeOperations.call`), which signals only the job's live
ranks on its node, as this user
(:func:`dynprof_nb.control.stacks.collect`); the answers are merged here. A live rank of the
pushed status table that no node answered for (its agent unreachable, its node dead) is named
silent. The stall uses what the agents push with each row: the median step time and the wall
clock of the rank's last step (nodes' clocks are assumed within a few seconds of each other,
well under the 60 s floor).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dynprof_nb.control.stacks import DUMP_TIMEOUT_S, stall

if TYPE_CHECKING:
    from dynprof_nb.analysis.stacks import StackFrame


#: ``ask(operation, payload) -> (answers, errors)``: one operation on every node's agent
Ask = Callable[[str, dict[str, Any]], tuple[list[dict[str, Any]], list[str]]]


def cluster_stacks(
    name: str,
    ask: Ask,
    rows_of: Callable[[], list[dict[str, Any]]],
    labels_of: Callable[[], dict[str, str]],
    timeout: float = DUMP_TIMEOUT_S,
) -> StackFrame:
    """Job ``name``'s stacks: ``ask`` runs the ``stacks`` operation on the agents, ``rows_of``
    gives the pushed status rows and ``labels_of`` the nodes' names (``ClusterJob`` passes its
    own, so this module needs no import of the controller that imports it)."""
    from dynprof_nb.analysis.stacks import StackFrame

    answers, errors = ask("stacks", {"job": name, "timeout_s": float(timeout)})
    labels = labels_of()
    rows: list[dict[str, Any]] = []
    silent: list[dict[str, Any]] = []
    answered: set[tuple[str, int]] = set()
    for answer in answers:
        node = labels.get(answer["key"], answer["node"])
        for row in answer.get("rows", []):
            rows.append(dict(row, node=node))
            answered.add((node, row["pid"]))
        for quiet in answer.get("silent", []):
            silent.append(dict(quiet, node=node))
            answered.add((node, quiet["pid"]))
    why = "its node's agent did not answer" + (f" ({'; '.join(errors)})" if errors else "")
    for row in rows_of():
        if row.get("alive") and (row["node"], row["pid"]) not in answered:
            silent.append({"rank": row["rank"], "node": row["node"], "pid": row["pid"], "why": why})
    return StackFrame.from_rows(rows, silent, job=name)


def cluster_stall(
    rows: list[dict[str, Any]], hang_after: float, hang_min_s: float
) -> tuple[tuple[int, float] | None, float]:
    """The stall of the live ranks of the pushed rows, and the wall time of the last step."""
    live = [r for r in rows if r.get("alive") is True]
    records = [r if r.get("last_step_wall") is not None else None for r in live]
    found = stall(records, time.time(), hang_after, hang_min_s, clock="last_step_wall")
    since = max((float(r["last_step_wall"]) for r in live if r.get("last_step_wall")), default=0.0)
    return found, since


def cluster_hang_report(
    name: str,
    ask: Ask,
    rows_of: Callable[[], list[dict[str, Any]]],
    labels_of: Callable[[], dict[str, str]],
    timeout: float = DUMP_TIMEOUT_S,
    keep: Any = None,
) -> Any:
    """``ClusterJob.hang_report()``: every node's agent collects its ranks' Flight Recorder
    dumps (the ``flight_recorder`` operation), then the stacks are taken; the dumps are
    analysed together here (see :mod:`dynprof_nb.control.hang`). The callables as for
    :func:`cluster_stacks`."""
    from dynprof_nb.control import hang
    from dynprof_nb.flight_recorder.reader import Dump

    answers, errors = ask("flight_recorder", {"job": name, "timeout_s": float(timeout)})
    labels = labels_of()
    dumps: list[Dump] = []
    notes: dict[int, str] = {}
    for answer in answers:
        node = labels.get(answer["key"], answer["node"])
        for d in answer.get("dumps", []):
            config = {
                str(k): {"desc": str(v.get("desc", "")), "ranks": _ranks(v.get("ranks"))}
                for k, v in (d.get("pg_config") or {}).items()
            }
            dumps.append(
                Dump(
                    path=f"{node}:rank {d['rank']}",
                    rank=int(d["rank"]),
                    version=str(d.get("version", "")),
                    entries=list(d.get("entries") or []),
                    pg_config=config,
                    pg_status=dict(d.get("pg_status") or {}),
                )
            )
        for rank, why in (answer.get("notes") or {}).items():
            notes[int(rank)] = str(why)  # no node in it: one reason of 32 nodes is one line
    for e in errors:
        notes.setdefault(-1, f"an agent did not answer: {e}")
    stacks = cluster_stacks(name, ask, rows_of, labels_of, timeout)
    steps = {int(r["rank"]): int(r["step"]) for r in rows_of() if r.get("alive") is True}
    return hang.build(stacks, dumps, notes, keep, steps)


def _ranks(spec: Any) -> list[int]:
    from dynprof_nb.flight_recorder.reader import ranks_of

    return ranks_of(spec)
