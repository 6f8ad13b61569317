import assert from "node:assert/strict";
import { test } from "node:test";

import {
  LaneState, LEFT, arrange, arrangement, centreRange, clampRange, eventsInRange, laneAtY,
  laneIndexOfRow, laneLabelOfRow, stepStride, summaryLevel, zoomRange,
} from "../../../dynprof_nb/analysis/timeline_js/layout.mjs";
import { decodeSummary } from "../../../dynprof_nb/analysis/timeline_js/model.mjs";
import { lane, packSummary } from "./helpers.mjs";

const ROW_H = 18;
// two ranks: rank 0 a host thread of 3 levels and a stream of 2, rank 1 the same
const LANES = [
  lane("0 host", 0, 3, { rank: 0, thread: "main" }),
  lane("0 stream 7", 3, 2, { rank: 0, thread: "stream 7", device: true, process: "gpu", comm: true }),
  lane("1 host", 5, 3, { rank: 1, thread: "main" }),
  lane("1 stream 7", 8, 2, { rank: 1, thread: "stream 7", device: true, process: "gpu", comm: true }),
];
const ROWS = 10;

// every drawn lane's [top, bottom) px: none overlaps another, none leaves a gap
function assertNoOverlap(arr) {
  const bands = arr.order.filter((j) => arr.laneY[j] >= 0)
    .map((j) => [arr.laneY[j], arr.laneY[j] + arr.laneN[j] * ROW_H]);
  let y = 0;
  for (const [a, b] of bands) {
    assert.equal(a, y, `a lane starts at ${a} px, the one before ended at ${y}`);
    assert.ok(b > a);
    y = b;
  }
  assert.equal(y, arr.contentH);
  // a shut rank's or process's lanes share its header row; every other row has its own height
  const own = Array.from(arr.rowY).filter((v, row) => v >= 0 && !arr.header.some(
    (h, j) => h && arr.laneY[j] === v));
  assert.equal(new Set(own).size, own.length, "two rows drawn at one height");
  for (const v of arr.rowY) assert.ok(v < arr.contentH);
}

test("lanes stack one under the other, every row at its own height", () => {
  const arr = arrange(LANES, ROWS, ROW_H, new LaneState());
  assertNoOverlap(arr);
  assert.deepEqual(arr.order, [0, 1, 2, 3]);
  assert.deepEqual(Array.from(arr.rowY), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((r) => r * ROW_H));
  assert.equal(arr.contentH, ROWS * ROW_H);
  assert.deepEqual(arr.rankBand.get(1), [5 * ROW_H, 10 * ROW_H]);
});

test("a collapsed lane keeps its top row, hides the others, and the next lane moves up", () => {
  const state = new LaneState();
  state.collapsed.add(0);
  const arr = arrange(LANES, ROWS, ROW_H, state);
  assertNoOverlap(arr);
  assert.equal(arr.rowY[0], 0);
  assert.equal(arr.rowY[1], -1);
  assert.equal(arr.rowY[2], -1);
  assert.equal(arr.laneY[1], ROW_H);
  assert.equal(arr.contentH, 8 * ROW_H);
});

test("a pinned stream is drawn first on every rank, outside the ranks' bands", () => {
  const state = new LaneState();
  state.pinned.add("stream 7");
  const arr = arrange(LANES, ROWS, ROW_H, state);
  assertNoOverlap(arr);
  assert.deepEqual(arr.order, [1, 3, 0, 2]);
  assert.deepEqual(arr.rankBand.get(0), [4 * ROW_H, 7 * ROW_H]);
  const shown = arrangement(LANES, arr, state);
  assert.deepEqual(shown.lanes.map((l) => [l[2], l[3]]),
    [["0 stream 7", true], ["1 stream 7", true], ["0 host", false], ["1 host", false]]);
  assert.equal(shown.height, ROWS);
  assert.deepEqual(arrangement(LANES, arrange(LANES, ROWS, ROW_H, new LaneState()), new LaneState()), {});
});

test("pinning communication pins every rank's communication lanes as one group", () => {
  const state = new LaneState();
  state.commPinned = true;
  assert.deepEqual(arrange(LANES, ROWS, ROW_H, state).order, [1, 3, 0, 2]);
});

test("a shut rank is one header row holding each of its lanes' top level", () => {
  const state = new LaneState();
  state.rankShut.add(0);
  const arr = arrange(LANES, ROWS, ROW_H, state);
  assertNoOverlap(arr);
  assert.deepEqual(arr.header, ["rank", "", "", ""]);
  assert.equal(arr.rowY[0], 0);
  assert.equal(arr.rowY[3], 0, "the stream's top level is drawn in the rank's header row");
  for (const r of [1, 2, 4]) assert.equal(arr.rowY[r], -1);
  assert.equal(arr.laneY[1], -1);
  assert.equal(arr.laneY[2], ROW_H);
  assert.equal(arr.contentH, 6 * ROW_H);
});

