"""Chrome trace JSON reader (Kineto, Ascend trace_view.json, dynprof_nb's built-in trace).

Fast path (:mod:`.pieces`): the events array is cut into a few MB pieces at event boundaries,
each piece is decoded by msgspec into small typed structs, and the structs go straight into
column arrays: categorical codes for names, categories and phases, exact int64 ns for times
(``ts`` is kept as its raw JSON text and converted in bulk, so string and ns-resolution
timestamps never pass through float64). Only the rows of the events frame are materialised;
counter and memory events keep their raw ``args`` text and become frames on first access.
Only when the strict parse fails does :mod:`.repair` take over (slow and tolerant); its output
is re-encoded and fed through the same fast path.
"""

from __future__ import annotations

import gc
import math
import operator
import os
import zlib
from collections.abc import Callable
from itertools import compress, repeat
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple, TypedDict, Union, get_args

import msgspec
import numpy as np
import pandas as pd

from dynprof_nb.compat import categorical_from_codes
from dynprof_nb.traces import schema
from dynprof_nb.traces.errors import TraceFormatError
from dynprof_nb.traces.formats.chrome import pieces as fastjson
from dynprof_nb.traces.formats.chrome.repair import check_text_like, first_byte, repair_json
from dynprof_nb.traces.formats.common import budget
from dynprof_nb.traces.formats.common.timestamps import (
    MAX_TOKEN_BYTES,
    NA_NS,
    NS_LIMIT_US,
    NS_MAX_US,
    tokens_us_to_ns,
)
from dynprof_nb.traces.formats.derived.from_events import DEVICE_CATS

KEEP_PH = ("X", "i", "I")  # complete and instant events go into `events`
_NULL = msgspec.Raw(b"null")
_UNREAD = b'"?"'  # stands in for a ts token too long to read (MAX_TOKEN_BYTES): NA, counted
# Every phase of the Trace Event Format: decoded as these very objects, so coding them is cheap.
# A file with another phase decodes through _LooseEvent instead.
Phase = Literal[
    "X",
    "B",
    "E",
    "i",
    "I",
    "C",
    "M",
    "s",
    "t",
    "f",
    "b",
    "n",
    "e",
    "S",
    "T",
    "p",
    "F",
    "P",
    "N",
    "O",
    "D",
    "V",
    "v",
    "R",
    "c",
    "(",
    ")",
]


class _Event(msgspec.Struct, gc=False):
    """The fields the frames use; every other key (and ``args``' content) is skipped."""

    ph: Phase | None = None
    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = _NULL
    dur: float | str | None = None  # MindSpore writes every duration as a string: "5.919"
    args: msgspec.Raw = _NULL


class _NumberDurEvent(_Event, gc=False):
    """:class:`_Event` read by a non-strict decoder: a decimal-string ``dur`` becomes its
    float in the decode itself (correctly rounded, as ``float()`` reads it), not one Python
    string per event converted afterwards. Only ``dur`` is typed, so nothing else is coerced;
    a string it cannot read (``"n/a"``, ``" 5"``) fails the piece over to :class:`_Event`."""

    dur: float | None = None


class _LooseEvent(msgspec.Struct, gc=False):
    """Fallback for a piece where a field has an odd type (``"dur": true``, ``"ph": 3``)."""

    ph: Any = None
    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = _NULL
    dur: Any = None
    args: msgspec.Raw = _NULL


class _LinkArgs(msgspec.Struct, gc=False):
    """The ``args`` Kineto links host and device with (``correlation``: the launch on the host
    and the device activity it launched share it) and the message of an NCCL collective
    (written on the kernel and on ``record_param_comms``)."""

    correlation: Any = None
    stream: Any = None
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    group_size: Any = msgspec.field(default=None, name="Group size")
    dtype: Any = None
    # the communication group (PyTorch 2.2+): its name, as every member rank knows it, and its
    # members as global ranks ("[0, 1]"); groups with the same ranks are told apart by name
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    pg_desc: Any = msgspec.field(default=None, name="Process Group Description")
    # a ``cuda_sync`` "Stream Wait Event" / "Event Sync": the cudaEventRecord it waits on
    # (HTA's critical path links the kernel before that record to what waits on it)
    wait_on_stream: Any = None
    wait_on_corr: Any = msgspec.field(default=None, name="wait_on_cuda_event_record_corr_id")


class _MemArgs(msgspec.Struct, gc=False):
    """The args of Kineto ``[memory]`` instant events."""

    Bytes: Any = None
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


#: Which of the keys a row needs to be a link row (see ``Columns._add_links``) an event's args
#: hold: ``{}`` for nearly every event of a file without links (Ascend, MindSpore), an empty
#: dict being cheaper to make and to test than a :class:`_LinkArgs` of seven fields.
_LinkKeys = TypedDict(
    "_LinkKeys",
    {"correlation": Any, "stream": Any, "In msg nelems": Any, "Out msg nelems": Any},
    total=False,
)
_NO_LINK = _LinkArgs()


class _KeptArgs(_LinkArgs, gc=False, frozen=True):
    """The args of a kept row in a piece decoded with its args typed (:class:`_Tagged`): the
    link keys. Frozen so that one empty instance can be the default of every event without
    ``args``; no more fields than the frames read, each one more is one more name every
    args key is compared with.

    ``correlation`` and ``stream`` are numbers here, NaN where missing, so that a piece's
    column of them converts in C (a correlation of another type fails the decode: the raw
    decoders read that piece, with :class:`_LinkArgs`' any-typed fields)."""

    correlation: float | None = math.nan
    stream: float | None = math.nan


class _InstantArgs(_KeptArgs, gc=False, frozen=True):
    """An instant event's args: the link keys and the ``[memory]`` fields (those of
    :class:`_MemArgs`)."""

    Bytes: Any = None
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


class _MetaArgs(msgspec.Struct, gc=False, frozen=True):
    """A metadata event's args: the process or thread name."""

    name: Any = None


_NO_KEPT_ARGS, _NO_INSTANT_ARGS, _NO_META_ARGS = _KeptArgs(), _InstantArgs(), _MetaArgs()


class _Tagged(msgspec.Struct, gc=False, tag_field="ph"):
    """An event of a piece decoded with its args typed: its class is its phase (``ph``, the
    tag of a msgspec tagged union), and only the phases the frames read decode any field.
    Every other event (a Kineto file's flow events, a third of them) is an empty struct: no
    name, ids, ts or args made and freed for it. A counter (its args are kept whole), an
    event without a phase and a value the strict types refuse (a string ``dur``, args that
    are not an object) fail the decode, and the raw decoders (:func:`_decode_piece`) read
    the piece."""


class _Kept(_Tagged, tag="X"):
    """A complete event (``X``): a row of the events frame. Its ts stays raw JSON text (exact
    through :func:`tokens_us_to_ns`)."""

    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = _NULL
    dur: float | None = math.nan  # NaN, not None, where missing: numpy converts it in C
    args: _KeptArgs | None = _NO_KEPT_ARGS


class _KeptI(_Kept, tag="i"):
    """An instant event: a row too, and a ``[memory]`` event is one."""

    args: _InstantArgs | None = _NO_INSTANT_ARGS


class _KeptCapitalI(_KeptI, tag="I"):
    """An instant event in the old spelling."""


class _IntTs(_Kept, tag="X"):
    """:class:`_Kept` with ``ts`` read as an int (whole microseconds, as older Kineto writes
    them): exact without a token parse."""

    ts: int | None = None


class _IntTsI(_IntTs, tag="i"):
    args: _InstantArgs | None = _NO_INSTANT_ARGS


class _IntTsCapitalI(_IntTsI, tag="I"):
    pass


class _Meta(_Tagged, tag="M"):
    """A metadata event: the process and thread names (``args.name``)."""

    name: Any = None
    pid: Any = None
    tid: Any = None
    args: _MetaArgs | None = _NO_META_ARGS


