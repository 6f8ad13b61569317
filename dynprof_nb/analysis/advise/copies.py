"""dynprof_nb's memory-copy rule for a GPU window (docs/definitions.md, "Advice"):

- memory copies: per rank, the device's memory copies (a Kineto trace's ``gpu_memcpy`` rows,
  ``Memcpy HtoD (Pageable -> Device)`` ...) per step: their count and device time by direction
  (HtoD, DtoH, DtoD, PtoP), and how many touch *pageable* host memory. A rank is named when its
  copies take >= 5% of its step. A copy from or to pageable memory cannot overlap the host: the
  driver stages it through a pinned buffer and the host waits (a DtoH copy to pageable memory
  is also a sync point); pinned memory (``pin_memory=True``) with ``non_blocking=True`` lets it
  run beside compute.

It applies to GPU windows only (:mod:`.scope`): a CPU window has no device to copy to, and an
Ascend window's copies are its step trace's (msprof-analyze's rules).
"""

from __future__ import annotations

import pandas as pd

from dynprof_nb.traces.interface import Window

from .findings import Finding, NotApplicable
from .scope import Scope

PEER = "dynprof_nb"
COPY_SHARE = 0.05
COPY_CATS = ("gpu_memcpy", "Memcpy")
DIRECTION = r"Memcpy\s+(HtoD|DtoH|DtoD|PtoP|HtoH)"


def copies_per_step(w: Window) -> pd.DataFrame:
    """Per rank and direction: copies per step, device µs per step and pageable copies per
    step, over the rank's steps (copies outside any step are not counted)."""
    k = w.kernels
    if k.empty or "type" not in k:
        raise NotApplicable("no device rows (kernels) in this window")
    if "rank" not in k:
        k = k.assign(rank=int(getattr(w, "rank", None) or 0))
    names = k["name"].astype(str)
    copies = k[k["type"].astype(str).isin(COPY_CATS) | names.str.match(r"^Memcpy\b")]
    copies = copies[copies["step"].notna()]
    st = w.steps
    if "rank" not in st:
        st = st.assign(rank=int(getattr(w, "rank", None) or 0))
    st = st[st["duration_us"].notna()]
    if st.empty:
        raise NotApplicable("no steps with durations")
    nsteps = st.groupby("rank")["step"].nunique()
    cols = ["rank", "direction", "per_step", "us_per_step", "pageable_per_step"]
    if copies.empty:
        return pd.DataFrame(columns=cols)
    c = copies.assign(
        direction=copies["name"].astype(str).str.extract(DIRECTION, expand=False).fillna("other"),
        pageable=copies["name"].astype(str).str.contains("Pageable").astype(int),
    )
    g = c.groupby(["rank", "direction"]).agg(
        n=("duration_us", "size"), us=("duration_us", "sum"), pageable=("pageable", "sum")
    )
    g = g.reset_index()
    n = g["rank"].map(nsteps).astype(float)
    return pd.DataFrame(
        {
            "rank": g["rank"].astype(int),
            "direction": g["direction"],
            "per_step": g["n"] / n,
            "us_per_step": g["us"] / n,
            "pageable_per_step": g["pageable"] / n,
        }
    ).dropna()[cols]


def memory_copies(w: Window) -> list[Finding]:
    t = copies_per_step(w)
    st = w.steps
    if "rank" not in st:
        st = st.assign(rank=int(getattr(w, "rank", None) or 0))
    step_us = st[st["duration_us"].notna()].groupby("rank")["duration_us"].mean()
    out = []
    for r, part in t.groupby("rank"):
        us, mean_step = float(part["us_per_step"].sum()), float(step_us.get(r, 0.0))
        share = min(us / mean_step, 1.0) if mean_step > 0 else 0.0
        if share < COPY_SHARE:
            continue
        pageable = float(part["pageable_per_step"].sum())
        each = ", ".join(
            f"{row.direction} {row.per_step:.1f} ({row.us_per_step / 1000:.3f} ms)"
            for row in part.sort_values("us_per_step", ascending=False).itertuples()
        )
        out.append(
            Finding(
                rule="memory copies",
                severity="high" if share >= 0.2 else "medium",
                evidence=(
                    f"rank {int(r)}'s device copies memory {us / 1000:.3f} ms per step, "
                    f"{100 * share:.1f}% of its step (threshold {100 * COPY_SHARE:.0f}%): per "
                    f"step {each}; {pageable:.1f} per step from or to pageable host memory"
                ),
                suggestion=(
                    "keep tensors on the device between steps; copy from pinned memory "
                    "(DataLoader(pin_memory=True), tensor.pin_memory()) with "
                    ".to(device, non_blocking=True) so copies overlap compute; read results "
                    "back (DtoH) once per N steps"
                ),
                peer=PEER,
                ranks=[int(r)],
                numbers={
                    "us_per_step": us,
                    "share": share,
                    "threshold": COPY_SHARE,
                    "pageable_per_step": pageable,
                    "by_direction_us": {
                        str(d): float(v)
                        for d, v in zip(part["direction"], part["us_per_step"], strict=True)
                    },
                },
            )
        )
    return out


SCOPES = {
    "memory copies": Scope(("gpu",), needs="device memory copies (a Kineto trace's Memcpy rows)"),
}
RULES = {"memory copies": memory_copies}

__all__ = ["COPY_SHARE", "PEER", "RULES", "SCOPES", "copies_per_step"]
