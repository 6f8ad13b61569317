"""Shared helpers for tests that run real training processes against a real segment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dynprof_nb
from dynprof_nb.contract import segment, window_dirs

TRAIN_LOOP = Path(__file__).with_name("train_loop.py")


def unique_job(prefix: str = "t") -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def spawn_rank(job: str, rank: int, out: Path, *, step_ms: float = 2.0, steps: int | None = None,
               style: str = "step", backend: str = "builtin",
               extra: list[str] | None = None) -> subprocess.Popen:
    cmd = [sys.executable, str(TRAIN_LOOP), "--job", job, "--rank", str(rank), "--out",
           str(out), "--step-ms", str(step_ms), "--style", style, "--backend", backend,
           *(extra or [])]
    if steps is not None:
        cmd += ["--steps", str(steps)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "",
               proc: subprocess.Popen | None = None, every: float = 0.02) -> Any:
    """Wait for a fact the product reports: the suite's one way to wait (never a sleep).

    Calls ``predicate`` until it returns something true and returns that value, with one
    deadline (``timeout`` seconds). Past it, fails saying ``what`` it was waiting for and the
    last value it saw (a status row, a step), so the failure reads as the fact that did not
    come. With ``proc``, a training process that exits first fails at once, with its output.
    """
    deadline = time.monotonic() + timeout
    value: Any = None
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"training process exited ({proc.returncode}) while waiting "
                                 f"for {what}:\n{''.join(kill_process(proc))}")
        if time.monotonic() >= deadline:
            break
        time.sleep(every)
    seen = repr(value)
    seen = seen if len(seen) <= 800 else seen[:800] + "..."
    raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}; "
                         f"the last value seen: {seen}")


def finish(proc: subprocess.Popen, timeout: float = 30.0) -> tuple[str, str]:
    """Stop a training process cleanly (SIGTERM) and return its output; one that has not
    ended within ``timeout`` seconds is killed (:func:`kill_process`). A process started by
    :func:`run_script` or ``framework_jobs.spawn`` writes into a file, not a pipe: once it has
    ended, what it forked and left behind (MindSpore's analysis workers) is killed with its
    group, and cannot hold the test."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    if getattr(proc, "output_file", None) is not None:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return kill_process(proc)
        end_group(proc)
        return output_of(proc), ""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        return kill_process(proc)


def kill_process(proc: subprocess.Popen, dump_stacks: bool = False) -> tuple[str, str]:
    """Kill a process, and every process of its group when it leads one (started with
    ``start_new_session=True``; its children too, even after it has ended), and return what
    it wrote, in a bounded time.

    Reading is bounded because a child the process forked (MindSpore's analysis workers) keeps
    its stdout open after the parent is gone: an unbounded ``communicate()`` here once held a
    CI run until CI's own limit, with no word of which test (the processes this suite starts
    for MindSpore now write into a file: :func:`run_script`). ``dump_stacks`` first asks the
    group for Python stacks with SIGUSR1 (a script that registered ``faulthandler`` for it
    prints them), so that the output says where a hung process was.
    """
    group = proc.pid if _leads_group(proc) else None
    if group is not None and dump_stacks:
        _signal_group(group, signal.SIGUSR1)
        _stacks_written(proc)
    if group is not None:
        _signal_group(group, signal.SIGKILL)
    elif proc.poll() is None:
        proc.kill()
    if getattr(proc, "output_file", None) is not None:
        proc.wait(10)
        return output_of(proc), ""
    try:
        out, err = proc.communicate(timeout=10)
        return out or "", err or ""
    except subprocess.TimeoutExpired as exc:  # a process outside the group holds the pipe
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait(10)
        return _text(exc.stdout), _text(exc.stderr)


def start_script(cmd: list[str], **popen: Any) -> subprocess.Popen:
    """Start ``cmd`` as a process whose output (stdout and stderr together) goes into a file,
    in a session of its own: a grandchild that outlives it holds no pipe of the test's, and
    :func:`end_group` kills it. Read the output with :func:`output_of`."""
    out = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    proc = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True,
                            **popen)
    proc.output_file = out  # type: ignore[attr-defined]
    proc.leads_group = True  # type: ignore[attr-defined]
    return proc


