"""The relay: a profiler_config.json mirrored into a job segment (the original's monitor
process), by the Relay class, by ``dynprof relay`` and by ``Monitor(cfg_path=...)``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jobutil import running_ranks, trace_steps, unique_job, wait_until

import dynprof_nb
from dynprof_nb.contract import segment
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.control.relay import POLL_INTERVAL_S, Relay
from dynprof_nb.locks import private_dir


def write_file(cfg_dir: Path, **keys: object) -> None:
    """What a person (or a script) does: write the whole file, MindSpore's format."""
    (cfg_dir / "profiler_config.json").write_text(json.dumps(ProfilerConfig(**keys).to_dict()))


@pytest.fixture
def job() -> Iterator[dynprof_nb.Job]:
    """A job prepared before its ranks start (what the relay feeds), removed afterwards."""
    name = unique_job("relay")
    job = dynprof_nb.attach(name, create=True)
    yield job
    job.close()
    segment.unlink(name)


def relay_row(job: dynprof_nb.Job) -> dict:
    rows = job.status()
    rows = rows[rows["rank"] == -1]
    assert len(rows) == 1, job.status().to_string()
    return rows.iloc[0].to_dict()


def test_a_file_edit_drives_a_running_job(tmp_path: Path) -> None:
    name = unique_job("relay")
    with running_ranks(name, tmp_path / "out", step_ms=5) as (job, _procs):
        relay = Relay(tmp_path, name, poll_interval=0.1).start()
        try:
            first = job.live_slots()[0].step + 60
            write_file(tmp_path, start_step=first, stop_step=first + 4, profile_memory=True)
            wait_until(lambda: job.config.start_step == first, what="the file to be relayed")
            job.wait(timeout=60, progress=False)
            assert (job.config.start_step, job.config.profile_memory) == (first, True)
            (window,) = job.windows().path
            assert trace_steps(window) == list(range(first, first + 5))

            # the same window with another key changed is a set: no second window
            gen = job.generation
            write_file(tmp_path, start_step=first, stop_step=first + 4, profile_memory=False)
            wait_until(lambda: job.generation > gen, what="the edit to be relayed")
            assert job.config.profile_memory is False
            target = job.generation
            wait_until(lambda: all(s.applied >= target for s in job.live_slots()),
                       what="the ranks to apply the edit")  # where a second window would arm
            assert len(job.windows()) == 1
            row = relay_row(job)
            assert (row["state"], row["error"], row["window"]) == ("relay", "", f"{first}-"
                                                                   f"{first + 4}")
        finally:
            relay.stop()


def test_an_invalid_file_keeps_the_last_good_config_and_says_why(
        tmp_path: Path, job: dynprof_nb.Job) -> None:
    relay = Relay(tmp_path, job, poll_interval=0.05)
    write_file(tmp_path, profile_memory=True, activities=["CPU"])
    assert relay.poll() is True
    good = job.config.to_dict()
    gen = job.generation

    cfg = tmp_path / "profiler_config.json"
    data = json.loads(cfg.read_text())
    cfg.write_text(json.dumps(dict(data, start_step="20")))  # MindSpore: silently no window
    assert relay.poll() is False
    assert job.generation == gen and job.config.to_dict() == good
    assert "start_step" in relay_row(job)["error"] and "'20'" in relay_row(job)["error"]

    cfg.write_text('{"start_step": 5, ')  # half a file
    relay.poll()
    assert "not valid JSON" in relay_row(job)["error"]
    assert job.config.to_dict() == good

    write_file(tmp_path, profile_memory=True, activities=["CPU"], with_stack=True)
    assert relay.poll() is True
    assert relay_row(job)["error"] == "" and job.config.with_stack is True


def test_unknown_keys_are_relayed_with_a_warning(tmp_path: Path, job: dynprof_nb.Job) -> None:
    (tmp_path / "profiler_config.json").write_text(
        json.dumps({"record_shape": True, "profile_memory": True}))
    assert Relay(tmp_path, job).poll() is True
    assert job.config.profile_memory is True
    assert "did you mean 'record_shapes'" in relay_row(job)["error"]


