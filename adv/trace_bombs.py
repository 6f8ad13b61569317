"""Whitespace bombs and huge tokens in a Kineto JSON trace: each load in a fresh process with a
4 GiB address-space cap and a 120 s deadline; reports the load's own peak RSS (VmHWM - before),
seconds and the outcome (rows, or the error type and message).
usage: trace_bombs.py [MB] [case ...]"""
import json, os, subprocess, sys, tempfile, time
from pathlib import Path
MB = int(sys.argv[1]) if len(sys.argv) > 1 else 64
ONLY = sys.argv[2:]
EV = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":5}'
def ws(n): return b" \n\t\r" * (n // 4)
N = MB << 20
CASES = {
 # whitespace in places other than between two events
 "ws_inside_event": lambda: b'{"traceEvents":[' + EV % 1 + b',{"ph":"X",' + ws(N) + b'"cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":10,"dur":5}]}',
 "ws_after_colon": lambda: b'{"traceEvents":[' + EV % 1 + b',{"ph":"X","cat":"cpu_op","name":' + ws(N) + b'"b","pid":1,"tid":1,"ts":10,"dur":5}]}',
 "ws_in_args": lambda: b'{"traceEvents":[' + EV % 1 + b',{"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":10,"dur":5,"args":{"a":[' + ws(N) + b'1]}}]}',
 "ws_before_array": lambda: b'{' + ws(N) + b'"traceEvents":[' + EV % 1 + b',' + EV % 10 + b']}',
 "ws_after_open_bracket": lambda: b'{"traceEvents":[' + ws(N) + EV % 1 + b',' + EV % 10 + b']}',
 "ws_tail": lambda: b'{"traceEvents":[' + EV % 1 + b',' + EV % 10 + b']' + ws(N) + b'}',
 "ws_otherdata": lambda: b'{"otherData":{"x":' + ws(N) + b'1},"traceEvents":[' + EV % 1 + b',' + EV % 10 + b']}',
 # huge tokens
 "huge_number_ts": lambda: b'{"traceEvents":[' + EV % 1 + b',{"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":1' + b"0" * N + b',"dur":5}]}',
 "huge_key": lambda: b'{"traceEvents":[' + EV % 1 + b',{"ph":"X","' + b"k" * N + b'":1,"cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":10,"dur":5}]}',
 "huge_arg_value": lambda: b'{"traceEvents":[' + EV % 1 + b',{"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":10,"dur":5,"args":{"s":"' + b"v" * N + b'"}}]}',
 "huge_escapes": lambda: b'{"traceEvents":[' + EV % 1 + b',{"ph":"X","cat":"cpu_op","name":"' + b"\\u00e9" * (N // 6) + b'","pid":1,"tid":1,"ts":10,"dur":5}]}',
 "many_args_keys": lambda: b'{"traceEvents":[' + EV % 1 + b',{"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":10,"dur":5,"args":{' + b",".join(b'"k%d":1' % i for i in range(N // 12)) + b'}}]}',
 "many_events_intact": lambda: b'{"traceEvents":[' + b",".join(EV % i for i in range(N // 80)) + b']}',
 "many_events_cut": lambda: (b'{"traceEvents":[' + b",".join(EV % i for i in range(N // 80)))[:-7],
 "unterminated_args_array": lambda: b'{"traceEvents":[' + EV % 1 + b',{"ph":"X","name":"b","args":{"a":[' + b"1," * (N // 2),
 "one_event_no_close": lambda: b'{"traceEvents":[' + EV % 1 + b',{"ph":"X","name":"' + b"a" * N,
}
CHILD = r"""
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
def peak():
    for l in open("/proc/self/status"):
        if l.startswith("VmHWM:"): return int(l.split()[1]) / 1024
from dynprof_nb.traces import load_trace
import pandas
before = peak(); t = time.perf_counter()
try:
    w = load_trace(sys.argv[1]); n = len(w.events); ops = len(w.ops); out = f"events={n} ops={ops}"
except Exception as e:
    out = f"ERROR {type(e).__module__}.{type(e).__name__}: {str(e)[:160]}"
print(json.dumps({"own_mb": peak() - before, "s": time.perf_counter() - t, "out": out}))
"""
tmp = Path(tempfile.mkdtemp(prefix="badv_bomb_"))
env = {**os.environ, "DYNPROF_NB_CACHE": "off", "PYTHONPATH": "/work/wt/badv"}
for name, make in CASES.items():
    if ONLY and name not in ONLY: continue
    p = tmp / f"{name}.json"; p.write_bytes(make())
    size = p.stat().st_size / 2**20
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, str(p)], capture_output=True, text=True, timeout=120, env=env)
        line = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else f"rc={r.returncode} {r.stderr[-300:]}"
    except subprocess.TimeoutExpired:
        line = "TIMEOUT 120 s"
    print(f"{name:22s} {size:6.0f} MB  {line}", flush=True)
    p.unlink()
os.rmdir(tmp)
