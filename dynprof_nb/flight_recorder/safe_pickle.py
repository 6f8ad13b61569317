"""Reading a Flight Recorder pickle without letting it run anything, or cost more than stated.

A dump is a pickle written by a training job, often on another machine, by whoever could write
to the job's output directory. ``pickle.load`` on it runs whatever callables the file names
(``os.system`` among them), and even a pickle of plain data can ask for gigabytes: 20 MB of
``EMPTY_SET`` opcodes builds 4.9 GB; a 10-byte ``LONG_BINPUT`` makes the C unpickler size
its memo for 4 billion entries; a list holding one list twice, 60 times over, is 551 bytes
that expand to 2^60 values when walked. PyTorch's and torch_npu's recorders write only dicts,
lists, tuples, strings, numbers, booleans and None, so this module reads those opcodes itself,
one by one, and nothing else:

* an opcode that names or calls code (``GLOBAL``, ``STACK_GLOBAL``, ``INST``, ``OBJ``,
  ``REDUCE``, ``BUILD``, ``NEWOBJ``, ``EXT*``, persistent ids, out-of-band buffers) is refused
  with its name and offset, before anything is built;
* every opcode is charged what it builds against a budget in bytes: :data:`OP_COST` for
  itself, and an estimate of the CPython memory of each object it makes (containers with
  their items). Past the budget the read stops;
* a memo reference (``GET``, or ``DUP``) to an object is charged its whole size again, as if
  it were copied (torch's pickler shares its call-site dicts and strings this way): walking,
  copying, showing or sending the value as a tree costs at most what was charged. A shared
  container is frozen: an opcode that changes it afterwards is refused, which is exactly how
  a cycle (a container that holds itself) is written;
* one string holds at most :data:`MAX_STRING` characters, one container :data:`MAX_ITEMS`
  items, containers nest at most :data:`MAX_DEPTH` deep, an integer has at most
  :data:`MAX_INT_BYTES` bytes;
* a dict key or set item is a string, bytes, a bool, None or an int within
  :data:`MAX_KEY_INT`, nothing else: 60,000 ints that are multiples of 2^61 - 1 all hash to
  0, and a dict of them (841 KB) took 26 s to build, quadratic. CPython randomises the hashes
  of strings and bytes; a small int hashes to itself, so no two collide.

Anything refused raises :class:`TraceFormatError` naming the file, the offset and the limit.
Time is linear in the opcodes read, each charged at least :data:`OP_COST`: a budget of B bytes
reads at most B / 64 opcodes: 10 s of CPU per GiB at worst (MARK, POP_MARK pairs, on a loaded
2-core machine). A real dump of 2,000 collectives with call sites has 180,000 opcodes, read in
0.1 s (the C unpickler: 0.02 s) and charged 53 MiB.
"""

from __future__ import annotations

import codecs
import struct
import sys
from pathlib import Path
from typing import Any

from dynprof_nb.traces.errors import TraceFormatError

MAX_STRING = 16 << 20  # characters of one string (a 100k-rank group's rank list: 0.7 MB)
MAX_ITEMS = 1 << 22  # items of one list, dict, set or tuple (entries: the buffer, 2,000)
MAX_DEPTH = 32  # containers nested (a real dump: 5, an entry's call site's fields)
MAX_INT_BYTES = 64  # of one integer (a real dump's largest: 9, a time in ns)
MAX_KEY_INT = 1 << 31  # |an int key or set item| below it (real dumps: string keys only)
DEFAULT_BUDGET = 1 << 30  # bytes of objects a read may build (the reader's default too)

