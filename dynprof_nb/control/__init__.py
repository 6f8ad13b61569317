"""The controller side (a notebook, the CLI, the relay): one interface, several publishers.

``base.Controller`` is the interface; ``job.Job`` publishes through this machine's shared
memory, ``filemode.FileJob`` through MindSpore's ``profiler_config.json``; ``registry.attach``
picks one. ``status`` defines the status row; ``relay`` mirrors a config file into a job.
"""
