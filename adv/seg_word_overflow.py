"""A segment (right size and magic) whose header words are corrupt: the run counter at 2**63-1,
the generation at -1, a slot with pid -5 / rank 2**62: a rank joining, status and jobs() must
give the project's error or carry on, and a real training loop must keep stepping."""
import os, subprocess, sys, tempfile
sys.path.insert(0, "/work/wt/badv/tests")
from jobutil import finish, spawn_rank, unique_job, wait_until
import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.contract.segment import H_RUN, H_GEN, slot_base, S_PID, S_RANK, S_STATE, S_STEP
from dynprof_nb.contract.slot import claim_slot
def case(name, fn):
    try: print(name, "->", str(fn())[:300].replace("\n", " | "))
    except Exception as e: print(name, "RAISED", type(e).__module__, type(e).__name__, str(e)[:200])
job = unique_job("badvwo")
seg = segment.Segment.open(job)
seg.words[H_RUN] = 2**63 - 1
if "--run-only" in sys.argv:
    p = spawn_rank(job, 1, __import__("pathlib").Path(tempfile.mkdtemp()), step_ms=2, steps=300)
    p.wait(60); o, e = p.communicate()
    print("training loop (run counter at max) rc", p.returncode, "|", (o + e)[-600:].replace("\n", " | "))
    seg.close(); segment.unlink(job); sys.exit()
b = slot_base(5)
seg.words[b + S_PID] = -5; seg.words[b + S_RANK] = 2**62; seg.words[b + S_STATE] = 99; seg.words[b + S_STEP] = -2**63
case("claim_with_run_at_max", lambda: claim_slot(seg, 0).run)
case("status", lambda: dynprof_nb.attach(job).status().to_string())
case("jobs", lambda: dynprof_nb.jobs().to_string())
out = tempfile.mkdtemp()
p = spawn_rank(job, 1, __import__("pathlib").Path(out), step_ms=2, steps=300)
try:
    o, e = finish(p, timeout=60)
    print("training loop rc", p.returncode, "|", (o + e)[-400:].replace("\n", " | "))
finally:
    seg.close(); segment.unlink(job)
