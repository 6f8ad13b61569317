"""Reliability matrix, faults: processes killed for real (SIGKILL), kernels restarted, jobs
restarted under the same name, two controllers at once. See docs/reliability.md.

Every process here is a real one: training ranks are ``tests/train_loop.py``, controllers are
Python subprocesses or a real Jupyter kernel, and kills are ``SIGKILL`` (nothing runs on the way
out, so what is left behind is exactly what a crash leaves).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from pathlib import Path

import pytest
from jobutil import finish, spawn_rank, trace_steps, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.contract.segment import H_SEQ, Segment

pytestmark = pytest.mark.timeout(180)


def _row(control: dynprof_nb.Job, rank: int) -> dict:
    rows = control.status()
    rows = rows[rows["rank"] == rank]
    assert len(rows) == 1, f"expected one slot for rank {rank}, got\n{control.status()}"
    return rows.iloc[0].to_dict()


def _python(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


# -- row 1: SIGKILL of one rank in the middle of a window ----------------------------------


def test_rank_killed_mid_window_is_dead_within_3s_and_its_window_never_complete(tmp_path):
    job = unique_job("kill")
    control = dynprof_nb.attach(job, create=True)
    procs = [spawn_rank(job, r, tmp_path, step_ms=4) for r in range(3)]
    try:
        wait_until(lambda: len(control.live_slots()) == 3
                   and all(s.step > 0 for s in control.live_slots()), what="3 ranks stepping")
        control.start("+100", "+350")  # about a second of recording per rank
        wait_until(lambda: (control.status().state == "recording").all(), timeout=30,
                   what="every rank recording")
        victim = procs[1]
        victim.send_signal(signal.SIGKILL)  # not reaped yet: a zombie must already count as dead
        killed_at = time.monotonic()
        wait_until(lambda: _row(control, 1)["state"] == "dead", timeout=3,
                   what="rank 1 shown dead")
        assert time.monotonic() - killed_at < 3.0
        row = _row(control, 1)
        assert not row["alive"] and row["pid"] == victim.pid

        # the other ranks finish their window; wait() does not hang on the dead one
        status = control.wait(timeout=60, progress=False)
        live = status[status.alive]
        assert sorted(live["rank"]) == [0, 2] and (live.state == "idle").all()
        victim.wait()
        win = control.windows()
        by_rank = {r: set(win[win["rank"] == r].status) for r in (0, 1, 2)}
        assert by_rank[0] == {"complete"} and by_rank[2] == {"complete"}
        assert by_rank[1] == {"incomplete"}, win  # listed, but never as complete
        dead_dir = Path(win[win["rank"] == 1].path.iloc[0])
        assert dead_dir.name.startswith(".rank1_")  # still under its temporary name
        # load() takes only complete windows: ranks 0 and 2
        loaded = control.load()
        assert sorted(loaded.ranks) == [0, 2]

        # a restarted rank with the same job and rank attaches and reports in the old slot
        procs[1] = spawn_rank(job, 1, tmp_path, step_ms=4)
        wait_until(lambda: _row(control, 1)["alive"] and _row(control, 1)["step"] > 0,
                   what="restarted rank 1 reporting")
        row = _row(control, 1)
        assert row["pid"] == procs[1].pid and row["error"] == ""
        assert row["generation"] == control.generation  # it picked up the job's config
        assert len(control.status()) == 3 and control.status().alive.all()
        # the window is still asked for, and the restarted rank counts steps from 1 again,
        # so it records that window afresh: a complete one beside the dead rank's incomplete
        control.wait(timeout=60, progress=False)
        win = control.windows()
        mine = win[win["rank"] == 1]
        assert sorted(mine.status) == ["complete", "incomplete"]
        cfg = control.config
        complete = mine[mine.status == "complete"].path.iloc[0]
        assert trace_steps(complete) == list(range(cfg.start_step, cfg.stop_step + 1))
    finally:
        for p in procs:
            finish(p)
        control.close()
        segment.unlink(job)


# -- row 2: SIGKILL of the controller while it writes the config ---------------------------

INSIDE_WRITE = """
    import json, os, sys, time
    import dynprof_nb
    from dynprof_nb.contract import segment
    job = dynprof_nb.attach(sys.argv[1], create=False)

    def block(pid):  # write_config calls this inside its critical section: stop right there
        print(json.dumps({"seq": job.segment(create=True).words[segment.H_SEQ]}), flush=True)
        time.sleep(600)

    segment.pid_start_time = block
    job.set(prof_path="/never/applied", profile_memory=True)
