"""msprof-analyze 26.2.0's ``advisor all`` as the oracle of ``w.advise()`` on the Ascend fixture
windows it reports on: it runs live (``--agent``: its problems as JSON) on a copy of each, and
dynprof_nb must find the same problems rule by rule (found / not found) with the numbers it
prints (slow rank's max difference, slow link's bandwidths, byte alignment's op count, small
packets' ratio and time). No expected number is typed here: each comes from its output.

The advisor's rank-level analyzers look at one rank (the slowest, else rank 0: "analysis for
default rank 0"); every fixture here has no slow rank in the dimensions they use, so the
comparison is on rank 0. Its categories dynprof_nb has no rule for (operator bound,
environment variables, dynamic shape) are left out, by name."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import msprof
import pytest
from testdata import fixtures_dir

import dynprof_nb

pytestmark = pytest.mark.timeout(600)

# advisor category -> dynprof_nb rule
CATEGORY = {
    "slow rank": "slow rank",
    "slow link": "slow link",
    "Byte Alignment Analysis": "byte alignment",
    "Packet Analysis": "small packets",
    "AICPU Issues": "AICPU operators",
    "Bandwidth Contention Analysis": "bandwidth contention",
    "Synchronize Stream Issues": "synchronize stream",
    "GC Analysis": "GC",
    "Affinity API Issues": "affinity API",
}
# found by both only as a whole: the advisor's own wording per finding
NOT_MAPPED = ("operator no bound", "Vector Operator", "Environment Variable",
              "AI Core Performance", "bound issues")
DYNAMIC_SHAPE = "RANK 0 operator dynamic shape issues"
# the windows it reports on (db_level2 repeats db_level1's findings; on db_level0 and the
# communication-only text folders it reports nothing), ~25 s each
WINDOWS = ["db_level1", "text_level0", "cluster_2rank"]


@pytest.fixture(scope="module", params=WINDOWS)
def case(request, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("advisor")
    data = root / request.param
    shutil.copytree(fixtures_dir() / "ascend_real" / request.param, data)
    out = root / "out"
    out.mkdir()
    exe = msprof.executable()
    r = subprocess.run([str(exe), "advisor", "all", "-d", str(data), "-l", "en", "--agent",
                        "-o", str(out)], capture_output=True, text=True, timeout=400, cwd=out)
    assert r.returncode == 0, r.stderr[-2000:]
    msg = json.loads(r.stdout.strip().splitlines()[-1])["message"]
    problems = {}
    for row in msg.get("problems", {}).get("data", []):
        problems[row[0]] = row[1]
    return {"problems": problems, "advice": dynprof_nb.load_window(data).advise()}


def _mine(advice, rule: str, rank: int | None = 0) -> list:
    return [f for f in advice.rule(rule) if f.severity != "info"
            and (rank is None or not f.ranks or rank in f.ranks)]


def test_same_problems_rule_by_rule(case):
    p, adv = case["problems"], case["advice"]
    assert p, "the advisor reported nothing"
    for cat, desc in p.items():
        if any(k in cat for k in NOT_MAPPED) or cat == DYNAMIC_SHAPE:
            continue
        assert cat in CATEGORY, (cat, desc)
    # dynamic shape: found where the advisor finds it, except where rank 0's kernels carry no
    # OP State at all: the advisor reports "all operators are dynamic shape" from the absence
    # alone, dynprof_nb says it cannot tell (not applicable, naming the advisor's reading)
    found = bool(_mine(adv, "dynamic shape"))
    if DYNAMIC_SHAPE in p and not found:
        assert adv.status("dynamic shape") == "not applicable", adv.checked
        why = adv.checked.set_index("rule").loc["dynamic shape"]
        assert "no OP State" in " ".join(map(str, why.to_dict().values())), why
    else:
        assert found == (DYNAMIC_SHAPE in p), (p.get(DYNAMIC_SHAPE), adv.lines())
    # slow rank: "There is no slow rank issues" or one line per slow dimension
    if "slow rank" in p:  # its cluster analysis ran (not on a folder with its old output)
        no_slow = "no slow rank" in p["slow rank"]
        assert (not adv.rule("slow rank")) == no_slow, (p["slow rank"], adv.lines())
    for cat in ("Byte Alignment Analysis", "Packet Analysis", "Synchronize Stream Issues",
                "GC Analysis", "Affinity API Issues"):
        assert bool(_mine(adv, CATEGORY[cat])) == (cat in p), (cat, p.get(cat), adv.lines())
    # the advisor runs these two only where it has its op summary (kernel_details.csv): where
    # it reports them, dynprof_nb must too
    for cat in ("AICPU Issues", "Bandwidth Contention Analysis"):
        if cat in p:
            assert _mine(adv, CATEGORY[cat]), (cat, adv.lines())


def test_same_numbers_where_printed(case):
    p, adv = case["problems"], case["advice"]
    for dim, ms in re.findall(r"(\w+) \n\s+has some issues.*?reached ([\d.]+)ms", p.get(
            "slow rank", ""), flags=re.S):
        (f,) = [f for f in adv.rule("slow rank") if f.numbers["dimension"] == dim]
        assert f.numbers["max_minus_min_ms"] == pytest.approx(float(ms), abs=1.5e-3)
    link = p.get("slow link", "")
    for transport, mean, mx, mn, gap in re.findall(
        r"(\w+) bandwidth\(GB/s\):.*?average is ([\d.]+).*?maximum\s+is ([\d.]+)GB/s.*?"
        r"minimum is ([\d.]+)GB/s.*?difference is ([\d.]+)GB/s", link, flags=re.S):
        if float(mean) == 0:  # no traffic on it: dynprof_nb says nothing
            assert not [f for f in adv.rule("slow link") if f.numbers["transport"] == transport]
            continue
        (f,) = [f for f in adv.rule("slow link") if f.numbers["transport"] == transport]
        n = f.numbers
        for mine, theirs in ((n["mean_gbps"], mean), (n["max_gbps"], mx), (n["min_gbps"], mn),
                             (n["gap_gbps"], gap)):
            assert mine == pytest.approx(float(theirs), abs=1.5e-3), (transport, n, link)
    if "Affinity API Issues" in p:  # "found 1 apis to be replaced"
        count = int(re.search(r"found (\d+) apis", p["Affinity API Issues"]).group(1))
        (f,) = _mine(adv, "affinity API")
        assert f.numbers["apis"] == count
    if "Byte Alignment Analysis" in p:
        count = int(re.search(r"of (\d+) communication", p["Byte Alignment Analysis"]).group(1))
        (f,) = _mine(adv, "byte alignment")
        assert f.numbers["ops"] == count
    for transport, ratio, size, ms in re.findall(
        r"In the (\w+) communication, ([\d.]+)% of the communication data volume is less than "
        r"([\d.]+) MB, and the total time is ([\d.]+) ms", p.get("Packet Analysis", "")):
        (f,) = [f for f in _mine(adv, "small packets") if f.numbers["transport"] == transport]
        assert f"{round(f.numbers['ratio'], 4):.2%}" == f"{ratio}%"
        assert f.numbers["threshold_mb"] == float(size)
        assert round(f.numbers["small_transit_ms"], 4) == pytest.approx(float(ms), abs=1e-9)


def test_affinity_rule_table_is_the_advisors():
    """dynprof_nb's copy of the affinity-API rule table is what msprof-analyze's own
    FusionOperatorDB resolves (tests/msprof_affinity_rules.py, run live in .venv/msprof)."""
    from dynprof_nb.analysis.advise.affinity_rules import RULES

    py = msprof.executable().parent / "python"
    r = subprocess.run([str(py), str(Path(__file__).parents[1] / "msprof_affinity_rules.py")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == RULES