#: the phases whose events nothing reads but their count (each an empty struct)
_SKIPPED = [
    msgspec.defstruct(f"_Skipped{i}", [], bases=(_Tagged,), tag=ph, gc=False)
    for i, ph in enumerate(get_args(Phase))
    if ph not in (*KEEP_PH, "M", "C")
]


def _tagged_decoder(kept: tuple[type, ...]) -> msgspec.json.Decoder:
    return msgspec.json.Decoder(list[Union[(*kept, _Meta, *_SKIPPED)]])  # noqa: UP007


class _LeanArgs(msgspec.Struct, gc=False, frozen=True):
    """A complete event's args in a piece without collectives and CUDA event syncs: the link
    keys, and the three that make a row one of those typed ``None``, so that such a row
    fails the decode and the piece is read again with :class:`_KeptArgs` (no test per row).
    msgspec compares each args key it does not know with every field: five fields, not
    thirteen, and a struct small enough for its free list, make a Kineto load a twentieth
    faster, and its peak memory a fifth lower."""

    correlation: float | None = math.nan
    stream: float | None = math.nan
    in_nelems: None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: None = msgspec.field(default=None, name="Out msg nelems")
    wait_on_corr: None = msgspec.field(default=None, name="wait_on_cuda_event_record_corr_id")


class _LeanInstantArgs(_LeanArgs, gc=False, frozen=True):
    """An instant event's args in a lean piece: :class:`_LeanArgs` and the ``[memory]`` fields
    (those of :class:`_InstantArgs`), so that a collective on an instant fails it too."""

    Bytes: Any = None
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


_NO_LEAN_ARGS, _NO_LEAN_INSTANT_ARGS = _LeanArgs(), _LeanInstantArgs()


def _lean(cls: type) -> type:
    """``cls`` (a kept event's class) with lean args, for the same phase: a complete event's
    :class:`_LeanArgs`, an instant's :class:`_LeanInstantArgs`."""
    tag = cls.__struct_config__.tag
    args, default = (
        (_LeanArgs, _NO_LEAN_ARGS) if tag == "X" else (_LeanInstantArgs, _NO_LEAN_INSTANT_ARGS)
    )
    return msgspec.defstruct(
        "_Lean" + cls.__name__.lstrip("_"),
        [("args", args | None, default)],
        bases=(cls,),
        tag=tag,
        gc=False,
    )


#: the kept classes (complete events, instants, instants in the old spelling), with their ts
#: as raw tokens or as ints, and the same with lean args
_KEPT = (_Kept, _KeptI, _KeptCapitalI)
_KEPT_INT_TS = (_IntTs, _IntTsI, _IntTsCapitalI)
_LEAN, _LEAN_INT_TS = tuple(map(_lean, _KEPT)), tuple(map(_lean, _KEPT_INT_TS))
#: the typed decoders by (lean args, int ts)
_TYPED_DECODERS = {
    (False, False): _tagged_decoder(_KEPT),
    (False, True): _tagged_decoder(_KEPT_INT_TS),
    (True, False): _tagged_decoder(_LEAN),
    (True, True): _tagged_decoder(_LEAN_INT_TS),
}
#: each tagged class's phase
_PHASE_OF = {
    cls: cls.__struct_config__.tag
    for cls in (*_KEPT, *_KEPT_INT_TS, *_LEAN, *_LEAN_INT_TS, _Meta, *_SKIPPED)
}


class _LinkKeysEvent(_NumberDurEvent, gc=False):
    """:class:`_NumberDurEvent` with ``args`` read as :class:`_LinkKeys` in the piece's own
    decode (an empty dict for an event without link keys; no raw copy, no second decode).
    Only for a piece that needs nothing else from its args: see ``Columns._decode``."""

    args: _LinkKeys | None = None


_DEC_EVENTS = msgspec.json.Decoder(list[_Event])
_DEC_NUMBER_DUR = msgspec.json.Decoder(list[_NumberDurEvent], strict=False)
_DEC_LOOSE = msgspec.json.Decoder(list[_LooseEvent])
_DEC_ANY_LIST = msgspec.json.Decoder(list[Any])
_DEC_MEM_ARGS = msgspec.json.Decoder(list[_MemArgs | None])
_DEC_LINK_ARGS = msgspec.json.Decoder(list[_LinkArgs | None])
_DEC_LINK_KEYS = msgspec.json.Decoder(list[_LinkKeys | None])
_DEC_LINK_KEYS_EVENTS = msgspec.json.Decoder(list[_LinkKeysEvent], strict=False)
#: the collective columns an events frame gets when some event carries them: numbers (float,
#: NaN on other rows) and texts (categorical)
COLLECTIVE_NUMBERS = ("in_nelems", "out_nelems", "group_size")
COLLECTIVE_TEXTS = ("collective", "dtype", "pg_name", "pg_ranks", "pg_desc")
COLLECTIVE_COLS = COLLECTIVE_NUMBERS + COLLECTIVE_TEXTS


#: the decode paths a Chrome trace can take (each gives the same frame for a file both read):
#: ``streaming`` (a large plain file decoded as it is read), ``pieces`` (the text in memory cut
#: at event boundaries), ``split`` (cut by a full scan where the quick cut was unsure); then
#: ``+loose`` when a piece had a field of an odd type (decoded untyped), and ``repaired+`` first
#: when the strict parse failed and :func:`~dynprof_nb.traces.formats.chrome.repair.repair_json` ran
READ_PATHS = ("streaming", "pieces", "split")


class ChromeTrace:
    """What one Chrome trace file gave: the events frame, side tables built on first access
    (``memory``, ``counters``), the top-level metadata, what was repaired, and ``read_path``,
    the decode path that ran (see :data:`READ_PATHS`: ``"pieces"``, ``"repaired+split+loose"``)."""

    def __init__(
        self,
        path: str,
        events: pd.DataFrame,
        meta: dict,
        ph_counts: dict,
        repairs: list[str],
        base_ns: int,
        counter_parts: tuple,
        memory_parts: list,
        read_path: str = "pieces",
    ):
        self.path = path
        self.read_path = read_path
        self.events = events
        self.meta = meta
        self.ph_counts = ph_counts
        self.repairs = repairs
        self._base = base_ns
        self._counter_parts = counter_parts
        self._memory_parts = memory_parts
        self._memory: pd.DataFrame | None = None
        self._counters: pd.DataFrame | None = None

    @property
    def memory(self) -> pd.DataFrame:
        """Kineto ``[memory]`` instant events as memory rows."""
        if self._memory is None:
            self._memory = _memory_frame(self._memory_parts, self._base)
            self._memory_parts = []
        return self._memory

    @property
    def counters(self) -> pd.DataFrame:
        """``ph: "C"`` counter events: one row per (event, args key): name, series, value, ts_ns."""
        if self._counters is None:
            self._counters = _counter_frame(self._counter_parts, self._base)
            self._counter_parts = ([], [])
        return self._counters


def read_bytes(path: str | Path) -> tuple[bytes | bytearray, list[str]]:
    """Read a file, gunzipping ``.gz`` (and keeping what a cut-short gzip stream gave).

    Within the budgets of :mod:`.budget`: binary data is refused from the first megabyte, and
    a gzip stream is inflated piece by piece and stopped at its limit (relative to the file and
    absolute), so a small file that inflates to gigabytes never sits in memory whole."""
    path = Path(path)
    notes: list[str] = []
    with open(path, "rb") as fh:
        head = fh.read(budget.SNIFF_BYTES)
        if head[:2] != b"\x1f\x8b":
            size = os.fstat(fh.fileno()).st_size
            sniff(head, path, size)
            budget.check_memory(path, 2 * size, "reading this trace whole")
            return head + fh.read(), notes
        fh.seek(0)
        return _inflate(fh, path, os.fstat(fh.fileno()).st_size)


