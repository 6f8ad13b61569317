"""One job on many machines, through Dask distributed (``pip install dynprof_nb[cluster]``).

* ``agent``: the node agent in each ``dask worker`` (``--preload dynprof_nb.cluster.agent`` or
  ``AgentPlugin``); ``operations``: the fixed set of operations it performs; ``node``: node
  identity and the one-agent-per-node election; ``reduce``: window reductions run on the node;
* ``controller``: ``ClusterJob``, what ``dynprof_nb.attach(job, cluster=...)`` returns;
  ``feed``: the pushed status table; ``cluster_window``: ``ClusterWindow``.

Training ranks never import this package.
"""
