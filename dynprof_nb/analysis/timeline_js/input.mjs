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
