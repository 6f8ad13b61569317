"""One job on many machines, through Dask distributed (``pip install dynprof_nb[cluster]``).

* ``agent``: the node agent in each ``dask worker`` (``--preload dynprof_nb.cluster.agent`` or
  ``AgentPlugin``); ``operations``: the fixed set of operations it performs; ``node``: node
  identity and the one-agent-per-node election; ``reduce``: window reductions run on the node;
* ``controller``: ``ClusterJob``, what ``dynprof_nb.attach(job, cluster=...)`` returns;
  ``feed``: the pushed status table; ``cluster_window``: ``ClusterWindow``;
* ``gate``: every server admits only its owner, checked at accept (``--preload
  dynprof_nb.cluster.gate``); ``tls``: the per-user CA and certificate that make every server
  mutual TLS with no flags; ``access``: who may drive a job, over what.

Training ranks never import this package.
"""
