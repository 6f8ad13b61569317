"""Several ranks' windows as one: frames concatenated with a ``rank`` (and ``device``) column,
the ranks' events parsed in parallel processes (the JSON decode holds the GIL), or for the
summaries each Kineto rank's streamed first pass run in them (no rank's events frame built),
the database ranks' kernels read in threads (sqlite's queries run without it)."""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from . import cache, parallel, schema
from .errors import collected_warnings
from .formats import source_of
from .formats.chrome.first_pass import first_pass
from .formats.chrome.streamed import goes_out_of_core, takes_first_pass
from .partitioned import is_out_of_core
from .window import FRAMES, TraceWindow


class MultiRankWindow(TraceWindow):
    """Several ranks' windows: frames are the ranks' frames concatenated with a ``rank`` column."""

    def __init__(self, path: Path, children: list[TraceWindow], skipped: list[str]):
        super().__init__(path, comm_patterns=children[0].comm_patterns if children else None)
        self.children = children
        self.skipped = skipped
        self._links: pd.DataFrame | None = None  # the ranks' side tables, joined
        self._bandwidth: pd.DataFrame | None = None
        self._passed = False  # whether the ranks' first passes ran (:func:`_first_passes`)
        fw = {c.framework for c in children}
        self.framework = fw.pop() if len(fw) == 1 else "mixed"
        starts = {c.start_step for c in children}
        stops = {c.stop_step for c in children}
        self.start_step = starts.pop() if len(starts) == 1 else None
        self.stop_step = stops.pop() if len(stops) == 1 else None

    @property
    def run(self) -> int | None:
        """The job's run the ranks recorded the window in (None unless they all say one)."""
        runs = {c.run for c in self.children}
        return runs.pop() if len(runs) == 1 else None

    def origin(self) -> str:
        """The first rank's (the ranks recorded one window), when they agree on the run."""
        runs = {c.run for c in self.children}
        return self.children[0].origin() if len(runs) == 1 else ""

    @property
    def ranks(self) -> list[int]:
        return [c.rank if c.rank is not None else i for i, c in enumerate(self.children)]

    @property
    def config(self) -> dict[str, Any] | None:
        """The ranks' config (they record one window with one config: the first rank's)."""
        return next((c.config for c in self.children if c.config is not None), None)

    def frame(self, kind: str) -> pd.DataFrame:
        """Frame ``kind``: the ranks' frames concatenated, with a ``rank`` column (read in
        parallel processes for the events, in threads for a database's kernels)."""
        if kind not in FRAMES:
            raise KeyError(f"no frame {kind!r}; a window has {', '.join(FRAMES)}")
        if kind not in self._cache:
            if kind == "events":
                _parallel_events(self.children)
            elif not self._passed:  # the summaries, without any rank's events
                _first_passes(self.children)
                self._passed = True  # (only once done: after Ctrl-C the rest pass next time)
            if kind == "kernels":
                _threaded_db_frames(self.children, kind)
            parts = [c.frame(kind) for c in self.children]
            if any(is_out_of_core(f) for f in parts):
                frame = _concat_out_of_core(parts, self.ranks, self.children)
            else:
                parts = [
                    _with_rank(f, r, c)
                    for f, r, c in zip(parts, self.ranks, self.children, strict=True)
                ]
                empty = schema.empty(kind).assign(rank=pd.Series(dtype="int64"))
                frame = schema.concat_frames(parts) if parts else empty
            per = {r: c.sources.get(kind) for r, c in zip(self.ranks, self.children, strict=True)}
            self.sources[kind] = {
                "ranks": per,
                "skipped": self.skipped,
                "format": sorted({v.get("format") for v in per.values() if v and v.get("format")}),
                "missing": {r: v["missing"] for r, v in per.items() if v and v.get("missing")},
            }
            self._cache[kind] = frame
        return self._cache[kind]

    @property
    def format(self) -> str:
        fm = {c.format for c in self.children}
        return fm.pop() if len(fm) == 1 else "mixed"

    @property
    def devices(self) -> dict[int, int | None]:
        """rank -> device id (None where the window does not say)."""
        return dict(zip(self.ranks, [c.device for c in self.children], strict=True))

    def communication_links(self) -> pd.DataFrame:
        if self._links is None:
            parts = [
                c.communication_links().assign(rank=r)
                for r, c in zip(self.ranks, self.children, strict=True)
            ]
            self._links = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
            self.sources["links"] = {
                "ranks": {
                    r: c.sources.get("links")
                    for r, c in zip(self.ranks, self.children, strict=True)
                }
            }
        return self._links

    def communication_bandwidth(self) -> pd.DataFrame:
        if self._bandwidth is None:
            parts = [
                c.communication_bandwidth().assign(rank=r)
                for r, c in zip(self.ranks, self.children, strict=True)
            ]
            self._bandwidth = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
            self.sources["bandwidth"] = {
                "ranks": {
                    r: c.sources.get("bandwidth")
                    for r, c in zip(self.ranks, self.children, strict=True)
                }
            }
        return self._bandwidth

    def memory_copies(self) -> pd.DataFrame:
        parts = [
            c.memory_copies().assign(rank=r) for r, c in zip(self.ranks, self.children, strict=True)
        ]
        return (
            pd.concat(parts, ignore_index=True)
            if parts
            else pd.DataFrame(columns=["start_ns", "end_ns", "step", "rank"])
        )

    def rank_window(self, rank: int) -> TraceWindow:
        return self.children[self.ranks.index(rank)]


