"""The training side: what runs inside a training rank.

``monitor.Monitor`` (the window state machine, ``step()``), ``ranges.range`` (user ranges),
``backends/`` (builtin, torch, MindSpore profilers), ``dropin`` (MindSpore's
``DynamicProfilerMonitor``), ``callback`` (MindSpore's callback protocol), ``block``
(``profile_block``: a window around a block of code). Nothing here imports pandas, numpy,
IPython, widgets, matplotlib or dask: a rank pays only for what it records with.
"""
