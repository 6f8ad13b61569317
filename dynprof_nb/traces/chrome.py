"""Chrome trace JSON reader (Kineto, Ascend trace_view.json, dynprof_nb's built-in trace).

Fast path: strict msgspec decode of the event array into raw slices, then typed decode in chunks
straight into column arrays, so peak memory stays near the file size and no list of dicts is
ever built. Only when the strict parse fails does :mod:`.repair` take over (slow and tolerant);
its output is re-encoded and fed through the same fast path.
"""

from __future__ import annotations

import gc
import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ._time import NA_NS, str_us_to_ns, us_values_to_ns
from .errors import TraceFormatError
from .repair import check_text_like, first_byte, repair_json

CHUNK = 10_000
KEEP_PH = ("X", "i", "I")  # complete and instant events go into `events`


class _Args(msgspec.Struct, gc=False):
    """Only the args the readers use; every other key is skipped by the decoder."""

    name: Any = None
    Bytes: Any = None
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


# Missing ts is decoded as this number so columns stay int64 (a None would force object arrays).
MISSING_US = -(2**53)


class _Event(msgspec.Struct, gc=False):
    ph: Any = None
    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = MISSING_US
    dur: Any = 0
    args: _Args | None = None


_NO_ARGS = _Args()


class _LooseEvent(msgspec.Struct, gc=False):
    """Fallback when ``args`` is not an object somewhere (seen in hand-edited traces)."""

    ph: Any = None
    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = MISSING_US
    dur: Any = 0
    args: Any = None


class _Times(msgspec.Struct, gc=False):
    ts: msgspec.Raw = msgspec.Raw(b"null")
    dur: msgspec.Raw = msgspec.Raw(b"null")


class _Top(msgspec.Struct):
    traceEvents: list[msgspec.Raw] | None = None
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    displayTimeUnit: Any = None
    otherData: Any = None
    deviceProperties: Any = None


_DEC_EVENTS = msgspec.json.Decoder(list[_Event])
_DEC_LOOSE = msgspec.json.Decoder(list[_LooseEvent])
_DEC_TIMES = msgspec.json.Decoder(list[_Times])
_DEC_TOP = msgspec.json.Decoder(_Top)
_DEC_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])


@dataclass
class ChromeTrace:
    """What one Chrome trace file gave: the events frame plus side tables and notes."""

    path: str
    events: pd.DataFrame
    memory: pd.DataFrame
    counters: pd.DataFrame
    meta: dict = field(default_factory=dict)
    ph_counts: dict = field(default_factory=dict)
    repairs: list[str] = field(default_factory=list)


def read_bytes(path: str | Path) -> tuple[bytes, list[str]]:
    """Read a file, gunzipping ``.gz`` (and keeping what a cut-short gzip stream gave)."""
    path = Path(path)
    notes: list[str] = []
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            d = zlib.decompressobj(wbits=47)
            try:
                out = d.decompress(data)
            except zlib.error:
                out = b""
            if not out:
                raise TraceFormatError(path, f"gzip data is corrupt ({exc})", offset=0,
                                       hint="re-copy the file or decompress it by hand") from exc
            notes.append(f"gzip stream cut short; kept the first {len(out)} decompressed bytes")
            data = out
    return data, notes


def load_chrome_trace(path: str | Path) -> ChromeTrace:
    """Parse a Chrome trace file (object or bare array form, plain or gzip) into frames."""
    path = Path(path)
    data, notes = read_bytes(path)
    box = [data]
    del data
    return parse_chrome_bytes(box, path, notes)


def parse_chrome_bytes(data: bytes | list, path: str | Path,
                       notes: list[str] | None = None) -> ChromeTrace:
    """Strict fast parse; on failure repair (with notes) and parse the repaired document.

    ``data`` may be passed as a one-item list: the list is emptied so the parser holds the only
    reference and can free the raw text before building the frame (peak memory).
    """
    box = data if isinstance(data, list) else [data]
    notes = list(notes or [])
    check_text_like(box[0], path)
    try:
        top, raws = _split(box[0])
    except (msgspec.DecodeError, msgspec.ValidationError):
        obj, repair_notes = repair_json(box[0], path)
        notes.extend(repair_notes)
        box[0] = msgspec.json.encode(obj)
        del obj
        top, raws = _split(box[0])
    box.clear()  # from here on only `raws` keeps the text alive
    top.traceEvents = None
    if raws is None:
        raise TraceFormatError(path, "valid JSON but not a trace: no traceEvents array", offset=0,
                               hint="load_trace reads Chrome traces, Ascend CSV/JSON/DB files")
    raws_box = [raws]
    del raws
    return _build(Path(path), top, raws_box, notes)