# what is charged per object built, in bytes: CPython 3.10-3.13 (64-bit) sizes, rounded up
OP_COST = 64  # every opcode, for its time: about a microsecond (a GiB: 16M opcodes)
PUSH_COST = 40  # every value pushed: the stack's bookkeeping (its slots, its cost)
SLOT = 8  # a reference in a list or tuple
LIST_COST, TUPLE_COST, DICT_COST, SET_COST = 64, 48, 72, 224
DICT_ITEM = SET_ITEM = 64
MEMO_ITEM = 160  # a memo entry, and a shared container's cost and depth
INT_COST, FLOAT_COST = 40, 32
_CONTAINERS = frozenset({list, dict, tuple, set, frozenset})
_REFUSED = {
    0x63: "GLOBAL", 0x93: "STACK_GLOBAL", 0x69: "INST", 0x6F: "OBJ", 0x52: "REDUCE",
    0x62: "BUILD", 0x81: "NEWOBJ", 0x92: "NEWOBJ_EX", 0x82: "EXT1", 0x83: "EXT2",
    0x84: "EXT4", 0x50: "PERSID", 0x51: "BINPERSID", 0x97: "NEXT_BUFFER",
    0x98: "READONLY_BUFFER",
}  # fmt: skip
_U2 = struct.Struct("<H").unpack_from
_U4 = struct.Struct("<I").unpack_from
_I4 = struct.Struct("<i").unpack_from
_U8 = struct.Struct("<Q").unpack_from
_F8 = struct.Struct(">d").unpack_from
_LINE = 160  # longest text line of a number or a memo index (protocol 0)
_sizeof = sys.getsizeof


