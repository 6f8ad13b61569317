"""Generate the hostile Flight Recorder dumps (issue 42) into a folder.

Each case is a dump that cost a naive reader gigabytes, hours or a raw exception, paired with
what the reader must do: ``expect`` "error" (a TraceFormatError matching ``match``, naming the
field ``where`` when given) or "load"; ``mode`` "read" (``read_dumps``) or "frame" (``load``,
then the frame, its groups and the analysis shown as text and HTML); ``env`` the environment
it is read under. The small cases (:func:`small_cases`, each under 64 KiB) are kept beside
this module as files (``python make_fr_corpus.py tests/data/hostile/flight_recorder
--small``); the large ones (:func:`large_cases`, 0.1-25 MB) are made by the test. Every
pickle here is written by this module from objects or raw opcodes it builds itself: nothing
here is unpickled by anything but the safe reader.

tests/flight_recorder/test_hostile_dumps.py reads each in a child process under an
address-space limit and a deadline.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import struct
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

SMALL = 64 << 10


@dataclass
class Case:
    name: str
    data: bytes
    expect: str  # "error" or "load"
    match: str = ""  # regex the message must match
    where: str = ""  # the field the message must name
    mode: str = "read"  # "read": read_dumps; "frame": load, shown, analysed
    env: dict = field(default_factory=dict)
    note: str = ""


def _dump(entries=None, pg_config=None, pg_status=None, **extra) -> dict:
    """A dump-shaped dict as torch writes it (version 2.10), one gloo group by default."""
    value = {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
        if pg_config is None
        else pg_config,
        "pg_status": {} if pg_status is None else pg_status,
        "entries": [] if entries is None else entries,
    }
    value.update(extra)
    return value


def _entry(seq: int = 1, **fields) -> dict:
    e = {
        "record_id": seq, "pg_id": 0, "process_group": ("0", "default_pg"),
        "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
        "profiling_name": "nccl:all_reduce", "time_created_ns": 1_700_000_000_000_000_000 + seq,
        "input_sizes": [[64]], "input_dtypes": ["Float"], "output_sizes": [[64]],
        "output_dtypes": ["Float"], "state": "scheduled", "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None, "retired": False, "timeout_ms": 600000,
        "is_p2p": False, "thread_name": "python", "thread_id": "1",
        "frames": [{"name": "main", "filename": "train.py", "line": 3}],
    }  # fmt: skip
    e.update(fields)
    return e


def _pickled(value, protocol: int = 2) -> bytes:
    return pickle.dumps(value, protocol=protocol)


def _doubling(levels: int) -> list:
    """``x = [x, x]``, ``levels`` times: a few bytes a level, 2^levels values when walked."""
    x: list = []
    for _ in range(levels):
        x = [x, x]
    return x


def _cycle_list() -> list:
    x: list = []
    x.append(x)
    x.append(x)
    return x


def _cycle_dict() -> dict:
    d: dict = {"name": "main"}
    d["self"] = d
    return d


def _cycle_tuple() -> tuple:
    """A tuple that holds a list that holds the tuple: pickle writes it through its memo."""
    inner: list = []
    t = (inner,)
    inner.append(t)
    return t


_M61 = (1 << 61) - 1  # k * (2^61 - 1) hashes to 0 on 64-bit CPython, for every k


def _colliding(n: int, values: bool) -> bytes:
    """Opcodes pushing n ints that all hash to 0 (each followed by a value 0 for a dict)."""
    out = []
    for k in range(1, n + 1):
        raw = (k * _M61).to_bytes(11, "little", signed=True)
        out.append(b"\x8a\x0b" + raw + (b"K\x00" if values else b""))
    return b"".join(out)


def _with_hole(value_at, build: bytes) -> bytes:
    """A dump pickled with ``build`` (raw opcodes of one value) where ``value_at`` put the
    placeholder string: a colliding dict or set written without Python ever building it."""
    data = _pickled(value_at(_HOLE))
    hole = b"X" + struct.pack("<I", len(_HOLE)) + _HOLE.encode()
    assert data.count(hole) == 1
    return data.replace(hole, build)


_HOLE = "@@colliding@@"


def _hash_dict(n: int) -> bytes:
    return b"}(" + _colliding(n, values=True) + b"u"


def _hash_set(n: int) -> bytes:
    return b"\x8f(" + _colliding(n, values=False) + b"\x90"


def _frames_of(value) -> bytes:
    return _pickled(_dump(entries=[_entry(frames=value)]))


def small_cases() -> list[Case]:
    return [
        # the shapes, small
        Case("dag60_desc", _pickled(_dump(pg_config={"0": {"name": "0", "desc": _doubling(60),
             "ranks": "[0]"}})), "error", "nested over 32 deep|builds over",
             note="the issue's 551 bytes: x = [x, x] 60 levels deep in pg_config.desc"),
        Case("dag28_desc", _pickled(_dump(pg_config={"0": {"name": "0", "desc": _doubling(28),
             "ranks": "[0]"}})), "error", "builds over",
             note="the same within the nesting cap: 2^28 values, refused by the budget"),
        Case("dag60_process_group", _pickled(_dump(entries=[_entry(
             process_group=_doubling(60))])), "error", "nested over 32 deep|builds over",
             mode="frame"),
        Case("dag28_frames", _frames_of(_doubling(28)), "error", "builds over", mode="frame"),
        Case("dag20_frames", _frames_of(_doubling(20)), "error", "expected", "entries[0].frames",
             mode="frame", note="within budget: refused for its shape, naming the field"),
        Case("cycle_list", _frames_of(_cycle_list()), "error", "holds itself", mode="frame"),
        Case("cycle_dict", _frames_of([_cycle_dict()]), "error", "holds itself", mode="frame"),
        Case("cycle_tuple_memo", _frames_of(_cycle_tuple()), "error", "holds itself",
             mode="frame"),
        Case("cycle_dup", b"\x80\x02}(X\x07\x00\x00\x00entries]2au.", "error",
             "holds itself", note="DUP of a list, appended to itself"),
        Case("binunicode_4gb", b"\x80\x02X\xff\xff\xff\xff" + b"a" * 64 + b".", "error",
             "a string of 4,294,967,295 bytes"),
        Case("binunicode8_1tb", b"\x80\x04\x8d" + struct.pack("<Q", 1 << 40) + b"a" * 64 + b".",
             "error", "a string of 1,099,511,627,776 bytes"),
        Case("long_binput_4g", b"\x80\x02}r\xff\xff\xff\xff(X\x07\x00\x00\x00entries]"
             b"X\x04\x00\x00\x00rankK\x00u.",
             "load", note="memo index 2^32-1: the C unpickler sizes its memo for it"),
        Case("truncated", _pickled(_dump(entries=[_entry(i) for i in range(20)]))[:-40],
             "error", "truncated"),
        Case("empty_file", b"\x80", "error", "truncated"),
        Case("zip_archive", _zipped(_pickled(_dump())), "error", "zip archive"),
        Case("gzip_bomb", _gzip_bomb(), "error", "inflates"),
        # malformed fields: the reader's error, naming the field
        Case("ranks_negative", _pickled(_dump(pg_config={"0": {"name": "0", "desc": "x",
             "ranks": "[0, -5]"}})), "error", "a list of ranks", "pg_config['0'].ranks"),
        Case("ranks_bool", _pickled(_dump(pg_config={"0": {"name": "0", "desc": "x",
             "ranks": [0, True]}})), "error", "a rank", "pg_config['0'].ranks[1]"),
        Case("ranks_expression", _pickled(_dump(pg_config={"0": {"name": "0", "desc": "x",
             "ranks": "[0, 1+1]"}})), "error", "a list of ranks", "pg_config['0'].ranks"),
        Case("rank_true", _pickled(_dump(rank=True)), "error", "a rank", "rank"),
        Case("rank_negative", _pickled(_dump(rank=-5)), "error", "a rank", "rank"),
        Case("pg_config_list", _pickled(_dump(pg_config=["0", "1"])), "error", "a dict",
             "pg_config"),
        Case("pg_config_item_str", _pickled(_dump(pg_config={"0": "default_pg"})), "error",
             "a dict", "pg_config['0']"),
        Case("pg_status_list", _pickled(_dump(pg_status={"0": [1, 2]})), "error", "a dict",
             "pg_status['0']"),
        Case("entry_str", _pickled(_dump(entries=[_entry(1), "all_reduce"])), "error",
             "a dict", "entries[1]", mode="frame"),
        Case("process_group_int", _pickled(_dump(entries=[_entry(process_group=7)])), "error",
             "pair", "entries[0].process_group", mode="frame"),
        Case("process_group_str", _pickled(_dump(entries=[_entry(process_group="0:default")])),
             "error", "pair", "entries[0].process_group", mode="frame"),
        Case("sizes_str", _pickled(_dump(entries=[_entry(input_sizes="64")])), "error",
             "tensor sizes", "entries[0].input_sizes", mode="frame"),
        Case("seq_list", _pickled(_dump(entries=[_entry(collective_seq_id=[1])])), "error",
             "a 64-bit integer", "entries[0].collective_seq_id", mode="frame"),
        Case("frames_junk", _frames_of([{"name": "main", "filename": "x.py", "line": 1,
             "junk": _doubling(16)}]), "error", "a string", "entries[0].frames[0].junk",
             mode="frame", note="a call site holding a shared list: shown, it would expand"),
        Case("seq_2_70", _pickled(_dump(entries=[_entry(collective_seq_id=2**70)])), "error",
             "a 64-bit integer", "entries[0].collective_seq_id", mode="frame"),
        Case("time_digits_20", _pickled(_dump(entries=[_entry(time_created_ns="9" * 20)])),
             "error", "a 64-bit integer", "entries[0].time_created_ns", mode="frame"),
        Case("group_name_5000_digits", _pickled(_dump(pg_config={"9" * 5000: {"name": "9" * 5000,
             "desc": "g", "ranks": "[0]"}, "1": {"name": "1", "desc": "x", "ranks": "[0]"}},
             rank=0)), "load", mode="frame", note="int() of it: refused past 4,300 digits"),
        Case("frames_str", _frames_of("main at train.py:3"), "error", "call sites",
             "entries[0].frames", mode="frame"),
        Case("version_list", _pickled(_dump(version=[2, 10])), "error", "a string", "version"),
        Case("top_list", _pickled([_entry()]), "error", "no 'entries' list"),
        Case("json_entries_dict", json.dumps({"entries": {"0": 1}}).encode(), "error",
             "no 'entries' list"),
        Case("code_global", _pickled({"entries": []}).replace(b"}", b"cos\nsystem\n)R",
             1), "error", "refused"),
        Case("seq_negative", _pickled(_dump(entries=[_entry(collective_seq_id=-1)])),
             "error", "a sequence id", "entries[0].collective_seq_id", mode="frame",
             note="loaded and analysed as a collective that matches no peer's"),
        Case("p2p_seq_negative", _pickled(_dump(entries=[_entry(p2p_seq_id=-3)])), "error",
             "a sequence id", "entries[0].p2p_seq_id", mode="frame"),
        Case("seq_negative_text", _pickled(_dump(entries=[_entry(collective_seq_id="-1")])),
             "error", "a sequence id", "entries[0].collective_seq_id", mode="frame"),
        # hash-collision keys: refused by their type, before any is hashed
        Case("hash_dict_100", _with_hole(lambda h: _dump(extra=h), _hash_dict(100)), "error",
             "an integer over 2\\^31"),
        Case("hash_set_100", _with_hole(lambda h: _dump(entries=[_entry(foo=h)]),
             _hash_set(100)), "error", "an integer over 2\\^31"),
        Case("float_keys", _pickled(_dump(extra={0.5: 1, 1.5: 2})), "error",
             "a dict key or set item that is a float"),
        Case("tuple_keys", _pickled(_dump(extra={(1, 2): 1})), "error",
             "a dict key or set item that is a tuple"),
        # what still loads: the reader's answer is right
        Case("ranks_shared_100", _pickled(_dump(pg_config={str(i): {"name": str(i), "desc": "g",
             "ranks": _RANKS_4K} for i in range(100)})), "load", mode="frame",
             note="100 groups share one 4,000-rank list (rank 100 among them): parsed once"),
    ]


_RANKS_4K = "[" + ", ".join(map(str, range(4000))) + "]"


def _zipped(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("_dump_0", date_time=(2026, 1, 1, 0, 0, 0)), data)
    return out.getvalue()


def _gzip_bomb() -> bytes:
    """A dump-looking gzip (a pickle header) of 64 KiB that inflates to 64 MiB of zeros."""
    return gzip.compress(b"\x80\x02" + bytes(64 << 20), compresslevel=9, mtime=0)


def large_cases() -> list[Case]:
    """0.1-20 MB: made at test time, not kept."""
    one_mb = "p" * (1 << 20)
    zeros = "[" + ",".join("0" * 1 for _ in range(1 << 19)) + "]"  # 1 MB of "0,0,..."
    big_int = b"\x80\x02\x8b" + struct.pack("<i", 1 << 20) + b"\x01" * (1 << 20) + b"."
    return [
        Case("deep_1e5_lists", b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b".", "error",
             "nested over 32 deep"),
        Case("deep_1e5_marks", b"\x80\x02" + b"(" * 100_000 + b"l" * 100_000 + b".", "error",
             "nested over 32 deep"),
        Case("deep_json", b'{"entries": [], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
             "error", "nest|recursion|deep"),
        Case("huge_int_long4", big_int, "error", "an integer of 1,048,576 bytes"),
        Case("huge_int_json", b'{"entries": [{"collective_seq_id": ' + b"9" * 100_000
             + b"}]}", "error", "an integer of 100,000 digits"),
        Case("shared_pg_string_3000", _pickled(_dump(entries=[_entry(i, process_group=(one_mb,
             "g")) for i in range(3000)])), "error", "builds over", mode="frame",
             note="the issue's 1 MB: 3,000 entries share one 1 MB process_group name"),
        Case("pg_string_1mb", _pickled(_dump(entries=[_entry(process_group=one_mb)])),
             "error", "pair", "entries[0].process_group", mode="frame",
             note="the name itself where the pair belongs (frames.py listed its characters)"),
        Case("shared_ranks_2000", _pickled(_dump(pg_config={str(i): {"name": str(i), "desc": "g",
             "ranks": zeros} for i in range(2000)})), "error", "builds over",
             note="the issue's 1.1 MB: 2,000 groups share one 1 MB '[0,0,...]'"),
        Case("shared_ranks_500", _pickled(_dump(pg_config={str(i): {"name": str(i), "desc": "g",
             "ranks": zeros} for i in range(500)})), "load", mode="frame",
             note="the same within the budget: parsed once, each group [0]"),
        Case("empty_sets_20mb", b"\x80\x04" + b"\x8f" * (20 << 20) + b".", "error",
             "builds over", note="the issue's 20 MB of EMPTY_SET (4.9 GB with pickle), at "
             "the default budget"),
        Case("empty_sets_20mb_64m", b"\x80\x04" + b"\x8f" * (20 << 20) + b".", "error",
             r"builds over 64\.0 MiB", env={"DYNPROF_NB_FR_MAX_BUILD": "64M"}),
        Case("entries_1m_empty", _pickled({"entries": [{} for _ in range(1_000_000)],
             "rank": 0}, protocol=4), "error", "1,000,000 entries, with their rows",
             env={"DYNPROF_NB_FR_MAX_BUILD": "512M"},
             note="2 MB, 389 MiB as values, as much again as frame rows"),
        Case("groups_3000_missing", _pickled(_dump(
             entries=[_entry(0, pg_id=i, process_group=(str(i), "g"), frames=None)
                      for i in range(3000)],
             pg_config={str(i): {"name": str(i), "desc": "g", "ranks": f"[0, {i + 1}]"}
                        for i in range(3000)}, rank=0)), "load", mode="frame",
             note="3,000 stuck groups, each missing its own rank: the analysis took rows x "
             "ranks (36 s for 1,000; 5 min for these)"),
        Case("hash_dict_60k", _with_hole(lambda h: _dump(extra=h), _hash_dict(60_000)),
             "error", "an integer over 2\\^31",
             note="60,000 int keys hashing to 0: 26 s to build, quadratic"),
        Case("hash_set_60k", _with_hole(lambda h: _dump(entries=[_entry(foo=h)]),
             _hash_set(60_000)), "error", "an integer over 2\\^31",
             note="the same as a set in an entry: 28.5 s"),
        Case("hash_pg_config_60k", _with_hole(lambda h: _dump(pg_config=h),
             _hash_dict(60_000)), "error", "an integer over 2\\^31",
             note="as pg_config's keys: 5.8 s"),
        Case("empty_dicts_json_8mb", b'{"entries": [' + b"{}," * (8 << 20) + b"{}]}", "error",
             "may build up to", env={"DYNPROF_NB_FR_MAX_BUILD": "256M"}),
    ]


def write(out: Path, cases: list[Case]) -> dict[str, Path]:
    """Each case's data as ``out/<name>``; its path by name."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for c in cases:
        p = out / c.name
        p.write_bytes(c.data)
        paths[c.name] = p
    return paths


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["--small"]):
        sys.exit("usage: make_fr_corpus.py OUT_DIR [--small]")
    chosen = small_cases() + ([] if sys.argv[2:] else large_cases())
    for name, path in write(Path(sys.argv[1]), chosen).items():
        print(f"{name:24s} {path.stat().st_size:>10,} {path}")