"""

AFTER_GENERATION = """
    import fcntl, json, sys, time
    from dynprof_nb.contract import segment
    seg = segment.Segment.open(sys.argv[1], create=False)
    w = seg.words
    fcntl.flock(seg.fileno(), fcntl.LOCK_EX)  # the writer lock, as write_config takes it
    w[segment.H_SEQ] += 1                 # odd: mid-write
    half = b'{"action":"set","config":{"prof_pa'
    seg.raw[segment.CONFIG_OFFSET:segment.CONFIG_OFFSET + len(half)] = half
    w[segment.H_LEN] = len(half)
    w[segment.H_GEN] += 1                 # ranks see a change and try to read it
    print(json.dumps({"seq": w[segment.H_SEQ]}), flush=True)
    time.sleep(600)
"""


@pytest.mark.filterwarnings("ignore:job .* the config in the segment")
@pytest.mark.parametrize("where", ["inside_write_config", "after_generation_bump"])
def test_controller_killed_mid_write_leaves_ranks_on_the_last_good_config(tmp_path, where):
    job = unique_job("ctlkill")
    control = dynprof_nb.attach(job, create=True)
    ranks = [spawn_rank(job, r, tmp_path, step_ms=3) for r in range(2)]
    writer = None
    try:
        wait_until(lambda: len(control.live_slots()) == 2
                   and all(s.step > 0 for s in control.live_slots()), what="ranks stepping")
        # the last good config: a window armed far enough ahead to outlive the kill
        good = control.start("+1000", "+1005", with_stack=True)  # ~3 s ahead
        good_cfg = control.config.to_dict()
        wait_until(lambda: (control.status().generation == good).all(), what="config applied")
        assert (control.status().state == "armed").all()

        code = INSIDE_WRITE if where == "inside_write_config" else AFTER_GENERATION
        writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), job], text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = writer.stdout.readline()
        assert line, writer.stderr.read()
        assert json.loads(line)["seq"] % 2 == 1  # it really is inside the critical section
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        seq = control.segment(create=True).words[H_SEQ]
        assert seq % 2 == 1  # what the dead writer left behind
        assert (control.status().state == "armed").all()  # the window is still to come

        # the notebook still shows the last good config it knew, with a clear warning
        with pytest.warns(UserWarning, match="died mid-write"):
            assert control.config.to_dict() == good_cfg

        # training goes on, on the last good config: the armed window records with it
        wait_until(lambda: len(control.windows()) == 2
                   and (control.windows().status == "complete").all(), timeout=60,
                   what="the armed window to be written by both ranks")
        for path in control.windows().path:
            manifest = json.loads((Path(path) / "window.json").read_text())
            assert manifest["config"]["with_stack"] is True
            assert manifest["config"]["prof_path"] == "./"  # not the dead writer's
            assert manifest["config"]["profile_memory"] is False
        status = control.status()
        assert status.alive.all() and (status.generation == good).all()
        if where == "after_generation_bump":
            # the ranks saw a change they could not read: they say so, once, and keep going
            wait_until(lambda: control.status().error.str.contains("keeping the last good").all(),
                       timeout=30, what="ranks to report the unreadable config")

        # the next writer is not blocked: the kernel dropped the dead writer's flock
        done: dict = {}
        t = threading.Thread(target=lambda: done.update(gen=control.set(profile_memory=True)))
        t.start()
        t.join(10)  # a guard against a hang, not a speed requirement
        assert not t.is_alive(), "Job.set blocked behind the dead writer's lock"
        assert control.segment(create=True).words[H_SEQ] % 2 == 0
        wait_until(lambda: (control.status().generation == done["gen"]).all(),
                   what="ranks to apply the next write")
        cfg = control.config  # standing; with_stack was the window's own option
        assert cfg.profile_memory and cfg.prof_path == "./" and not cfg.with_stack
        assert control.window_options == {"with_stack": True}  # kept across the dead write
        assert all(p.poll() is None for p in ranks)
    finally:
        if writer is not None and writer.poll() is None:
            writer.kill()
        outs = [finish(p) for p in ranks]
        control.close()
        segment.unlink(job)
    for out, err in outs:
        assert out.startswith("steps=") and int(out.split("=")[1]) > 1000
        assert "Traceback" not in err


# -- row 3: kernel restart in the notebook ------------------------------------------------


def test_kernel_restart_then_attach_shows_the_live_state_and_changes_nothing(tmp_path):
    from jupyter_client.manager import start_new_kernel

    job = unique_job("kernel")
    ranks = [spawn_rank(job, r, tmp_path, step_ms=3) for r in range(2)]
    km, kc = start_new_kernel(kernel_name="python3")

    def run(code: str) -> dict:
        out: list[str] = []

        def hook(msg: dict) -> None:
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("ERROR " + "\n".join(msg["content"]["traceback"]))

        reply = kc.execute_interactive(code, output_hook=hook, timeout=60)
        text = "".join(out)
        assert reply["content"]["status"] == "ok", text
        return json.loads(text.strip().splitlines()[-1])

    snapshot = textwrap.dedent("""
        import json, dynprof_nb
        job = dynprof_nb.attach(%r, create=True)
        s = job.status()
        print(json.dumps({"pid": __import__("os").getpid(), "gen": job.generation,
                          "config": job.window_config.to_dict(),
                          "ranks": s[["rank", "pid", "step", "state", "alive"]]
                          .to_dict("records")}, default=int))
    """) % job
    try:
        control = dynprof_nb.attach(job, create=True)
        wait_until(lambda: len(control.live_slots()) == 2, what="ranks up")
        before = run(snapshot + """
