"""Reliability matrix, bad input: hypothesis fuzzing of the config (through ``ProfilerConfig``
and through raw segment bytes under a live Monitor) and of the trace readers (generated JSON
and CSV, and mutated real fixtures). See docs/reliability.md.

* Config: only ``TraitError``/``ValueError`` may come out, never another exception, a hang or
  anything raised into a training loop. A real training process is attached to the segment the
  whole time the fuzzer writes garbage into it, and must come out alive and untroubled.
* Traces: only a repaired load or ``TraceFormatError``, each within a time bound. The readers
  run in a separate worker process, so a hang (or a crash of the interpreter) fails the case
  instead of blocking the run; the worker is restarted after it.
"""

from __future__ import annotations

import gzip
import json
import math
import select
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jobutil import finish, spawn_rank, unique_job, wait_until
from testdata import fixtures_dir
from traitlets import TraitError

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.protocol import ACTIONS, decode
from dynprof_nb.contract.segment import Segment

pytestmark = pytest.mark.timeout(300)

CONFIG_CASES = 400
SEGMENT_CASES = 300
TRACE_CASES = {"json": 150, "csv": 150, "fixtures": 120}
TRACE_CASE_SECONDS = 20.0  # per file; the largest mutated fixture loads in well under 1 s

# -- config ---------------------------------------------------------------------------------

json_scalars = (st.none() | st.booleans()
                | st.integers(min_value=-2**70, max_value=2**70)
                | st.sampled_from([-1, 0, 1, 2, 7, 2**63 - 1, 2**63, -2**63 - 1])
                | st.floats(allow_nan=True, allow_infinity=True)
                | st.text(max_size=20)
                | st.sampled_from(["Level1", "level0", "CPU", "NPU", "text", "db", "./", "20",
                                   "../../etc", "\x00", "AiCoreNone", "cpu", "true"]))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=5)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=12)
KEYS = ProfilerConfig.keys()
config_dicts = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=12), json_values,
                               max_size=8)


@settings(max_examples=CONFIG_CASES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=config_dicts, strict=st.booleans())
@example(data={"start_step": 2**64, "stop_step": 2**65}, strict=True)
@example(data={"start_step": float("nan")}, strict=True)
def test_profiler_config_fuzz_raises_only_value_errors(data: dict, strict: bool) -> None:
    """Whatever a notebook or a JSON file hands ``ProfilerConfig``, it is accepted whole (and
    round-trips) or refused with a TraitError/ValueError that names a key."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown keys warn in non-strict mode
        for build in (lambda: ProfilerConfig.from_dict(data, strict=strict),
                      lambda: ProfilerConfig().update(**{str(k): v for k, v in data.items()})):
            try:
                cfg = build()
            except (TraitError, ValueError) as exc:
                assert str(exc)
                continue
            cfg.validate()
            assert ProfilerConfig.from_dict(json.loads(cfg.to_json())).to_dict() == cfg.to_dict()
            assert -1 <= cfg.start_step < 2**63 and -1 <= cfg.stop_step < 2**63


def _command_bytes(action: str, config: dict, extra: dict) -> bytes:
    return json.dumps({"action": action, "config": config, **extra}).encode()


segment_payloads = st.one_of(
    st.binary(max_size=200),
    st.builds(_command_bytes, st.sampled_from([*ACTIONS, "launch", ""]), config_dicts,
              st.dictionaries(st.sampled_from(["by", "at", "x"]), json_values, max_size=2)),
    st.builds(lambda a, b: (a + b)[:4000],
              st.builds(_command_bytes, st.sampled_from(ACTIONS), config_dicts, st.just({})),
              st.binary(max_size=40)),
)


@pytest.fixture(scope="module")
def fuzz_job(tmp_path_factory) -> Iterator[tuple[Segment, dynprof_nb.Monitor, dynprof_nb.Job]]:
    out = tmp_path_factory.mktemp("fuzz")
    job = unique_job("fuzz")
    seg = Segment.open(job)
    monitor = dynprof_nb.Monitor(job=job, rank=0, output_path=out, backend="builtin")
    rank = spawn_rank(job, 1, out, step_ms=1)  # a real training process, the whole time
    wait_until(lambda: any(s.rank == 1 and s.step > 0 for s in seg.slots()), what="rank 1")
    control = dynprof_nb.attach(job, create=True)
    yield seg, monitor, control
    assert rank.poll() is None, "the training process died during the fuzzing"
    stdout, stderr = finish(rank)
    assert int(stdout.split("=")[1]) > 0 and "Traceback" not in stderr, stderr[-2000:]
    monitor.close()
    control.close()
    seg.close()
    segment.unlink(job)


@pytest.mark.filterwarnings("ignore:job .* the config in the segment")
@settings(max_examples=SEGMENT_CASES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(payload=segment_payloads)
@example(payload=b"[" * 60_000)
@example(payload=b'{"action":"set","config":{},"by":"me","at":[1]}')
@example(payload=b'{"action":"set","config":{},"by":1e400}')
@example(payload=b'{"action":"start","config":{"start_step":18446744073709551616,'
                 b'"stop_step":18446744073709551617}}')
def test_segment_bytes_fuzz_never_reaches_the_training_loop(fuzz_job, payload: bytes) -> None:
    """Bytes in the segment that no Job would write (a bug, another tool, memory corruption)
    are decoded to a clear ConfigError; the Monitor keeps stepping on its last good config."""
    seg, monitor, control = fuzz_job
    try:
        cmd = decode(payload)
    except (TraitError, ValueError) as exc:
        assert "config" in str(exc) or ":" in str(exc)
        cmd = None
    before = monitor.step_count
    seg.write_config(payload)
    for _ in range(3):
        monitor.step()  # must not raise, whatever the bytes
    assert monitor.step_count == before + 3
    monitor.config.validate()  # the config in force is always a valid one
    if cmd is None:
        assert "rejected" in monitor.last_error and "Keeping the last good" in monitor.last_error
    else:
        assert "internal error" not in monitor.last_error, monitor.last_error
    if monitor.state in ("armed", "recording"):
        control.stop()  # keep the next case's window machine idle
        monitor.step()


# -- trace readers --------------------------------------------------------------------------

WORKER = textwrap.dedent("""
    import json, sys, time, warnings
    from dynprof_nb.traces import TraceFormatError, load_trace
    for line in sys.stdin:
        path = line.rstrip("\\n")
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                w = load_trace(path)
                rows = sum(len(f) for f in w._cache.values()) if hasattr(w, "_cache") else 0
                out = {"outcome": "loaded", "rows": rows}
            except TraceFormatError as exc:
                out = {"outcome": "TraceFormatError", "message": str(exc)}
            except BaseException as exc:
                import traceback
                out = {"outcome": type(exc).__name__, "message": str(exc)[:300],
                       "trace": traceback.format_exc()[-1500:]}
        out["warnings"] = sorted({type(c.message).__name__ for c in caught})
        out["seconds"] = time.perf_counter() - t0
        print(json.dumps(out), flush=True)
