"""File mode's promise (issue 30): an edit complete in ``profiler_config.json`` before a rank's
``step()`` is applied by that ``step()``, whatever the step time and the relay's poll, and a
half-written file is never applied. Every test here sets the relay's timed poll to an hour,
so what it sees is the rank's own look at the file, never the poll."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from jobutil import trace_steps, unique_job

import dynprof_nb
from dynprof_nb import filewatch
from dynprof_nb.contract import segment
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.training import monitor as monitor_module
from dynprof_nb.training.monitor import FileModeMonitor

NO_POLL = 3600.0  # the relay's timed poll never comes during a test


def cfg_text(**keys: object) -> str:
    return json.dumps(ProfilerConfig(**keys).to_dict(), indent=4)


def write_in_place(cfg: Path, text: str) -> None:
    """MindSpore's own test's writer: ``json.dump(data, open(path, "w"))``, not atomic."""
    with open(cfg / "profiler_config.json", "w", encoding="utf-8") as fh:
        fh.write(text)


@pytest.fixture
def files(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    name, cfg, out = unique_job("filestep"), tmp_path / "cfg", tmp_path / "out"
    cfg.mkdir()
    yield name, cfg, out
    segment.unlink(name)


def monitor(name: str, cfg: Path, out: Path, rank: int = 0) -> dynprof_nb.Monitor:
    return dynprof_nb.Monitor(job=name, rank=rank, output_path=out, backend="builtin",
                              cfg_path=cfg, poll_interval=NO_POLL)


def test_an_edit_before_step_is_applied_by_that_step(files) -> None:
    """MindSpore's documented example at full speed: 2..5 from the start, the file rewritten
    in place to 6..7 just before step 6's step(): both windows, the second one moved to the
    next step as file mode does for a window that has begun (7..8), under the name asked."""
    name, cfg, out = files
    write_in_place(cfg, cfg_text(start_step=2, stop_step=5))
    m = monitor(name, cfg, out)
    assert isinstance(m, FileModeMonitor)
    try:
        for i in range(15):
            if i == 5:
                write_in_place(cfg, cfg_text(start_step=6, stop_step=7))
            m.step()
            if i == 5:
                assert (m.state, m.window) == ("recording", (7, 8)), m.last_error
    finally:
        m.close()
    assert sorted(p.name for p in out.iterdir()) == ["rank0_start2_stop5", "rank0_start6_stop7"]
    assert trace_steps(out / "rank0_start2_stop5") == [2, 3, 4, 5]
    assert trace_steps(out / "rank0_start6_stop7") == [7, 8]


def test_a_moved_window_records_every_step_while_the_last_one_is_saved(files,
                                                                      monkeypatch) -> None:
    """Issue 43's file-mode flake (1 run in 13 beside two CPU burners): MindSpore's example,
    2..5 then 6..7 written before step 6 (moved to 7..8), and 2..5's writer process forked by
    the training thread at a step of 7..8 (``Windows.fork_here``). That step's marker was
    lost when the fork rescheduled the step path (fixed in 57de081). Here the race happens
    every time: 2..5's save is held until 7..8 records, and the steps go on only once the
    writer asks for its fork, so the fork comes at step 7."""
    from jobutil import wait_until

    from dynprof_nb.training import window_io

    held, real_save = threading.Event(), window_io.Windows.save

    def held_save(self: window_io.Windows, rec: dict, end: dict) -> None:
        held.wait(60)
        real_save(self, rec, end)

    monkeypatch.setattr(window_io.Windows, "save", held_save)
    name, cfg, out = files
    write_in_place(cfg, cfg_text(start_step=2, stop_step=5))
    m = monitor(name, cfg, out)
    try:
        for _ in range(5):
            m.step()  # 2..5 recorded; its save waits
        write_in_place(cfg, cfg_text(start_step=6, stop_step=7))
        m.step()  # step 6 ends: 6..7 moved to 7..8
        assert (m.state, m.window) == ("recording", (7, 8)), m.last_error
        held.set()
        wait_until(lambda: m._state.fork_job is not None, timeout=30,
                   what="2..5's writer to ask the training thread for its fork")
        for _ in range(4):
            m.step()
    finally:
        held.set()
        m.close()
    assert trace_steps(out / "rank0_start2_stop5") == [2, 3, 4, 5]
    assert trace_steps(out / "rank0_start6_stop7") == [7, 8]


def test_a_step_during_the_relay_threads_write_applies_the_edit(files, monkeypatch) -> None:
    """The relay's timed poll (another thread of the rank's process) has read the edit, so
    the file's stamp no longer reads as changed, but has not written it into the job and rung
    the doorbell yet: a step then must wait for that write and apply the edit, not go on
    without it. It went on when the previous window's save (MindSpore's analysis) held the
    GIL between the edit and the step: the moved window began a step late and lost a step's
    marker (issue 43). Here the relay thread is held between its read and its write until
    the step has asked for the file, every time."""
    from dynprof_nb.control import relay as relay_module
    from dynprof_nb.training import filerelay

    name, cfg, out = files
    m = monitor(name, cfg, out)
    read, go, asked = threading.Event(), threading.Event(), threading.Event()
    real_apply, real_relay_now = relay_module.Relay._apply, filerelay.FileRelay.relay_now

    def held_apply(self, cfg_, last):  # the relay thread: read done, write not begun
        if threading.current_thread() is not threading.main_thread():
            read.set()
            go.wait(30)
        return real_apply(self, cfg_, last)

    def relay_now(self):  # the step asks for the file: the held write may go on
        asked.set()
        return real_relay_now(self)

    # the relay thread reads the edit long enough after it that its stamp is trusted
    # (filewatch's "racy" rule off): from then on the file reads as unchanged
    monkeypatch.setattr(filewatch, "RACY_S", 0.0)
    monkeypatch.setattr(filewatch, "RACY_COARSE_S", 0.0)
    monkeypatch.setattr(relay_module.Relay, "_apply", held_apply)
    monkeypatch.setattr(filerelay.FileRelay, "relay_now", relay_now)
    releaser = threading.Thread(target=lambda: asked.wait(10) and go.set(), daemon=True)
    poller = threading.Thread(target=m._file.relay.poll, daemon=True)
    try:
        m.step()
        write_in_place(cfg, cfg_text(start_step=40, stop_step=41))
        poller.start()
        assert read.wait(30), "the relay thread did not read the edit"
        releaser.start()
        m.step()  # the edit is complete in the file before this step: it applies it
        assert (m.state, m.window) == ("armed", (40, 41)), (m.state, m.window)
    finally:
        go.set()
        poller.join(30)
        m.close()


def test_a_window_written_ahead_is_exact_and_a_plain_monitor_keeps_its_step(files) -> None:
    name, cfg, out = files
    m = monitor(name, cfg, out)
    try:
        for _ in range(3):
            m.step()
        write_in_place(cfg, cfg_text(start_step=6, stop_step=7))
        m.step()  # step 4 ends: armed for 6..7, not moved
        assert (m.state, m.window) == ("armed", (6, 7))
        for _ in range(4):
            m.step()
    finally:
        m.close()
    assert trace_steps(out / "rank0_start6_stop7") == [6, 7]
    files = dynprof_nb.attach(cfg_path=cfg)  # writes by rename: a new file under the name
    files.start(20, 21)
    m2 = monitor(unique_job("renamed"), cfg, out)
    try:
        files.start(30, 31)
        m2.step()
        assert (m2.state, m2.window) == ("armed", (30, 31))
    finally:
        m2.close()
        segment.unlink(m2.job)
    plain = dynprof_nb.Monitor(job=unique_job("plain"), output_path=out, backend="builtin")
    try:  # the shared-memory step() is untouched (its cost: test_monitor's ratio test)
        # no file check in it: Monitor's own step(), or its timed twin (steps long enough
        # to time, live step times); never the file-mode one
        assert not isinstance(plain, FileModeMonitor)
        assert type(plain).step in (dynprof_nb.Monitor.step, monitor_module._timed_step)
    finally:
        plain.close()
        segment.unlink(plain.job)


def test_every_prefix_of_a_half_written_file_keeps_the_last_good_config(files) -> None:
    """A non-atomic writer shows the file truncated, then growing: every prefix a step can
    see is rejected (the last good window stays armed) until the file is whole."""
    name, cfg, out = files
    write_in_place(cfg, cfg_text(start_step=1000, stop_step=1001))
    m = monitor(name, cfg, out)
    job = dynprof_nb.attach(name)
    try:
        m.step()
        gen = job.generation
        assert m.window == (1000, 1001)
        whole = cfg_text(start_step=2000, stop_step=2001, with_stack=True)
        for k in range(0, len(whole), 7):
            write_in_place(cfg, whole[:k])
            m.step()
            assert (m.window, m.config.with_stack, job.generation) == ((1000, 1001), False, gen)
        assert "not valid JSON" in job.status().query("rank == -1").iloc[0].error
        write_in_place(cfg, whole)
        m.step()
        assert (m.window, m.config.with_stack) == ((2000, 2001), True)
        assert job.generation == gen + 1  # one write for the whole file, none for the parts
    finally:
        m.close()
        job.close()


def test_a_read_during_which_the_file_changed_is_given_up(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "profiler_config.json"
    path.write_text(cfg_text(start_step=3, stop_step=4))
    watch = filewatch.FileWatch(path)
    real_read = os.read

    def read_then_written(fd: int, n: int) -> bytes:
        data = real_read(fd, n)
        with open(path, "a") as fh:  # the writer appends while we read
            fh.write(" ")
        return data

    monkeypatch.setattr(filewatch.os, "read", read_then_written)
    assert watch.read() is None and watch.changed()
    monkeypatch.setattr(filewatch.os, "read", real_read)
    assert json.loads(watch.read())["start_step"] == 3
    watch.close()


def test_two_ranks_on_a_node_relay_an_edit_once(files) -> None:
    """Whichever rank steps first after the edit relays it; the other adopts it: one write
    into the job, both ranks on the same window."""
    name, cfg, out = files
    ranks = [monitor(name, cfg, out, rank=r) for r in (0, 1)]
    job = dynprof_nb.attach(name)
    try:
        for m in ranks:
            m.step()
        gen = job.generation
        write_in_place(cfg, cfg_text(start_step=50, stop_step=60))
        ranks[1].step()
        assert job.generation == gen + 1 and ranks[1].window == (50, 60)
        ranks[0].step()
        assert job.generation == gen + 1 and ranks[0].window == (50, 60)
    finally:
        for m in ranks:
            m.close()
        job.close()


WRITER = """
import json, sys
path, versions = sys.argv[1], json.loads(sys.argv[2])
for i in range(int(sys.argv[3])):
    with open(path, "w") as fh:  # not atomic: truncated, then written in 8 KiB pieces
        json.dump(versions[i % len(versions)], fh, indent=4)
