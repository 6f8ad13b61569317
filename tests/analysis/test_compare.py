"""compare() of two windows: ranks folded per name, a warning when their settings differ."""

from pathlib import Path

from conftest import write_builtin_window

import dynprof_nb


def test_compare_two_multi_rank_windows_folds_ranks_per_name(tmp_path: Path):
    for r in (0, 1):
        write_builtin_window(tmp_path / "a", rank=r)
        write_builtin_window(tmp_path / "b", rank=r, step_us=3000.0)
    a, b = dynprof_nb.load_window(tmp_path / "a"), dynprof_nb.load_window(tmp_path / "b")
    table = dynprof_nb.compare(a, b)
    assert table["name"].is_unique
    fwd = table.set_index("name").loc["forward"]
    assert fwd.count_a == 2 * 3 and fwd.self_us_b > 2.5 * fwd.self_us_a


def test_compare_warns_when_the_profiler_settings_differ(tmp_path: Path):
    import json

    import pytest

    from dynprof_nb.analysis.configdiff import ConfigMismatchWarning

    for name, stack in (("a", False), ("b", True)):
        d = write_builtin_window(tmp_path / name, rank=0)
        manifest = json.loads((d / "window.json").read_text())
        manifest["config"] = {"with_stack": stack}
        (d / "window.json").write_text(json.dumps(manifest))
    a, b = dynprof_nb.load_window(tmp_path / "a"), dynprof_nb.load_window(tmp_path / "b")
    with pytest.warns(ConfigMismatchWarning, match="with_stack"):
        dynprof_nb.compare(a, b)
    assert "recorded with with_stack=True" in str(b.summary())