def _split(data: bytes) -> tuple[_Top, list[msgspec.Raw] | None]:
    if first_byte(data) == b"[":
        return _Top(), _DEC_ARRAY.decode(data)
    top = _DEC_TOP.decode(data)
    return top, top.traceEvents


def _decode_chunk(raws: list[msgspec.Raw]) -> list:
    blob = b"[" + b",".join(raws) + b"]"
    try:
        return _DEC_EVENTS.decode(blob)
    except msgspec.ValidationError:
        return [_loosen(e) for e in _DEC_LOOSE.decode(blob)]


def _loosen(e: _LooseEvent) -> _Event:
    a = e.args if isinstance(e.args, dict) else {}
    args = _Args(name=a.get("name"), Bytes=a.get("Bytes"),
                 total_allocated=a.get("Total Allocated"), total_reserved=a.get("Total Reserved"),
                 device_type=a.get("Device Type"), device_id=a.get("Device Id"))
    return _Event(e.ph, e.name, e.cat, e.pid, e.tid, e.ts, e.dur, args)


def _codes(values: list, table: dict) -> np.ndarray:
    """Factorize one chunk and map its uniques into the file-wide code table."""
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    codes, uniq = pd.factorize(arr, use_na_sentinel=False)
    sd = table.setdefault
    lut = np.fromiter((sd(u, len(table)) for u in uniq), dtype=np.int32, count=len(uniq))
    return lut[codes]


def _categorical(codes: np.ndarray, table: dict) -> pd.Categorical:
    cats = [("" if k is None else str(k)) for k in table]
    uniq, inverse = np.unique(np.array(cats, dtype=object), return_inverse=True)
    remap = inverse.astype(np.int32)
    return pd.Categorical.from_codes(remap[codes] if len(codes) else codes.astype(np.int32),
                                     categories=pd.Index(uniq, dtype=object))


def _build(path: Path, top: _Top, raws_box: list, notes: list[str]) -> ChromeTrace:
    raws = raws_box.pop()
    n = len(raws)
    name_t: dict = {}
    cat_t: dict = {}
    ph_t: dict = {}
    pid_t: dict = {}
    tid_t: dict = {}
    name_c, cat_c, ph_c, pids, tids, ts_l, dur_l = [], [], [], [], [], [], []
    lossy = False
    meta_rows: list[tuple] = []
    mem_parts: list[tuple] = []
    counter_rows: list[tuple] = []
    gc_was = gc.isenabled()
    gc.disable()  # millions of short-lived objects; the collector only slows the build down
    try:
        for start in range(0, n, CHUNK):
            evs = _decode_chunk(raws[start:start + CHUNK])
            name_c.append(_codes([e.name for e in evs], name_t))
            cat_c.append(_codes([e.cat for e in evs], cat_t))
            ph_c.append(_codes([e.ph for e in evs], ph_t))
            pids.append(_id_codes([e.pid for e in evs], pid_t))
            tids.append(_id_codes([e.tid for e in evs], tid_t))
            ts_ns, lo1 = us_values_to_ns([e.ts for e in evs])
            dur_ns, lo2 = us_values_to_ns([e.dur for e in evs])
            lossy = lossy or lo1 or lo2
            ts_l.append(ts_ns)
            dur_l.append(dur_ns)
            for i in np.flatnonzero(ph_c[-1] == ph_t.get("M", -1)):
                e = evs[i]
                meta_rows.append((e.name, e.pid, e.tid, e.args.name if e.args else None))
            for i in np.flatnonzero(ph_c[-1] == ph_t.get("C", -1)):
                counter_rows.append((start + int(i), evs[i].name,
                                     msgspec.json.decode(raws[start + int(i)])))
            mcode = name_t.get("[memory]")
            if mcode is not None:
                sel = np.flatnonzero(name_c[-1] == mcode)
                if len(sel):
                    args = [evs[i].args or _NO_ARGS for i in sel]
                    mem_parts.append((sel + start, _floats([a.Bytes for a in args]),
                                      _floats([a.total_allocated for a in args]),
                                      _floats([a.total_reserved for a in args]),
                                      _floats([a.device_type for a in args]),
                                      _floats([a.device_id for a in args])))
            del evs
        if lossy:
            # Decimal µs beyond float64's ns resolution: re-read ts/dur as raw text, exactly.
            ts_l, dur_l = _exact_times(raws)
        del raws  # frees the file text before the frame is built
        counters = _counter_frame(counter_rows)
    finally:
        if gc_was:
            gc.enable()
    names = np.concatenate(name_c) if name_c else np.empty(0, np.int32)
    cats = np.concatenate(cat_c) if cat_c else np.empty(0, np.int32)
    phc = np.concatenate(ph_c) if ph_c else np.empty(0, np.int32)
    ts = np.concatenate(ts_l) if ts_l else np.empty(0, np.int64)
    dur = np.concatenate(dur_l) if dur_l else np.empty(0, np.int64)
    ts[ts == MISSING_US * 1000] = NA_NS
    pid = _ids_from_codes(pids, pid_t)
    tid = _ids_from_codes(tids, tid_t)
    base = top.baseTimeNanoseconds
    if isinstance(base, int) and base > 0:
        ts = np.where(ts == NA_NS, NA_NS, ts + base)
    ph_counts = {str(k): int(c) for k, c in zip(ph_t, np.bincount(phc, minlength=len(ph_t)), strict=True)}
    keep_codes = [ph_t[p] for p in KEEP_PH if p in ph_t]
    mask = np.isin(phc, keep_codes)
    idx = np.flatnonzero(mask)
    ev = _events_frame(idx, names, name_t, cats, cat_t, phc, ph_t, pid, tid, ts, dur, meta_rows)
    memory = _memory_frame(mem_parts, ts)
    if not counters.empty:
        counters["ts_ns"] = ts[counters.pop("index").to_numpy()]
    meta = {"distributedInfo": top.distributedInfo, "baseTimeNanoseconds": base,
            "displayTimeUnit": top.displayTimeUnit, "otherData": top.otherData,
            "deviceProperties": top.deviceProperties}
    return ChromeTrace(str(path), ev, memory, counters, meta, ph_counts, notes)


