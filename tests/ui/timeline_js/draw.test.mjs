import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Bars, dim, fitText, fmtDur, niceStep, rgbaWords, textColour, units,
} from "../../../dynprof_nb/analysis/timeline_js/draw.mjs";
import { LaneState, arrange } from "../../../dynprof_nb/analysis/timeline_js/layout.mjs";
import { fakeLayer, lane } from "./helpers.mjs";

test("durations read in the unit that fits them", () => {
  assert.deepEqual(units(5e9), [1e9, "s"]);
  assert.deepEqual(units(1999), [1, "ns"]);
  assert.equal(fmtDur(1500), "1.500 µs");
  assert.equal(fmtDur(2.5e6), "2.500 ms");
  assert.equal(fmtDur(800), "800.0 ns");
});

test("axis ticks fall on 1, 2 or 5 times a power of ten", () => {
  assert.equal(niceStep(0.7), 1);
  assert.equal(niceStep(130), 200);
  assert.equal(niceStep(4000), 5000);
  assert.equal(niceStep(6000), 10000);
});

test("colours: the ink that reads on a bar, the layer's byte order, the darker edge", () => {
  assert.equal(textColour("#ffff00"), "#111111");
  assert.equal(textColour("#000080"), "#ffffff");
  const [word] = rgbaWords(["#102030"]);
  assert.equal(word, 0xff302010); // little-endian RGBA: R in the low byte
  assert.equal(dim(word), (0xff000000 | (0x24 << 16) | (0x18 << 8) | 0x0c) >>> 0);
});

test("a long label is cut in the middle to fit, its start and end kept", () => {
  const measure = (s) => 6 * s.length;
  assert.equal(fitText("rank 0 / python / thread 1", 1000, measure), "rank 0 / python / thread 1");
  const cut = fitText("rank 0 / a very long process name / stream 7", 120, measure);
  assert.ok(measure(cut) <= 120, cut);
  assert.ok(cut.startsWith("rank 0") && cut.endsWith("m 7") && cut.includes("…"), cut);
  assert.equal(measure(fitText("rank 0 / a very long process name / stream 7", 126, measure)), 126);
});

test("narrow bars: one per pixel of a row, the first put (the longest) kept", () => {
  const arr = arrange([lane("main", 0, 1)], 1, 18, new LaneState());
  const sc = { lo: 0, hi: 1000, pw: 100, k: 0.1, off: 0, rowH: 18, height: 200, Y0: 46, arr };
  const bars = new Bars(fakeLayer(), Uint32Array.from([7, 8]));
  bars.begin(sc, 1);
  bars.put(500, 505, 0, 0, 0, 0); // 0.5 px
  bars.put(501, 503, 0, 1, 0, 1); // the same pixel: not drawn, not hit
  bars.put(600, 605, 0, 1, 0, 2);
  bars.put(0, 500, 0, 1, 0, 3); // 50 px: filled, its name queued
  assert.deepEqual(Array.from(bars.hits.i.subarray(0, bars.hits.n)), [0, 2, 3]);
  assert.deepEqual(bars.textQ, [2]);
  bars.begin(sc, 1); // the next frame starts empty
  bars.put(501, 503, 0, 1, 0, 1);
  assert.equal(bars.hits.n, 1);
});
