"""Kineto events with wrong types in every field: load_trace's events/ops/steps/summary answer
or refuse with TraceFormatError, never a foreign exception."""
import json, sys, tempfile, warnings
from pathlib import Path
from dynprof_nb.traces import load_trace
from dynprof_nb.traces.errors import TraceFormatError
BASE = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 5}
MUT = {"ts_str": {"ts": "1e300"}, "ts_list": {"ts": [1]}, "dur_str": {"dur": "abc"}, "dur_obj": {"dur": {}},
       "pid_obj": {"pid": {"a": 1}}, "tid_list": {"tid": [1, 2]}, "name_num": {"name": 12345}, "name_null": {"name": None},
       "name_list": {"name": ["a"]}, "args_list": {"args": [1, 2]}, "args_str": {"args": "x"}, "ph_num": {"ph": 5},
       "cat_obj": {"cat": {"x": 1}}, "ts_bool": {"ts": True}, "ts_neg": {"ts": -1e18}, "pid_huge": {"pid": 2**70},
       "ts_huge_int": {"ts": 2**70}, "dur_huge_int": {"dur": 2**70}, "ext_id": {"args": {"External id": "x", "correlation": [1]}},
       "step_name": {"name": "ProfilerStep#abc"}, "step_huge": {"name": "ProfilerStep#" + "9" * 30, "cat": "user_annotation"}}
tmp = Path(tempfile.mkdtemp())
bad = 0
for name, m in MUT.items():
    ev = [BASE, {**BASE, "ts": 200}, {**BASE, **m}, {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 90, "dur": 500}]
    p = tmp / f"{name}.json"; p.write_text(json.dumps({"traceEvents": ev}))
    res = []
    for what in ("events", "ops", "steps", "summary", "plot_timeline"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                w = load_trace(str(p))
                x = getattr(w, what)
                if callable(x): x = x()
                res.append(f"{what}:ok")
        except TraceFormatError as e:
            res.append(f"{what}:refused")
        except Exception as e:
            res.append(f"{what}:CRASH {type(e).__name__}: {str(e)[:80]}"); bad += 1
    print(f"{name:12s}", " ".join(res))
print("RESULT", "BROKE" if bad else "HELD")
