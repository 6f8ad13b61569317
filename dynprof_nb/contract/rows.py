"""One typed view of a rank, whoever reads it: the local controller, the cluster, the panel.

A rank is read from its slot in shared memory (:class:`~dynprof_nb.contract.segment.SlotView`)
on its own node, and from an agent's answer (plain data, across Dask) on the cluster. Both
become a :class:`RankRow`, so the checks in :mod:`dynprof_nb.control.asks` run on the same rows
in both places. A window is a :class:`StepWindow` value; its text form ``"20-30"`` is made and
parsed here and nowhere else.

Across Dask a row is :meth:`RankRow.to_dict` (the gate refuses pickles: plain dicts, strings
and numbers only, :mod:`dynprof_nb.cluster.wire`) and comes back with :meth:`RankRow.from_dict`.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

#: ``20-30`` in ASCII digits (``str.isdigit`` takes ``²``), at most 18 digits a side (int64)
_WINDOW_TEXT = re.compile(r"([0-9]{1,18})-([0-9]{1,18})")


class StepWindow(NamedTuple):
    """Steps ``start``..``stop``, both inclusive, as a rank records them."""

    start: int
    stop: int

    def __str__(self) -> str:
        return f"{self.start}-{self.stop}"

    @classmethod
    def parse(cls, text: Any) -> StepWindow | None:
        """``"20-30"`` as a window; ``None`` for ``""``, ``None`` or anything else (a rank
        with no window reports ``""``)."""
        found = _WINDOW_TEXT.fullmatch(str(text or ""))
        if found is None:
            return None
        start, stop = int(found[1]), int(found[2])
        return cls(start, stop) if 1 <= start <= stop else None  # 0 is "no window" (of())

    @classmethod
    def of(cls, start: int, stop: int) -> StepWindow | None:
        """A slot's ``start``/``stop`` words as a window; ``None`` when it has none (0)."""
        return cls(int(start), int(stop)) if start >= 1 else None


def window_text(window: StepWindow | None) -> str:
    """A window as status tables show it: ``"20-30"``, ``""`` for none."""
    return "" if window is None else str(window)


class RankRow(NamedTuple):
    """A rank as its controllers see it. ``node`` is ``""`` for a rank on this machine."""

    rank: int
    pid: int
    step: int
    state: str
    window: StepWindow | None = None
    node: str = ""
    alive: bool = True
    error: str = ""

    @property
    def name(self) -> str:
        """The rank in messages: ``"3"``, or ``"3 on node-b"`` on a cluster."""
        return f"{self.rank} on {self.node}" if self.node else str(self.rank)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the wire and for status tables (the window as ``"20-30"``)."""
        return {**self._asdict(), "window": window_text(self.window)}

    @classmethod
    def from_dict(cls, d: dict[str, Any], node: str = "") -> RankRow:
        """A row from an agent's status answer (extra keys, such as the rate, are ignored);
        ``node``: the node that answered, when the row does not name it."""
        return cls(
            rank=int(d["rank"]),
            pid=int(d.get("pid") or 0),
            step=int(d.get("step") or 0),
            state=str(d.get("state") or ""),
            window=StepWindow.parse(d.get("window")),
            node=str(d.get("node") or node),
            alive=bool(d.get("alive", True)),
            error=str(d.get("error") or ""),
        )


def row_of_slot(slot: Any, node: str = "") -> RankRow:
    """A :class:`~dynprof_nb.contract.segment.SlotView` (or anything with its fields) as a
    row; its liveness is the slot's ``alive``."""
    return RankRow(
        rank=slot.rank,
        pid=slot.pid,
        step=slot.step,
        state=slot.state,
        window=StepWindow.of(slot.start, slot.stop),
        node=node,
        alive=bool(getattr(slot, "alive", True)),
        error=slot.error,
    )
