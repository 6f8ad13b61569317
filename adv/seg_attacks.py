"""Segment attacks: rank claimed twice, garbage/truncated segment planted before attach, load() at once."""
import os, sys, warnings, uuid, traceback
sys.path.insert(0, "/work/wt/badv/tests")
import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.contract.slot import claim_slot
def job(): return f"badv-{os.getpid()}-{uuid.uuid4().hex[:6]}"
def case(name, fn):
    try: print(name, "->", fn())
    except Exception as e: print(name, "RAISED", type(e).__module__, type(e).__name__, str(e)[:300].replace("\n"," "))
# 1 one process claims rank 0 twice
j = job()
seg = segment.Segment.open(j)
a = claim_slot(seg, 0); b = claim_slot(seg, 0)
c = dynprof_nb.attach(j)
def st():
    s = c.status(); return s[["rank","pid","state","alive"]].to_dict("records") if "rank" in s else s.to_string()
case("claim_twice_status", st)
case("claim_twice_live_slots", lambda: [(s.rank, s.pid) for s in c.live_slots()])
case("claim_twice_start", lambda: (c.start("+5", "+9"), c.status()[["rank","state","window"]].to_dict("records"))[1])
c.close(); seg.close(); segment.unlink(j)
# 2 garbage planted in /dev/shm under the job's name
for label, content in [("garbage", os.urandom(1 << 16)), ("truncated", b"\0" * 17), ("empty", b""), ("huge_sparse", None)]:
    j = job(); path = segment.segment_path(j)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    if content is None: os.ftruncate(fd, 1 << 40)
    else: os.write(fd, content)
    os.close(fd)
    case(f"{label}_attach_nocreate", lambda: dynprof_nb.attach(j))
    case(f"{label}_attach_create", lambda: dynprof_nb.attach(j, create=True).status().to_string()[:200])
    case(f"{label}_jobs", lambda: dynprof_nb.jobs().to_string()[:300])
    try: os.unlink(path)
    except FileNotFoundError: pass
    segment.unlink(j)
