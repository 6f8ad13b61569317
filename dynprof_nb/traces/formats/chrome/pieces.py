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
from typing import Any, BinaryIO

import msgspec

PIECE_BYTES = 1 << 20
SPLIT_EVENTS = 20_000  # events per piece on the careful path
_WS = b" \t\r\n"
_WS_RE = re.compile(rb"[ \t\r\n]*")
_CUT = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
# what may follow a '}' up to the end of the buffer when a boundary could still start at it:
# ``[ws]*`` (the comma not yet read) or ``[ws]*,[ws]*`` (the '{' not yet read)
_BEFORE_COMMA = re.compile(rb"[ \t\r\n]*(,[ \t\r\n]*)?")
_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
_MAX_END_TRIES = 64
_BACK_BLOCK = 1 << 16
_RUN_MIN = 1 << 16  # a whitespace run this long outside any string is squeezed to one byte
# a long run, matched only from its first byte (so each run is read once, not once per byte)
_LONG_RUN = re.compile(rb"(?<![ \t\r\n])[ \t\r\n]{%d,}" % _RUN_MIN)
_QUOTE_OR_RUN = re.compile(rb'"|(?<![ \t\r\n])[ \t\r\n]{%d,}' % _RUN_MIN)
_STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*', re.S)  # up to a closing quote or a lone \\


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


def _last(data: bytes, end: int | None = None, floor: int = 0) -> int:
    """Index one past the last non-whitespace byte before ``end``, or ``floor`` when there is
    none after it: scanned backwards in C, a block at a time, so a file that ends in a gigabyte
    of whitespace costs one pass (a byte-by-byte Python loop took 14 s on 64 MB)."""
    end = len(data) if end is None else end
    while end > floor:
        lo = max(floor, end - _BACK_BLOCK)
        kept = len(bytes(data[lo:end]).rstrip(_WS))
        if kept:
            return lo + kept
        end = lo
    return floor


def _locate(
    head: bytes, tail: bytes, tail_at: int, dropped: list | None = None
) -> tuple[Top, int, int]:
    """(top-level metadata, start, end): the event array's content is ``[start, end)`` of the
    document, whose first bytes are ``head`` and whose last bytes, from offset ``tail_at``, are
    ``tail`` (both the whole document when it is in memory). ``dropped`` lists the blank runs
    squeezed out of ``head`` (:meth:`_Blanks.squeeze`), to give ``start`` in the document."""
    lo, hi = _first(head), _last(tail)
    if lo >= len(head) or hi == 0 or tail_at + hi - lo < 2:
        raise NotFast("too short")
    if head[lo] == 0x5B and tail[hi - 1] == 0x5D:  # a bare array
        return Top(), _in_file(lo + 1, dropped), tail_at + hi - 1
    if head[lo] != 0x7B or tail[hi - 1] != 0x7D:
        raise NotFast("not an object or an array")
    m = _EVENTS_KEY.search(head, lo)
    if m is None:
        raise NotFast("no traceEvents array in the head")
    prefix, start = head[lo : m.end()], _in_file(m.end(), dropped)
    j = hi
    for _ in range(_MAX_END_TRIES):  # the array's closing bracket, searching from the end
        j = tail.rfind(b"]", max(0, start - 1 - tail_at), j)
        if j <= 0:
            break
        k = _last(tail, j, max(0, start - tail_at))
        if tail_at + k == start or (k > 0 and tail[k - 1] == 0x7D):  # after an event, or []
            try:
                top = _DEC_TOP.decode(prefix + b"]" + tail[j + 1 : hi])
            except msgspec.DecodeError:
                continue
            top.traceEvents = None
            return top, start, tail_at + k
    raise NotFast("end of the traceEvents array not found")


def _in_file(pos: int, dropped: list | None) -> int:
    """The document's offset of ``pos`` in a head squeezed of the runs ``dropped``."""
    return pos + sum(n for at, n in dropped or () if at <= pos)


