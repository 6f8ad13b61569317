"""Two controllers on one job (issue 20, item 6): a second controller's window that overlaps
the one the ranks are recording is refused at once, naming that window, its ranks and what to
do; one after it is queued with a warning that says so, and both are recorded exactly.

Controller A is this test process; controller B is a second process with its own ``Job``
handle, started before A's window (its imports cost seconds on a loaded machine) and told by a
line on its stdin when to act, so it acts while A's window is being recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from jobutil import running_ranks, trace_steps, unique_job, wait_until

from dynprof_nb.control.base import WindowConflict

CONTROLLER_B = textwrap.dedent("""
    import json, sys, warnings
    import dynprof_nb
    from dynprof_nb.control.base import WindowConflict

    job = dynprof_nb.attach(sys.argv[1])
    print(json.dumps({"ready": len(job.live_slots())}), flush=True)
    out = {}
    for line in sys.stdin:
        what = line.strip()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gen_before = job.generation
            try:
                if what == "overlap":
                    job.start("+2", "+12")
                elif what == "after":
                    stop = max(s.stop for s in job.live_slots())
                    job.start(stop + 5, stop + 9)
                elif what == "armed":
                    job.start("+4000", "+4004")
                out[what] = {"accepted": job.generation}
            except WindowConflict as exc:
                out[what] = {"refused": str(exc), "generation_unchanged":
                             job.generation == gen_before}
        out[what]["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
        print(json.dumps({what: out[what]}), flush=True)
""")


def test_overlapping_window_of_a_second_controller_is_refused_and_a_later_one_queued(tmp_path):
    name = unique_job("two")
    with running_ranks(name, tmp_path, ranks=2, step_ms=3) as (job_a, _):
        b = subprocess.Popen([sys.executable, "-c", CONTROLLER_B, name], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            def ask_b(what: str) -> dict:
                if what != "ready":
                    b.stdin.write(what + "\n")
                    b.stdin.flush()
                line = b.stdout.readline()
                assert line, f"controller B exited: {b.stderr.read()[-2000:]}"
                return json.loads(line)[what]

            assert ask_b("ready") == 2  # B is attached and sees both ranks

            job_a.start("+25", "+400")  # 75 ms ahead at 3 ms: a stalled rank would skip it
            a_first, a_last = job_a.config.start_step, job_a.config.stop_step
            wait_until(lambda: [s.state for s in job_a.live_slots()] == ["recording"] * 2,
                       what="both ranks recording A's window")
            gen_a = job_a.generation

            # B overlaps A's window: refused at once, nothing written, A's window goes on
            refused = ask_b("overlap")
            text = refused["refused"]
            assert refused["generation_unchanged"] and job_a.generation == gen_a, refused
            assert f"window {a_first}-{a_last}" in text and "ranks 0, 1 are recording" in text
            assert f"asked for by pid {os.getpid()}" in text
            assert "wait()" in text and "stop()" in text and f"step {a_last}" in text
            assert [s.state for s in job_a.live_slots()] == ["recording"] * 2
            assert (job_a.config.start_step, job_a.config.stop_step) == (a_first, a_last)

            # B asks for a window after A's: accepted, and told it waits for A's
            queued = ask_b("after")
            assert queued.get("accepted") == gen_a + 1, queued
            (warning,) = queued["warnings"]
            assert warning.startswith("WindowQueued") and "queued behind" in warning
            assert f"window {a_first}-{a_last}" in warning and f"at step {a_last}" in warning
            b_first, b_last = a_last + 5, a_last + 9
            # both are recorded, each on exactly its own steps; wait() does not time out
            job_a.wait(timeout=120, progress=False)
            found = job_a.windows()
            got = sorted(zip(found.start, found.stop, found.status, strict=True))
            assert got == [(a_first, a_last, "complete")] * 2 + [(b_first, b_last,
                                                                  "complete")] * 2, got
            for row in found.itertuples():
                assert trace_steps(row.path) == list(range(row.start, row.stop + 1))
            assert not job_a.status().error.any(), job_a.status().to_string()

            # A arms a window far ahead; B replacing it is told whose window it cancels
            job_a.start("+3000", "+3004")
            wait_until(lambda: [s.state for s in job_a.live_slots()] == ["armed"] * 2,
                       what="A's window armed")
            replaced = ask_b("armed")
            assert "accepted" in replaced, replaced
            (warning,) = replaced["warnings"]
            assert warning.startswith("WindowReplaced") and f"pid {os.getpid()}" in warning
            job_a.stop()
        finally:
            b.stdin.close()
            b.wait(timeout=30)


def test_restarting_the_window_being_recorded_is_refused_not_skipped(tmp_path):
    """The same controller asking again while its window records: the rank would skip it
    after the current one (the old behaviour: "accepted", then a skipped window)."""
    with running_ranks(unique_job("again"), tmp_path, ranks=1, step_ms=3) as (job, _):
        job.start("+25", "+3000")  # 75 ms ahead at 3 ms: a stalled rank would skip it
        wait_until(lambda: job.live_slots()[0].state == "recording", what="recording")
        gen = job.generation
        try:
            job.start("+25", "+28")
        except WindowConflict as exc:
            assert "(this process)" in str(exc) and "rank 0 is recording" in str(exc)
        else:
            raise AssertionError("a window overlapping the recorded one was accepted")
        assert job.generation == gen
        job.stop()
        job.wait(timeout=60, progress=False)
        assert list(job.windows().status) == ["complete"]
