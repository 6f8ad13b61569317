"""The rule that keeps the cluster layer linear in ranks: one round trip per node and operation.

A node with more ranks costs its agent more work, never more round trips from the notebook: a
per-rank round trip (or a per-rank task that lists the node's windows again) is what made
``load()`` grow with ranks squared (issue 47; benchmarks/cluster_scale.py measures it). Here 4
nodes run 3 ranks each, and every operation is counted at the client: the Dask calls it makes
are as many as the nodes, whatever the ranks: ``step_times()``, ``load()``, ``w.sql()`` and the
window's ``dask.dataframe`` frames (one partition per node).
"""

from __future__ import annotations

from collections import Counter

import pytest
from jobutil import unique_job, wait_until

import dynprof_nb
from dynprof_nb.control.trigger import STEP_TIME_COLUMNS

pytestmark = pytest.mark.timeout(300)
NODES, PER_NODE = 4, 3


@pytest.fixture
def job3(cluster):
    name = unique_job("sc")
    cluster.start_ranks(name, per_node=PER_NODE, step_ms=30)
    client = cluster.client()
    job = dynprof_nb.attach(name, cluster=client)

    def ready():
        st = job.status()
        live = st[st.alive.astype(bool)]
        return len(live) == NODES * PER_NODE and (live.step > 0).all()

    try:
        wait_until(ready, 90, f"{NODES * PER_NODE} ranks of {name}")
        yield job
    finally:
        cluster.stop_ranks(name)
        job.close()


class Calls:
    """Every ``Client.run`` and ``Client.submit`` the job makes (what crosses to the workers)."""

    def __init__(self, client, monkeypatch) -> None:
        self.counts: Counter[str] = Counter()
        for method in ("run", "submit"):
            real = getattr(client, method)

            def counted(*args, _real=real, _method=method, **kwargs):
                self.counts[f"{_method}:{getattr(args[0], '__name__', args[0])}"] += 1
                return _real(*args, **kwargs)

            monkeypatch.setattr(client, method, counted)

    def take(self) -> Counter[str]:
        counts, self.counts = self.counts, Counter()
        return counts


def test_each_operation_is_one_round_trip_per_node_not_per_rank(job3, monkeypatch):
    job, ranks = job3, NODES * PER_NODE
    calls = Calls(job.client, monkeypatch)

    times = job.step_times()
    assert list(times.columns) == STEP_TIME_COLUMNS
    assert sorted(times["rank"].unique()) == list(range(ranks))
    assert (times.node == "node" + (times["rank"] // PER_NODE).astype(str)).all()
    assert (times.duration_s > 0).all() and times.kind.isin(["step", "interval"]).all()
    assert calls.take() == {"run:call": 1}  # one Client.run reaches every node at once

    job.start("+5", "+7")
    job.wait(timeout=120, progress=False)
    calls.take()
    window = job.load()
    assert window.ranks == list(range(ranks))
    assert (window.start_step, window.stop_step) == job.last_start["window"]
    assert sorted(window.steps["rank"].unique()) == list(range(ranks))
    assert window.summary().ranks is not None
    # the windows listed by one Client.run, then one reading task per node for its 3 ranks
    assert calls.take() == {"run:call": 1, "submit:node_reductions": NODES}

    # SQL: one task per node answers for its 3 ranks; only the per-rank answers come back
    answers = window.sql("select count(*) as n from events")
    assert answers["rank"].tolist() == list(range(ranks))
    assert (answers.node == "node" + (answers["rank"] // PER_NODE).astype(str)).all()
    assert (answers.n > 0).all()
    assert calls.take() == {"submit:node_sql": NODES}

    # the big frames: one partition per node (its ranks stacked), read by one task there
    events = window.events
    assert events.npartitions == NODES
    assert calls.take() == {"submit:node_frame": NODES}
    per_rank = events.groupby("rank").size().compute(scheduler=job.client)
    assert per_rank.sort_index().to_dict() == dict(zip(answers["rank"], answers.n, strict=True))
    per_node = events.groupby("node")["rank"].nunique().compute(scheduler=job.client)
    assert per_node.to_dict() == {f"node{n}": PER_NODE for n in range(NODES)}