def _inflate(fh: BinaryIO, path: Path, compressed: int) -> tuple[bytearray, list[str]]:
    limit, words = budget.inflate_limit(path, compressed)
    memory = budget.load_memory() // 2  # the text, then its pieces and columns beside it
    out = bytearray()
    d = zlib.decompressobj(wbits=47)
    notes: list[str] = []
    sniffed = False
    pending = b""
    try:
        while True:
            block = d.unconsumed_tail or pending or fh.read(1 << 20)
            pending = b""
            if not block:
                if not d.eof:
                    raise EOFError("compressed file ended before the end-of-stream marker")
                break
            out += d.decompress(block, 1 << 22)
            if not sniffed and (len(out) >= budget.SNIFF_BYTES or d.eof):
                sniff(bytes(out[: budget.SNIFF_BYTES]), path, len(out), inflated=True)
                sniffed = True
            if len(out) > limit:
                raise budget.too_big(path, "gzip data inflates", words)
            if len(out) > memory:
                budget.check_memory(path, 2 * len(out), "inflating this trace")
            if d.eof:  # another gzip member may follow (as gzip.decompress reads them)
                pending = d.unused_data or fh.read(1 << 20)
                if not pending.strip(b"\x00"):
                    break
                d = zlib.decompressobj(wbits=47)
    except (EOFError, OSError, zlib.error) as exc:
        if not out:
            raise TraceFormatError(
                path,
                f"gzip data is corrupt ({exc})",
                offset=0,
                hint="re-copy the file or decompress it by hand",
            ) from exc
        notes.append(f"gzip stream cut short; kept the first {len(out)} decompressed bytes")
    if not sniffed:
        sniff(bytes(out[: budget.SNIFF_BYTES]), path, len(out), inflated=True)
    return out, notes  # not bytes(out): that would hold the text twice


def sniff(head: bytes, path: str | Path, size: int, inflated: bool = False) -> None:
    """Refuse an empty file, binary data in its first megabyte, or a first character that
    cannot start JSON, before reading the rest (a 2 GB file of zeros is refused at once)."""
    what = " (in its decompressed text)" if inflated else ""
    if size == 0:
        raise TraceFormatError(
            path,
            f"file is empty{what}",
            offset=0,
            hint="the profiler was probably stopped before it wrote the trace",
        )
    nul = head.find(b"\x00")
    if nul >= 0:
        raise TraceFormatError(
            path,
            f"binary data where JSON text was expected{what}",
            offset=nul,
            hint="is this the right file? traces are .json or .json.gz",
        )
    first = first_byte(head)
    if first and first not in (b"{", b"["):
        raise TraceFormatError(
            path,
            f"not JSON: starts with {first!r}{what}",
            offset=0,
            hint="load_trace expects a Chrome trace JSON here",
        )


def load_chrome_trace(path: str | Path) -> ChromeTrace:
    """Parse a Chrome trace file (object or bare array form, plain or gzip) into frames."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(budget.SNIFF_BYTES)
        if head[:2] != b"\x1f\x8b":
            sniff(head, path, os.fstat(fh.fileno()).st_size)
    del head
    streamed = _load_streaming(path)
    if streamed is not None:
        return streamed
    data, notes = read_bytes(path)
    box = [data]
    del data
    return parse_chrome_bytes(box, path, notes)


STREAM_MIN = 8 << 20  # smaller files are read whole


def _load_streaming(path: Path) -> ChromeTrace | None:
    """A large uncompressed trace decoded piece by piece as it is read (the text never sits in
    memory whole); None when the file is small, gzip, or not laid out plainly enough."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < STREAM_MIN or fh.read(2) == b"\x1f\x8b":
            return None
        fh.seek(0)
        gc_was = gc.isenabled()
        gc.disable()
        try:
            top, pieces = fastjson.file_pieces(fh, size)
            acc = Columns()
            for piece in pieces:
                acc.add(piece)
        except (fastjson.NotFast, msgspec.DecodeError, OSError):
            return None
        finally:
            if gc_was:
                gc.enable()
    acc.how = "streaming"
    return acc.finish(str(path), top, [])


def parse_chrome_bytes(
    data: bytes | list, path: str | Path, notes: list[str] | None = None
) -> ChromeTrace:
    """Strict fast parse; on failure repair (with notes) and parse the repaired document.

    ``data`` may be passed as a one-item list: the list is emptied so the parser holds the only
    reference and can free the raw text before building the frame (peak memory).
    """
    box = data if isinstance(data, list) else [data]
    notes = list(notes or [])
    check_text_like(box[0], path)
    gc_was = gc.isenabled()
    gc.disable()  # hundreds of thousands of short-lived structs; the collector only slows down
    try:
        try:
            top, acc = _decode(box[0])
        except msgspec.DecodeError:  # not strict JSON: repair, then the same fast path
            obj, repair_notes = repair_json(box[0], path)
            notes.extend(repair_notes)
            box[0] = msgspec.json.encode(obj)
            del obj
            top, acc = _decode(box[0])
            if acc is not None:
                acc.repaired = True
        box.clear()  # the text is no longer needed: free it before the frame is built
    finally:
        if gc_was:
            gc.enable()
    if acc is None:
        raise TraceFormatError(
            path,
            "valid JSON but not a trace: no traceEvents array",
            offset=0,
            hint="load_trace reads Chrome traces, Ascend CSV/JSON/DB files",
        )
    return acc.finish(str(Path(path)), top, notes)


def _decode(data: bytes) -> tuple[fastjson.Top, Columns | None]:
    """Decode every event piece into columns; the pieces come from :mod:`.pieces`."""
    acc = Columns()
    try:
        top, pieces = fastjson.event_pieces(data)
        for piece in pieces:
            acc.add(piece)
        return top, acc
    except (fastjson.NotFast, msgspec.DecodeError):  # e.g. a cut at a false boundary
        pass
    top, pieces = fastjson.split_pieces(data)  # raises DecodeError on invalid JSON
    if pieces is None:
        return top, None
    acc = Columns()
    acc.how = "split"
    for piece in pieces:
        acc.add(piece)
    return top, acc


def _decode_piece(piece: bytes | memoryview, number_dur: bool = True) -> tuple[list, bool]:
    if number_dur:
        try:
            return _DEC_NUMBER_DUR.decode(piece), False
        except msgspec.ValidationError:
            pass
    try:
        return _DEC_EVENTS.decode(piece), False
    except msgspec.ValidationError:
        pass
    try:
        return _DEC_LOOSE.decode(piece), True
    except msgspec.ValidationError:  # an element that is not an object: drop it
        items = _DEC_ANY_LIST.decode(piece)
        keep = [msgspec.json.encode(x) for x in items if isinstance(x, dict)]
        return _DEC_LOOSE.decode(b"[" + b",".join(keep) + b"]"), True


def _codes(values: list, table: dict) -> np.ndarray:
    """Codes of one piece's values in the file-wide code table (new values get new codes).

    After the first pieces of a file nearly every value is in the table already: one C-level
    lookup pass then, and the set of new values only when a lookup misses. A column with one
    value all through the piece (a MindSpore file's ``cat``, ``pid``, ``tid``) is one count."""
    n = len(values)
    try:
        if n and values[0] == values[-1] and values.count(values[0]) == n:
            code = table.get(values[0])
            if code is None:
                code = table[values[0]] = len(table)
            return np.full(n, code, np.int32)
        return np.fromiter(map(table.__getitem__, values), np.int32, n)
    except (KeyError, TypeError):  # a new value (or an unhashable one, below)
        pass
    try:
        for u in set(values).difference(table):
            table[u] = len(table)
        return np.fromiter(map(table.__getitem__, values), np.int32, len(values))
    except TypeError:  # an unhashable value (a list or object where a name belongs)
        return _codes([_hashable(v) for v in values], table)


