// Drawing: one frame on the canvas, from a scene (what the widget holds now: the range, the
// canvas size, the lanes as arranged). Bars go into one pixel layer (a row of pixels per bar,
// copied down the rows at the end: tens of thousands of fillRect calls would not fit a frame);
// every bar drawn is kept in a hit list, which is what the pointer picks from (input.mjs).

import { LEFT, TOP, headerText, lowerBound, stepStride } from "./layout.mjs";

export function units(span) {
  if (span >= 2e9) return [1e9, "s"];
  if (span >= 2e6) return [1e6, "ms"];
  if (span >= 2e3) return [1e3, "µs"];
  return [1, "ns"];
}

export function fmtDur(ns) {
  const [s, u] = units(ns * 2);
  return `${(ns / s).toPrecision(4)} ${u}`;
}

export function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// a name's ink inside its bar: dark on a light colour, white on a dark one
export function textColour(hex) {
  const n = parseInt(hex.slice(1), 16);
  const l = 0.299 * (n >> 16) + 0.587 * ((n >> 8) & 255) + 0.114 * (n & 255);
  return l > 140 ? "#111111" : "#ffffff";
}

// the colour 25% darker: a bar's right edge, so that neighbours of one name stay apart
export function dim(word) {
  const r = (word & 255) * 0.75, g = ((word >> 8) & 255) * 0.75, b = ((word >> 16) & 255) * 0.75;
  return (0xff000000 | (b << 16) | (g << 8) | r) >>> 0;
}

// "#rrggbb" -> little-endian RGBA in one word (0xAABBGGRR), as the pixel layer stores it
export const rgbaWords = (colors) => Uint32Array.from(colors, (c) => {
  const n = parseInt(c.slice(1), 16);
  return (0xff000000 | ((n & 255) << 16) | (n & 0xff00) | (n >> 16)) >>> 0;
});

// the bars drawn in a frame, px on the canvas: a, b, layout row, source (0 summary, 1 kernel)
// and index in it
export class HitList {
  constructor() {
    this.n = 0;
    this.a = new Float32Array(1024);
    this.b = new Float32Array(1024);
    this.row = new Int32Array(1024);
    this.src = new Int32Array(1024);
    this.i = new Int32Array(1024);
  }

  keep(a, b, row, src, i) {
    if (this.n === this.a.length) {
      const grow = (A) => { const B = new A.constructor(A.length * 2); B.set(A); return B; };
      for (const k of ["a", "b", "row", "src", "i"]) this[k] = grow(this[k]);
    }
    const n = this.n;
    this.a[n] = a; this.b[n] = b; this.row[n] = row; this.src[n] = src; this.i[n] = i;
    this.n = n + 1;
  }
}

// One frame's bars: at most one narrow bar per pixel of a row (the first put, the longest:
// the summary is drawn level by level, coarse first), wide ones filled, into the pixel layer.
export class Bars {
  constructor(layer, rgba) {
    this.layer = layer;
    this.lctx = layer.getContext("2d");
    this.rgba = rgba;
    this.lw = 0; this.lh = 0; this.limg = null; this.lbuf = null;
    this.grid = new Int32Array(0); // one cell per row and pixel: the frame that filled it
    this.stamp = 0;
    this.hits = new HitList();
    this.textQ = []; // hits wide enough for a name
  }

  begin(sc, nRows) {
    this.sc = sc;
    this.cols = Math.ceil(sc.pw) + 2;
    if (this.grid.length < nRows * this.cols) this.grid = new Int32Array(nRows * this.cols);
    this.stamp += 1;
    this.hits.n = 0;
    this.textQ.length = 0;
    this.pad = sc.rowH > 6 ? 1 : 0;
    const lw = Math.ceil(sc.pw) + 2, lh = sc.height - TOP + sc.rowH; // rows in sight, one above
    if (lw !== this.lw || lh !== this.lh) {
      this.lw = lw; this.lh = lh;
      this.layer.width = lw; this.layer.height = lh;
      this.limg = this.lctx.createImageData(lw, lh);
      this.lbuf = new Uint32Array(this.limg.data.buffer);
    } else this.lbuf.fill(0);
  }