""")


class ReaderWorker:
    """One long-lived reader process; a case that hangs is killed after TRACE_CASE_SECONDS."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.cases = 0

    def _start(self) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def load(self, path: Path) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        self.cases += 1
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], TRACE_CASE_SECONDS + 30)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            return {"outcome": "hang or crash", "seconds": math.inf}
        return json.loads(line)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture(scope="module")
def reader() -> Iterator[ReaderWorker]:
    worker = ReaderWorker()
    yield worker
    worker.close()


def check_reader(worker: ReaderWorker, directory: Path, name: str, data: bytes) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(data)
    result = worker.load(path)
    assert result["outcome"] in ("loaded", "TraceFormatError"), (name, data[:300], result)
    assert result["seconds"] < TRACE_CASE_SECONDS, (name, len(data), result)
    if result["outcome"] == "TraceFormatError":
        assert name in result["message"]  # the error names the file
    return result


EVENT_KEYS = ["ph", "name", "cat", "pid", "tid", "ts", "dur", "args", "id", "s", "bp"]
PHASES = ["X", "B", "E", "M", "C", "i", "I", "f", "s", "b", "e", "n", "P", "?"]
events = st.dictionaries(
    st.sampled_from(EVENT_KEYS) | st.text(max_size=5),
    st.sampled_from(PHASES) | json_values, max_size=8)
trace_docs = st.one_of(
    st.fixed_dictionaries({"traceEvents": st.lists(events, max_size=30)},
                          optional={"displayTimeUnit": json_values,
                                    "baseTimeNanoseconds": json_values,
                                    "distributedInfo": json_values, "otherData": json_values,
                                    "deviceProperties": json_values}),
    st.lists(events, max_size=30),
    json_values,
)


def _mutate(data: bytes, ops: list[tuple[int, int, int, bytes]]) -> bytes:
    """Apply byte-level damage: 0 truncate, 1 flip, 2 delete a span, 3 insert, 4 duplicate."""
    for kind, a, b, junk in ops:
        if not data:
            break
        i, j = sorted((a % len(data), b % len(data)))
        if kind == 0:
            data = data[:i]
        elif kind == 1:
            data = data[:i] + bytes([data[i] ^ (1 + b % 255)]) + data[i + 1:]
        elif kind == 2:
            data = data[:i] + data[j:]
        elif kind == 3:
            data = data[:i] + junk + data[i:]
        else:
            data = data[:j] + data[i:j] + data[j:]
    return data


mutations = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2**31), st.integers(0, 2**31),
                               st.binary(max_size=16) | st.sampled_from(
                                   [b"NaN", b"inf", b"N/A", b'"', b"\\", b"}", b"]", b",",
                                    b"\x00", b"\xff\xfe", b"{" * 50, b"[" * 3000])),
                     min_size=0, max_size=4)


