"""Issue 50's held-out check, without a handle open across the restart: run 1 arms a window far
ahead, the notebook closes its handle, all ranks are SIGKILLed, run 2 starts under the same
name, a new handle attaches. Run 2's ranks must hold no armed window; a new window records
run 2's steps."""
import sys, tempfile, warnings
from pathlib import Path
sys.path.insert(0, "/work/wt/badv/tests")
from jobutil import finish, kill_process, spawn_rank, trace_steps, unique_job, wait_until
import dynprof_nb
from dynprof_nb.contract import segment
job, out = unique_job("badvrs"), Path(tempfile.mkdtemp()) / "out"
c = dynprof_nb.attach(job, create=True)
procs = [spawn_rank(job, r, out, step_ms=2) for r in range(2)]
ok = True
try:
    wait_until(lambda: len(c.live_slots()) == 2 and all(s.step > 3 for s in c.live_slots()), what="run 1")
    far = c.live_slots()[0].step + 100_000
    c.start(far, far + 4)
    wait_until(lambda: [s.state for s in c.live_slots()] == ["armed"] * 2, what="armed")
    c.close()
    for p in procs: kill_process(p)
    procs = [spawn_rank(job, r, out, step_ms=2) for r in range(2)]
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        c = dynprof_nb.attach(job)
        wait_until(lambda: len(c.live_slots()) == 2 and all(s.step > 3 for s in c.live_slots()), what="run 2")
        st = c.status()
    live = st[st.alive.astype(bool)]
    print("run 2 states:", list(live.state), "windows:", list(live.window), "runs:", list(live.run))
    print("said:", [str(w.message)[:200] for w in said])
    if list(live.state) != ["idle"] * 2 or (live.window != "").any():
        print("BROKE: run 2 inherited the far window"); ok = False
    c.start("+20", "+24")
    first, last = c.config.start_step, c.config.stop_step
    w = c.load(timeout=120)
    print("loaded", w.start_step, w.stop_step, "run", w.run)
    rows = c.windows()
    for path in rows.path:
        got = trace_steps(path)
        if got != list(range(first, last + 1)): print("BROKE: steps", got); ok = False
    if list(out.glob(f"*start{far}*")): print("BROKE: the far window was recorded"); ok = False
    print("RESULT", "HELD" if ok and w.run == 2 else "BROKE")
finally:
    for p in procs: finish(p)
    c.close(); segment.unlink(job)