  put(x0, x1, row, nm, src, i) {
    const { lo, k, pw, off, rowH } = this.sc;
    const rowY = this.sc.arr.rowY;
    const { lw, lbuf, grid, stamp, rgba } = this;
    let a = LEFT + (x0 - lo) * k;
    let b = LEFT + (x1 - lo) * k;
    if (b < LEFT || a > LEFT + pw) return;
    a = Math.max(a, LEFT - 1);
    b = Math.min(b, LEFT + pw + 1);
    const w = b - a;
    const line = (rowY[row] - off + rowH + this.pad) * lw; // one pixel row; copied down below
    if (w < 2) {
      const px = Math.max(0, Math.floor(a - LEFT + 1));
      const cell = row * this.cols + px;
      if (grid[cell] === stamp) return; // this pixel of this row has a longer bar already
      grid[cell] = stamp;
      lbuf[line + px] = rgba[nm];
      if (w > 1.2 && px + 1 < lw && grid[cell + 1] !== stamp) {
        grid[cell + 1] = stamp;
        lbuf[line + px + 1] = rgba[nm];
      }
      this.hits.keep(a, a + Math.max(w, 1), row, src, i);
      return;
    }
    const pa = Math.max(0, Math.round(a - LEFT + 1));
    const pb = Math.min(lw, Math.round(b - LEFT + 1));
    lbuf.fill(rgba[nm], line + pa, line + pb);
    if (pb - pa > 2) lbuf[line + pb - 1] = dim(rgba[nm]);
    this.hits.keep(a, b, row, src, i);
    if (w >= 24 && rowH >= 12) this.textQ.push(this.hits.n - 1);
  }

  // each row's pixel row copied down the row, and the layer onto the canvas
  composite(ctx, nRows, inSight) {
    if (!this.hits.n) return;
    const { off, rowH } = this.sc;
    const rowY = this.sc.arr.rowY;
    const { lw, lbuf, pad } = this;
    for (let row = 0; row < nRows; row++) {
      if (!inSight(row)) continue;
      const line = (rowY[row] - off + rowH + pad) * lw;
      for (let y = 1; y < rowH - 2 * pad; y++) lbuf.copyWithin(line + y * lw, line, line + lw);
    }
    this.lctx.putImageData(this.limg, 0, 0);
    ctx.imageSmoothingEnabled = false; // a high-dpi screen scales the layer: keep edges sharp
    ctx.drawImage(this.layer, LEFT - 1, TOP - rowH);
  }

  // names inside the bars they fit in (elided), each in its colour's ink; how many were drawn
  names(ctx, nameOf, names, nameW, inks) {
    const { pw, Y0, rowH } = this.sc;
    const rowY = this.sc.arr.rowY;
    const H = this.hits;
    ctx.font = "11px sans-serif";
    ctx.textBaseline = "middle";
    ctx.textAlign = "left";
    let labelled = 0;
    for (const h of this.textQ) {
      const nm = nameOf(h);
      const label = names[nm] || "";
      if (!nameW[nm]) nameW[nm] = ctx.measureText(label).width || 1;
      const a = Math.max(H.a[h], LEFT), b = Math.min(H.b[h], LEFT + pw);
      const room = b - a - 6;
      if (room < 14) continue;
      let s = label;
      if (nameW[nm] > room) {
        const chars = Math.floor((label.length * (room - 8)) / nameW[nm]);
        if (chars < 2) continue;
        s = label.slice(0, chars) + "…";
      }
      ctx.fillStyle = inks[nm];
      ctx.fillText(s, a + 3, Y0 + rowY[H.row[h]] + rowH / 2 + 0.5);
      labelled += 1;
    }
    return labelled;
  }
}

// x on the canvas of time t in the scene's range
export const xOf = (sc, t) => LEFT + ((t - sc.lo) / (sc.hi - sc.lo)) * sc.pw;

// a bar's outline: the selected event, the search match
export function outline(ctx, sc, x0, x1, row, colour, width) {
  const rowY = sc.arr.rowY;
  if (rowY[row] < 0) return;
  const a = xOf(sc, x0), b = xOf(sc, x1);
  ctx.strokeStyle = colour;
  ctx.lineWidth = width;
  ctx.strokeRect(a - 1, sc.Y0 + rowY[row] + 0.5, Math.max(3, b - a + 2), sc.rowH - 1);
}

// a critical path shown on the timeline (CriticalPath.show): each segment a bar along the
// bottom of its lane's first row, in its kind's colour, and a line where the path moves to
// another lane (a launch, a kernel's end releasing the host, a sync); how many were drawn
const PATH_INK = ["#d62728", "#ff7f0e", "#9467bd", "#7f7f7f", "#333333"];
export function drawPath(ctx, sc, path) {
  let shown = 0, prev = null;
  for (const [x0, x1, j, kind] of path) {
    const y = sc.arr.laneY[j];
    if (y === undefined || y < 0 || x1 < sc.lo || x0 > sc.hi) { prev = null; continue; }
    const a = Math.max(LEFT, xOf(sc, x0)), b = Math.min(LEFT + sc.pw, xOf(sc, x1));
    const yb = sc.Y0 + y + sc.rowH - 3;
    ctx.fillStyle = PATH_INK[kind] || PATH_INK[4];
    ctx.fillRect(a, yb, Math.max(1, b - a), 3);
    if (prev && prev.y !== yb) {
      ctx.fillStyle = "#d62728";
      ctx.fillRect(a, Math.min(prev.y, yb), 1, Math.abs(prev.y - yb) + 3);
    }
    prev = { y: yb };
    shown += 1;
  }
  return shown;
}