class _Blanks:
    """Squeezes each long whitespace run outside the strings of a buffer to its first byte,
    keeping where the text was lexed to, so a run growing block by block is read once.

    Only runs of :data:`_RUN_MIN` bytes or more are touched, and only where one was found: the
    strings of a plain trace are not lexed. Whitespace inside a string is data and is kept
    (blanks after a ``}`` in a string were dropped before, changing an event's name)."""

    def __init__(self, at: int) -> None:
        self.pos = self.seen = at  # the text is lexed to pos; no long run starts in [?, seen)
        self.in_str = False
        self.dropped: list[tuple[int, int]] = []  # (position after the kept byte, bytes)

    def squeeze(self, buf: bytearray, end: int) -> int:
        """Squeeze ``buf[self.pos:end]`` in place; the new end."""
        if _LONG_RUN.search(buf, self.seen, end) is None:
            self.seen = max(self.seen, _trailing_blanks(buf, self.seen, end))
            return end
        pos = self.pos
        while True:
            if self.in_str:
                pos = _STRING_REST.match(buf, pos, end).end()
                if pos >= end or buf[pos] != 0x22:  # the string (or an escape) runs on
                    break
                pos += 1
                self.in_str = False
            m = _QUOTE_OR_RUN.search(buf, pos, end)
            if m is None:
                pos = _trailing_blanks(buf, pos, end)
                break
            if buf[m.start()] == 0x22:
                pos, self.in_str = m.end(), True
                continue
            keep, stop = m.start() + 1, m.end()
            with memoryview(buf) as mv:  # one memmove in place
                mv[keep : keep + end - stop] = mv[stop:end]
            end -= stop - keep
            self.dropped.append((keep, stop - keep))
            pos = m.start()  # a run that goes on in the next block is found from its start
        self.pos = self.seen = pos
        return end


def _trailing_blanks(buf: bytearray, pos: int, end: int) -> int:
    """Where the whitespace at the end of ``buf[pos:end]`` starts (shorter than a long run)."""
    lo = max(pos, end - _RUN_MIN)
    return lo + len(bytes(buf[lo:end]).rstrip(_WS))


def event_pieces(data: bytes) -> tuple[Top, Iterator[memoryview]]:
    """Top-level metadata and the event array as pieces, each a JSON array of whole events."""
    top, start, end = _locate(data, data, 0)
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
        buf[1 : n + 1] = src[pos:cut]
        buf[n + 1] = 0x5D
        yield memoryview(buf)[: n + 2]
        pos = nxt


STREAM_EDGE = 1 << 20  # head and tail read first: the array's start and end must be in them


def file_pieces(fh: BinaryIO, size: int) -> tuple[Top, Iterator[bytes]]:
    """Like :func:`event_pieces`, reading an uncompressed file piece by piece instead of whole:
    the text never sits in memory at once. Raises :class:`NotFast` where it cannot be sure."""
    head, dropped = _file_head(fh, size)
    last = _file_last(fh, size)
    closing = b""
    if last and _read_at(fh, last - 1, 1) == b"}":  # the object's end: blanks before it are
        last, closing = _file_last(fh, last - 1), b"}"  # outside any string, so dropped
    tail_at = max(0, last - STREAM_EDGE)
    tail = _read_at(fh, tail_at, last - tail_at) + closing
    top, start, end = _locate(head, tail, tail_at, dropped)
    return top, _stream(fh, start, end)


def _file_head(fh: BinaryIO, size: int) -> tuple[bytearray, list]:
    """The file's first :data:`STREAM_EDGE` bytes once long blank runs outside strings are
    squeezed, and the runs dropped: megabytes of blanks before the event array (after the
    ``{``, inside ``otherData``) sent the file to the whole read (3.5x it in memory)."""
    head, blanks, at = bytearray(), _Blanks(0), 0
    while len(head) < STREAM_EDGE and at < size:
        got = fh.read(min(STREAM_EDGE, size - at))
        if not got:
            break
        at += len(got)
        head += got
        del head[blanks.squeeze(head, len(head)) :]
    return head, blanks.dropped


def _read_at(fh: BinaryIO, at: int, n: int) -> bytes:
    fh.seek(at)
    got = fh.read(n)
    if len(got) != n:
        raise NotFast("the file changed size while being read")
    return got


def _file_last(fh: BinaryIO, end: int) -> int:
    """One past the last byte before ``end`` that is not whitespace (0: none), read backwards
    a block at a time. With it, a file whose array or object ends in megabytes of blanks (after
    the ``]``, before the ``}``) still has its ends found in the tail, and streams; read whole
    instead, it took 3x the file in memory (issue 42, adversarial pass)."""
    while end > 0:
        lo = max(0, end - STREAM_EDGE)
        kept = len(_read_at(fh, lo, end - lo).rstrip(_WS))
        if kept:
            return lo + kept
        end = lo
    return 0


