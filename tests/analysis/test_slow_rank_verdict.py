"""The slow-rank verdict on the real Level-1 and Level-2 ``.db`` windows: msprof-analyze
26.2.0's advisor (``advisor all --agent``) runs live on a copy of each, and ``w.advise()``'s
"slow rank" rule -- msprof-analyze's own rule, under its name: for each of Computing,
Communication(Not Overlapped) and Free, (max - min) across the (step, rank) rows over the mean
step total, against 5% -- must give the same verdict, and the same gap where the advisor prints
one. dynprof_nb's own straggler rule (the rank whose own work is larger) must not name a rank
where the advisor sees no slow rank: on Level-2 rank 1 has more all-reduce time, which is
waiting, not work."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import msprof
import pytest
from testdata import fixtures_dir

import dynprof_nb

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module", params=["db_level1", "db_level2"])
def case(request, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("verdict")
    data = root / request.param
    shutil.copytree(fixtures_dir() / "ascend_real" / request.param, data)
    out = root / "out"
    out.mkdir()
    r = subprocess.run([str(msprof.executable()), "advisor", "all", "-d", str(data), "-l", "en",
                        "--agent", "-o", str(out)], capture_output=True, text=True, timeout=400,
                       cwd=out)
    assert r.returncode == 0, r.stderr[-2000:]
    msg = json.loads(r.stdout.strip().splitlines()[-1])["message"]
    problems = {row[0]: row[1] for row in msg.get("problems", {}).get("data", [])}
    assert "slow rank" in problems, problems  # its cluster analysis ran
    return {"said": problems["slow rank"], "advice": dynprof_nb.load_window(data).advise()}


def test_same_slow_rank_verdict_and_gaps(case):
    said, adv = case["said"], case["advice"]
    no_slow = "no slow rank" in said
    mine = adv.rule("slow rank")
    assert (not mine) == no_slow, (said, adv.lines())
    printed = re.findall(r"(\w+) \n\s+has some issues.*?reached ([\d.]+)ms", said, flags=re.S)
    assert len(printed) == len(mine), (said, adv.lines())
    for dim, ms in printed:
        (f,) = [f for f in mine if f.numbers["dimension"] == dim]
        assert f.numbers["max_minus_min_ms"] == pytest.approx(float(ms), abs=1.5e-3)
    for f in mine:
        assert "msprof-analyze's slow-rank rule" in f.evidence


def test_straggler_names_no_victim(case):
    said, adv = case["said"], case["advice"]
    assert adv.status("straggler") in ("found", "not found")
    if "no slow rank" in said:
        assert not adv.rule("straggler"), adv.lines()
    # the rule that compared median steps (and named the rank that waits) is gone
    assert "slowest rank" not in set(adv.checked["rule"])
