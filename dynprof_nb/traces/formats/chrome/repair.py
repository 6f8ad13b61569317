"""Tolerant JSON reading for traces that real profilers wrote badly.

Handles bare ``inf``/``NaN``, unquoted ``N/A``, raw control characters, unescaped backslashes
and files cut short by a killed process. Slow on purpose-built regexes, so it only runs after
the strict parser refused the file. Every change is reported back as a note.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

from ...errors import TraceFormatError

# A string runs to its closing quote or, in a file cut short inside it, to the end (``close``
# unmatched): a string that could fail to match made every later quote start a scan to the
# end, quadratic in a file cut inside a run of \" (64 KB took 70 s). Runs of plain characters
# are one step each, not one per character (the per-step state was ~120x the string).
_STRING_OR_BARE = re.compile(
    r'"(?:[^"\\]+|\\[\s\S])*(?:(?P<close>")|\\?\Z)'
    r'|(?<![\w."])(?:[-+]?(?:Infinity|inf(?:inity)?|INF|Inf)|NaN|nan|N/A|n/a|undefined)(?![\w"])'
)
_BAD_IN_STRING = re.compile(r'[\x00-\x1f]|\\(?!["\\/bfnrt]|u[0-9a-fA-F]{4})')
_FIX_IN_STRING = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})|\\|[\x00-\x1f]')
_EVENTS_START = re.compile(r'"traceEvents"\s*:\s*\[')
_RESYNC = re.compile(r"\}\s*,\s*(?=\{)")
_BETWEEN = re.compile(r"[ \t\r\n,]*")  # what may separate two events while salvaging
_BASE_TIME = re.compile(r'"baseTimeNanoseconds"\s*:\s*(\d+)')


_WS = re.compile(rb"[ \t\r\n]*")


def first_byte(data: bytes) -> bytes:
    """The first non-whitespace byte, without copying a multi-GB buffer the way strip() would."""
    end = _WS.match(data).end()
    return data[end : end + 1]


def check_text_like(data: bytes, path: str | Path) -> None:
    """Refuse empty and binary files with a clear message instead of a decoder traceback."""
    if not first_byte(data):
        raise TraceFormatError(
            path,
            "file is empty",
            offset=0,
            hint="the profiler was probably stopped before it wrote the trace",
        )
    head = data[:65536]
    nul = head.find(b"\x00")
    if nul >= 0:
        raise TraceFormatError(
            path,
            "binary data where JSON text was expected",
            offset=nul,
            hint="is this the right file? traces are .json or .json.gz",
        )
    first = first_byte(head)
    if first not in (b"{", b"["):
        raise TraceFormatError(
            path,
            f"not JSON: starts with {head.lstrip()[:20]!r}",
            offset=0,
            hint="load_trace expects a Chrome trace JSON here",
        )


def _fix_string(s: str) -> str:
    def one(m: re.Match) -> str:
        t = m.group(0)
        if len(t) > 1:
            return t
        if t == "\\":
            return "\\\\"
        return f"\\u{ord(t):04x}"

    return '"' + _FIX_IN_STRING.sub(one, s[1:-1]) + '"'


def sanitize(text: str) -> tuple[str, dict[str, int]]:
    """Rewrite bare non-JSON tokens (N/A, undefined) to null, bare inf/NaN to their text (an
    impossible number, not a missing one), and fix bad characters inside strings."""
    counts = {"bare tokens": 0, "strings": 0}

    def repl(m: re.Match) -> str:
        t = m.group(0)
        if t[0] == '"':
            if m.group("close") is None:  # cut short inside it: salvage drops its event
                return t
            if _BAD_IN_STRING.search(t, 1, len(t) - 1):
                counts["strings"] += 1
                return _fix_string(t)
            return t
        counts["bare tokens"] += 1
        if t.lower().lstrip("+-").startswith(("inf", "nan")):  # a number, impossible: kept as
            return f'"{t}"'  # text, so a ts or dur of it is dropped and counted (validate.py)
        return "null"

    return _STRING_OR_BARE.sub(repl, text), counts


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def repair_json(data: bytes, path: str | Path) -> tuple[Any, list[str]]:
    """Best-effort parse of a damaged trace; returns the document and what was changed or lost."""
    notes: list[str] = []
    text = data.decode("utf-8", errors="replace")
    if "\ufffd" in text:
        notes.append("replaced invalid UTF-8 bytes")
    try:  # the stdlib accepts NaN/Infinity and (strict=False) raw control characters
        # NaN/Infinity kept as text ("NaN"), not null: a dur or ts of NaN is then an
        # impossible value the frames' check drops and counts, never a silent 0 or "no ts"
        obj = json.loads(text, strict=False, parse_float=Decimal, parse_constant=Decimal)
        notes.append("non-standard JSON (NaN/Infinity or control characters) accepted")
        return obj, notes
    except json.JSONDecodeError:
        pass
    fixed, counts = sanitize(text)
    if counts["bare tokens"]:
        notes.append(
            f"{counts['bare tokens']} bare inf/NaN/N/A values read (N/A as null, inf/NaN as "
            "impossible numbers)"
        )
    if counts["strings"]:
        notes.append(
            f"{counts['strings']} strings with control characters or stray backslashes fixed"
        )
    try:
        return json.loads(fixed, strict=False, parse_float=Decimal), notes
    except json.JSONDecodeError as exc:
        first_error = exc
    events, lost = _salvage_events(fixed, path, first_error)
    notes.extend(lost)
    doc: dict[str, Any] = {"traceEvents": events}
    m = _BASE_TIME.search(fixed)
    if m:
        doc["baseTimeNanoseconds"] = int(m.group(1))
    return doc, notes


def _decode_event(dec: json.JSONDecoder, text: str, pos: int) -> tuple[Any, int]:
    """``dec.raw_decode(text, pos)``, tried first on the text up to the next ``},{`` (where
    the event most likely ends). A decode error counts the lines from the start of what it
    was given, so thousands of broken events in a big file each cost the whole file before
    them (45 s for 26,000 in 750 KB); in the slice they cost their own length. The whole text
    is decoded only when the slice may have cut the event (its error is at the slice's end,
    or inside a string the slice cut)."""
    cut = _RESYNC.search(text, pos)
    if cut is None:
        return dec.raw_decode(text, pos)
    part = text[pos : cut.start() + 1]
    try:
        obj, end = dec.raw_decode(part)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(part) - 1 or exc.msg.startswith("Unterminated string"):
            return dec.raw_decode(text, pos)
        exc.pos += pos  # where in the whole text (its line and column stay the slice's)
        raise
    return obj, pos + end


def _salvage_events(
    text: str, path: str | Path, first_error: json.JSONDecodeError
) -> tuple[list, list[str]]:
    """Decode events one by one; skip a broken one, stop where the file was cut."""
    stripped = len(text) - len(text.lstrip())
    if text[stripped : stripped + 1] == "[":
        pos = stripped + 1
    else:
        m = _EVENTS_START.search(text)
        if not m:
            line, col = _line_col(text, first_error.pos)
            raise TraceFormatError(
                path,
                f"invalid JSON ({first_error.msg}) and no traceEvents array found",
                line=line,
                column=col,
                hint="check that this is a Chrome trace file",
            )
        pos = m.end()
    dec = json.JSONDecoder(strict=False)
    events: list = []
    skipped: list[tuple[int, int]] = []
    n = len(text)
    truncated_at = None
    while True:
        pos = _BETWEEN.match(text, pos).end()  # in C: a Python loop took 3 s per 64 MB
        if pos >= n:
            truncated_at = n
            break
        if text[pos] == "]":
            break
        try:
            obj, end = _decode_event(dec, text, pos)
        except json.JSONDecodeError as exc:
            m = _RESYNC.search(text, exc.pos if exc.pos > pos else pos + 1)
            if m is None:
                truncated_at = pos
                break
            skipped.append((pos, m.end()))
            pos = m.end()
            continue
        if isinstance(obj, dict):
            events.append(obj)
        pos = end
    notes = []
    if skipped:
        notes.append(f"skipped {len(skipped)} unreadable events (first at byte {skipped[0][0]})")
    if truncated_at is not None:
        line, col = _line_col(text, truncated_at)
        notes.append(
            f"file is cut short (line {line}, column {col}): kept the {len(events)} complete "
            "events before that point, the rest of the trace is lost"
        )
    if not events:
        line, col = _line_col(text, first_error.pos)
        raise TraceFormatError(
            path,
            f"invalid JSON ({first_error.msg}); no event could be recovered",
            line=line,
            column=col,
            hint="the file may be truncated at its start or not a trace",
        )
    return events, notes
