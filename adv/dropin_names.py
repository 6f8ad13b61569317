"""job_name_for on hostile config directories: the name must pass check_job_name, never crash."""
import os, sys, tempfile
from dynprof_nb.training.dropin import job_name_for
from dynprof_nb.contract.segment import check_job_name
root = tempfile.mkdtemp(prefix="badv_names_")
rb = os.fsencode(root)
names = [b"cfg", b"..", b"...", b"a\nb", "数据".encode(), "\u202eevil".encode(), b"x" * 255, b"-._", b"\xff\xfe",
         b"$(reboot)", b"a" * 23 + b".b"]
for n in names:
    parent = os.path.join(rb, b"p" + n[:50] if n not in (b"..",) else b"pp")
    os.makedirs(parent, exist_ok=True)
    d = os.path.join(parent, n) if n not in (b"..", ) else parent + b"/sub/.."
    os.makedirs(d, exist_ok=True)
    path = os.fsdecode(d)
    try:
        name = job_name_for(path)
        check_job_name(name)
        print(repr(n[:30]), "->", repr(name), "OK")
    except Exception as e:
        print(repr(n[:30]), "CRASH", type(e).__name__, str(e)[:150])
for env in ["../x", "a\n", "x" * 100, "ok-name"]:
    os.environ["DYNPROF_JOB"] = env
    try:
        name = job_name_for(root); check_job_name(name); print("DYNPROF_JOB", repr(env[:20]), "->", "accepted")
    except Exception as e:
        print("DYNPROF_JOB", repr(env[:20]), "refused:", type(e).__name__, str(e)[:150])
