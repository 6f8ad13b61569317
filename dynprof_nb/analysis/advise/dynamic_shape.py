"""msprof-analyze's dynamic-shape rule (its advisor's ``DynamicShapeChecker``, "operator dynamic
shape issues: Found all operators are dynamic shape"), on a window's device kernels.

Its definition (CANN >= 8.0.RC1, the advisor's default 8.0.0): the op summary's operators are
all of dynamic shape when none has ``OP State`` = ``static`` (kernel_details.csv's "OP State"
column; a .db's COMPUTE_TASK_INFO.opState). A dynamic-shape operator is compiled (or looked up)
for each new shape on the host; the advisor suggests static shapes or binary kernels.

One difference, on purpose: the advisor counts a kernel_details.csv *without* an OP State
column as "all operators are dynamic shape" (its reader has no state to test and finds no
static operator). dynprof_nb does not claim that: the rule is not applicable there, and says
so (docs/definitions.md, "Advice"; the oracle test checks exactly this).
"""

from __future__ import annotations

from typing import Any

from dynprof_nb.traces.interface import Window

from .findings import Finding, NotApplicable
from .frames import span, with_rank

PEER = "msprof-analyze advisor"
STATE_COLUMNS = ("OP State", "op_state", "opState")
STATIC = "static"
NO_STATE_TEXT = (
    "the window's kernels carry no OP State (its kernel_details.csv has no such column): "
    "msprof-analyze's advisor reports 'all operators are dynamic shape' there, from the "
    "absence alone; nothing here shows which shapes are dynamic"
)
NO_STATE = (
    "the window's kernels carry no OP State (a .db without COMPUTE_TASK_INFO.opState, or no "
    "kernel_details.csv): msprof-analyze's advisor skips its check there too"
)


def state_column(k: Any) -> str | None:
    """The kernels frame's OP State column, where the window has one with values."""
    for c in STATE_COLUMNS:
        if c in k.columns and k[c].notna().any():
            return c
    return None


def dynamic_shape(w: Window) -> list[Finding]:
    k = w.kernels
    if k.empty:
        raise NotApplicable("no device kernels (kernel_details.csv or the .db)")
    col = state_column(k)
    if col is None:
        fmt = (getattr(w, "sources", {}) or {}).get("kernels", {}).get("format")
        raise NotApplicable(NO_STATE_TEXT if fmt == "text" else NO_STATE)
    k = with_rank(k, w)
    out = []
    for r, part in k.groupby("rank", sort=True):
        state = part[col].dropna().astype(str).str.strip().str.lower()
        if state.empty or (state == STATIC).any():
            continue
        lo, hi = span(part)
        out.append(
            Finding(
                rule="dynamic shape",
                severity="medium",
                evidence=(
                    f"rank {int(r)}: all {len(state)} device operators with an OP State are "
                    f"of dynamic shape ({', '.join(sorted(set(state)))}; threshold: no "
                    f"{STATIC!r} operator, the advisor's): each new shape is compiled or looked "
                    "up on the host"
                ),
                suggestion=(
                    "use static shapes where the model allows (pad to fixed sizes), and "
                    "torch_npu.npu.set_compile_mode(jit_compile=False) to run prebuilt binary "
                    "kernels instead of compiling"
                ),
                peer=PEER,
                ranks=[int(r)],
                start_ns=lo,
                end_ns=hi,
                lanes=[f"rank {int(r)} device"],
                numbers={
                    "operators": len(state),
                    "static": 0,
                    "threshold_static": 0,
                },
            )
        )
    return out
