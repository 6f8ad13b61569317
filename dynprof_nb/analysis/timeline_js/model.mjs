// The model: the data the synced traits carry, decoded into typed arrays (PROTOCOL.md says
// what each trait holds). Pure functions of the traits' values: no DOM, no canvas.

export function copyOf(view) {
  // a DataView over a shared buffer at any offset: copy into an aligned ArrayBuffer
  if (!view || !view.byteLength) return new ArrayBuffer(0);
  return view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength);
}

// `summary` (+ `summary_info`): the held events, sorted by level, row, start; one run per
// (level, row), `first[run]..first[run + 1]`, and each run's longest duration (so that a view's
// events are found by bisection on the start: nothing longer can start before lo - longest)
export function decodeSummary(info, view, nRows) {
  const buf = copyOf(view);
  const n = info.count || 0;
  const levels = info.levels || [];
  const runs = Math.max(1, levels.length) * nRows;
  let o = 0;
  const f64 = (k) => { const a = new Float64Array(buf, o, k); o += 8 * k; return a; };
  const i32 = (k) => { const a = new Int32Array(buf, o, k); o += 4 * k; return a; };
  const x0 = f64(n), dur = f64(n), longest = f64(runs);
  const id = i32(n), row = i32(n), name = i32(n), first = i32(runs + 1);
  return { n, x0, dur, longest, id, row, name, first, levels, complete: !!info.complete };
}

// `steps`: the shaded step bands (a, b ns; top, bottom rows), each given the rank whose lanes
// its top row is in; `step_labels`: the step numbers along the top (step, ns)
export function decodeSteps(stepsView, labelsView, lanes) {
  const f = new Float64Array(copyOf(stepsView));
  const n = f.length / 4;
  const steps = { n, a: f.subarray(0, n), b: f.subarray(n, 2 * n), top: f.subarray(2 * n, 3 * n),
                  bottom: f.subarray(3 * n, 4 * n) };
  steps.rank = Array.from(steps.top, (t) => {
    const lane = lanes.find((l) => l.y0 <= t && t < l.y0 + l.rows);
    return lane ? lane.rank : null;
  });
  const m = new Float64Array(copyOf(labelsView));
  const k = m.length / 2;
  const marks = { n: k, step: m.subarray(0, k), a: m.subarray(k, 2 * k) };
  return { steps, marks };
}

// `rects` (+ `drawn`): the kernel's answer for a view finer than the summary: x0, x1 as
// float32 ns from drawn.lo; id, row, name as int32; duration as float32 ns; column by column
export function decodeRects(meta, view) {
  const n = meta.count || 0;
  const buf = copyOf(view);
  const f = new Float32Array(buf, 0, 2 * n);
  const x0 = new Float64Array(n);
  const x1 = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    x0[i] = meta.lo + f[i];
    x1[i] = meta.lo + f[n + i];
  }
  return { n, x0, x1, id: new Int32Array(buf, 8 * n, n), row: new Int32Array(buf, 12 * n, n),
           name: new Int32Array(buf, 16 * n, n), dur: new Float32Array(buf, 20 * n, n),
           lo: meta.lo, hi: meta.hi, pxNs: (meta.hi - meta.lo) / meta.pixels, exact: !!meta.exact };
}

// what a drawn bar is (`src` 0: the summary's event i, 1: the kernel's): layout id, start, end,
// row, name id, duration
export function eventOf(S, D, src, i) {
  if (src) return { id: D.id[i], x0: D.x0[i], x1: D.x1[i], row: D.row[i], name: D.name[i], dur: D.dur[i] };
  return { id: S.id[i], x0: S.x0[i], x1: S.x0[i] + S.dur[i], row: S.row[i], name: S.name[i], dur: S.dur[i] };
}