job.start("+5000", "+5005", profile_memory=True)  # far ahead: still armed after the restart
print(json.dumps({"pid": __import__("os").getpid(), "gen": job.generation,
                  "config": job.window_config.to_dict()}))
""")
        wait_until(lambda: (control.status().generation == before["gen"]).all(),
                   what="ranks to apply the kernel's window")
        pids = sorted(control.status().pid)
        km.restart_kernel(now=True)  # kills the kernel process and starts a new one
        kc.wait_for_ready(timeout=60)
        after = run(snapshot)
        assert after["pid"] != before["pid"]  # a new kernel process
        assert after["gen"] == before["gen"]  # attaching wrote nothing
        assert after["config"] == before["config"]  # and the window is still asked for
        assert after["config"]["profile_memory"] is True
        ranks_after = sorted(after["ranks"], key=lambda r: r["rank"])
        assert [r["rank"] for r in ranks_after] == [0, 1]
        assert sorted(r["pid"] for r in ranks_after) == pids  # the same processes
        assert all(r["alive"] and r["state"] == "armed" for r in ranks_after)
        assert all(p.poll() is None for p in ranks)
        # training went on through the restart
        first = {r["rank"]: r["step"] for r in ranks_after}
        wait_until(lambda: all(control.status().step > max(first.values())),
                   what="steps to keep going")
        control.close()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        for p in ranks:
            finish(p)
        segment.unlink(job)


# -- row 4: a job restarted under the same name after a crash ---------------------------


def test_job_restarted_after_a_crash_reclaims_the_stale_segment(tmp_path):
    job = unique_job("crash")
    notebook = _python(f"""
        import sys, dynprof_nb
        job = dynprof_nb.attach({job!r}, create=True)
        job.set(with_stack=True, prof_path={str(tmp_path)!r})
        print(job.generation, flush=True); sys.stdin.readline()
    """, stdin=subprocess.PIPE)
    old = [spawn_rank(job, r, tmp_path, step_ms=3) for r in range(2)]
    try:
        assert int(notebook.stdout.readline()) == 1
        with Segment.open(job, create=False) as seg:
            wait_until(lambda: len([s for s in seg.slots() if s.alive]) == 2,
                       what="old ranks up")
        for p in [notebook, *old]:  # the whole job crashes, notebook included
            p.send_signal(signal.SIGKILL)
        for p in [notebook, *old]:
            p.wait()
        assert os.path.exists(segment.segment_path(job))  # left behind

        new = spawn_rank(job, 0, tmp_path, step_ms=3)
        old.append(new)
        # the restarted rank is the one that finds the stale segment and says so, once
        ready, _, _ = select.select([new.stderr], [], [], 30)
        assert ready, "the restarted rank said nothing about the stale segment"
        first_line = new.stderr.readline()
        assert "reclaiming stale segment" in first_line
        control = wait_until(lambda: _attach_if_alive(job, new.pid), what="new rank up")
        assert control.generation == 0  # a fresh segment: the crashed job's config is gone
        assert control.config.to_dict() == dynprof_nb.ProfilerConfig().to_dict()
        status = control.status()
        assert list(status["rank"]) == [0] and list(status.pid) == [new.pid]
        control.close()
        _, err = finish(new)
        assert "reclaiming" not in err and "Traceback" not in err  # said once, not again
    finally:
        for p in [notebook, *old]:
            if p.poll() is None:
                p.kill()
        segment.unlink(job)


RECLAIMER = """
    import os, sys, time
    from dynprof_nb.contract.segment import Segment
    from dynprof_nb.contract.slot import claim_slot
    job, at = sys.argv[1], float(sys.argv[2])
    real = Segment.is_stale

    def slow_is_stale(self):  # a reclaimer preempted between its check and its unlink
        stale = real(self)
        time.sleep(0.3)
        return stale

    Segment.is_stale = slow_is_stale
    time.sleep(max(0.0, at - time.time()))  # every reclaimer starts at the same moment
    seg = Segment.open(job)
    claim_slot(seg, int(sys.argv[3]))
    st = os.fstat(seg.fileno())
    print(st.st_dev, st.st_ino, flush=True)
    sys.stdin.readline()
