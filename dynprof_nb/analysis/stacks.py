"""Which ranks differ: identical stacks of many ranks merged into one prefix tree (STAT's idea).

``job.stacks()`` is a :class:`StackFrame`: a DataFrame ``rank, node, pid, thread, depth,
function, file, line, thread_id`` (depth 0 = the outermost frame), with the ranks that did not
answer in ``.silent``. ``.tree()`` merges the threads of every rank, thread by thread name,
into a prefix tree whose edges carry rank sets; chains that every rank below shares are shown
on one line, and at each fork the smaller rank set (the odd ones) comes first::

    MainThread [ranks 0-1]
      <module> → main → train_step [ranks 0-1]
        rank 1: slow_down (train.py:40) → sleep
        rank 0: backward (torch/_tensor.py:492) → ... → wait

It prints as plain text and renders as a collapsible HTML tree in a notebook. The groups (one
line per distinct stack, odd first) are ``tree().groups``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from dynprof_nb.safetext import escape

STACK_COLUMNS = ["rank", "node", "pid", "thread", "depth", "function", "file", "line", "thread_id"]


def rank_set(ranks: set[int] | list[int]) -> str:
    """``ranks 0-3,5`` / ``rank 7``: a set of ranks as runs."""
    ordered = sorted(set(ranks))
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return f"rank{'s' if len(ordered) > 1 else ''} {','.join(runs)}"


def _label(function: str, file: str, line: Any) -> str:
    if not file:
        return function
    where = os.path.basename(file)
    return (
        f"{function} ({where}:{line})"
        if line is not None and line == line
        else f"{function} ({where})"
    )


@dataclass
class Node:
    """One frame of the merged tree: the ranks whose thread passes through it."""

    label: str
    ranks: set[int] = field(default_factory=set)
    children: dict[str, Node] = field(default_factory=dict)

    def ordered(self) -> list[Node]:
        """Children, the odd (fewest ranks) first."""
        return sorted(self.children.values(), key=lambda n: (len(n.ranks), min(n.ranks)))


class StackTree:
    """The merged tree of a :class:`StackFrame`: ``str()`` is the text, a notebook the HTML."""

    def __init__(self, frame: pd.DataFrame, silent: list[dict[str, Any]] | None = None) -> None:
        self.roots: dict[str, Node] = {}
        self.silent = list(silent or [])
        self.truncated = list(frame.attrs.get("truncated") or [])
        self.recent = str(frame.attrs.get("recent") or "")  # the records kept at a stall
        stacks: dict[tuple[str, tuple[str, ...]], set[int]] = {}
        if len(frame):
            ordered = frame.sort_values(["rank", "pid", "thread_id", "depth"])
            for (rank, _pid, thread, _tid), rows in ordered.groupby(
                ["rank", "pid", "thread", "thread_id"], sort=False
            ):
                labels = tuple(
                    _label(f, p, ln)
                    for f, p, ln in zip(rows["function"], rows["file"], rows["line"], strict=True)
                )
                root = self.roots.setdefault(thread, Node(thread))
                root.ranks.add(int(rank))
                node = root
                for label in labels:
                    node = node.children.setdefault(label, Node(label))
                    node.ranks.add(int(rank))
                stacks.setdefault((thread, labels), set()).add(int(rank))
        self.groups = sorted(
            ({"thread": t, "ranks": sorted(r), "stack": list(s)} for (t, s), r in stacks.items()),
            key=lambda g: (g["thread"] != "MainThread", g["thread"], len(g["ranks"]), g["ranks"]),
        )

    def _threads(self) -> list[Node]:
        return sorted(self.roots.values(), key=lambda n: (n.label != "MainThread", n.label))

    @staticmethod
    def _chain(node: Node) -> tuple[list[str], Node]:
        """``node`` and the single-child descendants with its ranks, as one line."""
        labels = [node.label]
        while len(node.children) == 1:
            child = next(iter(node.children.values()))
            if child.ranks != node.ranks:
                break
            labels.append(child.label)
            node = child
        return labels, node

    def text(self) -> str:
        lines: list[str] = []
        for group in self.groups:
            if group["thread"] != "MainThread":
                continue
            lines.append(
                f"{len(group['ranks'])} {rank_set(group['ranks'])}: "
                + " → ".join(x.split(" (")[0] for x in group["stack"])
            )
        if lines:
            lines.append("")
        for root in self._threads():
            lines.append(f"{root.label} [{rank_set(root.ranks)}]")
            self._text(root, 1, lines)
        for s in self.silent:
            lines.append(f"rank {s['rank']} (pid {s['pid']} on {s['node']}): silent: {s['why']}")
        for c in self.truncated:
            lines.append(f"rank {c['rank']} (pid {c['pid']} on {c['node']}): cut: {c['what']}")
        if self.recent and lines:
            lines.append(f"steps before the hang: {self.recent}")
        return "\n".join(lines) if lines else "no stacks (no live rank answered)"

    def _text(self, node: Node, indent: int, lines: list[str]) -> None:
        for child in node.ordered():
            labels, last = self._chain(child)
            lines.append("  " * indent + " → ".join(labels) + f" [{rank_set(child.ranks)}]")
            self._text(last, indent + 1, lines)

    def _html(self, node: Node) -> str:
        parts = []
        for child in node.ordered():
            labels, last = self._chain(child)
            label = escape(" → ".join(labels))
            ranks = escape(rank_set(child.ranks))
            inner = self._html(last)
            summary = f"<code>{label}</code> <b>[{ranks}]</b>"
            parts.append(
                f"<li><details open><summary>{summary}</summary>{inner}</details></li>"
                if inner
                else f"<li>{summary}</li>"
            )
        return (
            f"<ul style='list-style:none;padding-left:1.2em'>{''.join(parts)}</ul>" if parts else ""
        )

    def _repr_html_(self) -> str:
        out = []
        for root in self._threads():
            out.append(
                f"<details open><summary><b>{escape(root.label)}</b> "
                f"[{escape(rank_set(root.ranks))}]</summary>{self._html(root)}"
                "</details>"
            )
        for s in self.silent:
            out.append(
                f"<div style='color:#b00'>rank {escape(s['rank'])} (pid {escape(s['pid'])} on "
                f"{escape(s['node'])}): silent: {escape(s['why'])}</div>"
            )
        for c in self.truncated:
            out.append(
                f"<div style='color:#a60'>rank {escape(c['rank'])} (pid {escape(c['pid'])} on "
                f"{escape(c['node'])}): cut: {escape(c['what'])}</div>"
            )
        if self.recent and out:
            out.append(f"<div>steps before the hang: {escape(self.recent)}</div>")
        return "".join(out) or "<i>no stacks (no live rank answered)</i>"

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()


class StackFrame(pd.DataFrame):
    """``job.stacks()``: one row per frame of every thread of every rank that answered; the
    ranks that did not are in ``.silent`` (rank, node, pid, why). ``.tree()`` merges them."""

    _metadata = ["silent"]

    @property
    def _constructor(self) -> type[StackFrame]:
        return StackFrame

    @classmethod
    def from_rows(
        cls, rows: list[dict[str, Any]], silent: list[dict[str, Any]] | None = None, **attrs: Any
    ) -> StackFrame:
        """Rows may carry ``cut``: what faulthandler left out of that rank's dump (see
        :func:`dynprof_nb.control.stacks.dump_cuts`), gathered in ``.attrs["truncated"]``."""
        cuts = [
            {"rank": r.get("rank"), "node": r.get("node"), "pid": r.get("pid"), "what": what}
            for r in rows
            for what in r.get("cut") or ()
        ]
        if cuts:
            attrs.setdefault("truncated", cuts)
        frame = cls(pd.DataFrame(rows, columns=STACK_COLUMNS))
        frame["line"] = frame["line"].astype("Int64")
        frame.silent = list(silent or [])
        frame.attrs.update(attrs)
        return frame

    def tree(self) -> StackTree:
        return StackTree(self, getattr(self, "silent", []))

    def to_json_text(self) -> str:
        rows = [
            {k: (None if v is pd.NA else v) for k, v in r.items()}
            for r in pd.DataFrame(self).astype(object).to_dict("records")
        ]
        return json.dumps(
            {"rows": rows, "silent": getattr(self, "silent", []), "attrs": dict(self.attrs)},
            default=str,
        )

    @classmethod
    def from_json_text(cls, text: str) -> StackFrame:
        data = json.loads(text)
        return cls.from_rows(data["rows"], data.get("silent"), **data.get("attrs", {}))


def tree(frame: pd.DataFrame) -> StackTree:
    """The merged tree of any frame with the :data:`STACK_COLUMNS` (a saved one included)."""
    return StackTree(frame, getattr(frame, "silent", []))
