"""``%%dynprof sql [WINDOW] [-o NAME]`` in a real IPython shell: the cell's SQL over a window,
named or the one last recorded here, its answer the cell's output."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from dynprof_nb import samples

pytest.importorskip("duckdb")

TOP_OPS = "select name, self_us from ops order by self_us desc, name limit 3"


def test_sql_cell_over_a_named_window(ip: InteractiveShell, magics) -> None:
    magics.window = None
    w = ip.user_ns["w"] = samples.load("ascend_text")
    result = ip.run_cell(f"%%dynprof sql w -o top\n{TOP_OPS}\n")
    assert result.success, result.error_in_exec
    answer = result.result  # the cell's output, as IPython shows it
    ops = w.ops.assign(name=w.ops["name"].astype(str))
    want = ops.sort_values(["self_us", "name"], ascending=[False, True]).head(3)
    assert answer["name"].tolist() == want["name"].tolist()
    assert answer["self_us"].tolist() == want["self_us"].tolist()
    assert ip.user_ns["top"] is answer


def test_sql_cell_over_the_window_last_recorded_here(
    ip: InteractiveShell, magics, tmp_path: Path
) -> None:
    magics.window = None
    cell = "total = sum(i * i for i in range(20000))\n"
    ip.run_cell_magic("dynprof", f"--dir {tmp_path} -o recorded -q", cell)
    result = ip.run_cell("%%dynprof sql\nselect count(*) as n, sum(count) as calls from ops\n")
    assert result.success, result.error_in_exec
    ops = ip.user_ns["recorded"].ops
    assert result.result["n"].tolist() == [len(ops)]
    assert result.result["calls"].tolist() == [ops["count"].sum()]


def test_sql_cell_errors_are_one_usage_error(ip: InteractiveShell, magics) -> None:
    magics.window = None
    with pytest.raises(UsageError, match="no window loaded here yet"):
        ip.run_cell_magic("dynprof", "sql", "select 1")
    with pytest.raises(UsageError, match="no variable 'nowhere'"):
        ip.run_cell_magic("dynprof", "sql nowhere", "select 1")
    ip.user_ns["w"] = samples.load("mindspore_cpu")
    with pytest.raises(UsageError, match="Parser Error"):
        ip.run_cell_magic("dynprof", "sql w", "selec name from ops")
    with pytest.raises(UsageError, match="This window's tables: events, ops"):
        ip.run_cell_magic("dynprof", "sql w", "select * from opps")
    ip.user_ns["n"] = 3
    with pytest.raises(UsageError, match="int is not a window"):
        ip.run_cell_magic("dynprof", "sql n", "select 1")
