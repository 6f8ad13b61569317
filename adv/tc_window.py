"""thread_cpu.json hostile content on one rank of a 2-rank window: slow_ranks/advise/explain.
usage: tc_window.py CASE  (prints OK/CRASH lines)"""
import json, sys, resource, warnings, tempfile
from pathlib import Path
sys.path.insert(0, "/work/wt/badv/tests")
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from testdata import write_builtin_window
import dynprof_nb
warnings.simplefilter("ignore")
G = {"steps": 3, "wall_ns": 9*10**6, "on_cpu_ns": 6*10**6, "runqueue_ns": 1*10**6, "timeslices": 30}
CASES = {
 "good": json.dumps(G).encode(),
 "deep_nest": b"[" * 60000,
 "huge_int": json.dumps({**G, "runqueue_ns": 10**400}).encode(),
 "impossible": json.dumps({**G, "runqueue_ns": 10**18, "wall_ns": 9*10**6}).encode(),
 "u64": json.dumps({**G, "runqueue_ns": 2**64 + 5}).encode(),
 "script_missing": json.dumps({"missing": "<img src=x onerror=alert(1)>"}).encode(),
 "absent": None,
}
def build(root, case, bad_rank=1, both=False, slow=True):
    for r in (0, 1):
        d = write_builtin_window(root, rank=r, start=1, stop=3, step_us=1000.0 * (3 if (r == 1 and slow) else 1))
        data = CASES[case] if (r == bad_rank or both) else CASES["good"]
        if data is not None:
            (d / "thread_cpu.json").write_bytes(data)
    return root
case = sys.argv[1]
both = len(sys.argv) > 2
with tempfile.TemporaryDirectory() as t:
    w = dynprof_nb.load_window(str(build(Path(t) / "w", case, both=both)))
    b = dynprof_nb.load_window(str(build(Path(t) / "b", "good", slow=False)))
    for name, fn in [("thread_cpu", lambda: w.thread_cpu()), ("slow_ranks", lambda: w.slow_ranks()),
                     ("advise", lambda: w.advise()), ("explain", lambda: w.explain(b)),
                     ("explain_rev", lambda: b.explain(w)), ("advise_html", lambda: w.advise()._repr_html_()),
                     ("explain_html", lambda: w.explain(b)._repr_html_()), ("sr_html", lambda: w.slow_ranks().to_html())]:
        try:
            out = fn()
            s = str(out)
            flag = ""
            if "onerror=alert" in s and "html" in name: flag = " UNESCAPED"
            if "e+1" in s or "inf" in s.lower().split(): flag += " SUSPECT_NUMBER"
            print(case, name, "OK", flag, s.replace("\n", " | ")[:400])
        except Exception as e:
            print(case, name, "CRASH", type(e).__name__, str(e)[:200])
