"""``profile_block``: the core helper ``%%dynprof`` runs around a cell, with real backends."""

from __future__ import annotations

from pathlib import Path

import pytest

import dynprof_nb
from dynprof_nb.contract import window_dirs


def test_a_block_is_one_step_and_a_published_window(tmp_path: Path) -> None:
    with dynprof_nb.profile_block(output=tmp_path, profile_memory=True) as prof:
        with dynprof_nb.range("work"):
            sum(range(10_000))
    assert prof.path == tmp_path / "rank0_start1_stop1"
    manifest = window_dirs.read_manifest(prof.path)
    assert manifest["status"] == "complete" and manifest["config"]["profile_memory"]
    assert prof.window.steps["step"].tolist() == [1]
    assert "work" in set(prof.window.ops["name"])
    rows = window_dirs.find_windows([tmp_path])
    assert [(r["start"], r["stop"], r["status"]) for r in rows] == [(1, 1, "complete")]


def test_steps_marked_inside_the_block(tmp_path: Path) -> None:
    with dynprof_nb.profile_block(steps=3, output=tmp_path) as prof:
        for _ in range(3):
            with dynprof_nb.range("inner"):
                sum(range(1000))
            prof.step()
    assert prof.window.steps["step"].tolist() == [1, 2, 3]
    assert prof.path.name == "rank0_start1_stop3"


def test_the_window_is_written_when_the_block_raises(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError):
        with dynprof_nb.profile_block(output=tmp_path) as prof:
            1 / 0  # noqa: B018
    assert isinstance(prof.error, ZeroDivisionError)
    assert window_dirs.read_manifest(prof.path)["status"] == "complete"


def test_torch_backend_records_aten_ops(tmp_path: Path) -> None:
    import torch  # make test installs it
    with dynprof_nb.profile_block(backend="torch", output=tmp_path, record_shapes=True) as prof:
        torch.randn(64, 64) @ torch.randn(64, 64)
    assert prof.window.framework == "pytorch"
    assert "aten::mm" in set(prof.window.ops["name"])


@pytest.mark.parametrize("bad", [0, -1, True, "2"])
def test_bad_steps_are_refused(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValueError, match="steps"):
        with dynprof_nb.profile_block(steps=bad, output=tmp_path):  # type: ignore[arg-type]
            pass
    assert not list(tmp_path.iterdir())
