"""The memory-copy rule on a real GPU trace (HTA's sampled rank, an A100 Kineto trace): its copies
per step by direction and pageable memory, a finding only where copies take >= 5% of the step,
and the rule out of scope where there is no device (docs/definitions.md, "Advice")."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pytest

import dynprof_nb
from dynprof_nb.analysis.advise.copies import copies_per_step

SAMPLE = Path(dynprof_nb.__file__).parent / "samples" / "kineto_gpu" / "sampled_rank-0.json.gz"


def load(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dynprof_nb.load_window(str(path))


def test_the_real_traces_copies_per_step_and_no_finding_under_the_threshold():
    w = load(SAMPLE)
    t = copies_per_step(w).set_index("direction")
    # 2 steps: per step 8 pageable and 4 pinned HtoD, 4 DtoH to pageable, 4 DtoD
    assert t["per_step"].to_dict() == {"DtoD": 4.0, "DtoH": 4.0, "HtoD": 12.0}
    assert t["pageable_per_step"].to_dict() == {"DtoD": 0.0, "DtoH": 4.0, "HtoD": 8.0}
    adv = w.advise()
    assert not adv.rule("memory copies")  # ~0.65 ms of a ~615 ms step
    (status,) = adv.checked.loc[adv.checked["rule"] == "memory copies", "status"]
    assert status == "not found"


def test_copies_that_hold_the_step_are_named_with_their_numbers(tmp_path: Path):
    doc = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "gpu_memcpy":
            e["dur"] = e["dur"] * 300  # ~195 ms of copies per step
    path = tmp_path / "rank0.1.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    w = load(path)
    (f,) = w.advise().rule("memory copies")
    per_step = copies_per_step(w)["us_per_step"].sum()
    step = w.steps["duration_us"].mean()
    assert f.ranks == [0] and f.severity == "high"
    assert f.numbers["us_per_step"] == pytest.approx(per_step)
    assert f.numbers["share"] == pytest.approx(per_step / step) and 0.2 <= f.numbers["share"] <= 1
    assert f.numbers["pageable_per_step"] == 12.0
    assert set(f.numbers["by_direction_us"]) == {"HtoD", "DtoH", "DtoD"}
    assert "pageable host memory" in f.evidence and "pin_memory" in f.suggestion


def test_a_cpu_window_has_no_device_to_copy_to():
    w = load(Path(dynprof_nb.__file__).parent / "samples" / "pytorch_cpu")
    checked = w.advise().checked.set_index("rule")
    assert checked.loc["memory copies", "status"] == "out of scope"
    assert checked.loc["memory copies", "note"].startswith("GPU-only: needs device memory copies")
