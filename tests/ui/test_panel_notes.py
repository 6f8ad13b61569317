"""A note (what a window cost, a choice made) is not shown as an error in the panel."""

from __future__ import annotations

import pandas as pd

from dynprof_nb.ui.panel import STATUS_SHOWN, with_notes


def test_notes_leave_the_red_error_column() -> None:
    rows = [dict.fromkeys(STATUS_SHOWN, "") for _ in range(2)]
    rows[0]["error"] = "note: window 5-9: the profiler's own stop held the training thread 0.62 s"
    rows[1]["error"] = "window 5-9 could not start: disk full"
    shown = with_notes(pd.DataFrame(rows))
    assert list(shown.columns)[-2:] == ["note", "error"]  # error stays the last (red) column
    assert shown.loc[0, "error"] == "" and shown.loc[0, "note"].startswith("window 5-9: the")
    assert shown.loc[1, "error"].startswith("window 5-9 could not") and shown.loc[1, "note"] == ""
