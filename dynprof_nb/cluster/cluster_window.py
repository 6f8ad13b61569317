"""A window of every rank of a cluster job, analysed where it was written.

``ClusterJob.load()`` returns a :class:`ClusterWindow`. Building it runs one task per node on the
worker of the node that wrote those ranks' files (``workers=[addr]``,
``allow_other_workers=False``): one round trip per node, whatever its number of ranks; the task
returns each rank's summaries only, so the notebook holds a few KB per rank whatever the trace
size.

pandas frames (small, computed on the nodes, combined here): ``ops`` (one row per rank and
operation), ``op_totals`` (ops folded over ranks), ``steps`` (one row per rank and step),
``kernel_summary`` (one row per rank and kernel name), ``ranks_view()`` and ``summary()``.
``sql()`` runs on the nodes too, one task per node, and brings back only the answers.

``dask.dataframe`` frames (big, one partition per node, left on the nodes until you compute
them): ``events``, ``kernels``, ``memory``, ``communication``. E.g.
``w.events.groupby("name").dur_ns.sum().compute()`` reduces on the nodes too;
``w.events.compute()`` brings every event of every rank into the notebook.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from dynprof_nb.analysis.summary import Summary, host_summary, ops_across_ranks, rank_table
from dynprof_nb.cluster.access import requester
from dynprof_nb.cluster.reduce import node_frame, node_reductions, node_sql
from dynprof_nb.traces import schema
from dynprof_nb.traces.lazyframe import LazyFrame
from dynprof_nb.traces.schema import concat_frames


class ClusterWindow:
    """The ranks' windows of one recording: ``ranks``, ``nodes`` (rank -> node),
    ``start_step``/``stop_step``, the pandas summaries and the ``dask.dataframe`` tables."""

    def __init__(self, client: Any, job: str, parts: list[dict[str, Any]]) -> None:
        self.client = client
        self.job = job
        self.parts = sorted(parts, key=lambda p: p["rank"])
        self.by_node: dict[str, list[tuple[str, int]]] = {}  # worker -> its (path, rank)s
        for p in self.parts:
            self.by_node.setdefault(p["addr"], []).append((p["path"], p["rank"]))
        self.node_of_worker = {p["addr"]: p["node"] for p in self.parts}
        futures = self._per_node(node_reductions, job)
        reduced = [r for answer in client.gather(futures) for r in answer]
        self._reduced = sorted(reduced, key=lambda r: r["rank"])
        self.ranks: list[int] = [p["rank"] for p in self.parts]
        self.nodes: dict[int, str] = {p["rank"]: p["node"] for p in self.parts}
        self.paths: dict[int, str] = {p["rank"]: p["path"] for p in self.parts}
        starts = {r["start_step"] for r in self._reduced}
        stops = {r["stop_step"] for r in self._reduced}
        self.start_step = starts.pop() if len(starts) == 1 else None
        self.stop_step = stops.pop() if len(stops) == 1 else None
        kinds = {r["framework"] for r in self._reduced}
        self.framework = kinds.pop() if len(kinds) == 1 else "mixed"
        self._dask: dict[str, Any] = {}

    def _per_node(self, task: Any, *args: Any, node: bool = False) -> list[Any]:
        """``task(*args, parts[, node], requester)`` once per node, pinned to the worker that
        wrote those ranks' windows: one round trip per node, not per rank (the node lists its
        windows once; a task per rank listed them once per rank, ranks squared)."""
        return [
            self.client.submit(
                task,
                *args,
                node_parts,
                *([self.node_of_worker[addr]] if node else []),
                requester(),
                workers=[addr],
                allow_other_workers=False,
                pure=False,
            )
            for addr, node_parts in self.by_node.items()
        ]

    # -- pandas: reductions computed on the nodes ------------------------------------------

    def _stack(self, key: str) -> pd.DataFrame:
        parts = [r[key].assign(rank=r["rank"], node=self.nodes[r["rank"]]) for r in self._reduced]
        return concat_frames(parts) if parts else pd.DataFrame()

    @property
    def ops(self) -> pd.DataFrame:
        """Host operations per rank: the ``ops`` columns plus ``rank`` and ``node``."""
        return self._stack("ops")

    @property
    def op_totals(self) -> pd.DataFrame:
        """Host operations folded over every rank (one row per name)."""
        return ops_across_ranks(self.ops.drop(columns="node"))

    @property
    def steps(self) -> pd.DataFrame:
        """Steps per rank: the ``steps`` columns plus ``rank`` and ``node``."""
        return self._stack("steps")

    @property
    def kernel_summary(self) -> pd.DataFrame:
        """Device kernels per rank and name: count, total, mean and max duration (µs)."""
        return self._stack("kernels")

    def ranks_view(self) -> pd.DataFrame:
        """Step time per rank, slowest first, with the rank's node."""
        table = rank_table(self.steps.drop(columns="node"))
        return table.assign(node=table["rank"].map(self.nodes))

    def summary(self, top: int = 10) -> Summary:
        """The same summary as a local window's, from the nodes' reductions."""
        steps = self.steps.drop(columns="node")
        ops = self.op_totals
        spans = [r["span"] for r in self._reduced if r["span"]]
        span_ms = (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e6 if spans else 0.0
        step_list = sorted(steps["step"].unique().tolist()) if len(steps) else []
        ranks = rank_table(steps) if len(steps) else None
        header = {
            "framework": self.framework,
            "ranks": self.ranks,
            "span_ms": span_ms,
            "steps": f"{step_list[0]}..{step_list[-1]}" if step_list else "-",
        }
        return host_summary(header, steps, ops, ranks, top)

    def sql(self, query: str, then: str | None = None) -> pd.DataFrame:
        """SQL ``query`` over each rank's window, run on the node that wrote it (DuckDB there,
        on the rank's frames: ``w.sql``), the answers brought back and stacked with ``rank``
        and ``node`` columns. A query that reduces (``group by``, ``count``) is thus answered
        per rank; ``then`` is SQL over those answers, the table ``ranks``, run here to
        combine them: e.g. ``query="select name, sum(dur_ns) as ns from events group by
        name"``, ``then="select name, sum(ns) as ns from ranks group by name order by ns
        desc limit 10"`` (docs/sql.md)."""
        futures = self._per_node(node_sql, self.job, query, node=True)
        answers = [a for a in self.client.gather(futures) if len(a.columns)]
        stacked = pd.concat(answers, ignore_index=True) if answers else pd.DataFrame()
        if len(stacked):
            stacked = stacked.sort_values("rank", kind="stable").reset_index(drop=True)
        if then is None:
            return stacked
        from dynprof_nb.analysis.sql import sql_over

        return sql_over({"ranks": stacked}, then)

    # -- dask.dataframe: the big tables stay on the nodes -----------------------------------

    def frame(self, kind: str) -> Any:
        """Frame ``kind`` of every rank, a ``dask.dataframe`` (the ``Window`` protocol), built on
        first use from one task per node on that node: one partition per node, its ranks'
        rows stacked (``rank`` and ``node`` columns)."""
        if kind not in self._dask:
            import dask.dataframe as dd

            meta = _meta(kind)
            futures = self._per_node(node_frame, self.job, kind, node=True)
            self._dask[kind] = dd.from_delayed(futures, meta=meta, verify_meta=False)
        return self._dask[kind]

    @property
    def sources(self) -> dict[str, Any]:
        """Per rank, the window directory its node reads (each node's loader notes stay there)."""
        return {"ranks": {r: {"files": [p]} for r, p in self.paths.items()}}

    events = LazyFrame[Any](
        "Every event of every rank (``dask.dataframe``, one partition per node)."
    )
    kernels = LazyFrame[Any]("Every device task of every rank (``dask.dataframe``).")
    memory = LazyFrame[Any]("Memory records of every rank (``dask.dataframe``).")
    communication = LazyFrame[Any]("Communication operations of every rank (``dask.dataframe``).")

    def __repr__(self) -> str:
        steps = f" steps {self.start_step}..{self.stop_step}" if self.start_step else ""
        return (
            f"<ClusterWindow {self.framework} job {self.job!r}{steps}: "
            f"{len(self.ranks)} rank(s) on {len(set(self.nodes.values()))} node(s)>"
        )


def _meta(kind: str) -> pd.DataFrame:
    frame = schema.empty(kind)
    frame = frame.astype({c: object for c in frame.columns if str(frame[c].dtype) == "category"})
    return frame.assign(rank=pd.Series(dtype="int64"), node=pd.Series(dtype=object))
