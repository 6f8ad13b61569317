"""The communication side of the interactive timeline (:mod:`.timeline_view`): which lanes
run collectives, the communication groups they belong to (the group menu pins one group's
lanes), and which call on another rank is a collective's peer (its arrows).

A group is what Kineto names on each collective (``Process Group Name``, the same name on
every member rank, with its ``Process Group Ranks``); a host call that names none
(``nccl:all_reduce``, ``c10d::allreduce_``) is in the group of the ``record_param_comms`` it
encloses or is nested in. gloo names no group on its calls: its window has none to pin, and a
collective's peers are then the same call on every shown rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dynprof_nb.traces.comm import is_communication
from dynprof_nb.traces.formats.derived.from_events import device_mask
from dynprof_nb.traces.interface import Window


class CommGroups:
    """A view's collectives, from its window, layout, drawn index and names. :meth:`lanes`
    (called once, as the view is built) also sets ``pg``, each drawn event's own group (None
    where it names none), which :meth:`peers` reads."""

    def __init__(
        self, window: Window, tl: Any, index: Any, name_of: np.ndarray, full_names: list[str]
    ) -> None:
        self.window, self.tl, self.index = window, tl, index
        self.name_of, self.full_names = name_of, full_names
        self.pg: np.ndarray | None = None

    def is_comm(self, names: list[str]) -> np.ndarray:
        """Which names are communication, by the window's own patterns (the summary's)."""
        spec = getattr(self.window, "comm_patterns", None)
        return is_communication(pd.Series(names, dtype=object), spec)

    def lanes(self) -> tuple[np.ndarray, list[list[str]], list[dict[str, Any]]]:
        """Per lane, whether it is a communication lane, and the communication groups it runs;
        and those groups (key, label, how many lanes).

        A communication lane is a device lane (stream, HCCL plane) that runs a drawn collective
        or send/receive (the summary's definition,
        :func:`dynprof_nb.traces.comm.is_communication`); in a window with none (gloo on the
        CPU), the host threads that call them. "pin communication" keeps these together, every
        rank's. A group is what Kineto names on each collective (``Process Group Name``, one
        name on every member rank; NCCL gives each its own stream), so pinning one keeps its
        member ranks' lanes together, as MindStudio Insight keeps a communication group's
        lanes. gloo writes no group on its calls: its window has no groups to pin."""
        lanes = self.tl.lanes
        out = np.zeros(len(lanes), dtype=bool)
        groups_of: list[list[str]] = [[] for _ in range(len(lanes))]
        if not len(self.index.y) or not len(lanes):
            return out, groups_of, []
        named = self.is_comm(self.full_names)[self.name_of]
        y0 = lanes["y0"].to_numpy(dtype=np.int64)
        lane_of = np.searchsorted(y0, np.asarray(self.index.y, dtype=np.int64), side="right") - 1
        out[np.unique(lane_of[named])] = True
        device = lanes["device"].to_numpy(dtype=bool)
        if (out & device).any():
            out &= device
        ev = self.window.events
        if "pg_name" not in ev:
            return out, groups_of, []
        rows = np.asarray(self.tl.index, dtype=np.int64)
        pg = self.pg = ev["pg_name"].astype(object).to_numpy()[rows]
        hit = named & out[lane_of] & pd.notna(pg)
        if not hit.any():
            return out, groups_of, []
        pairs = pd.DataFrame({"lane": lane_of[hit], "group": pg[hit].astype(str)}).drop_duplicates()
        per_lane = pairs.groupby("lane")["group"].agg(sorted)
        for j, g in per_lane.items():
            groups_of[int(j)] = list(g)
        return out, groups_of, _group_rows(ev, rows[hit], pairs)

    def peers(self, i: int, rank_col: np.ndarray) -> list[tuple[int, int]]:
        """Collective ``i``'s same call on the other shown ranks of its group, as (drawn event,
        rank): the same name and group, the same occurrence in time on its rank (where the
        trace names no group, on every shown rank). ``rank_col`` is each event's rank."""
        rk = rank_col[self.tl.index]
        same = np.flatnonzero(self.name_of == self.name_of[i])
        same = same[np.argsort(self.index.x0[same], kind="stable")]  # in time, not by row
        groups = self._groups_of(same, rank_col)
        mine = groups[np.flatnonzero(same == i)[0]]
        peers = list(self.tl.shown_ranks)
        if mine is not None:
            same = same[groups == mine]
            members = self.members(mine)
            peers = [r for r in peers if not members or r in members]
        here = same[rk[same] == rk[i]]
        nth = int(np.flatnonzero(here == i)[0])
        out = []
        for r in peers:
            theirs = same[rk[same] == r]
            if r != rk[i] and nth < len(theirs):
                out.append((int(theirs[nth]), int(r)))
        return out

    def _groups_of(self, ids: np.ndarray, rank_col: np.ndarray) -> np.ndarray:
        """The communication group of each drawn event in ``ids`` (None where unknown): its
        own ``pg_name`` (a kernel, ``record_param_comms``), else, for a host call that names
        none (``nccl:all_reduce``, ``c10d::allreduce_``), that of the ``record_param_comms``
        it encloses or is nested in on its rank."""
        out = np.full(len(ids), None, dtype=object)
        if self.pg is None:
            return out
        own = self.pg[ids]
        has = np.array([isinstance(g, str) for g in own], dtype=bool)
        out[has] = own[has]
        if has.all():
            return out
        ev = self.window.events
        # the host calls that name their group (record_param_comms), not the kernels: one of
        # another group may run inside a host call's span
        named = np.flatnonzero((ev["pg_name"].notna() & ~device_mask(ev)).to_numpy())
        ts = ev["ts_ns"].to_numpy("int64", na_value=0)
        pg = ev["pg_name"].astype(object).to_numpy()
        rows = np.asarray(self.tl.index, dtype=np.int64)[ids[~has]]
        dur = np.nan_to_num(ev["dur_ns"].to_numpy("float64", na_value=0)).astype(np.int64)
        start, end = ts[rows], ts[rows] + dur[rows]
        found = np.full(len(rows), None, dtype=object)
        for r in np.unique(rank_col[rows]):
            cand = named[rank_col[named] == r]
            cand = cand[np.argsort(ts[cand], kind="stable")]
            at = np.flatnonzero(rank_col[rows] == r)
            if not len(cand):
                continue
            c0, c1 = ts[cand], ts[cand] + dur[cand]
            # the first group-naming call inside the host call's span, else the last one that
            # encloses it (PyTorch nests nccl:all_reduce in record_param_comms, itself in
            # c10d::allreduce_)
            k = np.minimum(np.searchsorted(c0, start[at], side="left"), len(cand) - 1)
            inside = (c0[k] >= start[at]) & (c0[k] <= end[at])
            k2 = np.searchsorted(c0, start[at], side="right") - 1
            around = ~inside & (k2 >= 0) & (c1[np.maximum(k2, 0)] >= end[at])
            found[at[inside]] = pg[cand[k[inside]]]
            found[at[around]] = pg[cand[k2[around]]]
        out[~has] = found
        return out

    def members(self, group: str) -> set[int]:
        """The ranks of communication group ``group``, as its collectives' args list them."""
        ev = self.window.events
        if "pg_ranks" not in ev:
            return set()
        ranks = ev.loc[ev["pg_name"].astype(object) == group, "pg_ranks"].dropna()
        return ranks_of(ranks.iloc[0]) if len(ranks) else set()