class _Reader:
    """One read of one pickle: a stack machine for the plain-data opcodes, with a meter.

    Beside each value on the stack it keeps what the value costs as a tree (``costs``) and
    how many containers deep it is (``levels``); for each container in the memo, the same in
    ``tree`` and ``depth`` (by id: the memo keeps it alive), and the shared ones' ids in
    ``frozen``."""

    def __init__(self, data: bytes, path: str | Path, budget: int) -> None:
        self.data = data
        self.view = memoryview(data)
        self.path = path
        self.budget = budget
        self.spent = 0
        self.pos = 0
        self.at = 0  # offset of the opcode being read, for errors
        self.stack: list[Any] = []
        self.costs: list[int] = []
        self.levels: list[int] = []
        self.marks: list[int] = []  # stack lengths at each MARK
        self.memo: dict[int, tuple[Any, int]] = {}  # key -> (value, cost when a scalar)
        self.tree: dict[int, int] = {}
        self.depth: dict[int, int] = {}
        self.frozen: set[int] = set()
        self.kept: list[Any] = []  # containers shared by DUP: alive, so their ids stay theirs
        self.result: Any = None
        self.stopped = False

    # -- errors -----------------------------------------------------------------------------

    def fail(self, message: str) -> TraceFormatError:
        return TraceFormatError(self.path, f"not a readable pickle: {message}", offset=self.at)

    def over(self, what: str) -> TraceFormatError:
        return TraceFormatError(
            self.path,
            f"not a Flight Recorder dump: {what}",
            offset=self.at,
            hint="a real dump holds only small dicts, lists, strings and numbers",
        )

    def out_of_budget(self) -> TraceFormatError:
        from dynprof_nb.traces.formats.common.budget import human

        return TraceFormatError(
            self.path,
            f"this pickle builds over {human(self.budget)} of objects (a shared object is "
            "counted each time it is used); refused",
            offset=self.at,
            hint="the dumps of one load share DYNPROF_NB_FR_MAX_BUILD (default 1 GiB): set it "
            "higher to read this; a real dump of 2,000 collectives with call sites is charged "
            "about 55 MiB",
        )

    # -- reading the stream -----------------------------------------------------------------

    def run(self) -> Any:
        """The opcodes one by one; the frequent ones of real dumps inline, with the state in
        locals (a method call each took three times as long), the others through
        ``_TABLE``. ``spent`` here adds to what the methods charge in ``self.spent``."""
        data, table, memo = self.data, _TABLE, self.memo
        stack, costs, levels, marks = self.stack, self.costs, self.levels, self.marks
        end, budget, containers = len(data), self.budget, _CONTAINERS
        empties, fills = _EMPTIES, _FILLS
        pos = spent = 0
        while True:
            if pos >= end:
                self.at = pos
                raise self.fail("the pickle ends before its STOP opcode (a truncated file)")
            op = data[pos]
            spent += OP_COST
            if op == 0x68 and pos + 1 < end and data[pos + 1] in memo:  # BINGET
                value, cost = memo[data[pos + 1]]
                pos += 2
                if type(value) in containers:
                    self.at = pos - 2
                    self.share(value)
                else:
                    spent += PUSH_COST + cost
                    stack.append(value)
                    costs.append(cost)
                    levels.append(0)
            elif op == 0x28 and len(marks) <= MAX_DEPTH:  # MARK
                pos += 1
                marks.append(len(stack))
            elif op == 0x4B and pos + 1 < end:  # BININT1: 0-255, Python's cached ints
                stack.append(data[pos + 1])
                pos += 2
                spent += PUSH_COST
                costs.append(SLOT)
                levels.append(0)
            elif op == 0x4E:  # NONE
                pos += 1
                spent += PUSH_COST
                stack.append(None)
                costs.append(SLOT)
                levels.append(0)
            elif op in empties:  # EMPTY_LIST, EMPTY_DICT, EMPTY_SET
                kind, cost = empties[op]
                pos += 1
                spent += PUSH_COST + cost
                stack.append(kind())
                costs.append(cost)
                levels.append(1)
            elif op in fills:  # APPENDS, SETITEMS, ADDITEMS
                self.at = pos
                pos += 1
                self.fill(*fills[op])
            elif op == 0x8C and pos + 1 < end and pos + 2 + data[pos + 1] <= end:
                n = data[pos + 1]  # SHORT_BINUNICODE
                try:
                    value = str(data[pos + 2 : pos + 2 + n], "utf-8", "surrogatepass")
                except UnicodeDecodeError:
                    self.at = pos
                    raise self.fail("a string that is not UTF-8") from None
                pos += 2 + n
                cost = SLOT + _sizeof(value)
                spent += PUSH_COST + cost
                stack.append(value)
                costs.append(cost)
                levels.append(0)
            else:  # the rest, and the inline ones' errors
                self.at, self.pos = pos, pos + 1
                handler = table.get(op)
                if handler is None:
                    self.refuse_or_fail(op)
                handler(self)
                if self.stopped:
                    self.spent += spent
                    return self.result
                pos = self.pos
            if spent + self.spent > budget:
                self.at = pos
                self.spent += spent
                raise self.out_of_budget()

    def take(self, n: int) -> int:
        """Skip ``n`` bytes of argument; their start."""
        start = self.pos
        if n < 0 or start + n > len(self.data):
            raise self.fail("the pickle ends inside an opcode's argument (a truncated file)")
        self.pos = start + n
        return start

    def line(self, limit: int = _LINE) -> bytes:
        """A protocol-0 argument: the bytes up to the newline, at most ``limit`` of them."""
        start = self.pos
        stop = self.data.find(b"\n", start, start + limit + 1)
        if stop < 0:
            raise self.fail(f"a text argument longer than {limit:,} bytes, or not ended")
        self.pos = stop + 1
        return self.data[start:stop]

    def refuse_or_fail(self, op: int) -> None:
        name = _REFUSED.get(op)
        if name is None:
            raise self.fail(f"unknown opcode {op:#04x}")
        what = ""
        if name in ("GLOBAL", "INST"):
            for _ in range(2):
                stop = self.data.find(b"\n", self.pos, self.pos + 200)
                if stop < 0:
                    break
                what += " " + self.data[self.pos : stop].decode("ascii", "replace")
                self.pos = stop + 1
        elif name == "STACK_GLOBAL" and len(self.stack) >= 2:
            module, qualname = self.stack[-2:]
            if isinstance(module, str) and isinstance(qualname, str):
                what = f" {module[:100]}.{qualname[:100]}"
        raise TraceFormatError(
            self.path,
            f"not a Flight Recorder dump: the pickle asks for {name}{what} (it would import "
            "or call code); refused, nothing was run",
            offset=self.at,
            hint="a real dump holds only dicts, lists, strings and numbers",
        )

    # -- the stack --------------------------------------------------------------------------

    def fence(self) -> int:
        return self.marks[-1] if self.marks else 0

    def pop(self) -> tuple[Any, int, int]:
        """The top value, its cost and its levels."""
        if len(self.stack) <= self.fence():
            raise self.fail("an opcode takes more values than the stack holds")
        return self.stack.pop(), self.costs.pop(), self.levels.pop()

    def pop_mark(self) -> tuple[list[Any], int, int]:
        """The values above the last MARK, their total cost and their deepest levels."""
        if not self.marks:
            raise self.fail("an opcode needs a MARK that is not there")
        mark = self.marks.pop()
        items = self.stack[mark:]
        cost = sum(self.costs[mark:])
        level = max(self.levels[mark:], default=0)
        del self.stack[mark:], self.costs[mark:], self.levels[mark:]
        return items, cost, level

    def push(self, value: Any, level: int, cost: int = -1) -> None:
        """Push a new or shared value, charged ``cost`` (its size as a scalar by default)."""
        if cost < 0:
            cost = SLOT + _sizeof(value)
        self.spent += PUSH_COST + cost
        self.stack.append(value)
        self.costs.append(cost)
        self.levels.append(level)

    def push_container(self, value: Any, cost: int, level: int = 1) -> None:
        """Push a container just built (its items' cost included in ``cost``)."""
        if level > MAX_DEPTH:
            raise self.over(f"containers nested over {MAX_DEPTH} deep")
        self.push(value, level, cost)

    def fill(self, kind: type, item_cost: int) -> None:
        """APPENDS, SETITEMS, ADDITEMS: the values above the MARK into the container below it
        (``item_cost`` per value), unless it is shared: that would be a cycle."""
        items, cost, level = self.pop_mark()
        stack = self.stack
        if len(stack) <= self.fence():
            raise self.fail("an opcode takes more values than the stack holds")
        target = stack[-1]
        if type(target) is not kind:
            raise self.fail(f"items put into a {type(target).__name__}, not a {kind.__name__}")
        key = id(target)
        if key in self.frozen:
            raise self.over(
                "a container that holds itself (a cycle), or changed after it was shared"
            )
        if kind is dict and len(items) % 2:
            raise self.fail("a dict item with a key and no value")
        count = len(items) // 2 if kind is dict else len(items)
        if len(target) + count > MAX_ITEMS:
            raise self.over(f"a {kind.__name__} of over {MAX_ITEMS:,} items")
        added = cost + item_cost * len(items)
        self.spent += item_cost * len(items)
        if level >= self.levels[-1]:
            if level + 1 > MAX_DEPTH:
                raise self.over(f"containers nested over {MAX_DEPTH} deep")
            self.levels[-1] = level + 1
        self.costs[-1] += added
        if key in self.tree:  # in the memo: a GET is charged what it holds now
            self.tree[key], self.depth[key] = self.costs[-1], self.levels[-1]
        if kind is not list:
            self.check_keys(items[::2] if kind is dict else items)
        try:
            if kind is list:
                target.extend(items)
            elif kind is dict:
                for i in range(0, len(items), 2):
                    target[items[i]] = items[i + 1]
            else:
                target.update(items)
        except TypeError:
            raise self.fail("a dict key or set item that cannot be one (a list or dict)") from None

    def check_keys(self, keys: list[Any]) -> None:
        """Refuse a key whose hash an attacker could make collide with many others'."""
        for key in keys:
            kind = type(key)
            if kind is str or kind is bytes or key is None or kind is bool:
                continue
            if kind is int and -MAX_KEY_INT < key < MAX_KEY_INT:
                continue
            what = "an integer over 2^31" if kind is int else f"a {kind.__name__}"
            raise self.over(
                f"a dict key or set item that is {what} (only strings, bytes, bools, None and "
                "small integers are read as keys: others can be made to share a hash, and "
                "building the dict takes quadratic time)"
            )

    def text(self, n: int) -> str:
        if n > MAX_STRING:
            raise self.over(f"a string of {n:,} bytes, over the limit of {MAX_STRING:,}")
        start = self.take(n)
        try:
            return str(self.view[start : start + n], "utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise self.fail(f"a string that is not UTF-8 ({exc.reason})") from None

    def blob(self, n: int, kind: type = bytes) -> Any:
        if n > MAX_STRING:
            raise self.over(f"a bytes value of {n:,} bytes, over the limit of {MAX_STRING:,}")
        start = self.take(n)
        return kind(self.view[start : start + n])

    def ascii(self, raw: bytes) -> str:
        """A Python 2 ``str`` (STRING, BINSTRING), read as pickle does by default: ASCII."""
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            raise self.fail("a Python 2 string that is not ASCII") from None

    def integer(self, n: int) -> int:
        if n > MAX_INT_BYTES:
            raise self.over(f"an integer of {n:,} bytes (the limit is {MAX_INT_BYTES})")
        start = self.take(n)
        return int.from_bytes(self.data[start : start + n], "little", signed=True)

    def number(self, raw: bytes) -> int:
        try:
            return int(raw.rstrip(b"L"))
        except ValueError:
            raise self.fail(f"not an integer: {raw[:40]!r}") from None

    # -- the memo: sharing ------------------------------------------------------------------

    def memo_get(self, key: int) -> None:
        """Push the memo's value again, charged its whole size; a container is frozen."""
        try:
            value, cost = self.memo[key]
        except KeyError:
            raise self.fail(f"a reference to memo entry {key}, never stored") from None
        if type(value) in _CONTAINERS:
            self.share(value)
        else:
            self.push(value, 0, cost)

    def share(self, value: Any) -> None:
        """Push a container of the memo again, frozen, charged all it holds."""
        key = id(value)
        self.frozen.add(key)
        self.push(value, self.depth[key], self.tree[key])

    def memo_put(self, key: int) -> None:
        if len(self.stack) <= self.fence():
            raise self.fail("a memo PUT with nothing on the stack")
        if key not in self.memo:
            self.spent += MEMO_ITEM
        value = self.stack[-1]
        if type(value) in _CONTAINERS:
            self.tree[id(value)], self.depth[id(value)] = self.costs[-1], self.levels[-1]
        self.memo[key] = (value, self.costs[-1])


# -- the other opcodes: each a function of the reader ------------------------------------------


def _proto(r: _Reader) -> None:
    version = r.data[r.take(1)]
    if version > 5:
        raise r.fail(f"pickle protocol {version}, which no Python writes")


def _frame(r: _Reader) -> None:
    r.take(8)  # a length hint for buffered readers; the data is here already


def _stop(r: _Reader) -> None:
    r.result = r.pop()[0]
    r.stopped = True


def _mark(r: _Reader) -> None:
    raise r.over(f"containers nested over {MAX_DEPTH} deep (MARK)")  # the inline one did not


def _binget(r: _Reader) -> None:
    r.memo_get(r.data[r.take(1)])


def _binput(r: _Reader) -> None:
    r.memo_put(r.data[r.take(1)])


def _memoize(r: _Reader) -> None:
    r.memo_put(len(r.memo))


def _pop(r: _Reader) -> None:
    if len(r.stack) > r.fence():
        r.pop()
    elif r.marks:
        r.marks.pop()
    else:
        raise r.fail("POP on an empty stack")


def _pop_mark(r: _Reader) -> None:
    r.pop_mark()


def _dup(r: _Reader) -> None:
    if len(r.stack) <= r.fence():
        raise r.fail("DUP on an empty stack")
    value, cost = r.stack[-1], r.costs[-1]
    if type(value) in _CONTAINERS:
        r.kept.append(value)
        r.frozen.add(id(value))
        r.push(value, r.levels[-1], cost)
    else:
        r.push(value, 0, cost)


def _constant(value: Any):
    def push(r: _Reader) -> None:
        r.push(value, 0, SLOT)

    return push


def _int_line(r: _Reader) -> None:
    raw = r.line()
    if raw in (b"00", b"01"):
        r.push(raw == b"01", 0, SLOT)
    else:
        r.push(r.number(raw), 0)


def _long_line(r: _Reader) -> None:
    r.push(r.number(r.line()), 0)


def _binint(r: _Reader) -> None:
    r.push(_I4(r.data, r.take(4))[0], 0, INT_COST)


def _binint1(r: _Reader) -> None:
    r.push(r.data[r.take(1)], 0, SLOT)


def _binint2(r: _Reader) -> None:
    r.push(_U2(r.data, r.take(2))[0], 0, INT_COST)


def _long1(r: _Reader) -> None:
    r.push(r.integer(r.data[r.take(1)]), 0)


def _long4(r: _Reader) -> None:
    r.push(r.integer(_I4(r.data, r.take(4))[0]), 0)


def _float_line(r: _Reader) -> None:
    raw = r.line()
    try:
        value = float(raw)
    except ValueError:
        raise r.fail(f"not a number: {raw[:40]!r}") from None
    r.push(value, 0, FLOAT_COST)


def _binfloat(r: _Reader) -> None:
    r.push(_F8(r.data, r.take(8))[0], 0, FLOAT_COST)


def _short_binunicode(r: _Reader) -> None:
    r.push(r.text(r.data[r.take(1)]), 0)


def _binunicode(r: _Reader) -> None:
    r.push(r.text(_U4(r.data, r.take(4))[0]), 0)


def _binunicode8(r: _Reader) -> None:
    r.push(r.text(_U8(r.data, r.take(8))[0]), 0)


def _unicode_line(r: _Reader) -> None:
    raw = r.line(6 * MAX_STRING)  # raw-unicode-escape: up to 6 bytes a character
    try:
        value = codecs.raw_unicode_escape_decode(raw)[0]
    except UnicodeDecodeError:
        raise r.fail("a protocol-0 string that does not decode") from None
    if len(value) > MAX_STRING:
        raise r.over(f"a string of {len(value):,} characters, over the limit of {MAX_STRING:,}")
    r.push(value, 0)


def _string_line(r: _Reader) -> None:
    raw = r.line(4 * MAX_STRING + 2)
    if len(raw) < 2 or raw[:1] != raw[-1:] or raw[:1] not in (b"'", b'"'):
        raise r.fail("a STRING argument that is not quoted")
    try:
        decoded = codecs.escape_decode(raw[1:-1])[0]
    except ValueError:
        raise r.fail("a STRING argument that does not decode") from None
    r.push(r.ascii(decoded), 0)


def _binstring(r: _Reader) -> None:
    r.push(r.ascii(r.blob(_I4(r.data, r.take(4))[0])), 0)


def _short_binstring(r: _Reader) -> None:
    r.push(r.ascii(r.blob(r.data[r.take(1)])), 0)


def _binbytes(r: _Reader) -> None:
    r.push(r.blob(_U4(r.data, r.take(4))[0]), 0)


def _short_binbytes(r: _Reader) -> None:
    r.push(r.blob(r.data[r.take(1)]), 0)


def _binbytes8(r: _Reader) -> None:
    r.push(r.blob(_U8(r.data, r.take(8))[0]), 0)


def _bytearray8(r: _Reader) -> None:
    r.push(r.blob(_U8(r.data, r.take(8))[0], bytearray), 0)


def _empty(kind: type, cost: int):
    def push(r: _Reader) -> None:
        r.push_container(kind(), cost)

    return push


def _from_mark(kind: type, base: int, per_item: int):
    """LIST, TUPLE, FROZENSET, DICT: a container of the values above the MARK."""

    def build(r: _Reader) -> None:
        items, cost, level = r.pop_mark()
        if kind is dict and len(items) % 2:
            raise r.fail("a DICT with a key and no value")
        count = len(items) // 2 if kind is dict else len(items)
        if count > MAX_ITEMS:
            raise r.over(f"a {kind.__name__} of over {MAX_ITEMS:,} items")
        if kind is not list and kind is not tuple:
            r.check_keys(items[::2] if kind is dict else items)
        try:
            value = dict(zip(items[::2], items[1::2], strict=True)) if kind is dict else kind(items)
        except TypeError:
            raise r.fail("a dict key or set item that cannot be one (a list or dict)") from None
        r.push_container(value, base + per_item * len(items) + cost, level + 1)

    return build


def _tuple_n(n: int):
    def build(r: _Reader) -> None:
        popped = [r.pop() for _ in range(n)][::-1]
        value = tuple(p[0] for p in popped)
        cost = TUPLE_COST + SLOT * n + sum(p[1] for p in popped)
        r.push_container(value, cost, max(p[2] for p in popped) + 1)

    return build


def _one(kind: type, item_cost: int, pairs: int):
    """APPEND, SETITEM: one value (or key and value) into the container below."""

    def put(r: _Reader) -> None:
        r.marks.append(len(r.stack) - pairs)
        if r.marks[-1] < (r.marks[-2] if len(r.marks) > 1 else 0) + 1:
            r.marks.pop()
            raise r.fail("an opcode takes more values than the stack holds")
        r.fill(kind, item_cost)

    return put


def _get(r: _Reader) -> None:
    r.memo_get(r.number(r.line()))


def _long_binget(r: _Reader) -> None:
    r.memo_get(_U4(r.data, r.take(4))[0])


def _put(r: _Reader) -> None:
    r.memo_put(r.number(r.line()))


def _long_binput(r: _Reader) -> None:
    r.memo_put(_U4(r.data, r.take(4))[0])


_TABLE = {
    0x80: _proto, 0x95: _frame, 0x2E: _stop, 0x28: _mark, 0x30: _pop, 0x31: _pop_mark,
    0x32: _dup, 0x4E: _constant(None), 0x88: _constant(True), 0x89: _constant(False),
    0x49: _int_line, 0x4C: _long_line, 0x4A: _binint, 0x4B: _binint1, 0x4D: _binint2,
    0x8A: _long1, 0x8B: _long4, 0x46: _float_line, 0x47: _binfloat,
    0x8C: _short_binunicode, 0x58: _binunicode, 0x8D: _binunicode8, 0x56: _unicode_line,
    0x53: _string_line, 0x54: _binstring, 0x55: _short_binstring,
    0x42: _binbytes, 0x43: _short_binbytes, 0x8E: _binbytes8, 0x96: _bytearray8,
    0x29: _empty(tuple, TUPLE_COST),
    0x6C: _from_mark(list, LIST_COST, SLOT), 0x74: _from_mark(tuple, TUPLE_COST, SLOT),
    0x64: _from_mark(dict, DICT_COST, DICT_ITEM // 2),
    0x91: _from_mark(frozenset, SET_COST, SET_ITEM),
    0x85: _tuple_n(1), 0x86: _tuple_n(2), 0x87: _tuple_n(3),
    0x61: _one(list, SLOT, 1), 0x73: _one(dict, DICT_ITEM // 2, 2),
    0x67: _get, 0x68: _binget, 0x6A: _long_binget,
    0x70: _put, 0x71: _binput, 0x72: _long_binput, 0x94: _memoize,
}  # fmt: skip


_EMPTIES = {0x5D: (list, LIST_COST), 0x7D: (dict, DICT_COST), 0x8F: (set, SET_COST)}
_FILLS = {0x65: (list, SLOT), 0x75: (dict, DICT_ITEM // 2), 0x90: (set, SET_ITEM)}


def loads_counted(data: bytes, path: str | Path, budget: int = DEFAULT_BUDGET) -> tuple[Any, int]:
    """The value of pickle ``data`` (read from ``path``, named in errors) and the bytes its
    read was charged: builtin containers and scalars only, no cycle, within ``budget``."""
    reader = _Reader(data, path, budget)
    try:
        value = reader.run()
    except RecursionError:  # nothing here recurses; a hash of a deep key might
        raise reader.over("the pickle nests too deeply") from None
    except MemoryError:
        raise TraceFormatError(
            path,
            "ran out of memory reading this pickle, within its budget: free memory, or set "
            "DYNPROF_NB_FR_MAX_BUILD lower so that such a dump is refused sooner",
            offset=reader.at,
        ) from None
    return value, reader.spent


def loads(data: bytes, path: str | Path, budget: int = DEFAULT_BUDGET) -> Any:
    """The value of pickle ``data`` (read from ``path``, named in errors), built from builtin
    containers and scalars only, within ``budget`` bytes; nothing in it is ever imported or
    called."""
    return loads_counted(data, path, budget)[0]
