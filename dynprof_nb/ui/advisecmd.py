"""``dynprof advise WINDOW_DIR`` and ``%dynprof advise``: a window's findings
(:func:`dynprof_nb.analysis.advise.advise`) as a person reads them in a terminal, or as a log
reads them (one line per finding, when the output is not a terminal)."""

from __future__ import annotations

import os
import warnings
from typing import Any


def load_for_advice(path: str) -> Any:
    """The window at ``path`` (a window folder or one trace file)."""
    import dynprof_nb

    p = os.path.expanduser(path)
    if not os.path.exists(p):
        raise ValueError(f"{path}: no such window folder or trace file")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dynprof_nb.load_window(p) if os.path.isdir(p) else dynprof_nb.load_trace(p)


def advise_text(findings: Any, tty: bool) -> str:
    """A terminal's table (rule, severity, ranks, evidence, suggestion, then what was not
    applicable), or with ``tty=False`` one line per finding and a last line of counts."""
    if not tty:
        counts = findings.counts().replace("\n", "; ")
        return "\n".join([*findings.lines(), f"advise: {counts}"])
    out = []
    for i, f in enumerate(findings, 1):
        ranks = ",".join(map(str, f.ranks)) or "all"
        steps = ",".join(map(str, f.steps)) or "all"
        out.append(f"{i}. [{f.severity}] {f.rule}  (ranks {ranks}; steps {steps}; {f.peer})")
        out.append(f"   {f.evidence}")
        out.append(f"   -> {f.suggestion}")
    if not len(findings):
        out.append("no findings")
    na = findings.checked[findings.checked["status"].isin(["not applicable", "error"])]
    if len(na):
        out.append("not applicable to this window:")
        out += [f"   {r.rule}: {r.note}" for r in na.itertuples(index=False)]
    if findings.out_of_scope():
        out.append(findings.out_of_scope())
    return "\n".join(out)


def run_advise(path: str, rules: list[str] | None = None, tty: bool | None = None) -> str:
    """What ``dynprof advise PATH`` prints."""
    w = load_for_advice(path)
    findings = w.advise(only=rules) if rules else w.advise()
    import sys

    return advise_text(findings, sys.stdout.isatty() if tty is None else tty)


__all__ = ["advise_text", "load_for_advice", "run_advise"]
