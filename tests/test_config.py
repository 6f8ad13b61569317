"""ProfilerConfig: MindSpore's schema, its legacy forms, and errors that name the key."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from traitlets import TraitError

from dynprof_nb.contract.config import ConfigError, ProfilerConfig, coerce_cli_value

FIXTURES = Path(__file__).resolve().parent / "data"

MINDSPORE_DEFAULTS = {
    "start_step": -1, "stop_step": -1, "profiler_level": "Level0", "activities": ["CPU", "NPU"],
    "aic_metrics": "AiCoreNone", "export_type": ["text"], "analyse": False, "analyse_mode": -1,
    "profile_memory": False, "mstx": False, "parallel_strategy": False, "with_stack": False,
    "data_simplification": True, "l2_cache": False, "record_shapes": False, "sys_io": False,
    "sys_interconnection": False, "prof_path": "./", "mstx_domain_include": [],
    "mstx_domain_exclude": [], "host_sys": [],
}


def test_defaults_match_mindspore_27():
    data = ProfilerConfig().to_dict()
    assert {k: data[k] for k in MINDSPORE_DEFAULTS} == MINDSPORE_DEFAULTS
    assert data["ranks"] == []


@pytest.mark.parametrize("key,legacy,expected", [
    ("profiler_level", -1, "LevelNone"), ("profiler_level", 1, "Level1"),
    ("profiler_level", 2, "Level2"),
    ("activities", 0, ["CPU", "NPU"]), ("activities", 1, ["CPU"]), ("activities", 2, ["NPU"]),
    ("aic_metrics", -1, "AiCoreNone"), ("aic_metrics", 0, "PipeUtilization"),
    ("aic_metrics", 3, "MemoryL0"), ("aic_metrics", 7, "MemoryAccess"),
    ("export_type", 0, ["text"]), ("export_type", 1, ["db"]), ("export_type", 2, ["text", "db"]),
])
def test_legacy_int_forms_normalise(key, legacy, expected):
    assert getattr(ProfilerConfig(**{key: legacy}), key) == expected


@pytest.mark.parametrize("changes,names", [
    ({"start_step": "20"}, ["start_step", "'20'", "integer"]),
    ({"start_step": True}, ["start_step", "True", "integer"]),
    ({"stop_step": -5}, ["stop_step", "-5"]),
    ({"profile_memory": 1}, ["profile_memory", "true or false"]),
    ({"profiler_level": "Level9"}, ["profiler_level", "Level9", "Level0"]),
    ({"profiler_level": 5}, ["profiler_level", "5"]),
    ({"activities": ["TPU"]}, ["activities", "TPU", "CPU"]),
    ({"activities": []}, ["activities", "non-empty"]),
    ({"export_type": ["csv"]}, ["export_type", "csv", "text"]),
    ({"aic_metrics": "Bogus"}, ["aic_metrics", "Bogus", "PipeUtilization"]),
    ({"host_sys": ["gpu"]}, ["host_sys", "gpu"]),
    ({"ranks": [-1]}, ["ranks", "-1"]),
    ({"record_shape": True}, ["record_shape", "record_shapes"]),
])
def test_wrong_values_raise_naming_key_value_and_accepted(changes, names):
    with pytest.raises(ConfigError) as info:
        ProfilerConfig(**changes)
    for name in names:
        assert name in str(info.value)
    assert isinstance(info.value, TraitError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("start,stop,needle", [
    (30, 20, "stop_step"), (0, 5, "1-based"), (-1, 10, "start_step"),
])
def test_impossible_windows(start, stop, needle):
    with pytest.raises(ConfigError, match=needle):
        ProfilerConfig().update(start_step=start, stop_step=stop)


def test_update_returns_checked_copy_and_leaves_original():
    cfg = ProfilerConfig()
    new = cfg.update(start_step=20, stop_step=30, with_stack=True)
    assert (new.start_step, new.stop_step, new.with_stack) == (20, 30, True)
    assert cfg.start_step == -1 and not cfg.with_stack


def test_mindspore_fixture_file_round_trips(tmp_path):
    src = FIXTURES / "mindspore_cpu" / "profiler_config.json"
    cfg = ProfilerConfig.load(src)
    assert (cfg.start_step, cfg.stop_step, cfg.activities) == (5, 8, ["CPU"])
    assert cfg.export_type == ["text", "db"] and cfg.prof_path == "./out_text_db"
    saved = cfg.save(tmp_path)
    assert saved.name == "profiler_config.json"
    again = ProfilerConfig.load(tmp_path)
    assert again.to_dict() == cfg.to_dict()
    original = json.loads(src.read_text())
    assert {k: again.to_dict()[k] for k in original} == original


def test_unknown_keys_in_a_file_warn_once_and_still_load(tmp_path):
    path = tmp_path / "profiler_config.json"
    path.write_text(json.dumps({"start_step": 2, "stop_step": 3, "record_shape": True,
                                "my_note": "x", "is_valid": True}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = ProfilerConfig.load(path)
    assert cfg.start_step == 2
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "record_shape" in text and "record_shapes" in text and "my_note" in text


def test_legacy_int_file_as_mindspore_26_wrote_it(tmp_path):
    path = tmp_path / "profiler_config.json"
    path.write_text(json.dumps({"start_step": 2, "stop_step": 5, "aic_metrics": -1,
                                "profiler_level": 0, "analyse_mode": -1, "activities": 0,
                                "export_type": 0, "profile_memory": False, "mstx": False,
                                "parallel_strategy": False, "with_stack": False,
                                "data_simplification": True}))
    cfg = ProfilerConfig.load(path)
    assert cfg.activities == ["CPU", "NPU"] and cfg.profiler_level == "Level0"


def test_broken_file_names_line_and_column(tmp_path):
    path = tmp_path / "profiler_config.json"
    path.write_text('{"start_step": 2,\n "stop_step": }')
    with pytest.raises(ConfigError, match=r"line 2 column"):
        ProfilerConfig.load(path)


def test_save_is_atomic_no_temp_files_left(tmp_path):
    ProfilerConfig(start_step=3, stop_step=4).save(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["profiler_config.json"]


def test_cli_value_coercion():
    assert coerce_cli_value("activities", "CPU,NPU") == ["CPU", "NPU"]
    assert coerce_cli_value("profile_memory", "true") is True
    assert coerce_cli_value("profiler_level", "Level1") == "Level1"
    assert coerce_cli_value("ranks", "0,2") == [0, 2]
    with pytest.raises(ConfigError, match="did you mean 'with_stack'"):
        coerce_cli_value("with_stak", "true")


def test_every_trait_parses_its_own_text_and_writes_it_back():
    """The CLI, the magics and the panel all type values through these two methods."""
    cfg = ProfilerConfig(start_step=3, stop_step=9, activities=["CPU"], ranks=[0, 2],
                         with_stack=True, mstx_domain_include=["a", "b"], prof_path="/x y")
    traits = ProfilerConfig.class_traits()
    for key, value in cfg.to_dict().items():
        trait = traits[key]
        assert trait.from_string(trait.to_string(value)) == value, key
        assert trait.widget in {"text", "int", "checkbox", "dropdown", "toggles"}, key


def test_a_typo_in_a_number_is_not_a_number():
    trait = ProfilerConfig.class_traits()["stop_step"]
    with pytest.raises(ConfigError, match="'12x5' is not a number"):
        trait.from_string("12x5")
    with pytest.raises(ConfigError, match="with_stack: got 'maybe'; expected true or false"):
        coerce_cli_value("with_stack", "maybe")
    assert coerce_cli_value("with_stack", "yes") is True
    assert coerce_cli_value("activities", '["NPU"]') == ["NPU"]


@pytest.mark.parametrize("window", [{}, {"start_step": 3, "stop_step": 4}])
def test_analyse_mode_is_checked_with_or_without_a_window(tmp_path, window):
    """``analyse_mode: 5`` used to pass when the file had no window (validate returned before
    checking it), and then every later window failed on it."""
    (tmp_path / "profiler_config.json").write_text(json.dumps({"analyse_mode": 5, **window}))
    with pytest.raises(ConfigError, match=r"analyse_mode: got 5 .*-1 \(none\), 0 \(sync\) or 1"):
        ProfilerConfig.load(tmp_path)
    with pytest.raises(ConfigError, match="analyse_mode"):
        ProfilerConfig().update(analyse_mode=5, **window)
    for mode in (-1, 0, 1):
        assert ProfilerConfig(analyse_mode=mode, **window).analyse_mode == mode


def test_validate_checks_every_key_again():
    cfg = ProfilerConfig()
    cfg._trait_values["analyse_mode"] = 5  # past the trait (as a subclass or a bug could)
    with pytest.raises(ConfigError, match="analyse_mode: got 5"):
        cfg.validate()
