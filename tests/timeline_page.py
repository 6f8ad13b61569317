"""The interactive timeline's real front-end (timeline_js/: its modules joined as anywidget gets
them, :func:`timeline_view.front_end`, and timeline.css) in a plain
chromium page, without JupyterLab: a stand-in for anywidget's model object (get, set, on,
save_changes) whose ``save_changes`` calls the real :class:`TimelineView` in this process
(Playwright's ``expose_function``) and hands back the traits it changed, bytes as base64, as a
kernel's comm would. A page opens in about a second, so every browser test of a feature can
have its own. Used by tests/ui/test_timeline_page.py and benchmarks/timeline_frames.py."""

from __future__ import annotations

import base64
from typing import Any

from dynprof_nb.analysis import timeline_view
from dynprof_nb.analysis.timeline_view import TimelineView

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage"]

# what the browser and the kernel exchange (every synced trait but anywidget's own)
# what the widget syncs with its front-end: every trait TimelineView itself declares
LEFT, TOP = 210, 46  # the canvas' label column and top band (timeline_js/layout.mjs)


TRAITS = sorted(TimelineView.class_own_traits(sync=lambda v: bool(v)))

_MODEL = """
window.__tl_decode = (v) => (v && typeof v === 'object' && v.__b64 !== undefined)
  ? (() => { const s = atob(v.__b64); const a = new Uint8Array(s.length);
             for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
             return new DataView(a.buffer); })()
  : v;
window.__tl_model = (state) => {
  const data = {};
  for (const [k, v] of Object.entries(state)) data[k] = window.__tl_decode(v);
  const handlers = {};
  let dirty = {};
  window.__tl_calls = 0;
  const apply = (changes) => {
    for (const [k, v] of Object.entries(changes)) data[k] = window.__tl_decode(v);
    for (const k of Object.keys(changes)) (handlers['change:' + k] || []).forEach((f) => f());
  };
  window.__tl_apply = apply;
  return {
    get: (k) => data[k],
    set: (k, v) => { data[k] = v; dirty[k] = v; },
    save_changes: () => {
      const d = dirty; dirty = {};
      for (const [k, v] of Object.entries(d)) {
        window.__tl_calls += 1;
        window.__tl_kernel(k, v).then(apply);  // asynchronous, as a comm is
      }
    },
    on: (ev, f) => { (handlers[ev] = handlers[ev] || []).push(f); },
  };
};
"""

_OPEN = """async ([src, state]) => {
  const url = URL.createObjectURL(new Blob([src], {type: 'text/javascript'}));
  const mod = await import(url);
  mod.default.render({model: window.__tl_model(state), el: document.getElementById('host')});
}"""


def _wire(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"__b64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


class TimelinePage:
    """One TimelineView shown in a Playwright page; ``changed`` collects what the kernel side
    changed since the last call (to send it to the page)."""

    def __init__(self, page: Any, view: TimelineView, width: int = 1400) -> None:
        self.page, self.view = page, view
        self.changed: dict[str, Any] = {}
        self.calls: list[str] = []
        for name in TRAITS:
            view.observe(self._record, names=name)
        page.expose_function("__tl_kernel", self._kernel)
        css = (timeline_view.FRONT_END / "timeline.css").read_text()
        page.set_content(f"<html><head><style>body{{margin:8px;font-family:sans-serif}}"
                         f"{css}</style></head><body><div id='host' style='width:{width}px'>"
                         f"</div></body></html>")
        page.add_script_tag(content=_MODEL)
        src = timeline_view.front_end()
        state = {name: _wire(getattr(view, name)) for name in TRAITS}
        page.evaluate(_OPEN, [src, state])
        page.wait_for_selector(".dynprof-timeline[data-ready='1']")
        self.root = page.locator(".dynprof-timeline")
        self.canvas = self.root.locator("canvas")

    def _record(self, change: dict) -> None:
        self.changed[change["name"]] = change["new"]

    def _kernel(self, name: str, value: Any) -> dict:
        self.calls.append(name)
        self.changed = {}
        setattr(self.view, name, value)
        out = {k: _wire(v) for k, v in self.changed.items() if k != name}
        self.changed = {}
        return out

    def push(self) -> None:
        """Send what Python changed (``view.zoom_to(...)``) to the page, as the comm would."""
        out = {k: _wire(v) for k, v in self.changed.items()}
        self.changed = {}
        self.page.evaluate("(c) => window.__tl_apply(c)", out)

    def state(self) -> dict:
        return self.root.evaluate("(el) => ({...el.dataset})")

    def box(self) -> dict:
        return self.canvas.bounding_box()


# Frame time of zoom and pan: for each interaction, the time from its input event to its
# pixels (the canvas read back, which makes a software canvas rasterise), and the interval
# between animation frames around it (what the eye sees). Zooms in on one point and out again,
# with a drag step between wheel steps.
MEASURE = """async ([n, fx, fy]) => {
  const c = document.querySelector('.dynprof-tl-canvas');
  const r = c.getBoundingClientRect();
  const ctx = c.getContext('2d');
  const raf = () => new Promise((res) => requestAnimationFrame(res));
  const x = r.left + 210 + (r.width - 220) * fx, y = r.top + fy;
  const work = [], frames = [], kinds = [];
  let last = await raf();
  let dragX = x;
  for (let i = 0; i < n; i++) {
    const inward = Math.floor(i / 24) % 2 === 0;
    const t0 = performance.now();
    if (i % 2 === 0) {
      c.dispatchEvent(new WheelEvent('wheel', {deltaY: inward ? -120 : 120, clientX: x,
        clientY: y, bubbles: true, cancelable: true}));
      kinds.push('zoom');
    } else {
      if (i % 4 === 1) {
        c.dispatchEvent(new MouseEvent('mousedown', {clientX: dragX, clientY: y, bubbles: true}));
      }
      dragX += (i % 8 < 4 ? 40 : -40);
      window.dispatchEvent(new MouseEvent('mousemove', {clientX: dragX, clientY: y,
        bubbles: true}));
      if (i % 4 === 3) {
        window.dispatchEvent(new MouseEvent('mouseup', {clientX: dragX, clientY: y,
          bubbles: true}));
      }
      kinds.push('pan');
    }
    ctx.getImageData(0, 0, 1, 1);
    work.push(performance.now() - t0);
    const t = await raf();
    frames.push(t - last);
    last = t;
  }
  window.dispatchEvent(new MouseEvent('mouseup', {clientX: dragX, clientY: y, bubbles: true}));
  return {work, frames, kinds};
}"""


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]
