// Input: what a click, a key, a label press or a search step means, as pure decisions the
// widget's event listeners act on (widget.mjs wires them to the DOM).

import { arrowEnds } from "./draw.mjs";
import { LEFT, TOP } from "./layout.mjs";

// The bar under (mx, my) px on the canvas (an index into the frame's hit list, -1 for none):
// in the row at my (`Y0`: where row 0 is on the canvas), within a pixel of a bar's ends; of
// two there, the narrower (a kernel drawn over a wide bar is still reachable).
export function pick(H, rowY, rowH, Y0, mx, my) {
  if (mx < LEFT || my < TOP) return -1;
  const t = my - Y0;
  let best = -1;
  for (let h = 0; h < H.n; h++) {
    const y = rowY[H.row[h]];
    if (t < y || t >= y + rowH) continue;
    if (H.a[h] - 1 <= mx && mx <= H.b[h] + 1) {
      if (best < 0 || H.b[h] - H.a[h] < H.b[best] - H.a[best]) best = h;
    }
  }
  return best;
}

// the linked event whose arrow end is within 8 px of (mx, my) (`at(ev)`: an event's [x, y] on
// the canvas, null where its row is not drawn), or null: a click there goes to it
export function arrowAt(chosen, flows, at, mx, my) {
  if (!chosen) return null;
  for (const f of flows) {
    const into = f.why === "launch";
    const [s, t] = arrowEnds(chosen, f);
    const end = at(into ? s : t);
    if (!at(s) || !end) continue;
    if (Math.hypot(mx - end[0], my - end[1]) < 8) return f;
  }
  return null;
}

// What a click on lane j's label at x px does: open a shut rank or process (its header),
// collapse or open the lane's nested levels (the ▾/▸ glyph), pin its thread or stream (○/●),
// else shut its rank (shift) or its process.
export function labelAction(lane, header, x, shift) {
  if (header === "rank") return "open-rank";
  if (header) return "open-process";
  if (x < 14) return lane.rows > 1 ? "collapse" : "";
  if (x < 28) return "pin";
  return shift ? "shut-rank" : "shut-process";
}

// lane j's state after a label action
export function applyLabelAction(state, lanes, j, action, procKey) {
  const lane = lanes[j];
  const flip = (set, v) => (set.has(v) ? set.delete(v) : set.add(v));
  if (action === "open-rank") state.rankShut.delete(lane.rank);
  else if (action === "open-process") state.procShut.delete(procKey(lane));
  else if (action === "collapse") flip(state.collapsed, j);
  else if (action === "pin") flip(state.pinned, lane.thread);
  else if (action === "shut-rank") state.rankShut.add(lane.rank);
  else if (action === "shut-process") state.procShut.add(procKey(lane));
}

// WASD and the arrows, as in Perfetto: {zoom: factor} (< 1 in), {pan: fraction of the span},
// {clear: true} (Escape: the range), or null for any other key or one with a modifier
export function keyAction(e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return null;
  const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
  const moves = {
    w: { zoom: 0.8 }, ArrowUp: { zoom: 0.8 },
    s: { zoom: 1.25 }, ArrowDown: { zoom: 1.25 },
    a: { pan: -0.2 }, ArrowLeft: { pan: -0.2 },
    d: { pan: 0.2 }, ArrowRight: { pan: 0.2 },
    Escape: { clear: true },
  };
  return Object.prototype.hasOwnProperty.call(moves, key) ? moves[key] : null;
}

// The next (d = 1) or previous (-1) search match from `at` (-1: none yet) in the page of
// `found` (the `matches` trait) held: {at: i} in it, wrapping around, or {page: p} when it is
// past the page held and there are others (the kernel sends page p, wrapping around); null
// when there is nothing to step through.
export function stepMatch(found, at, d) {
  const n = found.items.length;
  if (!n) return null;
  const pages = Math.ceil(found.total / (found.limit || n));
  if (pages > 1 && at >= 0 && (at + d >= n || at + d < 0)) {
    return { page: ((found.page || 0) + d + pages) % pages };
  }
  return { at: at < 0 ? (d > 0 ? 0 : n - 1) : (at + d + n) % n };
}

// "3 / 1,200 (1-500 listed)": which match is shown, of how many, and which are listed
export function matchCount(found, at) {
  const first = (found.page || 0) * (found.limit || 0);
  return `${(first + at + 1).toLocaleString()} / ${found.total.toLocaleString()}` +
    (found.total > found.items.length
      ? ` (${(first + 1).toLocaleString()}-${(first + found.items.length).toLocaleString()} listed)`
      : "");
}

// ---- the DOM's events -----------------------------------------------------------------

// What a press at (x, y) on the canvas would do, as a CSS cursor: over the labels a click
// (collapse), on the time axis or with shift a range (col-resize), on the lanes a pan (grab).
export function cursorAt(x, y, shift) {
  if (x < LEFT) return "pointer";
  return shift || y < TOP ? "col-resize" : "grab";
}