"""


def test_a_writer_racing_the_steps_never_gets_a_half_file_applied(files) -> None:
    """A second process rewrites the file in place as fast as it can (each version over
    8 KiB, so Python writes it in several pieces) while the rank steps: every config the rank
    ever holds is one of the versions written whole, and the last one is applied."""
    name, cfg, out = files
    pad = ["domain-" + "x" * 40 + str(i) for i in range(300)]
    versions = [ProfilerConfig(start_step=10**6, stop_step=10**6 + 1, mstx_domain_include=pad,
                               prof_path=f"/tmp/v{i}").to_dict() for i in range(3)]
    assert len(json.dumps(versions[0], indent=4)) > 2 * 8192
    write_in_place(cfg, json.dumps(versions[0]))
    m = monitor(name, cfg, out)
    seen, torn = set(), 0
    try:
        writes = 300
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(cfg / "profiler_config.json"),
                                 json.dumps(versions), str(writes)])
        while proc.poll() is None:
            m.step()
            seen.add(m.config.prof_path)
            assert m.config.mstx_domain_include == pad
            torn += "not valid JSON" in m._file.relay.error  # a step that read a half file
        assert proc.returncode == 0
        m.step()
        assert m.config.prof_path == versions[(writes - 1) % 3]["prof_path"]
    finally:
        m.close()
    assert seen <= {v["prof_path"] for v in versions}
    assert len(seen) > 1  # the edits did reach the rank while it stepped
    assert torn  # and half-written files did too (hundreds of steps, measured)


def test_a_stuck_relay_lock_holder_delays_an_edit_but_never_stalls_the_steps(files) -> None:
    """Another process stopped while it holds the node's relay lock (a debugger, SIGSTOP):
    the first look waits for it (a bounded while), the next ones do not wait at all, and the
    edit is applied at the first step after the lock is free."""
    import fcntl

    from dynprof_nb.locks import open_lock

    name, cfg, out = files
    m = monitor(name, cfg, out)
    held = open_lock(f"relay.{name}.state")
    try:
        m.step()
        fcntl.flock(held, fcntl.LOCK_EX)
        write_in_place(cfg, cfg_text(start_step=40, stop_step=41))
        m.step()  # waited NODE_LOCK_WAIT_S for the holder, then went on
        assert m.state == "idle" and m._file.relay._lock_wait == 0.0
        m.step()
        assert m.state == "idle"
        fcntl.flock(held, fcntl.LOCK_UN)
        m.step()
        assert (m.state, m.window) == ("armed", (40, 41))
    finally:
        os.close(held)
        m.close()


def test_the_timed_poll_still_relays_an_edit_no_step_saw(files) -> None:
    """What no rank's fstat sees (an edit from another host of NFS, a job between steps)
    arrives by the elected relay's poll, which reads the file every poll_interval."""
    from jobutil import wait_until

    name, cfg, out = files
    m = dynprof_nb.Monitor(job=name, output_path=out, backend="builtin", cfg_path=cfg,
                           poll_interval=0.05)
    job = dynprof_nb.attach(name)
    try:
        m.step()
        write_in_place(cfg, cfg_text(start_step=70, stop_step=71))
        wait_until(lambda: job.config.start_step == 70, what="the poll to relay the edit")
        m.step()
        assert (m.state, m.window) == ("armed", (70, 71))
    finally:
        m.close()
        job.close()


def test_a_file_read_within_its_timestamp_tick_is_read_again(tmp_path: Path,
                                                             monkeypatch) -> None:
    """Two writes of the same size within one timestamp tick show the same stamp (git's
    "racily clean" index entries): a file read that soon after its change is not trusted."""
    path = tmp_path / "profiler_config.json"
    path.write_text(cfg_text(start_step=3, stop_step=4))
    changed_ns = path.stat().st_ctime_ns
    watch = filewatch.FileWatch(path)
    monkeypatch.setattr(filewatch.time, "time_ns", lambda: changed_ns + 1_000_000)
    assert watch.read() is not None and watch.changed()  # 1 ms old: maybe not the last write
    monkeypatch.setattr(filewatch.time, "time_ns", lambda: changed_ns + 1_000_000_000)
    assert watch.read() is not None and not watch.changed()  # a second old: trusted
    path.write_text(cfg_text(start_step=5, stop_step=6))  # same size, new stamp
    assert watch.changed()
    watch.close()
