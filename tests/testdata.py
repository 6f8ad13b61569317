"""Real test data and small window builders, shared by the tests (a plain module, not a
conftest: every tests/ subfolder can import it by name, whatever conftest pytest loaded first)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def fixtures_dir() -> Path:
    """Real profiler outputs kept in the repository (``tests/data``; sources and licences in
    ``tests/data/SOURCES.md``)."""
    return Path(__file__).resolve().parent / "data"


def write_builtin_window(root: Path, rank: int = 0, start: int = 1, stop: int = 3,
                         step_us: float = 1000.0, slow_step: int | None = None,
                         slow_factor: float = 3.0, status: str = "complete",
                         extra_ops: dict[str, float] | None = None) -> Path:
    """A window in the built-in backend's format: window.json, trace.json (µs floats with ns
    digits, ProfilerStep#N user annotations, python functions, a Memory counter), plus
    op_statistic.csv and step_trace_time.csv in Ascend column conventions. ``extra_ops``:
    ``{name: µs}``, one call each per step after ``backward`` (they must fit in the last
    tenth of a step)."""
    d = root / f"rank{rank}_start{start}_stop{stop}"
    (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    base = 1_795_968_800_000_000.0  # µs since epoch
    pid, tid = 4242 + rank, 4242 + rank
    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"python rank {rank}"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": "MainThread"}},
    ]
    t = base
    rows = []
    for step in range(start, stop + 1):
        dur = step_us * (slow_factor if step == slow_step else 1.0)
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid,
                   "tid": tid, "ts": round(t, 3), "dur": dur})
        ev.append({"ph": "X", "cat": "python_function", "name": "train.py(10): train_step", "pid": pid,
                   "tid": tid, "ts": round(t + 1.001, 3), "dur": dur - 2})
        ev.append({"ph": "X", "cat": "user_annotation", "name": "forward", "pid": pid, "tid": tid,
                   "ts": round(t + 2.002, 3), "dur": dur * 0.4})
        ev.append({"ph": "X", "cat": "user_annotation", "name": "backward", "pid": pid, "tid": tid,
                   "ts": round(t + 3.003 + dur * 0.4, 3), "dur": dur * 0.5})
        at = t + 4.004 + dur * 0.9
        for name, us in (extra_ops or {}).items():
            ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": pid,
                       "tid": tid, "ts": round(at, 3), "dur": us})
            at += us + 0.5
        ev.append({"ph": "C", "name": "Memory", "pid": pid, "tid": tid, "ts": round(t + 5, 3),
                   "args": {"Allocated": 1_000_000 * step, "Reserved": 4_000_000}})
        rows.append(f"0,{step},{dur * 0.9:.3f},0,0,0,{dur * 0.1:.3f},0,0,0,0")
        t += dur + 10
    (d / "trace.json").write_text(json.dumps({"traceEvents": ev, "displayTimeUnit": "ns",
                                              "otherData": {"backend": "builtin"}}))
    out = d / "ASCEND_PROFILER_OUTPUT"
    (out / "step_trace_time.csv").write_text(
        "Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
        "Bubble,Communication(Not Overlapped and Exclude Receive),Preparing\n" + "\n".join(rows) + "\n")
    (out / "op_statistic.csv").write_text(
        "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
        "forward,HOST,3,1200,400,400,400,44.4\nbackward,HOST,3,1500,500,500,500,55.6\n")
    manifest = {"job": "test", "rank": rank, "pid": pid, "host": "localhost", "start_step": start,
                "stop_step": stop, "started_at": 1.0, "ended_at": 2.0, "backend": "builtin",
                "config": {}, "status": status,
                "files": ["trace.json", "ASCEND_PROFILER_OUTPUT/step_trace_time.csv",
                          "ASCEND_PROFILER_OUTPUT/op_statistic.csv"]}
    (d / "window.json").write_text(json.dumps(manifest))
    return d


def npu_text_window(root: Path, ranks: int) -> Path:
    """A window of ``ranks`` real torch_npu ranks (trace_view.json only), made from the two
    ranks of tests/data/ascend_real/text_level0 in turn."""
    src = sorted((fixtures_dir() / "ascend_real" / "text_level0").glob("rank*_ascend_pt"))
    for r in range(ranks):
        d = root / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        d.mkdir(parents=True)
        shutil.copy(src[r % len(src)] / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", d)
    return root
