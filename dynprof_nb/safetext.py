"""Text this package did not write (config values, event and process names, paths, error
messages), made safe to show: the one place that decides how.

* :func:`escape` for HTML: ``&<>"'`` become entities, so a name such as
  ``<img src=x onerror=...>`` is shown as text and never runs in a notebook page (where script
  can drive the kernel). Bidirectional overrides and control characters other than newline and
  tab are shown as ``\\u202e``, so a name cannot reverse the text after it.
* :func:`visible` for labels, tooltips and canvas text: every control and bidirectional
  formatting character shown as ``\\uXXXX``, so one name cannot pass for another
  (``"evil\\u202egnp.exe"`` reads as itself, not as ``evilexe.png``).
* :func:`frame_html` for a DataFrame, :func:`visible_in` for a payload of many strings.

Kept free of heavy imports: the training side may import it.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from typing import Any

# Unicode's bidirectional formatting characters: LRM, RLM, ALM, the embeddings and overrides
# (U+202A-U+202E) and the isolates (U+2066-U+2069)
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 and C1 controls, DEL, and the line and paragraph separators
_CONTROL = "\x00-\x1f\x7f-\x9f\u2028\u2029"
_HIDDEN = re.compile(f"[{_CONTROL}{_BIDI}]")
_HIDDEN_IN_HTML = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")


def _code(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def visible(text: Any) -> str:
    """``text`` (``str()`` of anything) with every control and bidirectional formatting
    character written out as ``\\uXXXX``: what a label or tooltip shows of a name."""
    return _HIDDEN.sub(_code, str(text))


def escape(value: Any) -> str:
    """``str(value)`` for HTML text or a quoted attribute: markup escaped, bidirectional and
    control characters (but newline and tab) written out as ``\\uXXXX``."""
    return html.escape(_HIDDEN_IN_HTML.sub(_code, str(value)), quote=True)


def frame_html(frame: Any, **kwargs: Any) -> str:
    """``frame.to_html(**kwargs)`` with every cell of text or objects, every column and index
    label escaped by :func:`escape` (pandas' own escaping leaves quotes, bidirectional
    overrides and the ``str()`` of a list as they are); numbers keep pandas' formatting."""
    import pandas as pd  # (a frame is here: pandas is loaded)

    kwargs["escape"] = False  # done here, once, for every cell

    def cell(v: Any) -> Any:  # a missing value stays one: ``na_rep`` shows it
        return v if pd.api.types.is_scalar(v) and pd.isna(v) else escape(v)

    out = frame.copy()
    for i in range(out.shape[1]):
        if getattr(out.dtypes.iloc[i], "kind", "O") not in "biufcmM":  # text, category, objects
            out.isetitem(i, out.iloc[:, i].astype(object).map(cell))
    out.columns = [escape(c) for c in out.columns]
    if kwargs.get("index", True):
        out.index = [escape(i) for i in out.index]
    return out.to_html(**kwargs)


def visible_in(value: Any) -> Any:
    """``value`` with :func:`visible` applied to every string in it, keys too, through dicts,
    lists and tuples: a payload (an event's args from its trace file) sent to a browser."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible_in(k): visible_in(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [visible_in(v) for v in value]
    return value


def file_href(path: Any) -> str:
    """An ``href`` for a file path, safe in a quoted attribute: percent-encoded (a ``:`` too,
    so a file named ``javascript:...`` is a relative path, never a scheme) and, when
    relative, led by ``./``. Escaping alone is not enough in a link: the browser decodes
    ``&lt;`` back before it reads the URL."""
    text = str(path)
    quoted = urllib.parse.quote(text, safe="/")
    return quoted if text.startswith("/") else f"./{quoted}"
