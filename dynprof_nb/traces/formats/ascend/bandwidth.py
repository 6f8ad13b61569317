"""Per-transport bandwidth of Ascend communication ops, and the one rule both readers (the
communication.json text export and the .db export) use to turn it into an op's size and
bandwidth, so the two readers agree on the same kind of window.

Ascend reports, per communication op, one entry per transport in "Communication Bandwidth
Info" (communication.json) or analysis.db ``CommAnalyzerBandwidth``: HCCS, PCIE, SIO (the
links of one node), SDMA, and RDMA (between nodes). ``SDMA`` is not a link of its own: it is the
total of HCCS, PCIE and SIO (its size and transit time are their sums), so adding every entry
counts the data twice. Each entry's bandwidth is its size over its own transit time (the summed
durations of the tasks that moved data on it), not over the op's "Transit Time" (the op's
wall-clock transit, shorter because links run in parallel): dividing by that overstates the
bandwidth many times.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

# the links that ``SDMA`` totals (ON_CHIP/LOCAL copies within the device count in none of them)
SDMA_LINKS = ("HCCS", "PCIE", "SIO", "HCCS_SW")
# the transports whose sizes add up to what an op moved between ranks
DATA_TRANSPORTS = ("SDMA", "RDMA")

COLUMNS = [
    "step",
    "name",
    "group",
    "transport",
    "size_mb",
    "transit_us",
    "bandwidth_gbps",
    "large_packet_ratio",
]


def frame(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` typed as the per-transport bandwidth frame (one row per op and transport, the
    COLUMNS first, extra key columns kept); rows that moved nothing in no time are dropped
    (communication.json lists every transport, mostly as zeros)."""
    out = rows.copy()
    for c in COLUMNS:
        if c not in out:
            out[c] = np.nan if c in ("large_packet_ratio", "bandwidth_gbps") else pd.NA
    out["step"] = step_numbers(out["step"])
    if "rank" in out:
        out["rank"] = pd.array(pd.to_numeric(out["rank"], errors="coerce"), dtype="Int64")
    for c in ("size_mb", "transit_us", "bandwidth_gbps", "large_packet_ratio"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("float64")
    out = out[(out["size_mb"].fillna(0) != 0) | (out["transit_us"].fillna(0) != 0)]
    computed = out["size_mb"] / (out["transit_us"].where(out["transit_us"] > 0) / 1000.0)
    out["bandwidth_gbps"] = out["bandwidth_gbps"].where(out["bandwidth_gbps"].notna(), computed)
    extra = [c for c in out.columns if c not in COLUMNS]
    return out[COLUMNS + extra].reset_index(drop=True)


def step_numbers(col: object) -> pd.arrays.IntegerArray:
    """Step numbers from ``50``, ``50.0``, ``"50"`` or analysis.db's ``"step50"`` (NA where
    none: pd.to_numeric alone makes every ``"step50"`` NaN)."""
    s = pd.Series(col).reset_index(drop=True) if not isinstance(col, pd.Series) else col
    if pd.api.types.is_numeric_dtype(s):
        s = pd.to_numeric(s, errors="coerce").astype("float64")
        return pd.array(s.where(s == s.round()), dtype="Int64")
    digits = s.astype("string").str.extract(r"^\s*(?:step)?\s*(-?\d+)\s*$", flags=re.I)[0]
    return pd.array(pd.to_numeric(digits, errors="coerce"), dtype="Int64")


def with_sdma_total(rows: pd.DataFrame, key: str) -> pd.DataFrame:
    """``rows`` (per ``key`` and link: HCCS/PCIE/SIO/RDMA) plus the SDMA row Ascend writes,
    the total of each op's HCCS/PCIE/SIO rows (for bandwidth computed from the raw tasks)."""
    links = rows[rows["transport"].isin(SDMA_LINKS)]
    if links.empty:
        return rows
    firsts = links.groupby(key, sort=False).first()
    sums = links.groupby(key, sort=False)[["size_mb", "transit_us"]].sum()
    sdma = firsts.drop(columns=["size_mb", "transit_us"]).join(sums).reset_index()
    sdma["transport"] = "SDMA"
    sdma["bandwidth_gbps"] = np.nan
    return pd.concat([rows, sdma[rows.columns]], ignore_index=True)


def op_totals(bw: pd.DataFrame, key: str | list[str]) -> pd.DataFrame:
    """Per op (``key``): ``size_mb`` it moved between ranks (SDMA + RDMA; HCCS + PCIE + SIO
    where a reader has no SDMA row), ``transport_transit_us`` (those transports' own transit
    times, summed) and ``bandwidth_gbps`` = size / that time. With one transport carrying
    the op, as is usual, this is exactly Ascend's own Bandwidth(GB/s) of that transport."""
    cols = ["size_mb", "transport_transit_us", "bandwidth_gbps"]
    keys = [key] if isinstance(key, str) else list(key)
    if bw.empty:
        return pd.DataFrame(columns=[*keys, *cols]).set_index(keys)
    t = bw["transport"].astype(str)
    has_sdma = t.eq("SDMA").groupby([bw[k] for k in keys]).transform("any")
    use = t.isin(DATA_TRANSPORTS) | (t.isin(SDMA_LINKS) & ~has_sdma)
    g = bw[use].groupby(keys, dropna=False)[["size_mb", "transit_us"]].sum(min_count=1)
    g = g.rename(columns={"transit_us": "transport_transit_us"})
    ms = g["transport_transit_us"].where(g["transport_transit_us"] > 0) / 1000.0
    g["bandwidth_gbps"] = g["size_mb"] / ms
    return g[cols]
