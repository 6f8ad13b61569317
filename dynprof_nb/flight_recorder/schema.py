"""What each field of a Flight Recorder dump may hold, checked before anything uses it.

The frames and the analysis read a dump's fields as torch writes them: ``process_group`` a
pair of strings, sizes lists of lists of ints, ``frames`` a list of small dicts, ranks
non-negative ints. A field of another shape (a string where the pair belongs, a rank of
``True`` or ``-5``, a 1 MB name) is refused here with the file and the field
(``entries[12].process_group``), not left to raise a raw ``TypeError`` later, or to be
expanded character by character. Keys this module does not know are left as they are: the
unpickler has bounded them already.

A group's ``ranks`` is the repr of a list, ``'[0, 1, 2]'``; it is read by a small parser
(digits and commas, nothing evaluated) once per distinct string: 2,000 groups that share
one 1 MB rank list cost one parse.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dynprof_nb.traces.errors import TraceFormatError

MAX_NAME = 64 << 10  # characters of a name, desc, state, dtype, file name of a call site
MAX_RANK = (1 << 31) - 1  # torch's ranks are C ints
MAX_MEMBERS = 1 << 24  # group members listed in one dump, all groups together
MAX_DIMS = 64  # dimensions of one tensor's size
_SEQ_DIGITS = 18  # a number written as text (torch's JSON status: "4"), within int64
_INT64 = 1 << 63
_HINT = "a Flight Recorder dump holds what torch writes there; this file does not"

# entry field -> what it must be (see _check_field)
ENTRY_FIELDS = {
    "process_group": "pair",
    "profiling_name": "name",
    "state": "name",
    "thread_name": "name",
    "thread_id": "name_or_int",
    "collective_seq_id": "seq",
    "p2p_seq_id": "seq",
    "op_id": "count",
    "record_id": "count",
    "pg_id": "name_or_int",
    "timeout_ms": "count",
    "time_created_ns": "count",
    "time_discovered_started_ns": "count",
    "time_discovered_completed_ns": "count",
    "input_sizes": "sizes",
    "output_sizes": "sizes",
    "input_dtypes": "names",
    "output_dtypes": "names",
    "is_p2p": "flag",
    "retired": "flag",
    "frames": "frames",
}
STATUS_FIELDS = ("last_enqueued_collective", "last_started_collective", "last_completed_collective")


def describe(value: Any) -> str:
    """A short word for what a field holds, for errors (never the whole value)."""
    if isinstance(value, str):
        return f"a string of {len(value):,} characters" if len(value) > 40 else f"{value!r}"
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return f"the integer {value}" if abs(value) < 10**20 else "a huge integer"
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return f"a {type(value).__name__} of {len(value):,} items"
    return f"a {type(value).__name__}"


class Checker:
    """Checks one dump's fields; parsed rank lists are shared through ``cache`` (one per
    load: equal strings in every dump of it are parsed once)."""

    def __init__(self, path: str | Path, cache: dict[str, list[int]] | None = None) -> None:
        self.path = path
        self.cache = {} if cache is None else cache
        self.members = 0

    def error(self, where: str, expected: str, value: Any) -> TraceFormatError:
        return TraceFormatError(
            self.path, f"{where}: expected {expected}, got {describe(value)}", hint=_HINT
        )

    # -- scalars ----------------------------------------------------------------------------

    def name(self, value: Any, where: str, ints: bool = False) -> None:
        if value is None or (ints and type(value) is int):
            return
        if not isinstance(value, str):
            raise self.error(where, "a string" + (" or an integer" if ints else ""), value)
        if len(value) > MAX_NAME:
            raise self.error(where, f"at most {MAX_NAME:,} characters", value)

    def count(self, value: Any, where: str) -> None:
        """A sequence number, id or time: an int (not a bool) that fits a 64-bit column, its
        digits, or None."""
        if value is None or (type(value) is int and -_INT64 <= value < _INT64):
            return
        if isinstance(value, str):
            text = value.strip().removeprefix("-")
            if text.isascii() and text.isdigit() and len(text) <= _SEQ_DIGITS:
                return
        raise self.error(where, "a 64-bit integer", value)

    def seq(self, value: Any, where: str) -> None:
        """A sequence id: as :meth:`count`, never negative (torch counts them from 0; a -1
        would match no peer's collective and be shown as one that never ran)."""
        self.count(value, where)
        if (type(value) is int and value < 0) or (
            isinstance(value, str) and value.strip().startswith("-")
        ):
            raise self.error(where, "a sequence id (a non-negative 64-bit integer)", value)

    def rank(self, value: Any, where: str) -> int:
        if type(value) is not int or not 0 <= value <= MAX_RANK:
            raise self.error(where, f"a rank (an integer from 0 to {MAX_RANK})", value)
        return value

    # -- an entry's fields ------------------------------------------------------------------

    def entry(self, e: Any, where: str) -> None:
        if not isinstance(e, dict):
            raise self.error(where, "a dict (one recorded collective)", e)
        for key, kind in ENTRY_FIELDS.items():
            if key in e:
                self.field(kind, e[key], f"{where}.{key}")

    def field(self, kind: str, value: Any, where: str) -> None:
        if kind == "name":
            self.name(value, where)
        elif kind == "name_or_int":
            self.name(value, where, ints=True)
        elif kind == "count":
            self.count(value, where)
        elif kind == "seq":
            self.seq(value, where)
        elif kind == "flag":
            if value is not None and type(value) not in (bool, int):
                raise self.error(where, "True or False", value)
        elif kind == "pair":
            self.pair(value, where)
        elif kind == "names":
            for i, item in enumerate(self.sequence(value, where, "a list of strings")):
                self.name(item, f"{where}[{i}]")
        elif kind == "sizes":
            self.sizes(value, where)
        else:
            self.frames(value, where)

    def sequence(self, value: Any, where: str, expected: str) -> list | tuple:
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            raise self.error(where, expected, value)
        return value

    def pair(self, value: Any, where: str) -> None:
        """``process_group``: (name, desc), as a tuple (pickle) or a list (JSON)."""
        items = self.sequence(value, where, "a (name, desc) pair of strings")
        if len(items) > 2:
            raise self.error(where, "a (name, desc) pair of strings", value)
        for i, item in enumerate(items):
            self.name(item, f"{where}[{i}]", ints=True)

    def sizes(self, value: Any, where: str) -> None:
        for i, dims in enumerate(self.sequence(value, where, "a list of tensor sizes")):
            shape = self.sequence(dims, f"{where}[{i}]", "a tensor size (a list of integers)")
            if len(shape) > MAX_DIMS:
                raise self.error(f"{where}[{i}]", f"at most {MAX_DIMS} dimensions", shape)
            for j, n in enumerate(shape):
                if type(n) is not int:
                    raise self.error(f"{where}[{i}][{j}]", "an integer", n)

    def frames(self, value: Any, where: str) -> None:
        """Call sites: dicts of strings and numbers (name, filename, line), shown in the frame
        as they are, so nothing in them may be a container."""
        for i, frame in enumerate(self.sequence(value, where, "a list of call sites")):
            if not isinstance(frame, dict):
                raise self.error(f"{where}[{i}]", "a call site (a dict)", frame)
            for key, item in frame.items():
                at = f"{where}[{i}].{key if isinstance(key, str) and len(key) <= 40 else '?'}"
                if key == "line":
                    self.count(item, at)
                elif not isinstance(item, (int, float)):  # a name, a file, or what torch adds
                    self.name(item, at)

    # -- groups -----------------------------------------------------------------------------

    def ranks(self, spec: Any, where: str) -> list[int]:
        """A group's members: the recorder's ``'[0, 1]'`` (parsed once per distinct string),
        or a list of ranks."""
        if isinstance(spec, str):
            ranks = self.cache.get(spec)
            if ranks is None:
                ranks = self.cache[spec] = self.parse(spec, where)
        elif isinstance(spec, (list, tuple)):
            ranks = sorted({self.rank(r, f"{where}[{i}]") for i, r in enumerate(spec)})
        elif spec is None:
            ranks = []
        else:
            raise self.error(where, "a list of ranks, such as '[0, 1]'", spec)
        self.members += len(ranks)
        if self.members > MAX_MEMBERS:
            raise self.error(where, f"at most {MAX_MEMBERS:,} members in all groups", spec)
        return ranks

    def parse(self, text: str, where: str) -> list[int]:
        body = text.strip()
        if body[:1] in "[(" and body[-1:] in "])" and body:
            body = body[1:-1]
        parts = [p.strip() for p in body.split(",")] if body.strip() else []
        if parts and not parts[-1]:
            parts.pop()  # '[3,]'
        ranks = []
        for p in parts:
            if not (p.isascii() and p.isdigit() and len(p) <= 10):
                raise self.error(where, "a list of ranks, such as '[0, 1]'", text)
            ranks.append(self.rank(int(p), where))
        return sorted(set(ranks))

    def group(self, key: Any, cfg: Any, where: str) -> tuple[str, str, list[int]] | None:
        """(name, desc, ranks) of a ``pg_config`` item; None for gloo's empty placeholder."""
        self.name(key, f"{where} (its key)", ints=True)
        if not isinstance(cfg, dict):
            raise self.error(where, "a dict (name, desc, ranks)", cfg)
        self.name(cfg.get("name"), f"{where}.name", ints=True)
        self.name(cfg.get("desc"), f"{where}.desc")
        ranks = self.ranks(cfg.get("ranks"), f"{where}.ranks")
        name = str(cfg.get("name", key))
        if name == "" and not ranks:
            return None
        return name, str(cfg.get("desc") or ""), ranks

    def status(self, key: Any, st: Any, where: str) -> None:
        self.name(key, f"{where} (its key)", ints=True)
        if not isinstance(st, dict):
            raise self.error(where, "a dict (the last collectives)", st)
        for field in STATUS_FIELDS:
            self.count(st.get(field), f"{where}.{field}")
