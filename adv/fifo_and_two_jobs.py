"""(1) thread_cpu.json is a FIFO inside the window: loading and w.thread_cpu() must not block.
(2) `dynprof status` with no name while two jobs run: it must list both and say what to type."""
import os, subprocess, sys, tempfile, uuid, warnings
from pathlib import Path
sys.path.insert(0, "/work/wt/badv/tests")
from testdata import write_builtin_window
import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.contract.slot import claim_slot
root = Path(tempfile.mkdtemp())
d = write_builtin_window(root, rank=0)
os.mkfifo(d / "thread_cpu.json")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    w = dynprof_nb.load_window(str(d))
    print("fifo thread_cpu ->", w.thread_cpu()["missing"].tolist())
jobs = [f"badvtwo-{uuid.uuid4().hex[:6]}" for _ in range(2)]
segs = [segment.Segment.open(j) for j in jobs]
slots = [claim_slot(s, 0) for s in segs]
try:
    r = subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", "status"], capture_output=True, text=True, timeout=60)
    print("status rc", r.returncode, "|", (r.stdout + r.stderr).strip()[-400:])
    print("RESULT", "HELD" if r.returncode != 0 and all(j in r.stderr + r.stdout for j in jobs) else "CHECK")
finally:
    for s, j in zip(segs, jobs): s.close(); segment.unlink(j)
