import assert from "node:assert/strict";
import { test } from "node:test";

import {
  copyOf, decodeRects, decodeSteps, decodeSummary, eventOf,
} from "../../../dynprof_nb/analysis/timeline_js/model.mjs";
import { lane, packSummary } from "./helpers.mjs";

test("a DataView at an odd offset of a shared buffer is copied aligned", () => {
  const bytes = new Uint8Array(17);
  new DataView(bytes.buffer).setFloat64(1, 2.5, true);
  const copy = copyOf(new DataView(bytes.buffer, 1, 8));
  assert.equal(new Float64Array(copy)[0], 2.5);
  assert.equal(copyOf(null).byteLength, 0);
});

test("the summary's columns and runs decode as the kernel packed them", () => {
  const events = [
    { x0: 5, dur: 3, row: 1, name: 7, level: 0 },
    { x0: 1, dur: 9, row: 0, name: 6, level: 1 },
    { x0: 2, dur: 4, row: 0, name: 5, level: 0 },
  ];
  const S = decodeSummary({ count: 3, levels: [10, 1.25], complete: false }, packSummary(events, 2, 2), 2);
  assert.equal(S.n, 3);
  assert.deepEqual(Array.from(S.first), [0, 1, 2, 3, 3]); // (level, row) runs
  assert.deepEqual(Array.from(S.id), [2, 0, 1]);
  assert.deepEqual(Array.from(S.longest), [4, 3, 9, 0]);
  assert.equal(S.complete, false);
  assert.deepEqual(eventOf(S, null, 0, 1), { id: 0, x0: 5, x1: 8, row: 1, name: 7, dur: 3 });
});

test("the kernel's rects are offsets from drawn.lo", () => {
  const n = 2;
  const buf = new ArrayBuffer(24 * n);
  new Float32Array(buf, 0, 2 * n).set([1, 2, 3, 4]);
  new Int32Array(buf, 8 * n, 3 * n).set([10, 11, 0, 1, 4, 5]);
  new Float32Array(buf, 20 * n, n).set([2, 2]);
  const D = decodeRects({ count: n, lo: 1e9, hi: 1e9 + 100, pixels: 50, exact: true }, new DataView(buf));
  assert.deepEqual(Array.from(D.x0), [1e9 + 1, 1e9 + 2]);
  assert.deepEqual(Array.from(D.x1), [1e9 + 3, 1e9 + 4]);
  assert.equal(D.pxNs, 2);
  assert.deepEqual(eventOf(null, D, 1, 1), { id: 11, x0: 1e9 + 2, x1: 1e9 + 4, row: 1, name: 5, dur: 2 });
});

test("each step band belongs to the rank whose lanes it starts in", () => {
  const lanes = [lane("a", 0, 2, { rank: 0 }), lane("b", 2, 3, { rank: 3 })];
  const steps = new Float64Array([0, 10, 5, 15, 0, 2, 2, 5]); // a, b, top, bottom
  const labels = new Float64Array([1, 2, 0, 5]); // step, start
  const { steps: s, marks } = decodeSteps(new DataView(steps.buffer), new DataView(labels.buffer), lanes);
  assert.deepEqual(s.rank, [0, 3]);
  assert.deepEqual(Array.from(marks.step), [1, 2]);
  assert.deepEqual(Array.from(marks.a), [0, 5]);
});