def _hashable(v: Any) -> Any:
    try:
        hash(v)
        return v
    except TypeError:
        return msgspec.json.encode(v).decode()


def _dur_ns(values: list, loose: bool) -> np.ndarray:
    """Durations in µs (float, decimal string, or None) to int64 ns; 0 where missing or
    unreadable. A string reads as ``float()`` reads it (numpy's conversion calls it), in C:
    MindSpore's files hold nothing but string durations."""
    raw = values
    if loose:  # true, [..]: read what reads as a number, the rest is missing
        values = [_num(v) for v in values]
    try:
        a = np.array(values, dtype=np.float64)  # None -> nan, "5.919" -> 5.919
    except (TypeError, ValueError, OverflowError):  # "n/a", "": missing
        a = np.array([_num(v) for v in values], dtype=np.float64)
    nan = np.isnan(a)
    if nan.any():  # a dur written as NaN ("NaN", a repaired bare NaN) is impossible, not absent
        given = nan & np.fromiter(map(operator.is_not, raw, repeat(None)), bool, len(raw))
        for i in np.flatnonzero(given).tolist():  # text or NaN, never None: rare
            if _is_nan(raw[i]):  # a NaN, not text that is no number ("n/a", "": missing)
                a[i] = np.inf
    return _us_to_ns(a)


_DUR, _TS = operator.attrgetter("dur"), operator.attrgetter("ts")


def _typed_dur_ns(events: list) -> np.ndarray:
    """:func:`_dur_ns` of a typed piece's events, whose ``dur`` is a float (NaN where
    missing): read into the array in C, no list of them (None, a ``null``, takes the list)."""
    try:
        a = np.fromiter(map(_DUR, events), np.float64, len(events))
    except TypeError:
        return _dur_ns([e.dur for e in events], False)
    return _us_to_ns(a)


def _us_to_ns(a: np.ndarray) -> np.ndarray:
    """Float µs to int64 ns, rounded to the ns; 0 where missing (NaN: an event without a
    ``dur``), ``NA_NS`` for a dur the ns grid cannot hold (inf, beyond 2**43 µs), which the
    frames' check (:mod:`dynprof_nb.traces.validate`) drops with a word."""
    with np.errstate(invalid="ignore", over="ignore"):
        bad = ~(np.abs(a) < 2.0**43)  # beyond float64's ns grid, nan, inf: unreadable
        if bad.any():
            huge = bad & ~np.isnan(a)
            a[bad] = 0.0
        whole = np.floor(a)
        ns = whole.astype(np.int64) * 1000 + np.rint((a - whole) * 1000).astype(np.int64)
        if bad.any() and huge.any():
            ns[huge] = NA_NS
        return ns


class _Piece(NamedTuple):
    """One decoded piece (see ``Columns._decode``)."""

    evs: list
    phs: list | None  # each event's phase (None for a typed piece: its classes say them)
    names: list | None  # each event's name where the decode read them (link-key args), else None
    loose: bool  # decoded untyped (``+loose``)
    typed: bool = False  # args read as :class:`_KeptArgs` (and subclasses) in the decode
    int_ts: bool = False  # ts read as ints (whole µs) in the decode, not as raw tokens
    lean: bool = False  # typed, its kept events' args lean (:class:`_LeanArgs` and instants')


def _int_us_to_ns(events: list) -> np.ndarray | None:
    """The events' ``ts``, whole microseconds (ints, None where an event has none), as int64
    ns, NA_NS for None; None when one is beyond what int64 ns hold (the exact token path then
    decides and counts it, :func:`tokens_us_to_ns`)."""
    n = len(events)
    missing = None
    try:
        us = np.fromiter(map(_TS, events), np.int64, n)
    except TypeError:  # a None: an event without ts
        values = [e.ts for e in events]
        missing = np.fromiter(map(operator.is_, values, repeat(None)), bool, n)
        try:
            us = np.fromiter([0 if v is None else v for v in values], np.int64, n)
        except OverflowError:
            return None
    except OverflowError:
        return None
    if n and (int(us.max()) > NS_LIMIT_US or int(us.min()) < -NS_LIMIT_US):
        return None
    ns = us * 1000
    if missing is not None:
        ns[missing] = NA_NS
    return ns


