// The input module's listeners on stand-in DOM targets (Node's EventTarget): what a drag, a
// shift-drag, a click, a label press and the search box's keys do, as the widget sees them.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Pointer, SearchBox, cursorAt, listenKeys,
} from "../../../dynprof_nb/analysis/timeline_js/input.mjs";
import { LEFT, TOP } from "../../../dynprof_nb/analysis/timeline_js/layout.mjs";

globalThis.window = globalThis.window || new EventTarget();

// a mouse event at (x, y) on a canvas whose top-left corner is the page's
const at = (x, y, more = {}) => ({ clientX: x, clientY: y, shiftKey: false, preventDefault() {}, ...more });

// a widget lending the pointer a 1000 px plot of [0, 1000) ns, recording what it was asked
function widget() {
  const said = [];
  let lo = 0, hi = 1000;
  const view = {
    xy: (e) => ({ x: e.clientX, y: e.clientY }),
    timeAt: (x) => lo + ((x - LEFT) / 1000) * (hi - lo),
    plotW: () => 1000,
    range: () => [lo, hi],
    setRange: (a, b) => { [lo, hi] = [a, b]; said.push(["range", a, b]); },
    zoomBy: (f, t) => said.push(["zoom", f, t]),
    selecting: (a, b) => said.push(["selecting", a, b]),
    selected: () => said.push(["selected"]),
    click: (x, y) => said.push(["click", x, y]),
    label: (x, y, shift) => said.push(["label", x, y, shift]),
    moved: () => said.push(["moved"]),
    left: () => said.push(["left"]),
    whole: () => said.push(["whole"]),
  };
  const canvas = new EventTarget();
  const pointer = new Pointer(canvas, { focus() {} }, view);
  return { pointer, canvas, said };
}

test("a drag pans the view by the time under the distance dragged", () => {
  const { pointer, canvas, said } = widget();
  pointer.press(at(LEFT + 500, TOP + 50));
  pointer.dragTo(at(LEFT + 502, TOP + 50)); // 2 px: not a drag yet
  assert.deepEqual(said, []);
  pointer.dragTo(at(LEFT + 600, TOP + 50));
  assert.deepEqual(said, [["range", -100, 900]]);
  pointer.release(at(LEFT + 600, TOP + 50, { target: canvas }));
  assert.deepEqual(said.length, 1, "a drag released is no click");
});

test("a shift-drag, or a drag on the axis, selects a range of time", () => {
  for (const [y, shiftKey] of [[TOP + 50, true], [TOP - 10, false]]) {
    const { pointer, canvas, said } = widget();
    pointer.press(at(LEFT + 100, y, { shiftKey }));
    pointer.dragTo(at(LEFT + 300, y));
    pointer.dragTo(at(LEFT + 5000, y)); // past the plot: its end
    pointer.release(at(LEFT + 5000, y, { target: canvas }));
    assert.deepEqual(said, [["selecting", 100, 300], ["selecting", 100, 1000], ["selected"]]);
  }
});

test("the cursor says what a drag does where it is: a range on the axis, a pan on the lanes", () => {
  // a new user dragged on the axis expecting a pan and got a selection, with nothing to tell
  assert.equal(cursorAt(LEFT + 100, TOP - 10, false), "col-resize");
  assert.equal(cursorAt(LEFT + 100, TOP + 50, true), "col-resize");
  assert.equal(cursorAt(LEFT + 100, TOP + 50, false), "grab");
  assert.equal(cursorAt(LEFT - 5, TOP + 50, false), "pointer");
});

test("a press released where it began is a click at that point", () => {
  const { pointer, canvas, said } = widget();
  pointer.press(at(LEFT + 40, TOP + 30));
  pointer.release(at(LEFT + 41, TOP + 30, { target: canvas }));
  assert.deepEqual(said, [["click", LEFT + 41, TOP + 30]]);
  pointer.press(at(LEFT + 40, TOP + 30));
  pointer.release(at(LEFT + 40, TOP + 30, { target: window })); // released off the canvas
  assert.equal(said.length, 1);
});

test("a label press acts on the lane only when it did not move", () => {
  const { pointer, said } = widget();
  pointer.press(at(20, TOP + 30));
  pointer.labelClick(at(21, TOP + 31, { shiftKey: true }));
  assert.deepEqual(said, [["label", 21, TOP + 31, true]]);
  pointer.press(at(LEFT + 300, TOP + 30)); // a pan released over the labels
  pointer.labelClick(at(20, TOP + 30));
  pointer.press(at(20, TOP + 30));
  pointer.labelClick(at(40, TOP + 30)); // moved 20 px
  assert.equal(said.length, 1);
});

test("the wheel zooms about the time under the pointer", () => {
  const { pointer, said } = widget();
  pointer.wheel(at(LEFT + 250, TOP + 10, { deltaY: -200 }));
  assert.equal(said[0][0], "zoom");
  assert.ok(said[0][1] < 1, "a wheel up zooms in");
  assert.equal(said[0][2], 250);
  assert.deepEqual(pointer.mouse, { x: LEFT + 250, y: TOP + 10 });
});

function element() {
  const e = new EventTarget();
  e.value = "";
  return e;
}
const key = (k, more = {}) => Object.assign(new Event("keydown"), { key: k, shiftKey: false, ...more });

test("keys on the widget act, keys in the search box do not", () => {
  const root = element(), search = element();
  const acts = [];
  listenKeys(root, [search], (a) => acts.push(a));
  root.dispatchEvent(key("D"));
  root.dispatchEvent(key("w", { ctrlKey: true }));
  assert.deepEqual(acts, [{ pan: 0.2 }]);
});

test("Enter sends the search, and steps through its matches once the kernel answered it", () => {
  const input = element(), prev = element(), next = element();
  const data = { matches: {} };
  const model = { get: (k) => data[k], set: (k, v) => { data[k] = v; }, save_changes() {} };
  const steps = [];
  const box = new SearchBox(input, prev, next, model, (d) => steps.push(d));
  input.value = "NCCL";
  input.dispatchEvent(key("Enter"));
  assert.equal(data.query, "NCCL", "asked at once");
  assert.deepEqual(steps, [], "no step before the answer");
  data.matches = { query: "NCCL", items: [[1]], total: 1 };
  assert.equal(box.take(), 1, "the step waiting for the answer");
  assert.equal(box.take(), 0);
  input.dispatchEvent(key("Enter", { shiftKey: true }));
  next.dispatchEvent(new Event("click"));
  assert.deepEqual(steps, [-1, 1]);
});
