"""Config belongs to a window: ``start``'s options hold for that window only, ``set`` makes a
key standing, and every window says what it was recorded with (manifest, ``windows()``,
``TraceWindow.config``); comparing windows recorded differently warns. A real Monitor on a
real segment, stepped in this process so the windows are exact."""

from __future__ import annotations

import json
import warnings

import pytest
from jobutil import unique_job

import dynprof_nb
from dynprof_nb.analysis.configdiff import (
    ConfigMismatchWarning,
    config_line,
    timing_differences,
    warn_if_configs_differ,
)
from dynprof_nb.contract import segment
from dynprof_nb.contract.config import ConfigError
from dynprof_nb.contract.protocol import decode


@pytest.fixture
def rig(tmp_path):
    name = unique_job("wcfg")
    control = dynprof_nb.attach(name, create=True)
    monitor = dynprof_nb.Monitor(job=name, rank=0, output_path=tmp_path, backend="builtin")
    yield control, monitor, tmp_path
    monitor.close()
    control.close()
    segment.unlink(name)


def run(monitor, n: int) -> None:
    for _ in range(n):
        with dynprof_nb.range("work"):
            pass
        monitor.step()
    assert monitor.wait_saved(60)


def manifest(out, start: int, stop: int) -> dict:
    return json.loads((out / f"rank0_start{start}_stop{stop}" / "window.json").read_text())


def test_start_options_hold_for_that_window_only(rig):
    control, monitor, out = rig
    run(monitor, 2)
    control.start(5, 7, with_stack=True, profile_memory=True)
    assert not control.config.with_stack  # the standing config is unchanged
    assert control.window_options == {"with_stack": True, "profile_memory": True}
    assert control.window_config.with_stack
    run(monitor, 8)
    first = manifest(out, 5, 7)
    assert first["config"]["with_stack"] and first["config"]["profile_memory"]
    assert first["window_options"] == {"with_stack": True, "profile_memory": True}
    control.start(15, 16)  # the next window: back on the standing config
    run(monitor, 10)
    second = manifest(out, 15, 16)
    assert not second["config"]["with_stack"] and not second["config"]["profile_memory"]
    assert not monitor.config.with_stack and monitor.window_options == {}


def test_set_makes_a_key_standing_for_every_later_window(rig):
    control, monitor, out = rig
    control.set(record_shapes=True)
    control.start(3, 4)
    run(monitor, 5)
    control.start(8, 9, mstx=True)
    run(monitor, 5)
    assert manifest(out, 3, 4)["config"]["record_shapes"]
    later = manifest(out, 8, 9)["config"]
    assert later["record_shapes"] and later["mstx"]
    frame = control.windows()
    assert list(frame.config) == ["record_shapes=True", "mstx=True, record_shapes=True"]


def test_set_during_a_pending_window_keeps_its_options(rig):
    control, monitor, out = rig
    control.start(10, 11, with_stack=True)
    control.set(profile_memory=True)  # e.g. the panel's Apply of another field
    assert control.window_options == {"with_stack": True}
    control.set(stop_step=12)  # the same window, a later stop: still its options
    assert control.window_options == {"with_stack": True}
    run(monitor, 13)
    cfg = manifest(out, 10, 12)["config"]
    assert cfg["with_stack"] and cfg["profile_memory"]


def test_window_options_are_checked_before_anything_is_written(rig):
    control, _, _ = rig
    gen = control.generation
    with pytest.raises(ConfigError, match="with_stack"):
        control.start(10, 11, with_stack="yes")
    with pytest.raises(ConfigError, match="record_shape"):
        control.start(10, 11, record_shape=True)
    assert control.generation == gen


@pytest.mark.parametrize("window, needle", [
    ({"with_stack": "yes"}, "with_stack"),
    ({"start_step": 3}, "start_step"),
    ({"nosuchkey": 1}, "nosuchkey"),
    ([1, 2], "window"),
])
def test_a_rank_rejects_bad_window_options_with_a_message(window, needle):
    raw = json.dumps({"action": "start", "config": {"start_step": 5, "stop_step": 6},
                      "window": window}).encode()
    with pytest.raises(ConfigError, match=needle):
        decode(raw)


def test_windows_say_what_they_were_recorded_with_and_compare_warns(rig):
    control, monitor, out = rig
    control.start(3, 5, with_stack=True)
    run(monitor, 6)
    control.start(8, 10)
    run(monitor, 6)
    a = dynprof_nb.load_window(out / "rank0_start3_stop5")
    b = dynprof_nb.load_window(out / "rank0_start8_stop10")
    assert a.config["with_stack"] is True and b.config["with_stack"] is False
    assert config_line(a) == "recorded with with_stack=True"
    assert config_line(b) == "recorded with defaults"
    assert timing_differences(a, b) == {"with_stack": (True, False)}
    with pytest.warns(ConfigMismatchWarning, match="with_stack"):
        warn_if_configs_differ(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_configs_differ(b, b) is None
    both = dynprof_nb.load_window([out / "rank0_start8_stop10"])
    assert both.config == b.config
