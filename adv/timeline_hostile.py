"""The timeline front-end in real chromium (tests/timeline_page.py's plain page) on a Kineto
trace with hostile names/args, zero and negative durations, and one lane with many events:
no script runs, no page error, hover/click/search work.  usage: timeline_hostile.py"""
import json, sys, tempfile, warnings
from pathlib import Path
sys.path.insert(0, "/work/wt/badv/tests")
from timeline_page import CHROMIUM, CHROMIUM_ARGS, LEFT, TimelinePage
import dynprof_nb
PAY = [
    "<img src=x onerror=window.__pwned=1>", "</script><script>window.__pwned=2</script>",
    "__proto__", "constructor", "toString", "hasOwnProperty", "\u202egnp.exe", "a\u0000b",
    "${window.__pwned=3}", "x" * 100000, "\ud83d\ude00" * 50, "javascript:window.__pwned=4",
]
ev = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "<svg onload=window.__pwned=5>"}},
      {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "__proto__"}}]
t = 1_000_000.0
for step in range(1, 4):
    ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 7, "ts": t, "dur": 10000})
    for i, name in enumerate(PAY):
        ev.append({"ph": "X", "cat": "<b>cpu_op</b>", "name": name, "pid": 1, "tid": 7, "ts": t + 10 + i * 500,
                   "dur": [0, -5, 400, 1e-9][i % 4],
                   "args": {"__proto__": {"polluted": 1}, "constructor": "<img src=x onerror=window.__pwned=6>", name[:40]: name[:40]}})
    t += 10010
# one lane with many zero-duration events at one timestamp
for i in range(200000):
    ev.append({"ph": "X", "cat": "cpu_op", "name": "z", "pid": 1, "tid": 8, "ts": t, "dur": 0})
tmp = Path(tempfile.mkdtemp(prefix="badv_tl_"))
(tmp / "trace.json").write_text(json.dumps({"traceEvents": ev}))
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    w = dynprof_nb.load_trace(str(tmp / "trace.json"))
    view = w.plot_timeline(interactive=True)
print("warnings:", [str(x.message)[:120] for x in said][:5])
from playwright.sync_api import sync_playwright
pw = sync_playwright().start()
b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
try:
    page = b.new_page(viewport={"width": 1450, "height": 1100}); page.set_default_timeout(60000)
    errors = []; page.on("pageerror", lambda e: errors.append(str(e)))
    tp = TimelinePage(page, view)
    box = tp.box(); st = tp.state()
    print("state:", {k: st[k] for k in list(st)[:12]})
    # hover and click across the first lane rows
    for y in range(60, int(min(box["height"], 400)), 9):
        for x in range(LEFT + 5, int(box["width"]) - 10, 37):
            page.mouse.move(box["x"] + x, box["y"] + y)
    page.mouse.click(box["x"] + LEFT + 20, box["y"] + 70)
    # search for each payload
    inp = tp.root.locator("input").first
    for p in PAY[:6]:
        inp.fill(p[:60]); inp.press("Enter")
    page.wait_for_timeout(500)
    tip = tp.root.inner_html()
    pwned = page.evaluate("() => [window.__pwned, ({}).polluted]")
    print("pwned/polluted:", pwned)
    print("page errors:", errors[:5])
    print("raw <img in DOM:", "<img" in tip, "| raw <svg in DOM:", "<svg" in tip)
    print("RESULT", "BROKE" if (any(pwned) or errors or "<img" in tip or "<svg" in tip) else "HELD")
finally:
    b.close(); pw.stop()
    import shutil; shutil.rmtree(tmp, ignore_errors=True)
