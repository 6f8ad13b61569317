"""The panel's window list: one row per window (not per rank), the config each was recorded
with, and Compare warning when two windows were recorded with different timing options.
Real demo ranks, real windows."""

from __future__ import annotations

import re
import warnings

import pytest
from demojob import demo_job
from ipywidgets.widgets import widget_output
from jobutil import wait_until

from dynprof_nb.analysis.configdiff import ConfigMismatchWarning
from dynprof_nb.ui.panel import Panel


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory):
    with demo_job(tmp_path_factory.mktemp("pwin"), prefix="pwin") as j:
        yield j


def test_one_row_per_window_with_its_config_and_compare_warns(job, monkeypatch):
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
        # Compare newest with the one before. The warning is said in the panel's output, not
        # raised: raised in a click's callback it made JupyterLab blank that output area
        with warnings.catch_warnings(record=True) as raised:
            warnings.simplefilter("always")
            p.window_rows.children[0].children[3].click()
        assert not [w for w in raised if issubclass(w.category, ConfigMismatchWarning)]
        text = "".join(o.get("text", "") for o in p.output.outputs)
        # a and b named by their steps: both ranks' windows share one root directory
        assert re.search(r"a = steps \d+\.\.\d+, ranks 0,1 \(", text), text
        assert re.search(r"b = steps \d+\.\.\d+, ranks 0,1 \(", text), text
        assert "warning: the two windows were recorded with different profiler settings: " \
               "with_stack (True vs False)" in text, text
        # the table is analysis.compare's, per step per rank, and the panel says so
        assert "note: per step per rank: both windows have 3 steps x 2 ranks" in text, text
        tables = [o["data"]["text/html"] for o in p.output.outputs
                  if "text/html" in o.get("data", {})]
        assert len(tables) == 1 and "self_us_per_step_a" in tables[0], text
        p.window_rows.children[1].children[2].click()  # Summary of the older window
        text = "".join(o.get("text", "") for o in p.output.outputs)
        assert "recorded with with_stack=True" in text
        wait_until(lambda: sorted(p.trace.ranks) == [0, 1], what="both ranks loaded")
        # then Compare: the area is emptied through its state, never by a clear_output
        # message (JupyterLab answers that one by writing its outputs back, which erased the
        # labels and the warning once a Summary had filled the area)
        sent = []
        monkeypatch.setattr(widget_output, "clear_output", lambda *a, **k: sent.append(a))
        p.window_rows.children[0].children[3].click()
        assert sent == []
        text = "".join(o.get("text", "") for o in p.output.outputs)
        assert text.startswith("a = steps ") and "\nb = steps " in text, text
        assert "warning: the two windows were recorded with different profiler settings" in text
        assert not any("image/png" in o.get("data", {}) for o in p.output.outputs)
    finally:
        p.close()
