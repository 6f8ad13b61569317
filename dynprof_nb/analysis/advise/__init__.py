"""``w.advise()``: from a window's numbers to findings, each rule its peer's (msprof-analyze's
advisor, HTA), computed on the frames the window already loaded (no second parse).

A rule family per module: :mod:`.ascend` (msprof-analyze advisor), :mod:`.gpu` (HTA),
:mod:`.common` (both), :mod:`.host` (dynprof_nb's: the straggler, host-bound loops, sync
points, data-loader waits) and :mod:`.copies` (dynprof_nb's: a GPU's memory copies). Each rule
declares its :class:`~.scope.Scope` (the device kinds and frameworks it applies to, what it
needs): a rule out of scope is not run, and is listed apart ("not applicable to a CPU PyTorch
window: 13 rules (Ascend-only ...)"). A rule in scope returns its findings, or raises
:class:`~.findings.NotApplicable` when the window lacks what it needs: said once, in
``Findings.checked``, never turned into a finding.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pandas as pd

from dynprof_nb.traces.interface import Window

from . import ascend, common, copies, gpu, host
from .findings import Finding, Findings, NotApplicable
from .scope import Scope, describe, device_kind, framework_of

Rule = Callable[[Any], list[Finding]]

FAMILIES: dict[str, dict[str, Rule]] = {
    ascend.PEER: ascend.RULES,
    gpu.PEER: gpu.RULES,
    common.PEER: common.RULES,
    host.PEER: {**host.RULES, **copies.RULES},  # both dynprof_nb's own
}
SCOPES: dict[str, Scope] = {
    **ascend.SCOPES,
    **gpu.SCOPES,
    **common.SCOPES,
    **host.SCOPES,
    **copies.SCOPES,
}


def rules() -> dict[str, tuple[str, Rule]]:
    """Every rule by name: (peer, function)."""
    return {name: (peer, f) for peer, family in FAMILIES.items() for name, f in family.items()}


class _WithoutEvents:
    """A window whose ``events`` frame is not to be built (the summary's top findings: a
    summary of a big trace never materialises its events, and its text must not depend on
    whether they happen to be loaded). Rules that need the events say "not applicable"."""

    def __init__(self, window: Window) -> None:
        self._window = window

    @property
    def events(self) -> Any:
        raise NotApplicable("needs the events frame, which the summary does not build")

    def frame(self, kind: str) -> Any:
        if kind == "events":
            return self.events
        return self._window.frame(kind)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._window, name)


def advise(w: Window, only: list[str] | None = None, events: bool = True) -> Findings:
    """Run every rule (or those named in ``only``) on window ``w``; ``events=False`` runs
    them without building the events frame (the rules that need it are not applicable)."""
    window, w = w, (w if events else _WithoutEvents(w))
    found: list[Finding] = []
    checked = []
    device, framework = device_kind(window), framework_of(window)
    for name, (peer, rule) in rules().items():
        if only is not None and name not in only:
            continue
        scope = SCOPES.get(name, Scope())
        if not scope.covers(device, framework):
            checked.append((name, peer, "out of scope", f"{scope.label}: needs {scope.needs}"))
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = rule(w)
        except NotApplicable as e:
            checked.append((name, peer, "not applicable", str(e)))
            continue
        # a frame not as the rule expects: said in checked ("error"); the other rules still run
        except (LookupError, ValueError, TypeError, AttributeError, ArithmeticError) as e:
            checked.append((name, peer, "error", f"{type(e).__name__}: {e}"))
            continue
        found += [_locate(w, f) for f in got]
        problems = [f for f in got if f.severity != "info"]
        status = "found" if problems else "not found"
        note = f"{len(problems)} finding(s)" if problems else "nothing over the threshold"
        checked.append((name, peer, status, note))
    return Findings(
        window,
        found,
        pd.DataFrame(checked, columns=["rule", "peer", "status", "note"]),
        describe(device, framework),
    )


def _locate(w: Window, f: Finding) -> Finding:
    """A finding without a time range gets its steps' (on its ranks; all steps and ranks when
    it names none), and its ranks as lanes, so ``show()`` always has somewhere to go."""
    if f.start_ns is not None:
        return f
    try:
        st = w.steps
    except (KeyError, ValueError, AttributeError):
        return f
    if st.empty or "start_ns" not in st:
        return f
    sel = st[st["start_ns"].notna()]
    if f.ranks and "rank" in sel:
        sel = sel[sel["rank"].isin(f.ranks)]
    if f.steps:
        sel = sel[sel["step"].isin(f.steps)]
    if sel.empty:
        return f
    start = sel["start_ns"].astype("int64")
    f.start_ns = int(start.min())
    f.end_ns = int((start + (sel["duration_us"].fillna(0) * 1000).round().astype("int64")).max())
    if not f.lanes:
        f.lanes = [f"rank {r}" for r in (f.ranks or sorted(set(sel.get("rank", [0]))))]
    return f


__all__ = ["FAMILIES", "SCOPES", "Finding", "Findings", "NotApplicable", "advise", "rules"]
