"""Cut a Chrome trace's event array into pieces of a few MB at event boundaries, cheaply.

A typed decode of a whole 100 MB trace holds every event as a Python object at once (several
times the file in memory); splitting it first into ``list[msgspec.Raw]`` costs a full extra
parse. Instead the array is cut where the text reads ``}, {`` a few MB apart and each piece is
decoded on its own as ``[`` + piece + ``]``. A cut inside a string or a nested array cannot go
unnoticed: the piece before it then ends inside that string or container, so its decode fails
(the piece starts at a true event boundary, and a JSON prefix is lexed the same way whether or
not the rest follows). :class:`NotFast` or a decode error sends the caller to
:func:`split_pieces`, the plain strict parse.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import msgspec

PIECE_BYTES = 1 << 20
SPLIT_EVENTS = 20_000  # events per piece on the careful path
_WS = b" \t\r\n"
_WS_RE = re.compile(rb"[ \t\r\n]*")
_CUT = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
_MAX_END_TRIES = 64


class NotFast(Exception):
    """The layout is not the plain one the fast cut expects; use :func:`split_pieces`."""


class Top(msgspec.Struct):
    """The top-level object around ``traceEvents`` (all defaults for a bare array)."""

    traceEvents: Any = None
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    displayTimeUnit: Any = None
    otherData: Any = None
    deviceProperties: Any = None


class _TopSplit(Top):
    traceEvents: list[msgspec.Raw] | None = None


_DEC_TOP = msgspec.json.Decoder(Top)
_DEC_TOP_SPLIT = msgspec.json.Decoder(_TopSplit)
_DEC_RAWS = msgspec.json.Decoder(list[msgspec.Raw])


def _first(data: bytes, pos: int = 0) -> int:
    return _WS_RE.match(data, pos).end()


def _last(data: bytes) -> int:
    """Index one past the last non-whitespace byte."""
    end = len(data)
    while end and data[end - 1] in _WS:
        end -= 1
    return end


def _locate(data: bytes) -> tuple[Top, int, int]:
    """(top-level metadata, start, end): the event array's content is ``data[start:end]``."""
    lo, hi = _first(data), _last(data)
    if hi - lo < 2:
        raise NotFast("too short")
    if data[lo] == 0x5B and data[hi - 1] == 0x5D:  # a bare array
        return Top(), lo + 1, hi - 1
    if data[lo] != 0x7B or data[hi - 1] != 0x7D:
        raise NotFast("not an object or an array")
    m = _EVENTS_KEY.search(data, lo)
    if m is None:
        raise NotFast("no traceEvents array")
    start = m.end()
    j = hi
    for _ in range(_MAX_END_TRIES):  # the array's closing bracket, searching from the end
        j = data.rfind(b"]", start - 1, j)
        if j < 0:
            break
        k = j
        while k > start and data[k - 1] in _WS:
            k -= 1
        if k == start or data[k - 1] == 0x7D:  # `]` right after an event, or an empty array
            try:
                top = _DEC_TOP.decode(data[lo:start] + b"]" + data[j + 1:hi])
            except msgspec.DecodeError:
                continue
            top.traceEvents = None
            return top, start, k
    raise NotFast("end of the traceEvents array not found")


def event_pieces(data: bytes) -> tuple[Top, Iterator[memoryview]]:
    """Top-level metadata and the event array as pieces, each a JSON array of whole events."""
    top, start, end = _locate(data)
    return top, _cut(data, _first(data, start), end)


def _cut(data: bytes, pos: int, end: int) -> Iterator[memoryview]:
    buf = bytearray(0)
    src = memoryview(data)
    while pos < end:
        cut = nxt = end
        if end - pos > PIECE_BYTES + PIECE_BYTES // 2:
            m = _CUT.search(data, pos + PIECE_BYTES, end)
            if m is not None:
                cut, nxt = m.start() + 1, m.end() - 1
        n = cut - pos
        if len(buf) < n + 2:
            buf = bytearray(max(n + 2, PIECE_BYTES * 2))  # reused: no fresh pages per piece
        buf[0] = 0x5B
        buf[1:n + 1] = src[pos:cut]
        buf[n + 1] = 0x5D
        yield memoryview(buf)[:n + 2]
        pos = nxt


def split_pieces(data: bytes) -> tuple[Top, Iterator[bytes] | None]:
    """The careful path: a strict parse into one raw slice per event, then pieces of them.
    Raises ``msgspec.DecodeError`` on text that is not strict JSON; pieces is None when the
    document has no event array."""
    if data[_first(data):_first(data) + 1] == b"[":
        top, raws = Top(), _DEC_RAWS.decode(data)
    else:
        split = _DEC_TOP_SPLIT.decode(data)
        raws = split.traceEvents
        top = Top(None, split.distributedInfo, split.baseTimeNanoseconds, split.displayTimeUnit,
                  split.otherData, split.deviceProperties)
    if raws is None:
        return top, None
    return top, (b"[" + b",".join(raws[i:i + SPLIT_EVENTS]) + b"]"
                 for i in range(0, len(raws), SPLIT_EVENTS))