"""


def test_a_stale_segment_reclaimed_by_many_at_once_leaves_them_all_on_one(tmp_path):
    """Eight ranks of a restarted job find the crashed job's segment at the same moment (each
    slowed down between deciding it is stale and reclaiming it, as on a loaded machine): they
    must all end up on the one segment the name now points to, not on orphans."""
    for attempt in range(3):
        job = unique_job("race")
        dead = _python(f"""
            import os, signal
            from dynprof_nb.contract.segment import Segment
            from dynprof_nb.contract.slot import claim_slot
            claim_slot(Segment.open({job!r}), 0)
            os.kill(os.getpid(), signal.SIGKILL)
        """)
        dead.wait()
        at = time.time() + 1.0
        procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(RECLAIMER), job,
                                   str(at), str(r)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in range(8)]
        try:
            seen = {tuple(map(int, p.stdout.readline().split())) for p in procs}
            st = os.stat(segment.segment_path(job))
            assert seen == {(st.st_dev, st.st_ino)}, f"attempt {attempt}: orphaned segments"
        finally:
            errs = [p.communicate("bye\n", timeout=30)[1] for p in procs]
            segment.unlink(job)
        assert sum(e.count("reclaiming stale segment") for e in errs) == 1, errs  # said once


@pytest.mark.parametrize("how", ["killed", "closed"])
def test_a_watching_notebook_keeps_its_job_through_a_restart_of_every_rank(tmp_path, how):
    """The notebook attached and only read (no start, no set); every rank then died (or ended
    and closed) and the job restarted. The restarted ranks must join the segment the notebook
    is watching, not take it for stale and leave the notebook on an orphan that shows nothing
    (what re-running the quickstart's setup cell did before any window was asked for)."""
    job = unique_job("watch")
    old = spawn_rank(job, 0, tmp_path, step_ms=3)
    new = None
    try:
        control = wait_until(lambda: _attach_if_alive(job, old.pid), what="rank 0 up")
        assert control.generation == 0  # read only: this controller never wrote
        if how == "killed":
            old.kill()
            old.wait()
        else:
            finish(old)
        wait_until(lambda: not control.live_slots(), what="the old rank gone")
        new = spawn_rank(job, 0, tmp_path, step_ms=3)
        wait_until(lambda: [s for s in control.live_slots() if s.pid == new.pid and s.step > 0],
                   what="the restarted rank in the notebook's status", proc=new)
        control.start("+100", "+102")  # and the notebook still drives it
        status = control.wait(timeout=60, progress=False)
        assert list(control.windows().status) == ["complete"], (status.to_string(),
                                                                control.config.to_dict())
        control.close()
        _, err = finish(new)
        assert "reclaiming" not in err and "Traceback" not in err
    finally:
        for p in (old, new):
            if p is not None and p.poll() is None:
                p.kill()
        segment.unlink(job)


def _attach_if_alive(job: str, pid: int) -> dynprof_nb.Job | None:
    try:
        control = dynprof_nb.attach(job, create=False) if job in segment.list_jobs() else None
    except dynprof_nb.JobError:  # we found it stale first (and reclaimed it): not up yet
        return None
    if control is not None and any(s.pid == pid and s.step > 0 for s in control.slots()):
        return control
    if control is not None:
        control.close()
    return None


def test_live_job_segment_is_never_taken_over(tmp_path):
    job = unique_job("live")
    rank0 = spawn_rank(job, 0, tmp_path, step_ms=3)
    control = None
    try:
        control = wait_until(lambda: _attach_if_alive(job, rank0.pid), what="rank 0 up")
        gen = control.set(with_stack=True)
        # the controller that wrote it goes away (killed); the rank alone keeps the job alive
        notebook = _python(f"""
            import dynprof_nb, time
            dynprof_nb.attach({job!r}, create=True).set(profile_memory=True)
            print("ok", flush=True)
            time.sleep(600)
        """)
        assert notebook.stdout.readline().strip() == "ok"
        notebook.kill()
        notebook.wait()
        control.close()
        # a second launch of the same job name (another rank, another controller) joins it
        joiner = spawn_rank(job, 1, tmp_path, step_ms=3)
        try:
            control = wait_until(lambda: _attach_if_alive(job, joiner.pid), what="joiner up")
            assert control.generation == gen + 1
            assert control.config.with_stack and control.config.profile_memory
            status = control.status().sort_values("rank")
            assert list(status["rank"]) == [0, 1] and status.alive.all()
            assert status.pid.iloc[0] == rank0.pid  # rank 0's slot was not taken over
            _, err = finish(joiner)
            assert "reclaiming" not in err
        finally:
            if joiner.poll() is None:
                joiner.kill()
        assert rank0.poll() is None
    finally:
        finish(rank0)
        if control is not None:
            control.close()
        segment.unlink(job)


# -- row 5: two controllers writing at once ----------------------------------------------

CONTROLLER = """
    import json, sys, zlib
    import dynprof_nb
    job, me, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    control = dynprof_nb.attach(job, create=False)
    sys.stdin.readline()  # start together
    wrote = []
    for i in range(n):
        payload = [f"{me}{i}-{k}" * (1 + (i + k) % 9) for k in range(i % 13)]
        crc = zlib.crc32(f"{me}/{i}:{','.join(payload)}".encode())
        gen = control.set(prof_path=f"{me}/{i}/{crc}", mstx_domain_include=payload)
        wrote.append([gen, f"{me}/{i}/{crc}"])
    print(json.dumps(wrote), flush=True)
    sys.stdin.readline()  # both are done: read the result
    print(json.dumps(control.config.to_dict()), flush=True)
"""

WRITES_EACH = 400


def test_two_controllers_writing_at_once_do_not_interleave_and_last_write_wins(tmp_path):
    job = unique_job("two")
    control = dynprof_nb.attach(job, create=True)
    monitor = dynprof_nb.Monitor(job=job, rank=0, output_path=tmp_path, backend="builtin")
    writers = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(CONTROLLER), job, me,
                                 str(WRITES_EACH)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for me in ("A", "B")]
    torn = seen = 0
    try:
        for w in writers:
            w.stdin.write("go\n")
            w.stdin.flush()
        last = None
        while any(w.poll() is None for w in writers) and control.generation < 2 * WRITES_EACH:
            monitor.step()  # a rank reading while both write
            cfg = monitor.config
            if cfg is not last and cfg.prof_path != "./":
                me, i, crc = cfg.prof_path.split("/")
                payload = ",".join(cfg.mstx_domain_include)
                torn += zlib.crc32(f"{me}/{i}:{payload}".encode()) != int(crc)
                seen += 1
                last = cfg
        wrote = [json.loads(w.stdout.readline()) for w in writers]
        for w in writers:
            w.stdin.write("done\n")
            w.stdin.flush()
        finals = [json.loads(w.stdout.readline()) for w in writers]
    finally:
        for w in writers:
            if w.poll() is None:
                w.communicate(timeout=30)
    gens = sorted(g for one in wrote for g, _ in one)
    assert gens == list(range(1, 2 * WRITES_EACH + 1))  # each write whole, none lost
    for one in wrote:  # each controller's own writes are in its own order
        assert [g for g, _ in one] == sorted(g for g, _ in one)
    winner = max((g, p) for one in wrote for g, p in one)
    assert control.generation == winner[0]
    assert finals[0] == finals[1] == control.config.to_dict()  # both see the same result
    assert finals[0]["prof_path"] == winner[1]  # and it is the last write
    assert torn == 0 and seen > 10
    monitor.step()
    assert monitor.config.prof_path == winner[1] and monitor.last_error == ""
    monitor.close()
    control.close()
    segment.unlink(job)