def _numbers(args: list, field: Callable[[Any], Any]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`int_or_nan` of one field of each args, and where it is given (not None). In one
    C-level conversion when all are numbers or None: a value is then given exactly where it
    is not NaN (JSON has no NaN)."""
    values = list(map(field, args))
    if set(map(type, values)) <= _NUMBER_TYPES:
        try:
            a = np.array(values, np.float64)
        except OverflowError:
            pass
        else:
            return a, ~np.isnan(a)
    a = np.array([int_or_nan(v) for v in values], np.float64)
    return a, np.fromiter(map(operator.is_not, values, repeat(None)), bool, len(values))


_NUMBER_TYPES = {int, float, type(None)}


def _typed_numbers(args: list, field: Callable[[Any], Any]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_numbers` of one of :class:`_KeptArgs`' float fields (NaN where missing, None
    where given as ``null``), read into the array in C."""
    try:
        a = np.fromiter(map(field, args), np.float64, len(args))
    except TypeError:  # a null
        a = np.array(list(map(field, args)), np.float64)
    return a, ~np.isnan(a)


_CORRELATION, _STREAM = operator.attrgetter("correlation"), operator.attrgetter("stream")


def _collective_or_sync(args: list) -> tuple[np.ndarray, np.ndarray] | None:
    """Where ``args`` give a collective's message size, and where a CUDA event sync's record;
    None where no row gives either (nearly every piece: one Python test per row then)."""
    if True not in [
        a.in_nelems is not None or a.out_nelems is not None or a.wait_on_corr is not None
        for a in args
    ]:
        return None
    n = len(args)
    coll = np.fromiter((a.in_nelems is not None or a.out_nelems is not None for a in args), bool, n)
    return coll, np.fromiter((a.wait_on_corr is not None for a in args), bool, n)


class Columns:
    """Column accumulator: one call per decoded piece, ``finish`` builds the frame."""

    def __init__(self) -> None:
        self.ph_t: dict = {}
        self.class_code: dict = {}  # a typed event's class -> its phase's code in ph_t
        self.name_t: dict = {}
        self.cat_t: dict = {}
        self.pid_t: dict = {}
        self.tid_t: dict = {}
        self.cnt_t: dict = {}  # counter names
        self.ph_count: np.ndarray = np.zeros(0, np.int64)
        self.cols: dict[str, list[np.ndarray]] = {
            k: [] for k in ("name", "cat", "ph", "pid", "tid", "ts", "dur")
        }
        self.meta_rows: list[tuple] = []
        self.counter_parts: list[tuple] = []
        self.memory_parts: list[tuple] = []
        # link rows (see _keep_links), per piece: their row numbers in the events frame and
        # their correlation and stream (float, NaN where none)
        self.link_rows: list[np.ndarray] = []
        self.link_corr: list[np.ndarray] = []
        self.link_stream: list[np.ndarray] = []
        # the link rows whose args hold more (a collective, a CUDA event sync): rows and args
        self.rare_rows: list[np.ndarray] = []
        self.rare_args: list[_LinkArgs] = []
        self.n_rows = 0
        self.bad_ts = 0  # ts tokens given but not a time int64 ns can hold
        self.bad_ts_example = b""
        self.how = "pieces"  # which decode path fed it (READ_PATHS)
        self.loose = False  # a piece was decoded untyped (a field of an odd type)
        self.number_dur = True  # try _NumberDurEvent first (until a piece fails it)
        self.link_keys_first = True  # test args for link keys first (until a piece has them)
        self.args_keys = True  # try _LinkKeysEvent first (see _decode)
        self.typed = True  # try _Tagged next (until a piece has counters or odd values)
        self.int_ts = True  # ... as _IntTs (until a piece has a ts that is not an int)
        self.lean_args = True  # ... with _LeanArgs (until a piece has a collective or a sync)
        self.repaired = False  # the text was repaired first

    def read_path(self) -> str:
        """The decode path that ran, as ``ChromeTrace.read_path`` names it."""
        return ("repaired+" if self.repaired else "") + self.how + ("+loose" if self.loose else "")

    def _unreadable_ts(self, tokens: list) -> None:
        """Count the ts that were written but could not be read (a missing ts, or ``null``, is
        not counted): a time beyond int64 ns (after 2262 as Unix µs) or junk. Their rows keep
        ``ts_ns`` NA, and the trace says so in its repairs instead of leaving it silent."""
        given = [t for t in tokens if t != _NULL]
        if given and not self.bad_ts:
            self.bad_ts_example = bytes(given[0])[:40]
        self.bad_ts += len(given)

    def _decode(self, piece: bytes | memoryview) -> _Piece:
        """The piece's events, decoded by the first of three ways that can read it:

        - :class:`_LinkKeysEvent` (names read here): a piece whose args the frames need
          nothing from, that is with no counter (its args are kept whole), metadata (its
          ``name``), ``[memory]`` event (its fields) and no link key in any args (a MindSpore
          file's pieces, after the first);
        - :class:`_Tagged` (args typed, :meth:`_decode_typed`): a piece without counters
          whose values all have the plain types (a Kineto file's);
        - the raw decoders (:func:`_decode_piece`, args kept raw), for any other.

        A piece one way cannot read turns that way off for the rest of the file (one wasted
        decode per file at most)."""
        if self.args_keys:
            try:
                evs = _DEC_LINK_KEYS_EVENTS.decode(piece)
            except msgspec.ValidationError:  # an odd field: the careful decoders below
                evs = None
                self.args_keys = False
            if evs is not None:
                phs = [e.ph for e in evs]
                if "C" in phs or any([e.args for e in evs]):
                    self.args_keys = False
                elif "M" not in phs:
                    names = [e.name for e in evs]
                    if "[memory]" not in names:
                        return _Piece(evs, phs, names, False)
                    self.args_keys = False
        if self.typed:
            typed = self._decode_typed(piece)
            if typed is not None:
                return typed
        evs, loose = _decode_piece(piece, self.number_dur)
        if self.number_dur and evs and type(evs[0]) is not _NumberDurEvent:
            self.number_dur = False  # this file's durations are not all numbers: strict first
        return _Piece(evs, [e.ph for e in evs], None, loose)

    def _decode_typed(self, piece: bytes | memoryview) -> _Piece | None:
        """The piece with its args typed (:class:`_Tagged`): its ts read as ints while the
        file's are whole µs (:class:`_IntTs`), its complete events' args as
        :class:`_LeanArgs` until a collective or a CUDA event sync refuses them; None (and off
        for the file) when it has counters or a value the strict types refuse. Each refusal
        turns off what it names (msgspec's message gives the value's path), so a file costs
        one wasted decode per way turned off."""
        while True:
            lean, int_ts = self.lean_args, self.int_ts
            try:
                evs = _TYPED_DECODERS[lean, int_ts].decode(piece)
            except msgspec.ValidationError as exc:
                if lean and ".args." in str(exc):  # a collective or a sync: all their args
                    self.lean_args = False
                elif int_ts:  # fractional µs (newer Kineto), or an odd field
                    self.int_ts = False
                elif lean:
                    self.lean_args = False
                else:
                    self.typed = False
                    return None
            else:
                return _Piece(evs, None, None, False, True, int_ts, lean)

    def _phase_codes(self, p: _Piece) -> np.ndarray:
        """Each event's phase code; in a typed piece from its class (one C-level lookup per
        event, no list of phases)."""
        if not p.typed:
            return _codes(p.phs, self.ph_t)
        evs, by_class = p.evs, self.class_code
        try:
            return np.fromiter(map(by_class.__getitem__, map(type, evs)), np.int32, len(evs))
        except KeyError:  # a phase new to this file
            for cls in set(map(type, evs)).difference(by_class):
                by_class[cls] = self.ph_t.setdefault(_PHASE_OF[cls], len(self.ph_t))
            return np.fromiter(map(by_class.__getitem__, map(type, evs)), np.int32, len(evs))

    def add(self, piece: bytes | memoryview) -> None:
        """Add one piece's events (a subclass's ``add`` sees each piece once)."""
        self._add(piece)

    def _add(self, piece: bytes | memoryview) -> None:
        """:meth:`add`; a piece that must be decoded another way is read again here."""
        p = self._decode(piece)
        evs, names, loose = p.evs, p.names, p.loose
        n = len(evs)
        if not n:
            self.loose |= loose
            return
        phc = self._phase_codes(p)
        ph_t = self.ph_t
        here = np.bincount(phc, minlength=len(ph_t))  # this piece's events of each phase
        kept = [ph_t[k] for k in KEEP_PH if k in ph_t]
        if int(here[kept].sum()) == n:  # every event is kept (a file of complete events)
            idx, sub = np.arange(n), evs
        else:
            keep = np.zeros(len(ph_t), bool)
            keep[kept] = True
            keep = keep[phc]
            idx = np.flatnonzero(keep)
            sub = list(compress(evs, keep.tolist()))
        has_c = "C" in ph_t and here[ph_t["C"]] > 0
        csub = list(compress(evs, (phc == ph_t["C"]).tolist())) if has_c else []
        kept_ph = phc if sub is evs else phc[idx]
        name_c = _codes(
            names if names is not None and sub is evs else [e.name for e in sub], self.name_t
        )
        # a piece read again (below) adds the same rows: the same names to the table
        if p.typed and self._complete_memory_event(name_c, kept_ph):
            self.typed = False  # its memory fields are not typed: raw args from here on
            self._add(piece)
            return
        ts = _int_us_to_ns(sub) if p.int_ts else self._ts(sub, csub)
        if ts is None:  # a whole-µs ts beyond int64 ns: the token path reads (and counts) it
            self.int_ts = False
            self._add(piece)
            return
        args = [e.args for e in sub] if p.typed else None
        self.loose |= loose
        counts = here.copy()
        counts[: len(self.ph_count)] += self.ph_count
        self.ph_count = counts
        if len(idx):
            c = self.cols
            c["name"].append(name_c)
            c["cat"].append(_codes([e.cat for e in sub], self.cat_t))
            c["ph"].append(kept_ph)
            c["pid"].append(_codes([e.pid for e in sub], self.pid_t))
            c["tid"].append(_codes([e.tid for e in sub], self.tid_t))
            c["ts"].append(ts[: len(idx)])
            c["dur"].append(_typed_dur_ns(sub) if p.typed else _dur_ns([e.dur for e in sub], loose))
            if args is not None:
                self._keep_links(args, typed=True, lean=p.lean)
            elif names is None:
                self._add_links(sub)
            # else: no args of this piece has a link key (_decode checked)
            self.n_rows += len(sub)
            mcode = self.name_t.get("[memory]")
            if mcode is not None:
                sel = np.flatnonzero(name_c == mcode).tolist()
                if sel:  # their args: typed already, or raw (decoded on first access)
                    mem = [args[i] for i in sel] if args is not None else None
                    self.memory_parts.append(
                        (ts[sel], mem if mem is not None else _raw_list([sub[i].args for i in sel]))
                    )
        if "M" in ph_t and here[ph_t["M"]] > 0:
            meta = list(compress(evs, (phc == ph_t["M"]).tolist()))
            if meta:  # their args in one decode, not one call per event
                labels = (
                    [None if e.args is None else e.args.name for e in meta]
                    if p.typed
                    else _arg_names([e.args for e in meta])
                )
                self.meta_rows.extend(
                    (e.name, e.pid, e.tid, label) for e, label in zip(meta, labels, strict=True)
                )
        if csub:
            self.counter_parts.append(
                (
                    ts[len(idx) :],
                    _codes([e.name for e in csub], self.cnt_t),
                    _raw_list([e.args for e in csub]),
                )
            )

    def _complete_memory_event(self, name_c: np.ndarray, kept_ph: np.ndarray) -> bool:
        """Whether a complete event of the piece is named ``[memory]`` (a ``[memory]`` row's
        args are read for the memory frame, and only an instant's typed args hold them)."""
        mcode, x = self.name_t.get("[memory]"), self.ph_t.get("X")
        if mcode is None or x is None:
            return False
        return bool(((name_c == mcode) & (kept_ph == x)).any())

    def _ts(self, sub: list, csub: list) -> np.ndarray:
        """The exact ns of the kept rows' and then the counters' raw ts tokens (in bulk,
        :func:`tokens_us_to_ns`); the unreadable ones are counted."""
        tsr = [e.ts for e in sub]
        if csub:
            tsr += [e.ts for e in csub]
        lens = np.fromiter(map(len, tsr), np.int64, len(tsr))
        if len(lens) and lens.max() > MAX_TOKEN_BYTES:  # a hostile run of digits: not copied
            short = [_UNREAD if len(t) > MAX_TOKEN_BYTES else t for t in tsr]
            ts = tokens_us_to_ns(b"".join(short), np.fromiter(map(len, short), np.int64))
        else:
            ts = tokens_us_to_ns(b"".join(tsr), lens)
        bad = np.flatnonzero(ts == NA_NS)
        if len(bad):
            self._unreadable_ts([tsr[i] for i in bad.tolist()])
        return ts

    def _add_links(self, sub: list) -> None:
        """The link rows of a piece decoded with raw args (one C-level decode of its ``args``
        into :class:`_LinkArgs`, unknown keys skipped), kept by :meth:`_keep_links`.

        Until a piece has one of the keys a link row needs, a piece's args are first read as
        :class:`_LinkKeys` (an empty dict per event, tested in C by ``any``): a file with no
        links at all (every Ascend and MindSpore one) never makes a :class:`_LinkArgs`."""
        blob = _raw_list([e.args for e in sub])
        try:
            if self.link_keys_first:
                if not any(_DEC_LINK_KEYS.decode(blob)):  # no row can be a link row
                    return
                self.link_keys_first = False  # this file has links: read them at once
            args = _DEC_LINK_ARGS.decode(blob)
        except (msgspec.DecodeError, msgspec.ValidationError):  # odd args: no links here
            return
        del blob
        if args.count(_NO_LINK) == len(args):  # no event has one
            return
        # Most events carry none of these keys (every event of an Ascend or MindSpore file): a
        # C-level comparison with the empty struct drops them without a Python step per event.
        some = np.fromiter(map(operator.ne, args, repeat(_NO_LINK)), bool, len(args))
        hit = [i for i in np.flatnonzero(some).tolist() if args[i] is not None]
        if hit:
            self._keep_links([args[i] for i in hit], np.asarray(hit, np.int64))

    def _keep_links(
        self, args: list, at: np.ndarray | None = None, typed: bool = False, lean: bool = False
    ) -> None:
        """Keep the link rows among the piece's rows ``at`` (all of them when None), whose args
        are ``args`` (with :class:`_LinkArgs`' fields; None for none): the rows with a
        correlation, a stream or a collective message size. Their correlation and stream
        become floats at once (columns in C, no object kept per row); only the few rows whose
        args hold more (a collective, a CUDA event sync) keep their args for ``finish``.
        ``typed``: the args are :class:`_KeptArgs` (or None), whose numbers are floats;
        ``lean``: :class:`_LeanArgs` (a piece with no collective and no sync)."""
        numbers = _typed_numbers if typed else _numbers
        try:
            corr_f, link = numbers(args, _CORRELATION)
        except AttributeError:  # "args": null
            args = [(_NO_KEPT_ARGS if typed else _NO_LINK) if a is None else a for a in args]
            corr_f, link = numbers(args, _CORRELATION)
        stream_f, has_stream = numbers(args, _STREAM)
        link |= has_stream
        more = None if lean else _collective_or_sync(args)
        if more is not None:
            link |= more[0]
        if not link.any():
            return
        rows = np.flatnonzero(link)
        at = rows if at is None else at[rows]
        self.link_rows.append(at + self.n_rows)
        self.link_corr.append(corr_f[rows])
        self.link_stream.append(stream_f[rows])
        if more is not None and (rare := (more[0] | more[1])[rows]).any():
            self.rare_rows.append(at[rare] + self.n_rows)
            self.rare_args.extend(args[i] for i in rows[rare].tolist())

    def finish(self, path: str, top: fastjson.Top, notes: list[str]) -> ChromeTrace:
        c = {k: (np.concatenate(v) if v else np.empty(0, np.int64)) for k, v in self.cols.items()}
        base = top.baseTimeNanoseconds
        base = (
            base if isinstance(base, int) and not isinstance(base, bool) and 0 < base < 2**62 else 0
        )
        ts = c["ts"]
        if base:
            ts = np.where(ts == NA_NS, NA_NS, ts + base)
        ph_counts = {str(k): int(n) for k, n in zip(self.ph_t, self.ph_count, strict=True)}
        ev = events_frame(c, self, ts)
        _link_columns(ev, self)
        meta = {
            "distributedInfo": top.distributedInfo,
            "baseTimeNanoseconds": top.baseTimeNanoseconds,
            "displayTimeUnit": top.displayTimeUnit,
            "otherData": top.otherData,
            "deviceProperties": top.deviceProperties,
        }
        counters = (list(self.cnt_t), self.counter_parts)
        if self.bad_ts:
            notes = [*notes, bad_ts_note(self.bad_ts, self.bad_ts_example)]
        return ChromeTrace(
            path, ev, meta, ph_counts, notes, base, counters, self.memory_parts, self.read_path()
        )


def memory_and_counters(cols: Columns, base: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``[memory]`` rows and the counters a piece decoding kept (what a
    :class:`ChromeTrace` gives as ``memory`` and ``counters``), for a pass that keeps no
    events (:mod:`.first_pass`)."""
    return (
        _memory_frame(cols.memory_parts, base),
        _counter_frame((list(cols.cnt_t), cols.counter_parts), base),
    )


def bad_ts_note(count: int, example: bytes) -> str:
    return (
        f"{count} events have a ts that is not a time dynprof_nb can hold (first: "
        f"{example.decode('ascii', 'replace')}): they are dropped. Times are int64 ns, which "
        f"reach ±{NS_MAX_US} µs (2262-04-11 as Unix time); a ts beyond that is a clock or "
        "tool bug in the file"
    )


def _raw_list(raws: list) -> bytes:
    """Raw JSON values as one JSON array text (kept compact for a frame built later), copied
    once: the brackets ride on the first and last value, not on two more copies of the whole
    (the args of a piece are most of its bytes where events carry long ``Call stack`` texts)."""
    if len(raws) < 2:
        return b"[" + b"".join(raws) + b"]"
    return b",".join([b"[" + raws[0], *raws[1:-1], bytes(raws[-1]) + b"]"])


def _arg_names(raws: list) -> list:
    """``args["name"]`` of each metadata event (None where its args are not an object)."""
    return [
        a.get("name") if isinstance(a, dict) else None
        for a in _DEC_ANY_LIST.decode(_raw_list(raws))
    ]


def _categorical(codes: np.ndarray, table: dict) -> pd.Categorical:
    cats = [("" if k is None else str(k)) for k in table]
    uniq, inverse = np.unique(np.array(cats, dtype=object), return_inverse=True)
    return _from_lut(_code_lut(inverse, len(uniq)), codes, uniq)


def _code_lut(values: np.ndarray, n_categories: int) -> np.ndarray:
    """``values`` (category codes) in the integer type pandas keeps for that many categories,
    so the row codes taken through it are final (no second pass to narrow them)."""
    for kind in (np.int8, np.int16, np.int32):
        if n_categories < np.iinfo(kind).max:
            return np.asarray(values).reshape(-1).astype(kind)
    return np.asarray(values).reshape(-1).astype(np.int64)


def _from_lut(lut: np.ndarray, codes: np.ndarray, categories: np.ndarray) -> pd.Categorical:
    """The categorical whose row ``i`` is category ``lut[codes[i]]``: one take, and no
    validation pass (every value of ``lut`` is a category code by construction)."""
    rows = lut[codes] if len(codes) else np.zeros(0, lut.dtype)
    return categorical_from_codes(rows, categories=pd.Index(categories, dtype=object))


def table_ids(codes: np.ndarray, table: dict) -> np.ndarray:
    """int64 when every id is an integer, else an object array (becomes a categorical)."""
    keys = list(table)
    if all(type(k) is int and -(2**63) <= k < 2**63 for k in keys):
        return np.asarray(keys, dtype=np.int64)[codes] if keys else codes.astype(np.int64)
    lut = np.empty(len(keys), dtype=object)
    lut[:] = keys
    return lut[codes]


def metadata_labels(meta_rows: list) -> tuple[dict, dict]:
    """The process names by pid and thread names by (pid, tid) that a trace's ``M`` events
    give (``process_name`` / ``thread_name``); the last one wins, as in Perfetto."""
    proc_names: dict = {}
    thread_names: dict = {}
    for kind, p, t, label in meta_rows:
        if label is None:
            continue
        try:
            if kind == "process_name":
                proc_names[p] = str(label)
            elif kind == "thread_name":
                thread_names[(p, t)] = str(label)
        except TypeError:  # an unhashable pid/tid in a hand-made file
            continue
    return proc_names, thread_names


def events_frame(c: dict, acc: Columns, ts: np.ndarray) -> pd.DataFrame:
    proc_names, thread_names = metadata_labels(acc.meta_rows)
    pid_c, tid_c = c["pid"], c["tid"]  # codes index as they are: no int64 copy of each
    frame = pd.DataFrame(
        {
            "name": _categorical(c["name"], acc.name_t),
            "cat": _categorical(c["cat"], acc.cat_t),
            "ph": _categorical(c["ph"], acc.ph_t),
            "pid": _id_column(pid_c, acc.pid_t),
            "tid": _id_column(tid_c, acc.tid_t),
            "process": _label_column((pid_c, acc.pid_t), None, proc_names),
            "thread": _label_column((pid_c, acc.pid_t), (tid_c, acc.tid_t), thread_names),
            "ts_ns": ts,
            "dur_ns": c["dur"],
        },
        copy=False,  # the columns are this frame's own: no copy into one 2-D int64 block
    )
    if len(ts) and (ts == NA_NS).any():
        frame["ts_ns"] = frame["ts_ns"].astype("Int64").mask(frame["ts_ns"] == NA_NS)
    return frame


def int_or_nan(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else np.nan


def _link_columns(ev: pd.DataFrame, acc: Columns) -> None:
    """Add ``correlation``, ``launch_ns`` and ``stream_arg`` (the ``args.stream`` HTA files
    device activity by) to Kineto traces, and the collective columns (NCCL).

    ``launch_ns`` is set on each device row (``derive.DEVICE_CATS``): the ``ts_ns`` of the host
    event with the same correlation (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ``mtia``'s
    runtime call...), as HTA links them. Matching within one file keeps two files' (two ranks')
    correlation ids apart."""
    if not acc.link_rows:
        return
    rows = np.concatenate(acc.link_rows)
    n = len(ev)
    corr = np.concatenate(acc.link_corr)
    stream = np.concatenate(acc.link_stream)
    if (~np.isnan(stream)).any():
        full_s = np.full(n, np.nan)
        full_s[rows] = stream
        ev["stream_arg"] = whole_numbers(full_s)
    ok = ~np.isnan(corr)
    if ok.any():
        full = np.full(n, -1, np.int64)
        full[rows[ok]] = corr[ok].astype(np.int64)
        ev["correlation"] = _nonnegative(full)
        ev["launch_ns"] = _nonnegative(_launch_ns(full, _device_rows(ev), ev["ts_ns"]))
    rare = np.concatenate(acc.rare_rows) if acc.rare_rows else np.empty(0, np.int64)
    _wait_columns(ev, rare, acc.rare_args)
    _collective_columns(ev, rare, acc.rare_args)


def whole_numbers(values: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """Floats as Int64, NA where NaN or not a whole number an int64 holds (a stream id of
    7.5 is no stream): the array with its mask, no conversion through Float64."""
    with np.errstate(invalid="ignore"):
        ok = (values == np.floor(values)) & (np.abs(values) < 2.0**63)
    return pd.arrays.IntegerArray(np.where(ok, values, 0).astype(np.int64), ~ok)


def _nonnegative(values: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """``values`` (int64, this column's own) as Int64, NA where negative (no correlation, no
    launch found): the array with its mask, no conversion pass."""
    return pd.arrays.IntegerArray(values, values < 0)


def _device_rows(ev: pd.DataFrame) -> np.ndarray:
    """The complete events of a device category (``DEVICE_CATS``): tested once per category
    and phase, then taken by each row's code (no object column, no per-row lookup)."""

    def where(col: pd.Categorical, test: Any) -> np.ndarray:
        hit = np.append(np.asarray([bool(test(v)) for v in col.categories], bool), False)
        return hit[col.codes]  # a NaN row (code -1) takes the appended False

    return where(ev["cat"].array, DEVICE_CATS.__contains__) & where(ev["ph"].array, "X".__eq__)


def _launch_ns(corr: np.ndarray, is_dev: np.ndarray, ts_ns: pd.Series) -> np.ndarray:
    """Per device row with a correlation (``corr >= 0``), the ts of the first host row (in
    row order) with the same correlation; -1 elsewhere and where there is none (or its ts is
    NA). One sort of the host rows' correlations and one binary search per device row."""
    ts = ts_ns.to_numpy(np.int64, na_value=-1) if ts_ns.dtype != np.int64 else ts_ns.to_numpy()
    host = ~is_dev & (corr >= 0)
    keys, first = np.unique(corr[host], return_index=True)  # each key's first host row
    dev = np.flatnonzero(is_dev & (corr >= 0))
    out = np.full(len(corr), -1, np.int64)
    if len(keys) and len(dev):
        at = np.minimum(np.searchsorted(keys, corr[dev]), len(keys) - 1)
        found = keys[at] == corr[dev]
        out[dev[found]] = ts[host][first[at[found]]]
    return out


def _collective_columns(ev: pd.DataFrame, rows: np.ndarray, rare_args: list) -> None:
    """The NCCL message columns (:data:`COLLECTIVE_COLS`) on the rows that give a message
    size; nothing where no row does."""
    coll = [
        i
        for i, a in enumerate(rare_args)
        if a is not None and (a.in_nelems is not None or a.out_nelems is not None)
    ]
    if not coll:
        return
    n = len(ev)
    sel = rows[coll]
    args = [rare_args[i] for i in coll]
    for name in COLLECTIVE_NUMBERS:
        full = np.full(n, np.nan)
        full[sel] = [int_or_nan(getattr(a, name)) for a in args]
        ev[name] = full
    for name in COLLECTIVE_TEXTS:
        obj = np.full(n, None, dtype=object)
        obj[sel] = collective_texts(args, name)
        ev[name] = pd.Categorical(obj)


def collective_texts(args: list, name: str) -> list:
    """Field ``name`` of collective rows' args as text (None where a row lacks it). A group's
    ranks are spaced as Kineto writes them, ``"[0, 1]"``, however the file spaced them, so one
    group has one label on every rank."""
    out = [None if (v := getattr(a, name)) is None else str(v) for a in args]
    if name == "pg_ranks":
        out = [None if v is None else _ranks_text(v) for v in out]
    return out


def _ranks_text(v: str) -> str:
    return "[" + ", ".join(v.strip("[] ").replace(",", " ").split()) + "]"


def _wait_columns(ev: pd.DataFrame, rows: np.ndarray, link_args: list) -> None:
    """``wait_on_stream`` and ``wait_on_corr`` (the correlation of the ``cudaEventRecord``)
    of the CUDA event syncs, where a trace has any (Kineto since PyTorch 2.1)."""
    waits = [i for i, a in enumerate(link_args) if a is not None and a.wait_on_corr is not None]
    if not waits:
        return
    sel = rows[waits]
    for col in ("wait_on_stream", "wait_on_corr"):
        full = np.full(len(ev), np.nan)
        full[sel] = [int_or_nan(getattr(link_args[i], col)) for i in waits]
        ev[col] = whole_numbers(full)


def _id_column(codes: np.ndarray, table: dict) -> np.ndarray | pd.Categorical:
    """A pid or tid column: int64 when every id is an integer, else a categorical. Where the
    ids are ints and strings (Kineto's ``"Spans"`` pid), the categorical of the table's few
    keys is taken by each row's code: that is the categorical of the rows, whose values are
    exactly these keys (sorted, so their order does not matter), without hashing each row."""
    keys = list(table)
    if all(type(k) is int and -(2**63) <= k < 2**63 for k in keys) or not all(
        type(k) is int or type(k) is str for k in keys
    ):
        ids = table_ids(codes, table)
        return ids if ids.dtype == np.int64 else pd.Categorical(ids)
    lut = np.empty(len(keys), dtype=object)
    lut[:] = keys
    by_key = pd.Categorical(lut)
    rows = _code_lut(by_key.codes, len(by_key.categories))[codes]
    return categorical_from_codes(rows, dtype=by_key.dtype)


def _label_column(
    pid: tuple[np.ndarray, dict], tid: tuple[np.ndarray, dict] | None, labels: dict
) -> pd.Categorical:
    """``process`` (tid None) or ``thread`` labels from the pid/tid codes and their tables:
    the metadata's name where there is one, else the id as text. Each row's (pid, tid) is a
    slot ``pid_code * n_tids + tid_code``; the slots that occur are counted (hashed only when
    there are far more slots than rows) and each row takes its label's code in one lookup."""
    pc, pkeys = pid[0], list(pid[1])
    if tid is None:
        slot, size = pc, len(pkeys)

        def text(k: int) -> str:
            return labels.get(pkeys[k], str(pkeys[k]))
    else:
        tkeys = list(tid[1])
        nt = max(len(tkeys), 1)
        slot, size = pc.astype(np.int64) * nt + tid[0], len(pkeys) * nt

        def text(k: int) -> str:
            return labels.get((pkeys[k // nt], tkeys[k % nt]), str(tkeys[k % nt]))

    if size <= 4 * len(slot) + 4096:
        seen = np.flatnonzero(np.bincount(slot, minlength=size)) if len(slot) else slot[:0]
        codes = slot
    else:  # ids given as huge ints with few rows: hash the rows instead
        codes, seen = pd.factorize(slot)
        size = len(seen)
    texts = [text(k) for k in seen.tolist()]
    cats, inverse = (
        np.unique(np.array(texts, dtype=object), return_inverse=True)
        if texts
        else (np.array([], dtype=object), np.array([], dtype=np.int64))
    )
    lut = np.zeros(size, np.int64)
    lut[seen if codes is slot else np.arange(size)] = np.asarray(inverse).reshape(-1)
    return _from_lut(_code_lut(lut, len(cats)), codes, cats)


# ---- side tables, built on first access -----------------------------------------------------


def _is_nan(v: Any) -> bool:
    """Whether a dur value is a NaN (a float NaN, or its text), not junk or absent."""
    if isinstance(v, str):
        return v.strip().lower() in ("nan", "+nan", "-nan")
    return isinstance(v, float) and math.isnan(v)


def _num(v: Any) -> float:
    if isinstance(v, bool) or v is None:
        return float("nan")
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _floats(values: list | tuple) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return np.fromiter((_num(v) for v in values), np.float64, len(values))


def _memory_frame(parts: list[tuple], base: int) -> pd.DataFrame:
    rows_ts, cols = [], [[] for _ in range(5)]
    for ts, blob in parts:
        args = blob if isinstance(blob, list) else _mem_args_of(blob)
        args = [a or _MemArgs() for a in args]
        rows_ts.append(ts)
        for out, key in zip(
            cols,
            ("Bytes", "total_allocated", "total_reserved", "device_type", "device_id"),
            strict=True,
        ):
            out.append(_floats([getattr(a, key) for a in args]))
    if not rows_ts:
        return schema.empty("memory")
    ts = np.concatenate(rows_ts)
    if base:
        ts = np.where(ts == NA_NS, NA_NS, ts + base)
    delta, alloc, reserved, dtype_, dev_id = (np.concatenate(c) for c in cols)
    names = [
        f"{_dev_type(t)}:{_dev_id(d)}"
        for t, d in zip(dtype_.tolist(), dev_id.tolist(), strict=True)
    ]
    n = len(ts)
    return pd.DataFrame(
        {
            "ts_ns": ts,
            "device": pd.Categorical(names),
            "allocated_bytes": alloc,
            "reserved_bytes": reserved,
            "active_bytes": np.full(n, np.nan),
            "delta_bytes": delta,
            "name": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=["[memory]"]),
            "source": pd.Categorical.from_codes(
                np.zeros(n, np.int8), categories=["[memory] events"]
            ),
        }
    )


def _mem_args_of(blob: bytes) -> list:
    """The :class:`_MemArgs` of a piece's raw ``[memory]`` args (None where not an object)."""
    try:
        return _DEC_MEM_ARGS.decode(blob)
    except msgspec.ValidationError:  # some args are not objects: read the others one by one
        return [_mem_args(a) for a in _DEC_ANY_LIST.decode(blob)]


def _mem_args(a: Any) -> _MemArgs | None:
    try:
        return msgspec.convert(a, _MemArgs) if isinstance(a, dict) else None
    except msgspec.ValidationError:
        return None


def _dev_id(v: float) -> int:
    return int(v) if v == v and abs(v) < 999_999 else -1


def _dev_type(v: float) -> str:
    # Kineto's c10 DeviceType numbering for the ones seen in traces.
    if v != v:
        return "cpu"
    k = int(v) if abs(v) < 2**31 else v
    return {0: "cpu", 1: "cuda", 20: "privateuse1", 8: "hip"}.get(k, str(k))


def _counter_frame(parts: tuple[list, list[tuple]], base: int) -> pd.DataFrame:
    table, pieces = parts
    ts_out, name_out, series_out, value_out = [], [], [], []
    for ts, codes, blob in pieces:
        args = _DEC_ANY_LIST.decode(blob)
        for t, code, a in zip(ts.tolist(), codes.tolist(), args, strict=True):
            name = table[code]
            if isinstance(a, dict):  # one series per key, e.g. {"Allocated": .., "Reserved": ..}
                for key, value in a.items():
                    ts_out.append(t)
                    name_out.append(str(name))
                    series_out.append(str(key))
                    value_out.append(_num(value))
    ts = np.asarray(ts_out, dtype=np.int64)
    if base:
        ts = np.where(ts == NA_NS, NA_NS, ts + base)
    return pd.DataFrame(
        {
            "name": pd.Series(name_out, dtype=object),
            "series": pd.Series(series_out, dtype=object),
            "value": np.asarray(value_out, dtype=np.float64),
            "ts_ns": ts,
        }
    )
