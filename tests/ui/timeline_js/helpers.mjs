// Test data for the front-end's unit tests: lanes as the kernel sends them, a summary packed
// as timeline_view._pack_summary packs it, and a stand-in for the pixel layer's canvas.

export function lane(label, y0, rows, more = {}) {
  return { label, y0, rows, rank_first: false, rank: 0, thread: label, device: false,
           process: "python", comm: false, groups: [], ...more };
}

// events [{x0, dur, row, name, level}] -> a DataView laid out as `summary` is (PROTOCOL.md)
export function packSummary(events, nRows, nLevels) {
  const sorted = events.map((e, id) => ({ id, ...e }))
    .sort((a, b) => a.level - b.level || a.row - b.row || a.x0 - b.x0);
  const n = sorted.length, runs = nLevels * nRows;
  const buf = new ArrayBuffer(8 * (2 * n + runs) + 4 * (3 * n + runs + 1));
  let o = 0;
  const f64 = (k) => { const a = new Float64Array(buf, o, k); o += 8 * k; return a; };
  const i32 = (k) => { const a = new Int32Array(buf, o, k); o += 4 * k; return a; };
  const x0 = f64(n), dur = f64(n), longest = f64(runs);
  const id = i32(n), row = i32(n), name = i32(n), first = i32(runs + 1);
  sorted.forEach((e, i) => {
    x0[i] = e.x0; dur[i] = e.dur; id[i] = e.id; row[i] = e.row; name[i] = e.name;
    const r = e.level * nRows + e.row;
    longest[r] = Math.max(longest[r], e.dur);
  });
  for (let r = 0, i = 0; r <= runs; r++) {
    while (i < n && sorted[i].level * nRows + sorted[i].row < r) i++;
    first[r] = i;
  }
  return new DataView(buf);
}

// the pixel layer's canvas, without a browser: image data of the asked size, drawn nowhere
export function fakeLayer() {
  return {
    width: 0,
    height: 0,
    getContext: () => ({
      createImageData: (w, h) => ({ data: new Uint8ClampedArray(w * h * 4) }),
      putImageData: () => {},
    }),
  };
}