def _id_codes(values: list, table: dict) -> np.ndarray:
    """pid/tid are ints in most traces but strings in some events ("Spans", "")."""
    try:
        arr = np.asarray(values)
    except (ValueError, OverflowError):
        arr = None
    if arr is None or arr.dtype.kind not in "iu":
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
    codes, uniq = pd.factorize(arr, use_na_sentinel=False)
    sd = table.setdefault
    lut = np.fromiter((sd(u, len(table)) for u in uniq.tolist()), dtype=np.int32, count=len(uniq))
    return lut[codes]


def _ids_from_codes(parts: list[np.ndarray], table: dict) -> np.ndarray:
    """int64 when every id is an integer, else an object array (becomes a categorical)."""
    codes = np.concatenate(parts) if parts else np.empty(0, np.int32)
    keys = list(table)
    if all(isinstance(k, int) and not isinstance(k, bool) for k in keys):
        return np.asarray(keys, dtype=np.int64)[codes] if keys else codes.astype(np.int64)
    lut = np.empty(len(keys), dtype=object)
    lut[:] = keys
    return lut[codes]


def _exact_times(raws: list) -> tuple[list[np.ndarray], list[np.ndarray]]:
    ts_out, dur_out = [], []
    for start in range(0, len(raws), CHUNK):
        rows = _DEC_TIMES.decode(b"[" + b",".join(raws[start:start + CHUNK]) + b"]")
        ts_out.append(np.fromiter((_raw_ns(r.ts) for r in rows), np.int64, len(rows)))
        dur_out.append(np.fromiter((_raw_ns(r.dur) for r in rows), np.int64, len(rows)))
    return ts_out, dur_out


def _raw_ns(raw: msgspec.Raw) -> int:
    v = str_us_to_ns(bytes(raw))
    return NA_NS if v is None else v


