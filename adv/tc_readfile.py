import json, sys, traceback
from pathlib import Path
from dynprof_nb.traces.formats.common.threadcpu import read_file
d = Path(sys.argv[1]); d.mkdir(exist_ok=True)
G = {"steps": 2, "wall_ns": 10**9, "on_cpu_ns": 4*10**8, "runqueue_ns": 2*10**8, "timeslices": 1}
cases = {
 "deep_nest": b"[" * 60000,
 "deep_obj": b'{"a":' * 20000,
 "huge_int_400": json.dumps({**G, "on_cpu_ns": 10**400}).encode(),
 "huge_steps": json.dumps({**G, "steps": 10**400}).encode(),
 "int_5000_digits": ('{"steps": ' + "9"*5000 + "}").encode(),
 "oncpu_gt_wall": json.dumps({**G, "on_cpu_ns": 10**18, "wall_ns": 1}).encode(),
 "nan": b'{"steps":2,"wall_ns":NaN,"on_cpu_ns":1,"runqueue_ns":1,"timeslices":1}',
 "bool": json.dumps({**G, "steps": True}).encode(),
 "float": json.dumps({**G, "steps": 2.0}).encode(),
 "missing_list": json.dumps({"missing": ["x"]*10}).encode(),
 "missing_script": json.dumps({"missing": "<script>alert(1)</script>"}).encode(),
 "bad_utf8": b'{"missing": "\xff\xfe"}',
 "utf16": json.dumps(G).encode("utf-16"),
 "u64": json.dumps({**G, "on_cpu_ns": 2**64, "runqueue_ns": 2**63}).encode(),
 "empty": b"",
 "nul": b"\x00"*100,
}
for name, data in cases.items():
    p = d / f"{name}.json"; p.write_bytes(data)
    try:
        r = read_file(p)
        print(name, "->", repr(r)[:200])
    except BaseException as e:
        print(name, "CRASH", type(e).__name__, str(e)[:100])
for name, target in [("devzero", "/dev/zero"), ("devurandom","/dev/urandom"), ("shadow", "/etc/shadow"), ("dir", "/tmp")]:
    p = d / f"{name}.json"
    if p.is_symlink(): p.unlink()
    p.symlink_to(target)
    try: print(name, "->", repr(read_file(p))[:200])
    except BaseException as e: print(name, "CRASH", type(e).__name__, e)
import os
fifo = d/"fifo.json"
if not fifo.exists(): os.mkfifo(fifo)
print("fifo: read_file would block? skipping direct; discover uses is_file()")
