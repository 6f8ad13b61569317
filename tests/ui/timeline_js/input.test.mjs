import assert from "node:assert/strict";
import { test } from "node:test";

import { Bars, HitList } from "../../../dynprof_nb/analysis/timeline_js/draw.mjs";
import {
  applyLabelAction, arrowAt, keyAction, labelAction, matchCount, pick, stepMatch,
} from "../../../dynprof_nb/analysis/timeline_js/input.mjs";
import {
  LaneState, LEFT, TOP, arrange, eventsInRange, procKey,
} from "../../../dynprof_nb/analysis/timeline_js/layout.mjs";
import { decodeSummary, eventOf } from "../../../dynprof_nb/analysis/timeline_js/model.mjs";
import { fakeLayer, lane, packSummary } from "./helpers.mjs";

const ROW_H = 18;

function hits(bars) {
  const H = new HitList();
  for (const [a, b, row] of bars) H.keep(a, b, row, 0, H.n);
  return H;
}

test("a click hits the bar under it, in its row, within a pixel of its ends", () => {
  const rowY = Float64Array.from([0, ROW_H, 2 * ROW_H]);
  const H = hits([[300, 400, 0], [500, 501, 1], [300, 400, 2]]);
  const Y0 = TOP;
  assert.equal(pick(H, rowY, ROW_H, Y0, 350, TOP + 5), 0);
  assert.equal(pick(H, rowY, ROW_H, Y0, 350, TOP + 2 * ROW_H + 5), 2);
  assert.equal(pick(H, rowY, ROW_H, Y0, 350, TOP + ROW_H + 5), -1, "row 1 has nothing there");
  assert.equal(pick(H, rowY, ROW_H, Y0, 502, TOP + ROW_H + 5), 1, "a 1 px bar, a pixel away");
  assert.equal(pick(H, rowY, ROW_H, Y0, 503, TOP + ROW_H + 5), -1);
  assert.equal(pick(H, rowY, ROW_H, Y0, LEFT - 1, TOP + 5), -1, "the label column");
  assert.equal(pick(H, rowY, ROW_H, Y0, 350, TOP - 1), -1, "the axis");
  // scrolled down by one row: row 1 is where row 0 was
  assert.equal(pick(H, rowY, ROW_H, TOP - ROW_H, 502, TOP + 5), 1);
});

test("of two bars under the pointer, the narrower is hit", () => {
  const rowY = Float64Array.from([0]);
  const H = hits([[300, 700, 0], [340, 360, 0], [320, 380, 0]]);
  assert.equal(pick(H, rowY, ROW_H, TOP, 350, TOP + 9), 1);
});

test("a click at the pixel of an event drawn from the summary hits that event", () => {
  // three events on two rows, drawn into a 1000 px plot of [0, 1000) ns: 1 px per ns
  const events = [
    { x0: 100, dur: 200, row: 0, name: 0, level: 0 },
    { x0: 400, dur: 0.5, row: 0, name: 1, level: 0 },
    { x0: 100, dur: 50, row: 1, name: 2, level: 0 },
  ];
  const lanes = [lane("main", 0, 2)];
  const S = decodeSummary({ count: 3, levels: [10], complete: true }, packSummary(events, 2, 1), 2);
  const arr = arrange(lanes, 2, ROW_H, new LaneState());
  const sc = { lo: 0, hi: 1000, pw: 1000, k: 1, off: 0, rowH: ROW_H, height: 400, Y0: TOP, arr };
  const bars = new Bars(fakeLayer(), Uint32Array.from([1, 2, 3]));
  bars.begin(sc, 2);
  for (let row = 0; row < 2; row++) {
    const [i0, i1] = eventsInRange(S, row, sc.lo, sc.hi);
    for (let i = i0; i < i1; i++) bars.put(S.x0[i], S.x0[i] + S.dur[i], row, S.name[i], 0, i);
  }
  const at = (x, row) => {
    const h = pick(bars.hits, arr.rowY, ROW_H, TOP, LEFT + x, TOP + row * ROW_H + ROW_H / 2);
    return h < 0 ? null : events[eventOf(S, null, 0, bars.hits.i[h]).id].name;
  };
  assert.equal(at(200, 0), 0);
  assert.equal(at(400, 0), 1);
  assert.equal(at(120, 1), 2);
  assert.equal(at(200, 1), null);
  assert.equal(at(600, 0), null);
  assert.equal(bars.textQ.length, 2, "a name is drawn only in the bars wide enough for one");
});

