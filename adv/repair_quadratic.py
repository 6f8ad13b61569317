"""A Kineto file cut short inside a string full of escaped quotes (\\"): the repair pass's
string regex (repair.py _STRING_OR_BARE, via sanitize) restarts at every quote and scans to the
end: time grows as the square of the size. usage: repair_quadratic.py KB..."""
import json, os, subprocess, sys, tempfile, time
CHILD = r"""
import sys, time, warnings
from dynprof_nb.traces import load_trace
t = time.perf_counter()
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = len(load_trace(sys.argv[1]).events); out = f"events={n}"
except Exception as e:
    out = f"{type(e).__name__}: {str(e)[:100]}"
print(f"{time.perf_counter() - t:.1f} s {out}")
"""
for kb in map(int, sys.argv[1:] or ["64", "128", "256"]):
    p = os.path.join(tempfile.mkdtemp(), "cut.json")
    with open(p, "wb") as fh:
        fh.write(b'{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1},{"ph":"X","name":"' + b'\\"' * (kb * 512))
    env = {**os.environ, "DYNPROF_NB_CACHE": "off"}
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, p], capture_output=True, text=True, timeout=300, env=env)
        print(f"{kb:6d} KB: {r.stdout.strip() or r.stderr[-300:]}", flush=True)
    except subprocess.TimeoutExpired:
        print(f"{kb:6d} KB: TIMEOUT 300 s", flush=True)
    os.unlink(p)
