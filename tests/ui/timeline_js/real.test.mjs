// The front-end's logic on a real window's traits (the kineto_gpu sample, written by
// tests/ui/test_timeline_js.py into DYNPROF_TIMELINE_FIXTURE): the summary as the kernel packed
// it, its lanes as the kernel laid them out, and the events the kernel's VisibleIndex finds in
// a few ranges, which the browser must find too.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  LaneState, arrange, eventsInRange, summaryLevel,
} from "../../../dynprof_nb/analysis/timeline_js/layout.mjs";
import { decodeSummary } from "../../../dynprof_nb/analysis/timeline_js/model.mjs";

function fixture() {
  const where = process.env.DYNPROF_TIMELINE_FIXTURE;
  assert.ok(where, "run through tests/ui/test_timeline_js.py, which writes the real window's traits");
  const f = JSON.parse(readFileSync(where, "utf8"));
  const bytes = Buffer.from(f.summary, "base64");
  f.S = decodeSummary(f.summary_info, new DataView(bytes.buffer, bytes.byteOffset, bytes.length), f.rows);
  return f;
}

test("every level together finds exactly the events the kernel's index finds in a range", () => {
  const f = fixture();
  const { S } = f;
  assert.ok(S.n > 1000 && S.complete);
  for (const [lo, hi, want] of f.ranges) {
    const got = [];
    for (let lev = 0; lev < S.levels.length; lev++) {
      for (let row = 0; row < f.rows; row++) {
        const [i0, i1] = eventsInRange(S, lev * f.rows + row, lo, hi);
        for (let i = i0; i < i1; i++) if (S.x0[i] + S.dur[i] > lo) got.push(S.id[i]);
      }
    }
    assert.deepEqual(got.sort((a, b) => a - b), want, `[${lo}, ${hi})`);
  }
});

test("the whole window draws the coarsest level; a 1 µs view the finest", () => {
  const { S, full } = fixture();
  assert.equal(summaryLevel(S.levels, (full[1] - full[0]) / 1000, S.complete).level, 0);
  assert.equal(summaryLevel(S.levels, 1, S.complete).level, S.levels.length - 1);
});

test("the real lanes, collapsed, pinned or shut, never overlap", () => {
  const f = fixture();
  const rowH = f.row_height;
  const states = [new LaneState(), new LaneState(), new LaneState(), new LaneState()];
  states[1].collapsed.add(0);
  states[2].pinned.add(f.lanes[f.lanes.length - 1].thread);
  states[3].procShut.add(`${f.lanes[0].rank}\u0001${f.lanes[0].process}\u0001${f.lanes[0].device}`);
  for (const state of states) {
    const arr = arrange(f.lanes, f.rows, rowH, state);
    let y = 0;
    for (const j of arr.order) {
      if (arr.laneY[j] < 0) continue;
      assert.equal(arr.laneY[j], y);
      y += arr.laneN[j] * rowH;
    }
    assert.equal(y, arr.contentH);
    const own = Array.from(arr.rowY).filter((v) => v >= 0 && !arr.header.some((h, j) => h && arr.laneY[j] === v));
    assert.equal(new Set(own).size, own.length);
  }
});
