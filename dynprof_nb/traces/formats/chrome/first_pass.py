"""A Kineto trace's first load as one streamed pass, at any size (issue 32 item 2): its ``ops``,
``steps`` and ``kernels`` (and so the step breakdown, the summary and the analyses) come from
:mod:`.summaries`' reduction of the decoded pieces, never from an ``events`` frame.

The same pass writes what a later ``w.events`` needs into the frame cache
(:mod:`dynprof_nb.traces.cache`): the pieces' raw columns go to Parquet parts as they are
decoded (:func:`.out_of_core.decode_to_parts`, ``EVENT_ROWS`` rows each), and once the pass
knows what the whole file says (code tables, step intervals, launches), each part is built
into its events rows and appended to the events entry as a row group
(:func:`dynprof_nb.traces.cache.codec.write_parts`), so the whole frame is never in memory.
The window's identity (rank, framework, the span the summary shows) and the three summaries are
entries too, so a second load, in any process, reads no trace at all, and asking for events
afterwards reads the cache, not the trace.

Not here: ``DYNPROF_NB_STREAM=0``; a window that is not one Kineto trace
(:func:`.streamed.streamable`); a trace the fast cut refuses or with Ascend/MindSpore rows
(:class:`.summaries.NotStreamable`: read whole as before); with the cache off, a trace whose
events fit in memory (a later ``events`` would parse it a second time: it is parsed whole, as
before, unless ``DYNPROF_NB_STREAM=1``). A trace whose events go out of core
(:func:`.out_of_core.wanted`) writes no events entry (a Dask frame is never cached): its pass
gives the summaries alone.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from ... import cache, schema
from ...cache.codec import write_parts
from ...errors import collected_warnings, disk_full, warn
from ..base import lazy
from ..derived import source as derived
from . import streamed

# the pass itself, imported when a trace is read (not for a load from the cache)
ooc = lazy(".out_of_core", __package__)
stream = lazy(".summaries", __package__)

#: events rows built at a time into the events entry (bounds the pass's peak memory)
EVENT_ROWS = 50_000


def first_pass(w: Any, files: Any, provider: Any) -> bool:
    """Fill window ``w`` (a :class:`.window.TraceWindow` of ``files``) from the frame cache or
    from one streamed pass over its one Kineto trace; False (nothing done) when it is not such
    a window or its trace cannot stream, and it loads as usual."""
    if not streamed.takes_first_pass(files):
        return False
    known = _recall(w)
    if known is not None:
        return known
    path = files.traces[0]
    big = streamed.too_big(files.traces)
    if not big and not cache.enabled() and os.environ.get(streamed.STREAM_ENV) != "1":
        return False  # nowhere to keep the events: a later w.events would parse it again
    # the raw parts go to a scratch directory in the cache (none where the events go out of
    # core, or with the cache off or not writable: then the pass gives the summaries alone)
    out = None if streamed.wanted(files.traces) else cache.scratch_dir()
    with_events = out is not None
    said: list[Warning] = []
    try:
        with collected_warnings() as said:
            if with_events:
                try:
                    s, build, parts = ooc.decode_to_parts(
                        path, out, True, w.comm_patterns, EVENT_ROWS, memory=True
                    )
                except OSError as exc:  # no room for the parts: the summaries alone
                    if not disk_full(exc):
                        raise
                    _remove(out)
                    out, with_events = None, False
            if not with_events:
                s = stream.stream_trace(path, w.comm_patterns)
            stream.adopt(w, s, path, provider)
            if s.memory is not None:
                _adopt_memory(w, s, path)
    except stream.NotStreamable:
        _remove(out)
        return False
    except BaseException:  # Ctrl-C or a bad memory event: no scratch parts left behind
        _remove(out)
        raise
    finally:
        for warning in said:  # said on, as they were
            warn(warning, stacklevel=4)
    try:  # the big entry first: the size bound removes it before the summaries it came with
        if with_events:
            _store_events(w, path, provider, s, build, parts)
    finally:
        _remove(out)
    _store(w, s, said)
    return True


def _remove(out: Path | None) -> None:
    if out is not None:
        shutil.rmtree(out, ignore_errors=True)


def _recall(w: Any) -> bool | None:
    """Whether an earlier load left the window's identity in the cache: True (set, with what
    the summary needs without events) when this pass wrote it, False when a whole parse did
    (the trace cannot stream: :func:`.cache.identify` reads it again), None when none did."""
    hit = cache.recall(w, "identity")
    if hit is None:
        return None
    meta = hit[1]
    seen = meta.get("streamed")
    if not isinstance(seen, dict):
        return False
    w.rank, w.framework = meta["identity"]
    w.streamed = streamed.Streamed(
        None, None, "", None, seen["span_ms"], seen["meta"], seen["repairs"], set()
    )
    return True


def _adopt_memory(w: Any, s: streamed.Streamed, path: Path) -> None:
    """The memory frame from the pass's ``[memory]`` and counter events, as the whole parse
    derives it (:func:`..derived.source.memory_of`), so no frame of the window parses it."""
    memory, counters = s.memory
    frame = schema.conform(derived.memory_of(w, [(path, memory, counters)]), "memory")
    if w.device is not None and "device" not in frame.columns:
        frame["device"] = schema.constant_int(w.device, len(frame))
    w.adopt_frame("memory", frame, derived.SOURCE, "events")


def _store(w: Any, s: streamed.Streamed, said: list[Warning]) -> None:
    """The identity and the three summaries as cache entries; a summary stored is dropped
    from the window (read back from its entry when asked), so a first load and a cached one
    hold the same frames (none) and say the same in their repr."""
    streamed = {"span_ms": s.span_ms, "meta": s.meta, "repairs": s.repairs}
    cache.store(
        w,
        "identity",
        pd.DataFrame(),
        {},
        said,
        identity=[w.rank, w.framework],
        streamed=streamed,
    )
    for kind in ("ops", "steps", "kernels", "memory"):
        if not w.loaded(kind):  # (memory: kept only by a pass that writes the events)
            continue
        if cache.store(w, kind, w.frame(kind), {kind: w.sources[kind]}, said):
            w.forget(kind)


def _store_events(
    w: Any, path: Path, provider: Any, s: streamed.Streamed, build: Any, parts: list
) -> None:
    """The events entry, built part by part from the pass's raw columns, with the note the
    whole parse gives (``path`` is ``stream``)."""
    note = {
        "files": [str(path)],
        "missing": None,
        "notes": list(s.repairs),
        "format": "text",
        "provider": provider.name,
        "path": "stream",
        "source": provider.name,
    }
    if s.dropped:  # the pass dropped rows with impossible times: the events say so as well
        note["notes"].append(s.dropped[1])
        note["dropped"] = s.dropped[0]
    rows = sum(n for _, _, n in parts)

    def frames() -> Any:
        for part in parts or [("", 0, 0)]:
            ev = build(part)
            if w.device is not None and "device" not in ev.columns:
                ev["device"] = schema.constant_int(w.device, len(ev))
            yield ev

    def write(fh: Any, meta: dict) -> None:
        write_parts(fh, frames(), rows, meta)

    cache.store(w, "events", write, {"events": note}, [])