@settings(max_examples=TRACE_CASES["json"], deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(doc=trace_docs, ops=mutations, gz=st.booleans())
def test_chrome_json_fuzz_loads_or_raises_trace_format_error(reader, tmp_path, doc, ops, gz):
    data = _mutate(json.dumps(doc, allow_nan=True).encode(), ops)
    name = "fuzz.pt.trace.json"
    if gz:
        data, name = gzip.compress(data), name + ".gz"
    check_reader(reader, tmp_path / "json", name, data)


CSV_FILES = {
    "kernel_details.csv": ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)",
                           "Duration(us)", "Wait Time(us)", "Input Shapes", "Stream ID"],
    "op_statistic.csv": ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                         "Avg Time(us)", "Max Time(us)", "Ratio(%)"],
    "step_trace_time.csv": ["Device_id", "Step", "Computing", "Communication(Not Overlapped)",
                            "Overlapped", "Communication", "Free", "Stage", "Bubble", "Type",
                            "Index"],
    "memory_record.csv": ["Component", "Timestamp(us)", "Total Allocated(MB)",
                          "Total Reserved(MB)", "Total Active(MB)", "Device Type"],
    "operator_memory.csv": ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)",
                            "Device Type"],
    "cpu_op_detail_info_0.csv": ["op_side", "op_type", "op_name", "full_op_name",
                                 "op_occurrences", "op_total_time(ms)", "op_avg_time(ms)",
                                 "total_proportion", "subgraph", "pid"],
    "cpu_ms_memory_record_0.txt": ["Timestamp(ns)", "Total Allocated(Byte)",
                                   "Total Reserved(Byte)", "Total Active(Byte)"],
    "cpu_op_execute_timestamp_0.txt": [],
}
cells = (st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
         | st.sampled_from(["", "N/A", "nan", "inf", "-1", "0", "1.5", "1e400", "\"", ";",
                            "1795968804006364148", "12.3456789123", "Host", "AI_CORE",
                            "x;HostCpuOps;1,0.1,0 2,0.2,0"])
         | st.integers(-2**70, 2**70).map(str) | st.floats().map(repr))


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(CSV_FILES)))
    columns = CSV_FILES[name]
    header = draw(st.permutations(columns).flatmap(
        lambda cols: st.integers(0, len(cols)).map(lambda k: cols[:k]))) if columns else []
    header += draw(st.lists(cells, max_size=2))
    width = draw(st.integers(0, len(header) + 2))
    rows = draw(st.lists(st.lists(cells, min_size=width, max_size=width), max_size=15))
    sep = draw(st.sampled_from([",", ",", ";", "\t"]))
    text = "\n".join(sep.join(r) for r in [header, *rows] if r or draw(st.booleans()))
    return name, draw(st.sampled_from([b"", b"\xef\xbb\xbf"])) + text.encode("utf-8")


@settings(max_examples=TRACE_CASES["csv"], deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=csv_files(), ops=mutations)
def test_csv_fuzz_loads_or_raises_trace_format_error(reader, tmp_path, case, ops):
    name, data = case
    check_reader(reader, tmp_path / "csv", name, _mutate(data, ops))


def _fixture_files() -> list[Path]:
    root = fixtures_dir()
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and p.stat().st_size < 800_000
             and p.suffix in (".json", ".gz", ".csv", ".txt", ".db")
             and not p.name.startswith(("profiler_config", "cpu_framework", "cpu_op_type_info"))
             # Flight Recorder dumps are not traces (tests/flight_recorder fuzzes their reader)
             and "flight_recorder" not in p.relative_to(root).parts]
    assert len(files) >= 10, f"expected the real fixtures under {root}"
    return files


FIXTURES = _fixture_files()


@settings(max_examples=TRACE_CASES["fixtures"], deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(FIXTURES), ops=mutations.filter(bool), inner=st.booleans())
def test_mutated_real_fixtures_load_or_raise_trace_format_error(reader, tmp_path, which, ops,
                                                               inner):
    data = which.read_bytes()
    if which.suffix == ".gz" and inner:  # damage the JSON inside, not only the gzip stream
        data = gzip.compress(_mutate(gzip.decompress(data), ops), compresslevel=1)
    else:
        data = _mutate(data, ops)
    check_reader(reader, tmp_path / "fixtures", which.name, data)


def test_every_real_fixture_loads_unmutated_in_the_worker(reader, tmp_path):
    """The fuzz harness itself works: the untouched fixtures all load."""
    for path in FIXTURES:
        result = check_reader(reader, tmp_path / "plain", path.name, path.read_bytes())
        assert result["outcome"] == "loaded", (path, result)
    assert reader.cases >= len(FIXTURES)
