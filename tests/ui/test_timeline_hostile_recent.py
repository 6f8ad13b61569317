"""The timeline front-end (timeline_js/, in real chromium through tests/timeline_page.py) on a
trace whose names and args are script, prototype keys, bidi overrides and a 100k-character
name, with zero, negative and sub-nanosecond durations and 20,000 zero-length events at one
instant: nothing runs, nothing is polluted, no page error, and hover, click and search work."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from timeline_page import LEFT, TimelinePage

import dynprof_nb

PAYLOADS = [
    "<img src=x onerror=window.__pwned=1>", "</script><script>window.__pwned=2</script>",
    "__proto__", "constructor", "toString", "hasOwnProperty", "\u202egnp.exe", "a\u0000b",
    "${window.__pwned=3}", "x" * 100_000, "\U0001f600" * 50, "javascript:window.__pwned=4",
]


def hostile_trace(path: Path) -> Path:
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
           "args": {"name": "<svg onload=window.__pwned=5>"}},
          {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "__proto__"}}]
    t = 1_000_000.0
    for step in range(1, 4):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
                   "tid": 7, "ts": t, "dur": 10_000})
        for i, name in enumerate(PAYLOADS):
            ev.append({"ph": "X", "cat": "<b>cpu_op</b>", "name": name, "pid": 1, "tid": 7,
                       "ts": t + 10 + i * 500, "dur": [0, -5, 400, 1e-9][i % 4],
                       "args": {"__proto__": {"polluted": 1}, name[:40]: name[:40],
                                "constructor": "<img src=x onerror=window.__pwned=6>"}})
        t += 10_010
    ev += [{"ph": "X", "cat": "cpu_op", "name": "z", "pid": 1, "tid": 8, "ts": t, "dur": 0}
           for _ in range(20_000)]
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_hostile_names_args_and_durations_run_nothing_and_break_nothing(browser, tmp_path):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        w = dynprof_nb.load_trace(str(hostile_trace(tmp_path / "trace.json")))
        view = w.plot_timeline(interactive=True)
    assert any("impossible" in str(x.message) and "dur" in str(x.message) for x in said)
    page = browser.new_page(viewport={"width": 1450, "height": 1100})
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        tp = TimelinePage(page, view)
        box = tp.box()
        for y in range(60, int(min(box["height"], 300)), 12):
            for x in range(LEFT + 5, int(box["width"]) - 10, 60):
                page.mouse.move(box["x"] + x, box["y"] + y)
        page.mouse.click(box["x"] + LEFT + 20, box["y"] + 70)
        search = tp.root.locator("input").first
        for p in PAYLOADS[:6]:
            search.fill(p[:60])
            search.press("Enter")
        assert page.evaluate("() => [window.__pwned, ({}).polluted]") == [None, None]
        html = tp.root.inner_html()
        assert "<img" not in html and "<svg" not in html
        assert int(tp.state()["drawn"]) > 0
    finally:
        page.close()
    assert not errors, errors
