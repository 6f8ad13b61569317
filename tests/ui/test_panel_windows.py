"""The panel's window list: one row per window (not per rank), the config each was recorded
with, and Compare warning when two windows were recorded with different timing options.
Real demo ranks, real windows."""

from __future__ import annotations

import pytest
from demojob import demo_job
from jobutil import wait_until

from dynprof_nb.ui.panel import Panel


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory):
    with demo_job(tmp_path_factory.mktemp("pwin"), prefix="pwin") as j:
        yield j


def test_one_row_per_window_with_its_config_and_compare_warns(job):
    job.start("+5", "+7", with_stack=True)  # this window only
    job.wait(timeout=120, progress=False)
    job.start("+5", "+7")  # back on the standing config
    job.wait(timeout=120, progress=False)
    p = Panel(job, poll=False)
    try:
        p.refresh(windows=True)
        assert len(p.window_rows.children) == 2  # two windows of two ranks: two rows
        newest, older = (r.children[0].value for r in p.window_rows.children)
        assert "ranks 2/2 complete" in newest and "ranks 2/2 complete" in older
        assert "with_stack=True" in older and "with_stack" not in newest
        p.window_rows.children[0].children[3].click()  # Compare newest with the one before
        text = "".join(o.get("text", "") for o in p.output.outputs)
        assert "warning: the two windows were recorded with different profiler settings: " \
               "with_stack (True vs False)" in text, text
        # the table itself is analysis.compare's (multi-rank compare is issue 15 item 5's)
        assert any("text/html" in o.get("data", {}) for o in p.output.outputs) \
            or "could not compare" in text
        p.window_rows.children[1].children[2].click()  # Summary of the older window
        text = "".join(o.get("text", "") for o in p.output.outputs)
        assert "recorded with with_stack=True" in text
        wait_until(lambda: sorted(p.trace.ranks) == [0, 1], what="both ranks loaded")
    finally:
        p.close()