def test_dynprof_relay_command(tmp_path: Path, job: dynprof_nb.Job) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "dynprof_nb.ui.cli", "relay", "--cfg-path",
                             str(tmp_path), "--job", job.name, "--poll-interval", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        write_file(tmp_path, start_step=100, stop_step=110, record_shapes=True)
        wait_until(lambda: job.config.start_step == 100, timeout=30, what="the CLI relay")
        assert job.config.record_shapes is True
        # the relay's row is published just after the config it relayed
        wait_until(lambda: (job.status()["rank"] == -1).any(), what="the relay's row")
        assert relay_row(job)["pid"] == proc.pid
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "relaying" in out


def test_monitor_with_cfg_path_relays_on_one_process(tmp_path: Path) -> None:
    name = unique_job("relay-monitor")
    write_file(tmp_path, start_step=5, stop_step=7, activities=["CPU"])
    with dynprof_nb.Monitor(job=name, output_path=tmp_path / "out", backend="builtin",
                            cfg_path=tmp_path, poll_interval=0.05) as first, \
            dynprof_nb.Monitor(job=name, rank=1, output_path=tmp_path / "out",
                               backend="builtin", cfg_path=tmp_path, poll_interval=0.05) as second:
        job = dynprof_nb.attach(name, create=True)
        wait_until(lambda: job.config.start_step == 5, what="the monitor's relay")
        for _ in range(10):
            first.step()
            second.step()
        wait_until(lambda: len(job.windows()) == 2 and set(job.windows().status) == {"complete"},
                   what="both ranks' windows")
        assert sorted(trace_steps(p) for p in job.windows().path) == [[5, 6, 7]] * 2
        relays = job.status()
        assert (relays["rank"] == -1).sum() == 1  # one relay per node, not one per rank
    job.close()
    # the last process leaving a finished job removes its segment and the node's relay files
    assert name not in segment.list_jobs()
    assert not [n for n in os.listdir(private_dir()) if n.startswith(f"relay.{name}.")]


def test_poll_interval_is_the_documented_one() -> None:
    assert POLL_INTERVAL_S == 0.5


def test_file_mode_moves_a_window_that_has_begun_and_keeps_its_name(tmp_path: Path) -> None:
    """MindSpore's documented step() example: the file asks for 2..5, and is edited to 6..7
    after step 6 has run. MindSpore records both; so does a rank in file mode: 6..7 begins at
    the next step with the same length, under the name asked for, and says so."""
    name, cfg, out = unique_job("late"), tmp_path / "cfg", tmp_path / "out"
    cfg.mkdir()
    write_file(cfg, start_step=2, stop_step=5)
    monitor = dynprof_nb.Monitor(job=name, output_path=out, backend="builtin", cfg_path=cfg,
                                 poll_interval=0.05)
    job = dynprof_nb.attach(name)
    files = dynprof_nb.attach(cfg_path=cfg, prof_path=out)
    try:
        for _ in range(5):
            monitor.step()  # the relay's first look came before step 1: 2..5 is exact
        gen = job.generation
        write_file(cfg, start_step=6, stop_step=7)
        wait_until(lambda: job.generation > gen, what="the edit to be relayed")
        monitor.step()  # step 6 ends: the window has begun, so it records 7..8
        rank0 = job.status().iloc[0]
        assert (rank0.state, rank0.window) == ("recording", "7-8"), job.status().to_string()
        assert "recording steps 7-8 instead" in rank0.error
        assert "rank0_start6_stop7" in rank0.error
        for _ in range(9):
            monitor.step()
    finally:
        monitor.close()
        job.close()
        segment.unlink(name)
    assert sorted(p.name for p in out.iterdir()) == ["rank0_start2_stop5", "rank0_start6_stop7"]
    assert trace_steps(out / "rank0_start2_stop5") == [2, 3, 4, 5]
    assert trace_steps(out / "rank0_start6_stop7") == [7, 8]
    manifest = json.loads((out / "rank0_start6_stop7" / "window.json").read_text())
    assert (manifest["start_step"], manifest["stop_step"]) == (7, 8)  # the steps recorded
    assert (manifest["requested_start_step"], manifest["requested_stop_step"]) == (6, 7)
    assert manifest["shifted_by"] == 1 and "after step 6 had begun" in manifest["note"]
    assert (files.config.start_step, files.config.stop_step) == (6, 7)
    row = files.status().iloc[0]  # the file's view finds it by the name asked for
    assert (row.state, row.window) == ("written", "6-7") and "recorded steps 7-8" in row.error
    loaded = dynprof_nb.load_window(out / "rank0_start6_stop7")
    assert (loaded.start_step, loaded.stop_step) == (7, 8)
    assert list(loaded.steps.step) == [7, 8]