def _stream(fh: BinaryIO, start: int, end: int) -> Iterator[memoryview]:
    """Blocks read into one reused buffer behind a ``[``; each piece ends at the last event
    boundary found in the second half of what is buffered, the rest is carried over.

    Every byte is searched once, whatever the layout: where a block ends inside a boundary
    (``}`` and a run of whitespace, perhaps a comma), that ``}`` is kept as pending and the next
    block only continues the run from where it stopped. (Searching again from the ``}`` made
    a file with 64 MB of whitespace between two events take 4 s, and 256 MB 58 s.) Where no
    boundary is found, long blank runs outside strings in what is carried are squeezed
    (:class:`_Blanks`): a gigabyte of blanks between two events or two keys of one event is
    never carried (carrying it made a 512 MB run peak at 2.2 GB)."""
    fh.seek(start)
    left = end - start
    buf = bytearray(2 * PIECE_BYTES + 2)
    buf[0] = 0x5B
    have = 0  # carried-over bytes at buf[1:1 + have]
    scan = 1  # no event boundary starts in buf[1:scan]: searched already
    pend = 0  # a '}' whose boundary runs past what was searched (0: none) ...
    comma = False  # ... whether that run has its comma yet
    blanks = _Blanks(1)  # the carried bytes start an event: outside any string
    while True:
        want = min(PIECE_BYTES, left)
        if len(buf) < have + want + 2:  # one event longer than a block: grow
            grown = bytearray(2 * (have + want) + 2)
            grown[: have + 1] = buf[: have + 1]
            buf = grown
        with memoryview(buf) as mv:
            got = fh.readinto(mv[1 + have : 1 + have + want])
        left -= got
        if not got and left > 0:
            raise NotFast("the file was cut short while being read")
        if not have:  # whitespace before the first event is not carried (nor searched again)
            skip = _WS_RE.match(buf, 1, 1 + got).end() - 1
            if skip:
                got -= skip
                buf[1 : 1 + got] = buf[1 + skip : 1 + skip + got]
        total = have + got
        if left <= 0:
            if buf[1 : 1 + total].strip(_WS):
                buf[1 + total] = 0x5D
                with memoryview(buf) as mv:
                    yield mv[: total + 2]
            return
        cut = nxt = 0
        if pend:  # continue the pending boundary's run where the last block stopped
            if comma:
                stop = _WS_RE.match(buf, scan, 1 + total).end()
            else:
                run = _BEFORE_COMMA.match(buf, scan, 1 + total)
                comma, stop = run.group(1) is not None, run.end()
            if stop == 1 + total:
                have = total = blanks.squeeze(buf, 1 + total) - 1
                scan = 1 + total
                continue
            if comma and buf[stop] == 0x7B:
                cut, nxt = pend + 1, stop
            scan = stop
            pend = 0
        if not cut:
            half = max(scan, 1 + total // 2)
            m = _CUT.search(buf, half, 1 + total) or (
                _CUT.search(buf, scan, 1 + total) if scan < half else None
            )
            if m is None:  # no boundary in buf[scan:]; one may start at its last '}'
                runs = len(blanks.dropped)
                total = blanks.squeeze(buf, 1 + total) - 1  # an event longer than a block
                lo = min([scan, 1 + total] + [at for at, _ in blanks.dropped[runs:]])
                brace = buf.rfind(b"}", lo, 1 + total)
                run = _BEFORE_COMMA.match(buf, brace + 1, 1 + total) if brace >= 0 else None
                scan = 1 + total
                have = total
                if run is not None and run.end() == 1 + total:
                    pend, comma = brace, run.group(1) is not None
                continue
            cut, nxt = m.start() + 1, m.end() - 1
        scan = 1
        pend = 0
        blanks = _Blanks(1)
        saved = buf[cut]
        buf[cut] = 0x5D
        with memoryview(buf) as mv:
            yield mv[: cut + 1]
        buf[cut] = saved
        have = 1 + total - nxt
        with memoryview(buf) as mv:  # one memmove in place (a bytearray slice is a new copy)
            mv[1 : 1 + have] = mv[nxt : 1 + total]


def split_pieces(data: bytes) -> tuple[Top, Iterator[bytes] | None]:
    """The careful path: a strict parse into one raw slice per event, then pieces of them.
    Raises ``msgspec.DecodeError`` on text that is not strict JSON; pieces is None when the
    document has no event array."""
    if data[_first(data) : _first(data) + 1] == b"[":
        top, raws = Top(), _DEC_RAWS.decode(data)
    else:
        split = _DEC_TOP_SPLIT.decode(data)
        raws = split.traceEvents
        top = Top(
            None,
            split.distributedInfo,
            split.baseTimeNanoseconds,
            split.displayTimeUnit,
            split.otherData,
            split.deviceProperties,
        )
    if raws is None:
        return top, None
    return top, (
        b"[" + b",".join(raws[i : i + SPLIT_EVENTS]) + b"]"
        for i in range(0, len(raws), SPLIT_EVENTS)
    )
