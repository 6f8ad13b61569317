"""Extension points: a lower layer names what a higher one adds to it, and imports that on first
use, so the lower layer imports nothing of the higher one (no cycle, no cost until asked).

A public module of its own (it was the facade's ``_extend``) so ``traces/`` and ``control/``
import no private name of another module.
"""

from __future__ import annotations

import importlib

# what a higher layer adds to a lower one, imported when the lower one first asks for it
# (``dynprof_nb.traces.shortcuts``: a window's summary and plots, so traces/ names no module of
# analysis/ and reading a trace never loads matplotlib; ``control.registry``: attach(cluster=)
# from cluster/, so control/ and cluster/ make no cycle and Dask loads only for a cluster)
EXTENSIONS = {
    "window_shortcuts": ("analysis.shortcuts",),
    # the agent module sets how attach installs agents (cluster.wire.install_agents)
    "cluster_attach": ("cluster.agent", "cluster.controller"),
}


def extend(point: str) -> None:
    """Import the modules that extend ``point`` (they register themselves when imported)."""
    for module in EXTENSIONS.get(point, ()):
        importlib.import_module(f"dynprof_nb.{module}")
