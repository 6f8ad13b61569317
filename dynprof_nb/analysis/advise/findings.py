"""What ``w.advise()`` hands back: one row per finding, and one per rule of what it checked.

A finding says what a rule saw (``evidence``: the numbers, each with the rule's threshold beside
it), where (``start_ns``/``end_ns`` and ``lanes``: ranks, streams), and what to try
(``suggestion``). :class:`Findings` wraps the rows in a DataFrame (``.frame``) with an HTML
repr, and keeps ``.checked``: every rule run, whether it found something, found nothing, or was
not applicable to this window's data (and why) -- the one place a missing input is said, so a
rule never reports a finding it cannot back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from dynprof_nb.safetext import escape
from dynprof_nb.traces.interface import Window

SEVERITIES = ("high", "medium", "low", "info")

COLUMNS = [
    "rule",
    "severity",
    "ranks",
    "steps",
    "evidence",
    "suggestion",
    "start_ns",
    "end_ns",
    "lanes",
    "peer",
    "numbers",
]


class NotApplicable(Exception):  # noqa: N818 -- a rule's answer, not an error
    """Raised by a rule whose inputs this window does not have; the message says which."""


@dataclass
class Finding:
    """One thing a rule found. ``numbers`` holds the evidence's values by name (the same
    numbers as the text, unrounded), so a test or a person can recompute them from frames."""

    rule: str
    severity: str
    evidence: str
    suggestion: str
    peer: str
    ranks: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    start_ns: int | None = None
    end_ns: int | None = None
    lanes: list[str] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r}: one of {SEVERITIES}")


_ORDER = {s: i for i, s in enumerate(SEVERITIES)}


class Findings:
    """The findings of :func:`dynprof_nb.analysis.advise.advise` (``w.advise()``).

    ``frame``: one row per finding (rule, severity, ranks, steps, evidence, suggestion,
    start_ns, end_ns, lanes, peer, numbers), the most severe first; ``checked``: one row per
    rule (rule, peer, status ``found`` / ``not found`` / ``not applicable`` (in scope, but the
    window lacks its data) / ``out of scope`` (not for this kind of window: never run) /
    ``error``, note); ``kind``: the window's kind, e.g. "a CPU PyTorch window".
    ``findings[i]`` is a :class:`Finding`; ``show(i)`` opens the interactive timeline zoomed to
    where finding ``i`` is."""

    def __init__(
        self, window: Window, found: list[Finding], checked: pd.DataFrame, kind: str = "this window"
    ) -> None:
        self.window = window
        self.kind = kind
        self.findings = sorted(found, key=lambda f: _ORDER[f.severity])
        self.checked = checked
        rows = [{c: getattr(f, c) for c in COLUMNS} for f in self.findings]
        self.frame = pd.DataFrame(rows, columns=COLUMNS)

    def __len__(self) -> int:
        return len(self.findings)

    def __getitem__(self, i: int) -> Finding:
        return self.findings[i]

    def __iter__(self) -> Any:
        return iter(self.findings)

    def rule(self, name: str) -> list[Finding]:
        """The findings of rule ``name``."""
        return [f for f in self.findings if f.rule == name]

    def status(self, name: str) -> str:
        """``found``, ``not found`` or ``not applicable`` for rule ``name``."""
        row = self.checked[self.checked["rule"] == name]
        if row.empty:
            raise KeyError(f"no rule {name!r}; rules: {', '.join(self.checked['rule'])}")
        return str(row["status"].iloc[0])

    def top(self, n: int = 3) -> list[Finding]:
        """The ``n`` most severe findings (info ones last), for the summary."""
        return [f for f in self.findings if f.severity != "info"][:n]

    def lines(self) -> list[str]:
        """One line per finding (what ``dynprof advise`` prints in a log)."""
        out = []
        for f in self.findings:
            where = f"ranks {','.join(map(str, f.ranks))}" if f.ranks else "all ranks"
            if f.steps:
                where += f" steps {','.join(map(str, f.steps))}"
            out.append(f"[{f.severity}] {f.rule} ({where}): {f.evidence}")
        return out

    def show(self, i: int = 0, **kw: Any) -> Any:
        """The interactive timeline of the window, zoomed to where finding ``i`` is (its time
        range, its ranks)."""
        f = self.findings[i]
        if f.ranks and "ranks" not in kw and len(getattr(self.window, "ranks", []) or []) > 1:
            kw["ranks"] = f.ranks
        view = self.window.plot_timeline(interactive=True, **kw)
        if f.start_ns is not None and f.end_ns is not None:
            off = view.tl.offsets.get(f.ranks[0] if f.ranks else 0, 0) if view.tl.offsets else 0
            pad = max((f.end_ns - f.start_ns) // 20, 1000)
            view.zoom(f.start_ns - off - pad, f.end_ns - off + pad)
        return view

    def __repr__(self) -> str:
        return "\n".join([self.counts(), *self.lines()])

    def counts(self) -> str:
        """The header: how many findings from how many rules, what could not run, and (one
        line) the rules not for this kind of window."""
        c = self.checked["status"].value_counts()
        n, hit, quiet = len(self), int(c.get("found", 0)), int(c.get("not found", 0))
        head = (
            f"{_count(n, 'finding')} on {self.kind}: {_count(hit + quiet, 'rule')} ran, "
            f"{hit} with a finding, {quiet} with nothing over its threshold"
        )
        if c.get("not applicable"):
            head += f"; {_count(int(c['not applicable']), 'rule')} lacked their data here"
        if c.get("error"):
            head += f"; {_count(int(c['error']), 'rule')} failed (see .checked)"
        scope = self.out_of_scope()
        return head + (f"\n{scope}" if scope else "")

    def out_of_scope(self) -> str:
        """One line: the rules not for this kind of window, by why ("" when none)."""
        out = self.checked[self.checked["status"] == "out of scope"]
        if out.empty:
            return ""
        why = out["note"].str.split(":").str[0].value_counts()
        parts = ", ".join(f"{n} {label}" for label, n in why.items())
        return f"not applicable to {self.kind}: {_count(len(out), 'rule')} ({parts})"

    def _repr_html_(self) -> str:
        esc = escape
        colour = {"high": "#c0392b", "medium": "#d68910", "low": "#2874a6", "info": "#707b7c"}
        rows = []
        for f in self.findings:
            ranks = ", ".join(map(str, f.ranks)) or "all"
            steps = ", ".join(map(str, f.steps)) or "all"
            rows.append(
                f"<tr><td style='color:{colour.get(f.severity, '#000')};font-weight:bold'>"
                f"{esc(f.severity)}</td>"
                f"<td>{esc(f.rule)}</td><td>{esc(ranks)}</td><td>{esc(steps)}</td>"
                f"<td style='text-align:left'>{esc(f.evidence)}</td>"
                f"<td style='text-align:left'>{esc(f.suggestion)}</td>"
                f"<td>{esc(f.peer)}</td></tr>"
            )
        na = self.checked[self.checked["status"].isin(["not applicable", "out of scope"])]
        na_html = "".join(
            f"<li>{esc(r.rule)}: {esc(r.note)}</li>" for r in na.itertuples(index=False)
        )
        return (
            f"<div><b>{esc(self.counts().splitlines()[0])}</b>"
            + "".join(f"<br>{esc(line)}" for line in self.counts().splitlines()[1:])
            + "<table><tr><th>severity</th><th>rule</th><th>ranks</th><th>steps</th>"
            "<th>evidence (threshold)</th><th>suggestion</th><th>from</th></tr>"
            + "".join(rows)
            + "</table>"
            + (
                f"<details><summary>not applicable here</summary><ul>{na_html}</ul></details>"
                if na_html
                else ""
            )
            + "</div>"
        )


def _count(n: int, noun: str) -> str:
    """``1 rule``, ``3 rules``: the header read aloud, not ``rule(s)``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


__all__ = ["COLUMNS", "Finding", "Findings", "NotApplicable", "SEVERITIES"]
