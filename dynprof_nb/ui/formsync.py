"""What the panel's text fields show, sent with a press of Apply (see ``formsync.js``).

ipywidgets throttles a model's state to one message in flight, but sends a button's click at
once: keystrokes typed while the kernel was busy could arrive after the click, and Apply would
parse a half-typed step ("1" of "12x5"). The browser sends the fields' text ahead of the click,
and :class:`FormSync` writes it into the fields first, so Apply always sees what the user saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets as widgets


class FormSync(anywidget.AnyWidget):
    """A hidden widget inside the panel that copies the typed text into ``fields``."""

    _esm = Path(__file__).with_name("formsync.js")

    def __init__(self, fields: Mapping[str, widgets.Widget], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fields = fields
        self.on_msg(self._on_values)

    def _on_values(self, _widget: Any, content: Any, _buffers: Any) -> None:
        values = content.get("values") if isinstance(content, dict) else None
        if not isinstance(values, dict):
            return
        for key, text in values.items():
            field = self._fields.get(key)
            if isinstance(field, widgets.Text) and isinstance(text, str) and field.value != text:
                field.value = text
