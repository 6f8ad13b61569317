"""The controllers' one error type, below every controller module (the loading rules and the
controller base both raise it)."""

from __future__ import annotations


class JobError(RuntimeError):
    """A request that cannot be carried out as asked (the message says what to do)."""