def test_file_mode_still_skips_a_window_that_has_ended(tmp_path: Path) -> None:
    name, cfg, out = unique_job("late"), tmp_path / "cfg", tmp_path / "out"
    cfg.mkdir()
    monitor = dynprof_nb.Monitor(job=name, output_path=out, backend="builtin", cfg_path=cfg,
                                 poll_interval=0.05)
    job = dynprof_nb.attach(name)
    try:
        for _ in range(8):
            monitor.step()
        # the step a rank publishes is up to one heartbeat old: the relay judges by it
        wait_until(lambda: job.live_slots()[0].step >= 8, what="step 8 to be published")
        write_file(cfg, start_step=3, stop_step=5)  # all of it ran before the edit
        wait_until(lambda: "has ended on every rank" in relay_row(job)["error"],
                   what="the relay to refuse the ended window")
        monitor.step()
    finally:
        monitor.close()
        job.close()
        segment.unlink(name)
    assert not out.exists() or not list(out.iterdir())


def test_analyse_mode_out_of_range_is_refused_without_a_window(tmp_path: Path,
                                                               job: dynprof_nb.Job) -> None:
    """A file without a window used to let ``analyse_mode: 5`` in (the window check returned
    first); it then blocked every later window. Every key is checked on every write."""
    (tmp_path / "profiler_config.json").write_text(json.dumps({"analyse_mode": 5}))
    relay = Relay(tmp_path, job)
    assert relay.poll() is False
    assert "analyse_mode: got 5" in relay_row(job)["error"]
    write_file(tmp_path, start_step=10**6, stop_step=10**6 + 1, analyse_mode=1)
    assert relay.poll() is True
    assert (job.config.start_step, job.config.analyse_mode) == (10**6, 1)
    assert relay_row(job)["error"] == ""
    files = dynprof_nb.attach(cfg_path=tmp_path)
    with pytest.raises(dynprof_nb.ConfigError, match="analyse_mode"):
        files.set(start_step=-1, stop_step=-1, analyse_mode=5)


def test_a_relay_whose_state_file_was_removed_relays_on_into_a_fresh_one(
        tmp_path: Path, job: dynprof_nb.Job) -> None:
    """The node's relay state goes with the job's segment (``forget_job``); a relay that
    opened it before locks the fresh file the name now points to, and goes on relaying."""
    from dynprof_nb import locks

    relay = Relay(tmp_path, job)
    try:
        write_file(tmp_path, start_step=100, stop_step=110)
        assert relay.poll()
        state = locks.job_lock_name(job.name, "state")
        locks.forget_job(job.name)
        assert state not in os.listdir(private_dir())
        write_file(tmp_path, start_step=200, stop_step=210)
        assert relay.poll() and job.config.start_step == 200
        assert state in os.listdir(private_dir())  # the fresh file, with what was relayed
        assert locks.still_named(relay._state_fd, state)
    finally:
        relay.stop()
    assert relay.poll() is False  # stopped: no look, no error