test("next and previous step through the matches, wrapping around", () => {
  const found = { items: [[1], [2], [3]], total: 3, page: 0, limit: 500 };
  assert.deepEqual(stepMatch(found, -1, 1), { at: 0 });
  assert.deepEqual(stepMatch(found, -1, -1), { at: 2 });
  assert.deepEqual(stepMatch(found, 2, 1), { at: 0 });
  assert.deepEqual(stepMatch(found, 0, -1), { at: 2 });
  assert.equal(stepMatch({ items: [], total: 0 }, -1, 1), null);
  assert.equal(matchCount(found, 1), "2 / 3");
});

test("past the page of matches held, the kernel is asked for the next or previous page", () => {
  const found = { items: [[1], [2]], total: 5, page: 0, limit: 2 };
  assert.deepEqual(stepMatch(found, 1, 1), { page: 1 });
  assert.deepEqual(stepMatch(found, 0, -1), { page: 2 }, "before the first: the last page");
  assert.deepEqual(stepMatch({ ...found, page: 2 }, 1, 1), { page: 0 }, "after the last: the first");
  assert.deepEqual(stepMatch(found, 0, 1), { at: 1 });
  assert.equal(matchCount({ ...found, page: 1 }, 0), "3 / 5 (3-4 listed)");
});

test("W/S and the up/down arrows zoom, A/D and left/right pan, any case, no modifier", () => {
  const key = (k, mods = {}) => keyAction({ key: k, ...mods });
  assert.deepEqual(key("w"), { zoom: 0.8 });
  assert.deepEqual(key("W"), { zoom: 0.8 });
  assert.deepEqual(key("ArrowUp"), { zoom: 0.8 });
  assert.deepEqual(key("s"), { zoom: 1.25 });
  assert.deepEqual(key("A"), { pan: -0.2 });
  assert.deepEqual(key("ArrowRight"), { pan: 0.2 });
  assert.deepEqual(key("Escape"), { clear: true });
  assert.equal(key("w", { ctrlKey: true }), null, "ctrl-W closes the tab, not a zoom");
  assert.equal(key("q"), null);
  assert.equal(key("constructor"), null);
});

test("a label press collapses, pins or shuts, and a header press opens", () => {
  const lanes = [lane("a", 0, 3, { thread: "t" }), lane("b", 3, 1, { thread: "u", rank: 1 })];
  const state = new LaneState();
  assert.equal(labelAction(lanes[0], "", 5, false), "collapse");
  assert.equal(labelAction(lanes[1], "", 5, false), "", "one level: nothing to collapse");
  assert.equal(labelAction(lanes[0], "", 20, false), "pin");
  assert.equal(labelAction(lanes[0], "", 100, false), "shut-process");
  assert.equal(labelAction(lanes[0], "", 100, true), "shut-rank");
  assert.equal(labelAction(lanes[0], "rank", 100, false), "open-rank");
  assert.equal(labelAction(lanes[0], "process", 5, false), "open-process");
  applyLabelAction(state, lanes, 0, "collapse", procKey);
  applyLabelAction(state, lanes, 0, "pin", procKey);
  applyLabelAction(state, lanes, 1, "shut-rank", procKey);
  assert.deepEqual([...state.collapsed], [0]);
  assert.deepEqual([...state.pinned], ["t"]);
  assert.deepEqual([...state.rankShut], [1]);
  applyLabelAction(state, lanes, 0, "collapse", procKey);
  applyLabelAction(state, lanes, 1, "open-rank", procKey);
  assert.equal(state.collapsed.size + state.rankShut.size, 0);
});

test("a click by an arrow's far end goes to the linked event", () => {
  const chosen = { id: 1, x0: 0, row: 0 };
  const kernel = { id: 2, x0: 100, row: 1, why: "kernel" };
  const launch = { id: 3, x0: 200, row: 2, why: "launch" };
  const at = (ev) => (ev.row === 5 ? null : [ev.x0, ev.row * 10]);
  assert.equal(arrowAt(chosen, [kernel, launch], at, 101, 11), kernel);
  assert.equal(arrowAt(chosen, [kernel, launch], at, 200, 20), launch);
  assert.equal(arrowAt(chosen, [kernel, launch], at, 150, 15), null);
  assert.equal(arrowAt(null, [kernel], at, 100, 10), null);
  assert.equal(arrowAt(chosen, [{ ...kernel, row: 5 }], at, 100, 50), null, "its row is hidden");
});
