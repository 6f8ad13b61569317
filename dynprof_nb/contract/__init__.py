"""The contract between a training rank and its controllers: what both sides read and write,
and nothing else. Every process imports it (the rank, the notebook, the CLI, a Dask agent), so
it imports no pandas, numpy or IPython.

* ``config``: the profiler config (a traitlets ``HasTraits``), its schema and checks;
* ``protocol``: the command a controller writes and a rank applies, and the step marker;
* ``segment``: the job's POSIX shared memory (bytes, seqlock, slots, lifetime, reclaim);
* ``slot``: one rank's slot as the rank writes it (:class:`~dynprof_nb.contract.slot.RankSlot`);
* ``shared_layout``: the words inside a rank's slot (the step-time ring, the trigger, stacks);
* ``window_dirs``: a window's folder on disk, its manifest and its publication.
"""
