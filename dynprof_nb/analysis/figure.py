"""The Figure every plot returns: a ``matplotlib.figure.Figure`` that displays itself.

The plots build figures without pyplot (no global state: they work in threads, under any
backend, in tests). IPython shows a pyplot-free Figure as ``<Figure size 1200x234 with 1 Axes>``
unless ``%matplotlib inline`` has hooked Figures into its display; this one carries its own
``_repr_png_``, so a figure returned from a cell is an image in any Jupyter frontend (and in an
exported notebook) with no setup cell. Where the inline backend is active its formatter wins
(IPython looks up formatters registered for the type before ``_repr_png_``): one image either way.
"""

from __future__ import annotations

import io

from matplotlib.figure import Figure as _MplFigure


class Figure(_MplFigure):
    """A matplotlib Figure that IPython displays as a PNG without ``%matplotlib inline``."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()
