"""Reading a Flight Recorder pickle without letting it run anything.

A dump is a pickle written by a training job, often on another machine, by whoever could write
to the job's output directory. ``pickle.load`` on it runs whatever callables the file names
(``os.system`` among them). PyTorch's and torch_npu's recorders write only dicts, lists,
tuples, strings, numbers, booleans and None, so nothing here ever needs to be called.

The :class:`pickle.Unpickler` used has a ``find_class`` that admits nothing and a
``persistent_load`` that refuses. Those are the only ways a pickle reaches a callable: every
opcode that names one (``GLOBAL``, ``STACK_GLOBAL``, ``INST``, ``OBJ``'s class, ``EXT*``)
goes through ``find_class``, and the opcodes that call (``REDUCE``, ``NEWOBJ``, ``BUILD``'s
``__setstate__``) act on what is on the stack, which can then only be builtin values (none of
which has a ``__setstate__``, on 3.10 to 3.13). The C unpickler keeps a 12 MB dump's read to
milliseconds; a pure-Python scan of every opcode first took 6 s for 64 such files, so the scan
(:func:`check_opcodes`, every opcode but plain data refused) runs only to name the offending
opcode and its offset once the unpickler has refused, and for tests.

Anything refused raises :class:`TraceFormatError` naming the file and the opcode.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from pathlib import Path
from typing import Any

from dynprof_nb.traces.errors import TraceFormatError

# opcodes that push a builtin scalar or container, fill one, or manage the stack and memo
ALLOWED_OPCODES = frozenset(
    {
        "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP",
        "NONE", "NEWTRUE", "NEWFALSE",
        "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4",
        "FLOAT", "BINFLOAT",
        "STRING", "BINSTRING", "SHORT_BINSTRING",
        "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8",
        "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8",
        "EMPTY_LIST", "APPEND", "APPENDS", "LIST",
        "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
        "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
        "EMPTY_SET", "ADDITEMS", "FROZENSET",
        "GET", "BINGET", "LONG_BINGET", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE",
    }
)  # fmt: skip


class _NothingUnpickler(pickle.Unpickler):
    """An unpickler that can build builtin values only: no class, no callable, no persistent id."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to import {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused a persistent id")


def check_opcodes(data: bytes, path: str | Path) -> None:
    """Raise :class:`TraceFormatError` at the first opcode that is not plain data."""
    try:
        for op, arg, pos in pickletools.genops(data):
            if op.name not in ALLOWED_OPCODES:
                what = f" {arg}" if op.name in ("GLOBAL", "INST") and arg else ""
                raise TraceFormatError(
                    path,
                    f"not a Flight Recorder dump: the pickle asks for {op.name}{what} "
                    f"(it would import or call code); refused, nothing was run",
                    offset=pos,
                    hint="a real dump holds only dicts, lists, strings and numbers",
                )
    except TraceFormatError:
        raise
    except Exception as exc:  # truncated or garbled opcodes
        raise TraceFormatError(path, f"not a readable pickle: {exc}") from None


def loads(data: bytes, path: str | Path) -> Any:
    """The value of pickle ``data`` (read from ``path``, named in errors), built from builtin
    containers and scalars only; nothing in it is ever imported or called."""
    try:
        return _NothingUnpickler(io.BytesIO(data)).load()
    except RecursionError:
        raise TraceFormatError(path, "the pickle nests too deeply") from None
    except Exception as exc:
        check_opcodes(data, path)  # names the opcode that asked for a callable, if one did
        raise TraceFormatError(path, f"not a readable pickle: {exc}") from None
