"""The user interfaces: thin adapters over the controller interface and ``TraceWindow``.

``magics`` (``%dynprof``), ``panel`` (the ipywidgets form), ``cli`` (the ``dynprof`` script),
``commands`` (the subcommands and help both share), ``demo`` (``make demo``).
"""