def _group_rows(ev: pd.DataFrame, rows: np.ndarray, pairs: pd.DataFrame) -> list[dict]:
    """The groups as the pin menu lists them: ``group 3 · ranks [0, 2]`` (and the group's
    description where the job gave one), with how many lanes run it, by name."""
    cols = [c for c in ("pg_name", "pg_ranks", "pg_desc") if c in ev]
    first = ev[cols].iloc[rows].astype(object).drop_duplicates("pg_name")
    lanes = pairs.groupby("group")["lane"].nunique()
    out = []
    for _, g in first.iterrows():
        key = str(g["pg_name"])
        label = f"group {key}"
        if isinstance(g.get("pg_ranks"), str) and g["pg_ranks"] != "[]":
            label += f" · ranks {g['pg_ranks']}"
        if isinstance(g.get("pg_desc"), str) and g["pg_desc"] not in ("", "undefined"):
            label += f" · {g['pg_desc']}"
        out.append({"key": key, "label": label, "lanes": int(lanes.get(key, 0))})
    return sorted(out, key=lambda g: (len(g["key"]), g["key"]))


def ranks_of(ranks: Any) -> set[int]:
    """A group's ranks from Kineto's ``"[0, 2]"``; empty where the trace does not say."""
    if not isinstance(ranks, str):
        return set()
    return {int(r) for r in ranks.strip("[] ").replace(",", " ").split() if r.lstrip("-").isdigit()}