def _with_rank(f: pd.DataFrame, rank: int, child: TraceWindow) -> pd.DataFrame:
    f = f.assign(rank=rank)
    if "device" not in f.columns:  # memory's device is its device string already
        f["device"] = schema.constant_int(child.device, len(f))
    return f


def _concat_out_of_core(parts: list, ranks: list[int], children: list[TraceWindow]) -> Any:
    """The ranks' events as one Dask frame where any rank's are out of core (a rank in memory
    is one more partition), with the dtypes an in-memory window would have: the rank and
    device columns, and each categorical's categories united as :func:`.schema.concat_frames`
    unites them (worked out on the ranks' empty metas, then every partition cast to them)."""
    import dask.dataframe as dd
    from dask.dataframe.utils import make_meta

    out, metas = [], []
    for f, r, c in zip(parts, ranks, children, strict=True):
        if not is_out_of_core(f):
            f = dd.from_pandas(_with_rank(f, r, c), npartitions=1)
        else:
            f = f.assign(rank=r)
            if "device" not in f.columns:
                f = f.assign(device=pd.NA if c.device is None else c.device)
            f = f.astype({"device": "Int64"})
        out.append(f)
        metas.append(make_meta(f))
    like = schema.concat_frames(metas).iloc[:0]
    return dd.concat(
        [f.map_partitions(_conformed, like, meta=like) for f in out], interleave_partitions=False
    )


def _conformed(part: pd.DataFrame, like: pd.DataFrame) -> pd.DataFrame:
    """``part`` with the columns and dtypes of ``like`` (a column it lacks is all NA)."""
    return part.reindex(columns=like.columns).astype(like.dtypes.to_dict())


def _first_passes(children: list[TraceWindow]) -> None:
    """Each rank that is one Kineto trace through the streamed first pass a lone window's load
    takes (:mod:`.formats.chrome.first_pass`), so its ops, steps, kernels (and memory) come
    from that pass and its events go to the frame cache, never to a frame. The passes run
    ahead in forked processes (the decode holds the GIL), writing the cache; each rank then
    recalls its own, in order, where a rank that failed meets its error again. A rank whose
    trace cannot stream loads as before (its summaries derived from its events)."""
    todo = [c for c in children if _streams(c)]
    ahead = [None] * len(todo)
    if todo and cache.enabled():  # (with the cache off a worker's pass would leave nothing)
        ahead = parallel.prime(todo, _pass_ahead, TraceWindow.events_input_bytes)
    for c, done in zip(todo, ahead, strict=True):
        if done is not False:  # (False: it cannot stream; a second try would say so again)
            _first_pass(c)


def _streams(c: TraceWindow) -> bool:
    """Whether rank ``c`` may take the first pass: one Kineto trace, nothing of it read yet."""
    return (
        c.streamed is None
        and not any(c.loaded(k) for k in ("events", "ops", "steps", "kernels"))
        and takes_first_pass(c.files)
    )


def _first_pass(c: TraceWindow) -> bool:
    """The first pass of rank ``c``, which keeps the rank and framework the multi-rank load gave
    it (a rank is never identified from its trace here, as before): the pass starts from what a
    lone load of the same files starts from, so the identity it leaves in the cache is that
    load's (the two share their entries)."""
    own = c.rank, c.framework
    c.rank, c.framework = c.files.rank, c.files.framework_name
    try:
        return first_pass(c, c.files, source_of(c.files.traces[0]))
    finally:
        c.rank, c.framework = own


def _pass_ahead(c: TraceWindow) -> bool:
    """Rank ``c``'s first pass on a copy of it as loaded, for the cache entries it writes: its
    warnings are said by ``c``'s own pass, which reads them back with its entries."""
    fresh = TraceWindow(c.path, c.files, comm_patterns=c.comm_patterns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _first_pass(fresh)


def _parallel_events(children: list[TraceWindow]) -> None:
    """The ranks' events parsed in forked processes, through the children's public
    parallel-loading methods (the :class:`~dynprof_nb.traces.interface.LoadsInParallel`
    protocol), never their private fields. A rank whose events go out of core is left to
    load here: its frame is a Dask one (files and all), nothing a worker can hand over, and
    its pass also gives its ops, steps and kernels; so is one whose first pass wrote its
    events to the frame cache (read from there)."""
    cached = cache.enabled()  # (with the cache off a pass gives the summaries alone)
    children = [
        c for c in children if not (goes_out_of_core(c) or (cached and c.streamed is not None))
    ]
    parallel.load_events(
        children,
        TraceWindow.parsed_events,
        TraceWindow.events_input_bytes,
        release=lambda c: c.forget("events"),
    )


def _threaded_db_frames(children: list[TraceWindow], kind: str) -> None:
    """Read frame ``kind`` of the database ranks in threads, one a rank: sqlite runs its
    queries without the GIL, and those are most of a .db frame's time (2 ranks of 93k
    kernels: 0.2 s instead of 0.3 s on 2 cores). A rank that fails raises here, in order."""
    todo = [c for c in children if c.format == "db" and not c.loaded(kind)]
    workers = min(len(todo), os.cpu_count() or 1)
    if workers < 2:
        return

    def read(c: TraceWindow) -> list[Warning]:
        with collected_warnings() as caught:
            c.frame(kind)
        return caught

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futs = [pool.submit(read, c) for c in todo]
    for f in futs:
        for w in f.result():  # said here, in the caller's thread, in the ranks' order
            warnings.warn(w, stacklevel=4)
