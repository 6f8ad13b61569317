"""Job API against real training processes: two ranks, exact windows, bad input refused."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from jobutil import finish, running_ranks, trace_steps, unique_job, wait_until

from dynprof_nb.contract.config import ConfigError
from dynprof_nb.control.base import WindowRefused


@pytest.fixture
def two_ranks(tmp_path):
    with running_ranks(unique_job("job"), tmp_path, ranks=2, step_ms=3) as (control, procs):
        yield control, procs, tmp_path


def test_two_background_ranks_record_exactly_the_window(two_ranks):
    control, procs, out = two_ranks
    status = control.status()
    assert sorted(status["rank"]) == [0, 1] and status.alive.all()
    assert set(status.columns) >= {"rank", "pid", "step", "state", "window", "generation",
                                   "heartbeat_age_s", "alive", "error"}
    gen = control.start("+25", "+34")  # 75 ms ahead at 3 ms steps (a loaded box stalls 15 ms)
    cfg = control.config
    assert cfg.stop_step - cfg.start_step == 9
    final = control.wait(timeout=60, progress=False)
    assert (final.generation == gen).all() and (final.state == "idle").all()
    windows = control.windows()
    assert sorted(windows["rank"]) == [0, 1] and (windows.status == "complete").all()
    for path in windows.path:
        assert trace_steps(path) == list(range(cfg.start_step, cfg.stop_step + 1))
        manifest = json.loads(open(f"{path}/window.json").read())
        assert manifest["status"] == "complete" and manifest["job"] == control.name
    # training kept going through the window
    steps_now = control.status().step.min()
    wait_until(lambda: control.status().step.min() > steps_now + 5, what="training to go on")


def test_relative_start_is_after_the_most_advanced_rank(two_ranks):
    control, _, _ = two_ranks
    ahead = control.status().step.max()
    control.start("+50", "+52")
    assert control.config.start_step >= ahead + 50


@pytest.mark.parametrize("args,kwargs,needle", [
    (("20", 30), {}, None),  # a string of digits is fine: the CLI and magics send text
    ((30, 20), {}, "stop_step"),
    ((True, 30), {}, "start"),
    ((5, -3), {}, "stop"),
    (("soon", 30), {}, "start"),
    ((100, 110), {"profiler_level": "Level7"}, "profiler_level"),
    ((100, 110), {"activities": ["TPU"]}, "activities"),
    ((100, 110), {"export_type": ["csv"]}, "export_type"),
    ((100, 110), {"record_shape": True}, "record_shape"),
    ((100, 110), {"profile_memory": "yes"}, "profile_memory"),
])
def test_bad_start_is_refused_and_the_segment_config_is_unchanged(two_ranks, args, kwargs,
                                                                  needle):
    control, procs, _ = two_ranks
    before = (control.generation, control.config.to_dict())
    if needle is None:
        control.start(10**6, 10**6 + 1)  # a valid call for contrast
        assert control.generation == before[0] + 1
        return
    with pytest.raises((ConfigError, ValueError)) as info:
        control.start(*args, **kwargs)
    assert needle in str(info.value)
    assert (control.generation, control.config.to_dict()) == before
    assert all(p.poll() is None for p in procs)  # training keeps running


@pytest.mark.parametrize("kwargs,needle", [
    ({"start_step": "20"}, "start_step"),
    ({"with_stack": 1}, "with_stack"),
    ({"unknown_thing": 1}, "unknown_thing"),
    ({"aic_metrics": 42}, "aic_metrics"),
])
def test_bad_set_is_refused_and_unchanged(two_ranks, kwargs, needle):
    control, procs, _ = two_ranks
    before = (control.generation, control.config.to_dict())
    with pytest.raises(ValueError, match=needle):
        control.set(**kwargs)
    assert (control.generation, control.config.to_dict()) == before
    assert all(p.poll() is None for p in procs)


def test_window_every_rank_has_passed_is_refused_with_their_steps(two_ranks):
    control, _, _ = two_ranks
    wait_until(lambda: control.status().step.min() > 5)
    with pytest.raises(WindowRefused) as info:
        control.start(2, 4)
    text = str(info.value)
    assert "rank 0 at step" in text and "rank 1 at step" in text


def test_set_changes_keys_without_arming_a_window(two_ranks):
    control, _, out = two_ranks
    gen = control.set(profile_memory=True)
    wait_until(lambda: (control.status().generation == gen).all(), what="set to apply")
    assert control.config.profile_memory
    assert (control.status().state == "idle").all()
    assert not list(out.glob("rank*"))


def test_stopped_rank_is_listed_dead_and_wait_ignores_it(tmp_path):
    with running_ranks(unique_job("dead"), tmp_path, ranks=2, step_ms=3) as (control, procs):
        procs[1].kill()
        procs[1].wait()
        wait_until(lambda: not control.status().alive[1], timeout=3, what="rank 1 shown dead")
        assert control.status().state[1] == "dead"
        control.start("+25", "+27")  # 75 ms ahead: a loaded CI box stalls a rank 15 ms
        status = control.wait(timeout=30, progress=False)
        assert status.alive.tolist() == [True, False]
        assert len(control.windows()) == 1


def test_cli_drives_a_background_job(tmp_path):
    job = unique_job("cli")
    with running_ranks(job, tmp_path, ranks=1, step_ms=3) as (control, procs):
        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", *args],
                                  capture_output=True, text=True, timeout=60)

        assert job in cli("jobs").stdout
        assert "idle" in cli("status", job).stdout
        started = cli("start", job, "+25", "+27", "--memory", "--wait")  # 75 ms at 3 ms
        assert started.returncode == 0, started.stderr
        assert "asked for" in started.stdout
        assert "complete" in cli("windows", job).stdout
        bad = cli("start", job, "40", "30")
        assert bad.returncode == 2 and "stop_step" in bad.stderr and "Traceback" not in bad.stderr
        assert cli("set", job, "with_stack=true").returncode == 0
        assert control.config.with_stack
        assert cli("set", job, "with_stak=true").returncode == 2
        out, _ = finish(procs[0])
        assert "steps=" in out
