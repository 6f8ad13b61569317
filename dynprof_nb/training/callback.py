"""MindSpore's callback protocol without importing MindSpore: a class becomes a
``mindspore.train.Callback`` only in a process that has MindSpore (``Model.train`` accepts only
those), so a training rank without MindSpore never pays for the import."""

from __future__ import annotations

from functools import cache


def mindspore_callback() -> type | None:
    """``mindspore.train.Callback`` if MindSpore can be imported here, else None."""
    try:
        from mindspore.train import Callback
    except Exception:
        return None
    return Callback


@cache
def with_callback(cls: type) -> type:
    """``cls`` made a MindSpore ``Callback`` too (``cls`` itself when MindSpore is absent)."""
    base = mindspore_callback()
    if base is None or issubclass(cls, base):
        return cls
    return type(cls.__name__, (cls, base), {"__module__": cls.__module__, "__doc__": cls.__doc__})