test("the lane at a height, and the lane of a row", () => {
  const arr = arrange(LANES, ROWS, ROW_H, new LaneState());
  assert.equal(laneAtY(arr, 0), 0);
  assert.equal(laneAtY(arr, 3 * ROW_H - 1), 0);
  assert.equal(laneAtY(arr, 3 * ROW_H), 1);
  assert.equal(laneAtY(arr, 10 * ROW_H), undefined);
  assert.equal(laneIndexOfRow(LANES, 7), 2);
  assert.equal(laneIndexOfRow(LANES, 10), -1);
  assert.equal(laneLabelOfRow(LANES, 9), "1 stream 7");
});

test("a zoom draws the levels down to the first as fine as a pixel", () => {
  const levels = [8000, 1000, 125];
  assert.deepEqual(summaryLevel(levels, 20000, false), { level: 0, finer: false });
  assert.deepEqual(summaryLevel(levels, 8000, false), { level: 0, finer: false });
  assert.deepEqual(summaryLevel(levels, 7999, false), { level: 1, finer: false });
  assert.deepEqual(summaryLevel(levels, 500, false), { level: 2, finer: false });
  // finer than every level held: the finest is drawn, and the kernel asked unless all is held
  assert.deepEqual(summaryLevel(levels, 10, false), { level: 2, finer: true });
  assert.deepEqual(summaryLevel(levels, 10, true), { level: 2, finer: false });
  assert.deepEqual(summaryLevel([], 10, false), { level: -1, finer: false });
});

test("a view's events are found by bisection, long ones that started before it included", () => {
  const events = [
    { x0: 0, dur: 1000, row: 0, name: 0, level: 0 }, // covers the view from before it
    { x0: 100, dur: 10, row: 0, name: 1, level: 0 }, // ends before the view
    { x0: 600, dur: 10, row: 0, name: 2, level: 0 },
    { x0: 900, dur: 10, row: 0, name: 3, level: 0 }, // starts after it
    { x0: 650, dur: 10, row: 1, name: 4, level: 0 },
  ];
  const S = decodeSummary({ count: 5, levels: [100], complete: true }, packSummary(events, 2, 1), 2);
  const [i0, i1] = eventsInRange(S, 0, 500, 800);
  const ids = [];
  for (let i = i0; i < i1; i++) if (S.x0[i] + S.dur[i] >= 500) ids.push(S.id[i]);
  assert.deepEqual(ids, [0, 2]);
  const [j0, j1] = eventsInRange(S, 1, 500, 800);
  assert.deepEqual(Array.from(S.id.subarray(j0, j1)), [4]);
});

test("the range is clamped to 100 ns at least and the window at most", () => {
  const full = [0, 1e6];
  assert.deepEqual(clampRange(500, 520, full), [460, 560]);
  const [a, b] = clampRange(-5e6, 5e6, full);
  assert.ok(Math.abs(b - a - 1.02e6) < 1e-6);
  assert.ok(a >= -0.01e6 - 1e-6 && b <= 1.01e6 + 1e-6);
  assert.deepEqual(clampRange(-1e5, 1e5, full), [-1e4, 1.9e5]);
});

test("a zoom keeps the time under the pointer where it is", () => {
  const [a, b] = zoomRange(1000, 2000, 0.5, 1200);
  assert.deepEqual([a, b], [1100, 1600]);
  assert.equal((1200 - a) / (b - a), (1200 - 1000) / 1000);
});

test("centring on an event keeps the span unless the event is too wide or too narrow", () => {
  assert.deepEqual(centreRange(0, 1000, 4000, 4100, 1000), [3550, 4550]);
  assert.deepEqual(centreRange(0, 1000, 4000, 5000, 1000), [3000, 6000]);
  const [a, b] = centreRange(0, 1e9, 4000, 4010, 1000); // 10 ns in 1 s: 2 us around it
  assert.deepEqual([a, b], [3005, 5005]);
});

test("step numbers are thinned to markers 36 px apart", () => {
  const n = 100;
  const marks = { n, step: Float64Array.from({ length: n }, (_, i) => i),
                  a: Float64Array.from({ length: n }, (_, i) => i * 10) };
  assert.equal(stepStride(marks, 0, n, 0, 1), 5); // 10 px apart: every 5th, 50 px
  assert.equal(stepStride(marks, 0, n, 0, 4), 1); // 40 px apart: every one
  assert.equal(stepStride(marks, 0, n, 0, 0.1), 50); // 1 px apart: every 50th
  assert.equal(LEFT, 210);
});