def _stacks_written(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    """After SIGUSR1: wait until the output has a dumped stack and has stopped growing (the
    dump's own end), or ``timeout`` seconds (a process without the handler writes nothing;
    this wait is only there to make a hung test's failure say where it hung)."""
    if getattr(proc, "output_file", None) is None:
        return
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        text = output_of(proc)
        if "most recent call first" in text and text == last:
            return
        last = text
        time.sleep(0.1)


def main_threads(stacks: Any) -> dict[int, list[str]]:
    """Each rank's main-thread functions in ``job.stacks()``, outermost first: what a test
    waits on to know where a rank is (in an all-reduce, in its hang), rather than a sleep."""
    main = stacks[stacks.thread == "MainThread"].sort_values("depth")
    return {int(r): list(rows.function) for r, rows in main.groupby("rank")}


def output_of(proc: subprocess.Popen) -> str:
    """What a process from :func:`start_script` has written so far."""
    out = proc.output_file  # type: ignore[attr-defined]
    out.flush()
    out.seek(0)
    return out.read()


def end_group(proc: subprocess.Popen) -> None:
    """Kill what is left of an ended process's group (the workers it forked)."""
    if _leads_group(proc):
        _signal_group(proc.pid, signal.SIGKILL)


def run_script(cmd: list[str], timeout: float, check: bool = False,
               **popen: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, timeout=...)`` that cannot hang:
    stdout and stderr go to files, so MindSpore's forked analysis workers, which outlive the
    script, hold no pipe open; they are killed with the script's group (a session of its
    own) when it ends. Past ``timeout`` the group is killed and the test fails with the
    output so far, saying so."""
    files = [tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") for _ in "12"]
    proc = subprocess.Popen([str(c) for c in cmd], stdout=files[0], stderr=files[1],
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True,
                            **popen)
    timed_out = False
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _signal_group(proc.pid, signal.SIGKILL)  # what it forked and left running (or it)
        proc.wait(10)
    out, err = (_rewound(f) for f in files)
    for f in files:
        f.close()
    if timed_out:
        raise AssertionError(f"{cmd[:3]} still running after {timeout} s (killed); it wrote:\n"
                             f"{out[-3000:]}\n{err[-6000:]}")
    if check and proc.returncode:
        raise AssertionError(f"{cmd[:3]} exited {proc.returncode}:\n{out[-3000:]}\n{err[-6000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _rewound(fh: Any) -> str:
    fh.flush()
    fh.seek(0)
    return fh.read()


def _leads_group(proc: subprocess.Popen) -> bool:
    """Whether ``proc`` leads its process group: started so (``framework_jobs.spawn`` marks
    it, as a reaped process can no longer be asked), or found so."""
    if getattr(proc, "leads_group", False):
        return True
    try:
        return os.getpgid(proc.pid) == proc.pid
    except ProcessLookupError:
        return False


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


@contextmanager
def running_ranks(job: str, out: Path, ranks: int = 1, **kwargs: Any
                  ) -> Iterator[tuple[dynprof_nb.Job, list[subprocess.Popen]]]:
    """Start ``ranks`` training processes, attach, and clean everything up afterwards."""
    control = dynprof_nb.attach(job, create=True)
    procs = [spawn_rank(job, r, out, **kwargs) for r in range(ranks)]
    try:
        wait_until(lambda: len(control.live_slots()) == ranks
                   and all(s.step > 0 for s in control.live_slots()),
                   what=f"{ranks} rank(s) of {job} to start stepping")
        yield control, procs
    finally:
        for p in procs:
            finish(p)
        control.close()
        segment.unlink(job)


def trace_steps(window_dir: str | Path) -> list[int]:
    """The ProfilerStep#N numbers in a built-in window's trace.json."""
    import json

    data = json.loads((Path(window_dir) / "trace.json").read_text())
    return sorted(int(e["name"].split("#")[1]) for e in data["traceEvents"]
                  if e.get("name", "").startswith("ProfilerStep#"))


def recorded_window(job: dynprof_nb.Job, start: str, stop: str, timeout: float,
                    **options: Any) -> tuple[Path, dict[str, Any], int, int]:
    """Start a window, wait for it, and check it is the job's one complete window, on exactly
    the steps asked for: (its directory, its manifest, first step, last step)."""
    job.start(start, stop, **options)
    first, last = job.config.start_step, job.config.stop_step
    job.wait(timeout=timeout, progress=False)
    found = job.windows()
    assert list(found.status) == ["complete"], job.status().to_string()
    assert (found.start.iloc[0], found.stop.iloc[0]) == (first, last)
    path = Path(found.path.iloc[0])
    return path, window_dirs.read_manifest(path), first, last


WITHIN_STEPS = 30  # the harness: a complete triggered window within 30 steps


def steps_at(times: Any, t: float) -> dict[int, int]:
    """Each rank's step at monotonic time ``t``, from ``job.step_times()`` rows (the last
    step that had ended by then)."""
    return {int(rank): int(rows[rows.end_s <= t].step.max()) for rank, rows
            in times.groupby("rank") if (rows.end_s <= t).any()}


def trigger_placement(start: int, stop: int, first_slow: int, ahead: int) -> dict[str, int]:
    """Where a triggered window lies against the slowdown: in the slow rank's steps (from
    its first slow step) and in the most advanced rank's (from its step at the slowdown)."""
    return {"start_after_slow": start - first_slow, "stop_after_slow": stop - first_slow,
            "start_after_ahead": start - ahead, "stop_after_ahead": stop - ahead}


def windows_only(frame: Any) -> Any:
    """``job.windows()`` without the recent-steps records a trigger also keeps (issue 46)."""
    if "recent" not in frame:
        return frame
    return frame[frame["recent"].fillna("").astype(str) == ""].reset_index(drop=True)