// the ends of the arrow between the chosen event and a linked one `f`: a launch points at its
// kernel; a kernel's own flows point away from it
export function arrowEnds(chosen, f) {
  const into = f.why === "launch";
  return into ? [f, chosen] : [chosen, f];
}

export function drawArrow(ctx, sc, chosen, f) {
  const [s, t] = arrowEnds(chosen, f);
  const rowY = sc.arr.rowY;
  if (rowY[s.row] < 0 || rowY[t.row] < 0) return;
  const x1 = xOf(sc, s.x0), y1 = sc.Y0 + rowY[s.row] + sc.rowH / 2;
  const x2 = xOf(sc, t.x0), y2 = sc.Y0 + rowY[t.row] + sc.rowH / 2;
  ctx.strokeStyle = "#d0202a";
  ctx.fillStyle = "#d0202a";
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  ctx.moveTo(x1, y1);
  ctx.lineTo(x2, y2);
  ctx.stroke();
  const ang = Math.atan2(y2 - y1, x2 - x1);
  ctx.beginPath();
  ctx.moveTo(x2, y2);
  ctx.lineTo(x2 - 9 * Math.cos(ang - 0.4), y2 - 9 * Math.sin(ang - 0.4));
  ctx.lineTo(x2 - 9 * Math.cos(ang + 0.4), y2 - 9 * Math.sin(ang + 0.4));
  ctx.closePath();
  ctx.fill();
}

// A label that fits `w` px (`measure`: a text's width): elided in the middle, where lane
// labels repeat themselves (the rank first, the thread or stream last); squeezing the glyphs
// made long ones illegible.
export function fitText(text, w, measure) {
  if (measure(text) <= w) return text;
  const cut = (k) => text.slice(0, Math.ceil(k / 2)) + "…" + text.slice(text.length - Math.floor(k / 2));
  let lo = 0, hi = text.length - 1;
  while (lo < hi) {
    const k = (lo + hi + 1) >> 1;
    if (measure(cut(k)) <= w) lo = k;
    else hi = k - 1;
  }
  return cut(lo);
}

// fitText on a canvas, remembered per font, width and text
export function makeFitter(ctx) {
  const fitted = new Map();
  return (text, w) => {
    const key = `${ctx.font}|${w}|${text}`;
    let out = fitted.get(key);
    if (out !== undefined) return out;
    out = fitText(text, w, (s) => ctx.measureText(s).width);
    if (fitted.size > 5000) fitted.clear();
    fitted.set(key, out);
    return out;
  };
}

// each drawn lane's label as fitted: two that would read the same once cut (hostile names
// alike but in the middle) keep a number each, so one lane never passes for another
export function laneTexts(sc, fit, measure) {
  const { lanes, arr, state } = sc;
  const out = new Map();
  const byText = new Map();
  for (const j of arr.order) {
    if (arr.laneY[j] < 0) continue;
    const full = arr.header[j] ? headerText(lanes, arr, state, j) : lanes[j].label;
    const w = arr.header[j] ? LEFT - 34 : LEFT - 36;
    const t = fit(full, w);
    out.set(j, t);
    if (!byText.has(t)) byText.set(t, []);
    byText.get(t).push([j, full, w]);
  }
  for (const same of byText.values()) {
    if (same.length < 2) continue;
    same.forEach(([j, full, w], k) => {
      const tag = ` #${k + 1}`;
      out.set(j, fit(full, w - measure(tag)) + tag);
    });
  }
  return out;
}