def _events_frame(idx, names, name_t, cats, cat_t, phc, ph_t, pid, tid, ts, dur, meta_rows):
    proc_names: dict = {}
    thread_names: dict = {}
    for kind, p, t, label in meta_rows:
        if label is None:
            continue
        if kind == "process_name":
            proc_names[p] = str(label)
        elif kind == "thread_name":
            thread_names[(p, t)] = str(label)
    pid_k = pid[idx]
    tid_k = tid[idx]
    dur_k = dur[idx]
    dur_k = np.where(dur_k == NA_NS, 0, dur_k)
    frame = pd.DataFrame({
        "name": _categorical(names[idx], name_t),
        "cat": _categorical(cats[idx], cat_t),
        "ph": _categorical(phc[idx], ph_t),
        "pid": _id_column(pid_k),
        "tid": _id_column(tid_k),
        "process": _label_column(pid_k, None, proc_names),
        "thread": _label_column(pid_k, tid_k, thread_names),
        "ts_ns": ts[idx],
        "dur_ns": dur_k,
    })
    if (frame["ts_ns"] == NA_NS).any():
        frame["ts_ns"] = frame["ts_ns"].astype("Int64").mask(frame["ts_ns"] == NA_NS)
    return frame


def _id_column(a: np.ndarray) -> pd.Series | np.ndarray:
    if a.dtype == np.int64:
        return a
    return pd.Categorical(a)


def _label_column(pid: np.ndarray, tid: np.ndarray | None, labels: dict) -> pd.Categorical:
    if tid is None:
        codes, uniq = pd.factorize(pid)
        texts = [labels.get(p, str(p)) for p in uniq]
    else:
        pc, pu = pd.factorize(pid)
        tc, tu = pd.factorize(tid)
        codes, uniq = pd.factorize(pc.astype(np.int64) * max(len(tu), 1) + tc)
        nt = max(len(tu), 1)
        texts = [labels.get((pu[k // nt], tu[k % nt]), str(tu[k % nt])) for k in uniq]
    cats, remap = np.unique(np.array(texts, dtype=object), return_inverse=True) if texts else (
        np.array([], dtype=object), np.array([], dtype=np.int64))
    return pd.Categorical.from_codes(remap[codes] if len(codes) else codes,
                                     categories=pd.Index(cats, dtype=object))


MEMORY_COLUMNS = ["ts_ns", "device", "allocated_bytes", "reserved_bytes", "active_bytes",
                  "delta_bytes", "name", "source"]


def _num(v: Any) -> float:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _floats(values: list | tuple) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.fromiter((_num(v) for v in values), np.float64, len(values))


def _memory_frame(parts: list[tuple], ts: np.ndarray) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _MEM_DTYPES.items()})
    idx, delta, alloc, reserved, dtype_, dev_id = (np.concatenate(c) for c in zip(*parts, strict=True))
    key = np.nan_to_num(dtype_, nan=-1).astype(np.int64) * 1_000_000 + np.nan_to_num(dev_id, nan=-1).astype(np.int64)
    codes, uniq = pd.factorize(key)
    names = [f"{_dev_type(int(k // 1_000_000) if k >= 0 else None)}:{int(k % 1_000_000) if k % 1_000_000 < 999_999 else -1}"
             for k in uniq]
    n = len(idx)
    return pd.DataFrame({
        "ts_ns": ts[idx],
        "device": pd.Categorical.from_codes(codes, categories=pd.Index(names).unique()) if len(set(names)) == len(names)
        else pd.Categorical([names[c] for c in codes]),
        "allocated_bytes": alloc,
        "reserved_bytes": reserved,
        "active_bytes": np.full(n, np.nan),
        "delta_bytes": delta,
        "name": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=["[memory]"]),
        "source": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=["[memory] events"]),
    })


_MEM_DTYPES = {"ts_ns": "int64", "device": "category", "allocated_bytes": "float64",
               "reserved_bytes": "float64", "active_bytes": "float64", "delta_bytes": "float64",
               "name": "category", "source": "category"}


def _dev_type(v: Any) -> str:
    # Kineto's c10 DeviceType numbering for the ones seen in traces.
    return {0: "cpu", 1: "cuda", 20: "privateuse1", 8: "hip"}.get(v, str(v)) if v is not None else "cpu"


def _counter_frame(rows: list[tuple]) -> pd.DataFrame:
    out = []
    for index, name, event in rows:
        args = event.get("args") if isinstance(event, dict) else None
        if isinstance(args, dict):  # one series per key, e.g. {"Allocated": .., "Reserved": ..}
            for key, value in args.items():
                out.append((index, str(name), str(key), _num(value)))
    return pd.DataFrame(out, columns=["index", "name", "series", "value"])