// The pointer over the canvas: the wheel zooms about the time under it, a drag pans, a
// shift-drag (or a drag on the axis) selects a range, a click picks a bar (or an arrow's end),
// a press on the labels acts on a lane. `view` is what the widget lends it: xy(e) ({x, y} on
// the canvas), timeAt(x), plotW(), range() ([lo, hi]), setRange(a, b), zoomBy(f, t),
// selecting(a, b) (a range being dragged), selected() (released), click(x, y), label(x, y,
// shift), moved() (redraw what is under the pointer), left(), whole() (the whole window).
export class Pointer {
  constructor(canvas, root, view) {
    this.mouse = null; // {x, y} on the canvas, or null when the pointer is elsewhere
    this.drag = null; // a press being dragged: where it began, the range then, what it does
    // where a press on the lane labels began: the browser's click fires wherever over the
    // canvas a press ends, so a pan released over the labels would be a click on one
    // (collapsing its process); a label click counts only when pressed there and not moved
    this.labelPress = null;
    this.canvas = canvas;
    this.view = view;
    canvas.addEventListener("wheel", (e) => this.wheel(e), { passive: false });
    canvas.addEventListener("mousedown", (e) => {
      root.focus({ preventScroll: true });
      this.press(e);
    });
    window.addEventListener("mousemove", (e) => this.dragTo(e));
    window.addEventListener("mouseup", (e) => this.release(e));
    canvas.addEventListener("click", (e) => this.labelClick(e));
    canvas.addEventListener("mousemove", (e) => {
      this.mouse = view.xy(e);
      // the cursor says what a drag does here: a range on the time axis, a pan on the lanes
      if (!this.drag) canvas.style.cursor = cursorAt(this.mouse.x, this.mouse.y, e.shiftKey);
      if (!this.drag) view.moved();
    });
    canvas.addEventListener("mouseleave", () => {
      this.mouse = null;
      view.left();
    });
    canvas.addEventListener("dblclick", (e) => {
      if (e.offsetX >= LEFT) view.whole();
    });
  }

  wheel(e) {
    e.preventDefault();
    this.mouse = this.view.xy(e);
    const t = this.view.timeAt(Math.max(LEFT, this.mouse.x));
    this.view.zoomBy(Math.exp(Math.max(-3, Math.min(3, e.deltaY * 0.0025))), t);
  }

  press(e) {
    const { x, y } = this.view.xy(e);
    this.labelPress = x < LEFT ? { x: e.clientX, y: e.clientY } : null;
    if (x < LEFT) return;
    const [lo, hi] = this.view.range();
    const selecting = e.shiftKey || y < TOP;
    this.drag = { x: e.clientX, lo, hi, moved: false, selecting, t: this.view.timeAt(x) };
    e.preventDefault();
  }

  dragTo(e) {
    const drag = this.drag;
    if (!drag) return;
    const dx = e.clientX - drag.x;
    if (Math.abs(dx) > 3) drag.moved = true;
    if (!drag.moved) return;
    const view = this.view;
    if (drag.selecting) {
      const x = Math.max(LEFT, Math.min(view.xy(e).x, LEFT + view.plotW()));
      view.selecting(drag.t, view.timeAt(x));
      return;
    }
    const dt = (dx / view.plotW()) * (drag.hi - drag.lo);
    view.setRange(drag.lo - dt, drag.hi - dt);
  }

  release(e) {
    const d = this.drag;
    if (!d) return;
    this.drag = null;
    if (d.selecting && d.moved) {
      this.view.selected();
      return;
    }
    if (!d.moved && e.target === this.canvas) {
      const { x, y } = this.view.xy(e);
      this.view.click(x, y);
    }
  }

  labelClick(e) {
    const press = this.labelPress;
    this.labelPress = null;
    if (!press || Math.hypot(e.clientX - press.x, e.clientY - press.y) > 3) return; // a drag
    const { x, y } = this.view.xy(e);
    if (x >= LEFT || y < TOP) return;
    this.view.label(x, y, e.shiftKey);
  }
}

// WASD and the arrows on the widget (not in the search box or a menu: `ignore`), kept from
// JupyterLab's own shortcuts; `act` takes keyAction's answer
export function listenKeys(root, ignore, act) {
  root.addEventListener("keydown", (e) => {
    if (ignore.includes(e.target)) return;
    const action = keyAction(e);
    if (!action) return;
    e.preventDefault();
    e.stopPropagation();
    act(action);
  });
  root.addEventListener("keyup", (e) => e.stopPropagation());
  root.addEventListener("keypress", (e) => e.stopPropagation());
}

// The search box, next and previous: the text goes to the kernel (`query`) 250 ms after the
// last keystroke, or at Enter; Enter (shift: back) steps through the matches once the kernel
// has answered this text, and a step asked before the answer is taken when it comes (take()).
export class SearchBox {
  constructor(input, prev, next, model, step) {
    this.pending = 0; // a step waiting for the kernel's matches (1, -1), or 0
    this.timer = 0;
    const ask = () => {
      model.set("query", input.value);
      model.save_changes();
    };
    input.addEventListener("input", () => {
      clearTimeout(this.timer);
      this.timer = setTimeout(ask, 250);
    });
    input.addEventListener("keydown", (e) => {
      e.stopPropagation();
      if (e.key !== "Enter") return;
      e.preventDefault();
      if ((model.get("matches") || {}).query !== input.value.trim()) {
        clearTimeout(this.timer);
        this.pending = e.shiftKey ? -1 : 1;
        ask();
        return;
      }
      step(e.shiftKey ? -1 : 1);
    });
    input.addEventListener("keyup", (e) => e.stopPropagation());
    prev.addEventListener("click", () => step(-1));
    next.addEventListener("click", () => step(1));
  }

  // a step to take when the kernel's next matches come
  after(d) {
    this.pending = d;
  }

  // the step waiting for these matches (0: none), taken
  take() {
    const d = this.pending;
    this.pending = 0;
    return d;
  }
}