// the label column: ▾/▸ (collapse), ○/● (pin), each lane's label, rank separators, and the
// line under the pinned lanes; returns the labels as drawn
export function drawLanes(ctx, sc, fit) {
  const { lanes, arr, state, rowH, Y0, pw, height } = sc;
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, TOP, LEFT, height - TOP);
  ctx.font = `${Math.min(11, rowH - 4)}px sans-serif`;
  ctx.textBaseline = "middle";
  const texts = laneTexts(sc, fit, (s) => ctx.measureText(s).width);
  let prevRank = null;
  let pinEnd = -1;
  for (const j of arr.order) {
    const y = arr.laneY[j];
    if (y < 0) continue;
    const lane = lanes[j];
    const top = Y0 + y;
    if (state.isPinned(lane)) pinEnd = top + arr.laneN[j] * rowH;
    if (prevRank !== null) {
      const newRank = lane.rank !== prevRank;
      ctx.fillStyle = newRank ? "#555555" : "#dddddd";
      ctx.fillRect(4, top, LEFT + pw - 4, newRank ? 1 : 0.5);
    }
    prevRank = lane.rank;
    if (top + arr.laneN[j] * rowH < TOP || top > height) continue; // out of sight
    const mid = top + rowH / 2;
    ctx.textAlign = "left";
    ctx.fillStyle = "#666666";
    if (arr.header[j]) {
      ctx.fillText("▸", 4, mid);
      ctx.fillStyle = "#222222";
      ctx.fillText(texts.get(j), 30, mid);
      continue;
    }
    if (lane.rows > 1) ctx.fillText(state.collapsed.has(j) ? "▸" : "▾", 4, mid);
    ctx.fillText(state.isPinned(lane) ? "●" : "○", 16, mid);
    ctx.fillStyle = "#222222";
    ctx.textAlign = "right";
    ctx.fillText(texts.get(j), LEFT - 6, mid);
  }
  if (pinEnd > 0) {
    ctx.fillStyle = "#2862c8";
    ctx.fillRect(0, pinEnd - 1, LEFT + pw, 2);
  }
  return texts;
}

// the time axis and the step numbers along the top; returns the step labels drawn
// ([step, x]) and the stride they were thinned to
export function drawAxis(ctx, sc, marks, zero, stepTitle) {
  const { lo, hi, pw, k, width } = sc;
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, width, TOP);
  const span = hi - lo;
  const [scale, unit] = units(span);
  const step = niceStep(span / Math.max(2, pw / 110));
  ctx.fillStyle = "#333333";
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  ctx.font = "10px sans-serif";
  for (let t = Math.ceil(lo / step) * step; t <= hi; t += step) {
    const x = xOf(sc, t);
    ctx.fillRect(x, TOP - 5, 1, 5);
    ctx.fillText(`${+(t / scale).toFixed(6)}`, x, TOP - 12);
  }
  ctx.textAlign = "left";
  ctx.fillText(`time (${unit})${zero}`, 4, TOP - 12);
  ctx.fillStyle = "#555555";
  ctx.fillRect(LEFT, TOP - 1, pw, 1);
  const shown = [];
  if (!marks || !marks.n) return { shown, stride: null };
  const i0 = lowerBound(marks.a, 0, marks.n, lo);
  const i1 = lowerBound(marks.a, i0, marks.n, hi);
  const stride = stepStride(marks, i0, i1, lo, k);
  ctx.font = "10px sans-serif";
  for (let i = i0; i < i1; i++) {
    if (marks.step[i] % stride) continue;
    const x = LEFT + (marks.a[i] - lo) * k;
    ctx.fillStyle = "#7a5a00";
    ctx.fillRect(x, 4, 1, 16);
    ctx.fillText(String(marks.step[i]), x + 3, 12);
    shown.push([marks.step[i], +x.toFixed(1)]);
  }
  if (i0 > 0 && (!shown.length || shown[0][1] > LEFT + 40)) {
    ctx.fillStyle = "#7a5a00"; // the step the view starts in, when its marker is left of it
    ctx.fillText(`◂ ${marks.step[i0 - 1]}`, LEFT + 3, 12);
  }
  ctx.fillStyle = "#7a5a00";
  ctx.textAlign = "right";
  const every = stride > 1 ? ` (every ${stride})` : "";
  ctx.fillText(`${stepTitle}${every}`, LEFT - 6, 12);
  return { shown, stride };
}

// step shading: every other step of each rank, in the rank's band of lanes
export function drawStepBands(ctx, sc, steps) {
  if (!steps || !steps.n) return;
  const { lo, hi, pw, k, Y0 } = sc;
  ctx.fillStyle = "#efefef";
  for (let i = 0; i < steps.n; i++) {
    if (steps.b[i] < lo || steps.a[i] > hi) continue;
    const a = Math.max(LEFT, LEFT + (steps.a[i] - lo) * k);
    const b = Math.min(LEFT + pw, LEFT + (steps.b[i] - lo) * k);
    if (b - a < 3) continue; // bands under 3 px are noise (as in the static plot)
    const band = sc.arr.rankBand.get(steps.rank[i]);
    if (band) ctx.fillRect(a, Y0 + band[0], b - a, band[1] - band[0]);
  }
}
