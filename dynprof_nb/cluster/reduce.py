"""Window reductions that run on the node that wrote the window (Dask tasks pinned there).

``load()``'s task reads the window directories of a node's ranks with the ordinary readers (one
task per node), a partition's task one rank's; each checks first that the paths are the job's
windows on this node, asked for by the agent's own user
(:meth:`NodeOperations.window_paths`, once per node for all its ranks), and returns only
what the notebook needs: the per-rank ``ops`` and ``steps`` tables, a kernel summary and the
event span (a few KB), or one whole frame when a ``dask.dataframe`` partition asks for it.
"""

from __future__ import annotations

from typing import Any

from dynprof_nb.cluster.wire import agent_of

KERNEL_SUMMARY_COLUMNS = ["name", "count", "total_us", "avg_us", "max_us"]


def _agent() -> Any:
    """This worker's agent, refusing when it runs none or its scheduler is not gated."""
    from distributed import get_worker

    agent = agent_of(get_worker())
    if agent is None:
        raise RuntimeError(
            "this worker runs no dynprof_nb agent (start it with "
            "--preload dynprof_nb.cluster.agent)."
        )
    if not agent.gate_ok:  # checked by every operation; a read comes after one
        raise PermissionError(
            f"node {agent.operations.name}: refused 'load': this cluster's "
            "scheduler was not found gated for this agent's user (see "
            "dynprof_nb.cluster.gate)."
        )
    return agent


def _window(job: str, path: str, user: Any) -> Any:
    from dynprof_nb.traces import load_window

    return load_window(_agent().operations.window_path(job, path, user))


def node_reductions(job: str, parts: list[tuple[str, int]], user: Any = None) -> list[dict]:
    """The summaries of every ``(path, rank)`` of ``parts``, all windows this node wrote, in
    one task: one round trip per node however many ranks it runs, the node's windows listed
    and checked once (:meth:`NodeOperations.window_paths`), then each rank reduced in turn."""
    from dynprof_nb.traces import load_window

    checked = _agent().operations.window_paths(job, [p for p, _ in parts], user)
    return [
        reductions(load_window(path), rank) for path, (_, rank) in zip(checked, parts, strict=True)
    ]


def rank_reductions(job: str, path: str, rank: int, user: Any = None) -> dict[str, Any]:
    """One rank's summaries, computed where its files are (for ``user``, the requester)."""
    return reductions(_window(job, path, user), rank)


def reductions(w: Any, rank: int) -> dict[str, Any]:
    """What the notebook keeps of one rank's window: ops, steps, a kernel summary, the span."""
    import pandas as pd

    ev = w.events
    span = None
    if len(ev) and ev["ts_ns"].notna().any():
        span = (int(ev["ts_ns"].min()), int((ev["ts_ns"] + ev["dur_ns"]).max()))
    kernels = w.kernels
    if len(kernels):
        ks = (
            kernels.groupby(kernels["name"].astype(object), sort=False)["duration_us"]
            .agg(["count", "sum", "mean", "max"])
            .reset_index()
        )
        ks.columns = KERNEL_SUMMARY_COLUMNS
    else:
        ks = pd.DataFrame(columns=KERNEL_SUMMARY_COLUMNS)
    return {
        "rank": rank,
        "framework": w.framework,
        "start_step": w.start_step,
        "stop_step": w.stop_step,
        "ops": plain(w.ops),
        "steps": plain(w.steps),
        "kernels": ks,
        "span": span,
        "events": len(ev),
    }


FRAME_KINDS = ("events", "kernels", "memory", "communication")


def node_frame(
    job: str, kind: str, parts: list[tuple[str, int]], node: str, user: Any = None
) -> Any:
    """The ``kind`` frame of every ``(path, rank)`` of ``parts`` (this node's ranks), stacked
    with ``rank`` and ``node`` columns and categories as text: one ``dask.dataframe``
    partition per node, read by one task (the node's windows listed and checked once, as
    :func:`node_reductions`; a task per rank listed them once per rank: ranks squared)."""
    from dynprof_nb.traces import load_window
    from dynprof_nb.traces.schema import concat_frames

    if kind not in FRAME_KINDS:
        raise ValueError(f"frame {kind!r}: expected events, kernels, memory or communication.")
    checked = _agent().operations.window_paths(job, [p for p, _ in parts], user)
    frames = [
        plain(getattr(load_window(path), kind)).assign(rank=rank, node=node)
        for path, (_, rank) in zip(checked, parts, strict=True)
    ]
    return concat_frames(frames)


def node_sql(
    job: str, query: str, parts: list[tuple[str, int]], node: str, user: Any = None
) -> Any:
    """Each rank's answer to SQL ``query`` (``w.sql``: DuckDB on the node, over the rank's
    frames, from its frame cache there where they are cached), stacked with ``rank`` and
    ``node``, for every ``(path, rank)`` of ``parts`` in one task: one round trip per node,
    and only the answers cross the network."""
    import pandas as pd

    from dynprof_nb.traces import load_window

    checked = _agent().operations.window_paths(job, [p for p, _ in parts], user)
    answers = [
        load_window(path).sql(query).assign(rank=rank, node=node)
        for path, (_, rank) in zip(checked, parts, strict=True)
    ]
    return pd.concat(answers, ignore_index=True) if answers else pd.DataFrame()


def plain(frame: Any) -> Any:
    """Categorical columns as plain text, so partitions from different ranks line up."""
    cats = [c for c in frame.columns if str(frame[c].dtype) == "category"]
    if not cats:
        return frame.reset_index(drop=True)
    return frame.astype({c: object for c in cats}).reset_index(drop=True)
