"""Which kernels and ranges count as communication: one definition for every frame and summary.

A step's communication time, the ``communication`` frame built from events, and the summary's
notes all ask :func:`matcher` here, so they can never disagree. The defaults cover the usual
collective libraries and the expert-parallel kernels that are not named after a library:

    >>> from dynprof_nb.traces import comm
    >>> comm.patterns["my_a2a"] = r"my_fused_alltoall"     # this session, windows loaded from now
    >>> w = dynprof_nb.load_window(path, comm_patterns={**comm.DEFAULT_PATTERNS, "x": r"x_comm"})

Patterns are regular expressions matched anywhere in the name, ignoring case. A window keeps the
patterns it was loaded with (``w.comm_patterns``), so all its frames agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

import numpy as np
import pandas as pd

#: family -> regular expression. Kernel names seen in real traces: ``ncclKernel_AllReduce_RING_LL``,
#: ``ncclDevKernel_SendRecv``, ``hcom_allReduce__123``, ``HcclAllreduce``, RCCL's ``ncclKernel`` too
#: (and ``rccl`` in its ranges), ``gloo:all_reduce``, ``c10d::allreduce_``, DeepEP's
#: ``deep_ep::internode::dispatch<...>`` / ``intranode::combine`` / ``internode_ll::dispatch``.
DEFAULT_PATTERNS: dict[str, str] = {
    "nccl": r"nccl",
    "rccl": r"rccl",
    "hccl": r"hccl|hcom",
    "gloo": r"gloo",
    "c10d": r"c10d::",
    # (not a compute op that broadcasts: aten::broadcast_tensors, Ascend's BroadcastTo kernels)
    "collectives": r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all"
    r"|broadcast(?!_?(?:to|tensors|shapes?|grad|in_?dim))",
    "deepep": r"deep_?ep|(?:inter|intra)node(?:_ll)?::\w*(?:dispatch|combine)",
}

#: The patterns windows are loaded with from now on (edit in place to configure a session).
patterns: dict[str, str] = dict(DEFAULT_PATTERNS)

PatternSpec = Mapping[str, str] | Iterable[str] | str | None


def resolve(spec: PatternSpec = None) -> tuple[str, ...]:
    """The regular expressions ``spec`` stands for: ``None`` is the current :data:`patterns`;
    a mapping's values, a list's items, or one expression. Each is checked (a bad one is a
    ``ValueError`` naming it)."""
    if spec is None:
        spec = patterns
    if isinstance(spec, str):
        items: tuple[str, ...] = (spec,)
    elif isinstance(spec, Mapping):
        items = tuple(str(v) for v in spec.values())
    else:
        items = tuple(str(v) for v in spec)
    for item in items:
        try:
            re.compile(item)
        except re.error as exc:
            raise ValueError(
                f"communication pattern {item!r} is not a regular expression "
                f"({exc}); e.g. r'internode::dispatch'."
            ) from None
    return items


@lru_cache(maxsize=32)
def _compiled(items: tuple[str, ...]) -> re.Pattern | None:
    if not items:
        return None
    return re.compile("|".join(f"(?:{p})" for p in items), re.IGNORECASE)


def matcher(spec: PatternSpec = None) -> re.Pattern | None:
    """One compiled expression for ``spec`` (``None`` when there are no patterns at all)."""
    return _compiled(resolve(spec))


def is_communication(names: pd.Series | Iterable[str], spec: PatternSpec = None) -> np.ndarray:
    """A boolean per name: does it count as communication?"""
    s = names if isinstance(names, pd.Series) else pd.Series(list(names), dtype=object)
    rx = matcher(spec)
    if rx is None or s.empty:
        return np.zeros(len(s), dtype=bool)
    # each distinct name once (a trace has millions of kernels but a few thousand names)
    codes, uniq = pd.factorize(s.astype(object))
    hit = np.fromiter(
        (isinstance(u, str) and rx.search(u) is not None for u in uniq), bool, len(uniq)
    )
    out = np.zeros(len(s), dtype=bool)
    ok = codes >= 0
    out[ok] = hit[codes[ok]]
    return out


__all__ = ["DEFAULT_PATTERNS", "is_communication", "matcher", "patterns", "resolve"]
