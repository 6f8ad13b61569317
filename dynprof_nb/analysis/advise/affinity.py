"""msprof-analyze's affinity-API rule (its advisor's ``TimelineFusionOpsAnalyzer``, "Affinity API
Issues": "found N apis to be replaced"), on a window's host events.

Its definition, followed exactly (docs/definitions.md, "Advice"):

- the **aten sequence** of a rank: host events whose name starts with ``aten::`` or ``npu::``
  (any case), in time order, keeping those whose name starts with ``aten`` and that are not
  inside the last one kept (the top-level aten operators, contiguous);
- the **optimizer sequence**: events whose name starts with ``Optimizer.step#``;
- the **rule table** (:mod:`.affinity_rules`, msprof-analyze's timeline_fusion_ops.yaml as its
  advisor resolves it for its default CANN and torch versions): an operator sequence (names
  without their ``aten::`` / ``Optimizer.step#`` prefix, ``-`` between them) -> the affine
  API(s). A sequence without parentheses matches consecutive operators exactly; one with
  ``(a|b){m,n}`` parts is the advisor's regular expression over ``-name1--name2-...`` (built by
  its ``_format_rule_to_pattern``, ported as is);
- a finding per rank that matches any rule: the number of distinct APIs (each ``/``-separated
  API of a matched rule counts), each with its operator sequence and how often it matched.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from dynprof_nb.traces.interface import Window

from .affinity_rules import RULES
from .findings import Finding, NotApplicable
from .frames import names_where, with_rank

PEER = "msprof-analyze advisor"
OP_SEP = "-"
ATEN_PREFIX = "aten::"
OPTIMIZER_PREFIX = "Optimizer.step#"
MIN_MATCHES = 1  # the advisor reports a rule that matches once


def rule_pattern(op_rule: str) -> tuple[str, bool]:
    """The advisor's ``_format_rule_to_pattern``: ``(mul){0,1}-(add|neg){0,2}-dropout`` becomes
    the regular expression it searches ``-op--op-...`` with (and True), a rule without
    parentheses stays as it is (and False: an exact match of consecutive names)."""
    if "(" not in op_rule and ")" not in op_rule:
        return op_rule, False
    out = ""
    for part in op_rule.split(OP_SEP):
        m = re.search(r"\((\w+)\)", part)
        lo, hi = (m.start() + 1, m.end() - 1) if m else (0, len(part))
        names = [f"{OP_SEP}{n.strip(' ')}{OP_SEP}" for n in part[lo:hi].split("|")]
        out += f"({'|'.join(names)}){part[hi + 1 :]}"
    return out, True


def sequences(e: pd.DataFrame) -> dict[str, list[tuple[str, int, int]]]:
    """One rank's aten and optimizer sequences: (bare name, ts_ns, end_ns) each."""
    low = e[names_where(e["name"], lambda n: n.str.lower().str.startswith(("aten::", "npu::")))]
    low = low.sort_values("ts_ns", kind="stable")
    aten: list[tuple[str, int, int]] = []
    for name, ts, dur in zip(
        low["name"].astype(str), low["ts_ns"].tolist(), low["dur_ns"].tolist(), strict=True
    ):
        if not name.startswith("aten"):
            continue
        if aten and aten[-1][1] <= ts and aten[-1][2] >= ts + dur:
            continue  # inside the last top-level aten operator
        aten.append((name.replace(ATEN_PREFIX, ""), int(ts), int(ts + dur)))
    opt = e[names_where(e["name"], lambda n: n.str.startswith(OPTIMIZER_PREFIX))]
    optimizer = [
        (n.replace(OPTIMIZER_PREFIX, ""), int(t), int(t + d))
        for n, t, d in zip(
            opt["name"].astype(str), opt["ts_ns"].tolist(), opt["dur_ns"].tolist(), strict=True
        )
    ]
    return {"aten": aten, "optimizer": optimizer}


def matches(seq: list[tuple[str, int, int]], op_rule: str) -> list[int]:
    """Where ``op_rule`` matches ``seq``: the index of each match's first operator."""
    names = [s[0] for s in seq]
    pattern, regex = rule_pattern(op_rule)
    if not regex:
        ops = pattern.split(OP_SEP)
        return [i for i in range(len(names)) if names[i : i + len(ops)] == ops]
    total = "".join(f"{OP_SEP}{n}{OP_SEP}" for n in names)
    starts = np.cumsum([0] + [len(n) + 2 for n in names])  # where each name's "-n-" begins
    try:
        found = list(re.finditer(pattern, total))
    except re.error:  # the advisor logs "Failed to find fusion operators with regex" and goes on
        return []
    return [int(np.searchsorted(starts, m.start(0), side="right") - 1) for m in found]


def affinity_api(w: Window) -> list[Finding]:
    e = w.events
    if e.empty:
        raise NotApplicable("no host events (trace_view.json or the .db's API tables)")
    if str(getattr(w, "framework", "") or "").lower().startswith("mindspore"):
        raise NotApplicable("the advisor's affinity-API table is for PyTorch (torch_npu) only")
    e = with_rank(e, w)
    out = []
    for r, part in e.groupby("rank", sort=True):
        seqs = sequences(part)
        if not seqs["aten"] and not seqs["optimizer"]:
            continue
        hits: dict[str, list[tuple[str, int, int]]] = {}  # api -> (rule, count, first ts)
        for mode in ("aten", "optimizer"):
            seq = seqs[mode]
            for op_rule, apis in RULES[mode].items():
                at = matches(seq, op_rule)
                if not at:
                    continue
                for api in apis.split("/"):
                    hits.setdefault(api, []).append((op_rule, len(at), seq[at[0]][1]))
        if not hits:
            continue
        first = min(t for v in hits.values() for _, _, t in v)
        last = max(t for v in hits.values() for _, _, t in v)
        detail = "; ".join(
            f"{api} for {', '.join(f'{rule} ({n}x)' for rule, n, _ in v)}"
            for api, v in sorted(hits.items())
        )
        out.append(
            Finding(
                rule="affinity API",
                severity="low",
                evidence=(
                    f"rank {int(r)}: {len(hits)} API(s) can be replaced by an affine API "
                    f"(rule table of CANN {RULES['cann_version']}, torch "
                    f"{RULES['torch_version']}): {detail} (threshold: {MIN_MATCHES} match of a "
                    "rule)"
                ),
                suggestion="call the torch_npu affine API(s) named, fused on the NPU, instead "
                "of the operator sequences they replace (profile with with_stack=True to see "
                "where in the code they are)",
                peer=PEER,
                ranks=[int(r)],
                start_ns=first,
                end_ns=last,
                lanes=[f"rank {int(r)} host"],
                numbers={
                    "apis": len(hits),
                    "threshold_matches": MIN_MATCHES,
                    "matches": {api: [[rule, n] for rule, n, _ in v] for api, v in hits.items()},
                },
            )
        )
    return out
