// The interactive timeline's front-end (anywidget, no dependency, no network).
//
// Zoom and pan are drawn here, from the multi-resolution summary the kernel sent once
// (`summary`: per level and row, the longest event starting in each bucket, sorted by start):
// a redraw draws the levels as fine as a pixel, finding each row's events in range by
// bisection, at most one narrow bar per pixel, into one pixel layer (a row of pixels per
// bar, copied down the rows at the end: tens of thousands of fillRect calls would not fit a frame). Only when the view is finer than the finest
// level held does it ask the kernel (`view` -> `rects`), without waiting: the summary is drawn
// meanwhile and the answer redraws. Every redraw recomputes what is under the pointer, so a
// tooltip never names an event that has moved away.
//
// Names are drawn inside the bars they fit in (elided), each name in its own colour, steps
// numbered along the top. Search by name (`query` -> `matches`), next/previous centre the view;
// W/S or the up/down arrows zoom, A/D or left/right pan; shift-drag (or drag on the axis)
// selects a range, whose summed time per name the kernel gives (`span`); a click shows an
// event's details and arrows to its launch or kernels and a collective's peers; the glyphs
// left of a lane collapse its nested levels (▾/▸) and pin it, and the same stream of every
// rank, to the top (○/●); "pin communication" pins every rank's communication lanes there as
// one group, and the group menu (`comm_groups`: Kineto's Process Group Name) the lanes of one
// communication group, every member rank's; a click on a label collapses its process (the
// host process or the device of its rank) to one header row, shift-click the whole rank. A
// critical path (`path`) is drawn under its lanes.
// The container's data-* attributes say what is drawn (tests read them).

const LEFT = 210; // lane labels
const TOP = 46; // step numbers, then the time axis
const BOTTOM = 8;
const CHAR_GUESS = 6.2;

function units(span) {
  if (span >= 2e9) return [1e9, "s"];
  if (span >= 2e6) return [1e6, "ms"];
  if (span >= 2e3) return [1e3, "µs"];
  return [1, "ns"];
}

function fmtDur(ns) {
  const [s, u] = units(ns * 2);
  return `${(ns / s).toPrecision(4)} ${u}`;
}

function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function copyOf(view) {
  // a DataView over a shared buffer at any offset: copy into an aligned ArrayBuffer
  if (!view || !view.byteLength) return new ArrayBuffer(0);
  return view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength);
}

function lowerBound(arr, a, b, v) {
  while (a < b) {
    const m = (a + b) >> 1;
    if (arr[m] < v) a = m + 1;
    else b = m;
  }
  return a;
}

function textColour(hex) {
  const n = parseInt(hex.slice(1), 16);
  const l = 0.299 * (n >> 16) + 0.587 * ((n >> 8) & 255) + 0.114 * (n & 255);
  return l > 140 ? "#111111" : "#ffffff";
}

function dim(word) {
  // the colour 25% darker: a bar's right edge, so that neighbours of one name stay apart
  const r = (word & 255) * 0.75, g = ((word >> 8) & 255) * 0.75, b = ((word >> 16) & 255) * 0.75;
  return (0xff000000 | (b << 16) | (g << 8) | r) >>> 0;
}

function el_(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function render({ model, el }) {
  const root = el_("div", "dynprof-timeline");
  root.tabIndex = 0;
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  const bar = el_("div", "dynprof-tl-bar");
  const title = el_("span", "dynprof-tl-title");
  const reset = el_("button", "dynprof-tl-reset", "whole window");
  reset.title = "zoom out to the whole window (or double-click the timeline)";
  const readout = el_("span", "dynprof-tl-readout");
  bar.append(title, reset, readout);
  const nav = el_("div", "dynprof-tl-nav");
  const search = el_("input", "dynprof-tl-search");
  search.type = "search";
  search.placeholder = "search names (Enter: next)";
  const prev = el_("button", "dynprof-tl-prev", "◀ previous");
  const next = el_("button", "dynprof-tl-next", "next ▶");
  const count = el_("span", "dynprof-tl-count");
  const pinComm = el_("button", "dynprof-tl-pincomm", "○ pin communication");
  pinComm.title = "keep every rank's communication lanes (the streams that run its " +
    "collectives) together at the top, as one group";
  const groups = model.get("comm_groups") || [];
  const pinGroup = el_("select", "dynprof-tl-pingroup");
  pinGroup.title = "keep the lanes of one communication group (every member rank's) " +
    "together at the top";
  pinGroup.append(new Option("pin a communication group…", ""));
  for (const g of groups) pinGroup.append(new Option(`${g.label} (${g.lanes} lanes)`, g.key));
  if (groups.length < 2) pinGroup.style.display = "none";
  const help = el_("span", "dynprof-tl-help",
    "wheel or W/S zoom · drag or A/D pan · shift-drag: a range · click: details · " +
    "▾ collapse · ○ pin · label: collapse the process (shift: the rank)");
  nav.append(search, prev, next, count, pinComm, pinGroup, help);
  const list = el_("div", "dynprof-tl-matches");
  const note = el_("div", "dynprof-tl-note");
  const canvas = el_("canvas", "dynprof-tl-canvas");
  const tip = el_("div", "dynprof-tl-tip");
  const span = el_("div", "dynprof-tl-span");
  const details = el_("pre", "dynprof-tl-details",
    "click an event for its details; wheel to zoom, drag to pan");
  const links = el_("div", "dynprof-tl-links");
  const legend = el_("div", "dynprof-tl-legend");
  const stage = el_("div", "dynprof-tl-stage");
  stage.append(canvas, tip);
  root.append(bar, nav, list, note, stage, legend, span, details, links);
  el.appendChild(root);

  const ctx = canvas.getContext("2d");
  let width = 0;
  let height = 0;
  const rowH = model.get("row_height");
  const lanes = model.get("lanes");
  const nRows = model.get("rows");
  const names = model.get("names");
  const colors = model.get("colors");
  const inks = colors.map(textColour);
  const rgba = Uint32Array.from(colors, (c) => {
    const n = parseInt(c.slice(1), 16); // little-endian RGBA in one word: 0xAABBGGRR
    return (0xff000000 | ((n & 255) << 16) | (n & 0xff00) | (n >> 16)) >>> 0;
  });
  // bars under 2 px go into one pixel layer (one write per pixel row), composited at once:
  // a wide view of a dense window is tens of thousands of them, too many for fillRect
  const layer = document.createElement("canvas");
  const lctx = layer.getContext("2d");
  let lw = 0, lh = 0, limg = null, lbuf = null;
  const nameW = new Float32Array(names.length); // measured at the bar font, lazily
  const full = model.get("full");
  let lo = full[0];
  let hi = full[1];

  // ---- the data ------------------------------------------------------------------------
  const info = model.get("summary_info");
  const S = (() => {
    const buf = copyOf(model.get("summary"));
    const n = info.count || 0;
    const levels = info.levels || [];
    const runs = Math.max(1, levels.length) * nRows;
    let o = 0;
    const f64 = (k) => { const a = new Float64Array(buf, o, k); o += 8 * k; return a; };
    const i32 = (k) => { const a = new Int32Array(buf, o, k); o += 4 * k; return a; };
    const x0 = f64(n), dur = f64(n), longest = f64(runs);
    const id = i32(n), row = i32(n), name = i32(n), first = i32(runs + 1);
    return { n, x0, dur, longest, id, row, name, first, levels, complete: !!info.complete };
  })();
  let D = null; // the kernel's answer for a view finer than the summary
  let steps = null;
  let marks = null;
  let seq = 0;
  let inFlight = 0;
  let asked = 0;

  function readSteps() {
    const f = new Float64Array(copyOf(model.get("steps")));
    const n = f.length / 4;
    steps = { n, a: f.subarray(0, n), b: f.subarray(n, 2 * n), top: f.subarray(2 * n, 3 * n),
              bottom: f.subarray(3 * n, 4 * n) };
    steps.rank = Array.from(steps.top, (t) => {
      const lane = lanes.find((l) => l.y0 <= t && t < l.y0 + l.rows);
      return lane ? lane.rank : null;
    });
    const m = new Float64Array(copyOf(model.get("step_labels")));
    const k = m.length / 2;
    marks = { n: k, step: m.subarray(0, k), a: m.subarray(k, 2 * k) };
  }

  function readRects() {
    const meta = model.get("drawn");
    const n = meta.count || 0;
    const buf = copyOf(model.get("rects"));
    const f = new Float32Array(buf, 0, 2 * n);
    const x0 = new Float64Array(n);
    const x1 = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      x0[i] = meta.lo + f[i];
      x1[i] = meta.lo + f[n + i];
    }
    D = { n, x0, x1, id: new Int32Array(buf, 8 * n, n), row: new Int32Array(buf, 12 * n, n),
          name: new Int32Array(buf, 16 * n, n), dur: new Float32Array(buf, 20 * n, n),
          lo: meta.lo, hi: meta.hi, pxNs: (meta.hi - meta.lo) / meta.pixels, exact: !!meta.exact };
  }

  // ---- lanes: collapsed, pinned, and where each row is drawn ---------------------------
  const collapsed = new Set(); // lane indices showing their top level only
  const rankShut = new Set(); // ranks shown as one header row
  const procShut = new Set(); // processes (procKey) shown as one header row
  const procKey = (lane) => `${lane.rank}\u0001${lane.process}\u0001${lane.device}`;
  const pinned = new Set(); // thread/stream labels pinned (every rank's lane of it)
  let commPinned = false; // every rank's communication lanes pinned, as one group
  let groupPinned = ""; // the communication group whose lanes are pinned
  const isPinned = (lane) => pinned.has(lane.thread) || (commPinned && lane.comm) ||
    (groupPinned !== "" && (lane.groups || []).includes(groupPinned));
  if (!lanes.some((lane) => lane.comm)) pinComm.style.display = "none";
  const rowY = new Float64Array(nRows); // px below TOP, -1: not drawn
  let laneY = []; // per lane: px below TOP of its first row, -1 hidden
  let laneN = []; // per lane: rows drawn
  let header = []; // per lane: "rank" or "process" where drawn as a collapsed header
  let order = [];
  let rankBand = new Map(); // rank -> [top, bottom] px below TOP
  let contentH = 0;

  function arrange() {
    const pin = [], rest = [];
    lanes.forEach((lane, j) => (isPinned(lane) ? pin : rest).push(j));
    order = [...pin, ...rest];
    rowY.fill(-1);
    laneY = lanes.map(() => -1);
    laneN = lanes.map(() => 0);
    header = lanes.map(() => "");
    rankBand = new Map();
    const headed = new Map(); // header key -> its row's px below TOP
    let y = 0;
    for (const j of order) {
      const lane = lanes[j];
      const shut = rankShut.has(lane.rank) ? "rank" : procShut.has(procKey(lane)) ? "process" : "";
      if (shut) {
        // one header row per collapsed rank or process: every lane's top level drawn in it
        const key = `${pin.includes(j)}:${shut === "rank" ? lane.rank : procKey(lane)}`;
        if (!headed.has(key)) {
          headed.set(key, y);
          header[j] = shut;
          laneY[j] = y;
          laneN[j] = 1;
          y += rowH;
        }
        rowY[lane.y0] = headed.get(key);
        continue;
      }
      const n = collapsed.has(j) ? 1 : lane.rows;
      laneY[j] = y;
      laneN[j] = n;
      for (let d = 0; d < n; d++) rowY[lane.y0 + d] = y + d * rowH;
      const band = rankBand.get(lane.rank);
      if (!pin.includes(j)) rankBand.set(lane.rank, [band ? band[0] : y, y + n * rowH]);
      y += n * rowH;
    }
    contentH = y;
  }

  function showLanes() {
    root.dataset.rows = String(contentH / rowH);
    root.dataset.pinned = JSON.stringify([...pinned]);
    root.dataset.commPinned = commPinned ? "1" : "0";
    root.dataset.groupPinned = groupPinned;
    root.dataset.headers = JSON.stringify(order.filter((j) => header[j]).map((j) => header[j]));
    pinComm.textContent = `${commPinned ? "●" : "○"} pin communication`;
    root.dataset.order = JSON.stringify(order.filter((j) => laneY[j] >= 0).map((j) => lanes[j].label));
    sendArrangement();
  }

  // A window of thousands of rows is taller than any screen (and than the largest canvas a
  // browser draws): the stage is as tall as every row, the canvas only as tall as the window
  // and sticky in it, and a frame draws the rows in sight, scrolled by `off` (Y0: where row 0
  // is on the canvas; the time axis stays at the top).
  let fullH = 0, off = 0, Y0 = TOP;
  function layout() {
    width = Math.max(500, Math.floor(el.getBoundingClientRect().width || 1000));
    fullH = TOP + contentH + BOTTOM;
    height = Math.min(fullH, Math.max(400, window.innerHeight || fullH));
    stage.style.height = `${fullH}px`;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.floor(width * dpr);
    canvas.height = Math.floor(height * dpr);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }

  const plotW = () => width - LEFT - 10;
  const tx = (t) => LEFT + ((t - lo) / (hi - lo)) * plotW();
  const timeAt = (x) => lo + ((x - LEFT) / plotW()) * (hi - lo);

  // ---- one frame -----------------------------------------------------------------------
  let grid = new Int32Array(0); // one cell per row and pixel: the frame that filled it
  let stamp = 0;
  let H = { n: 0, a: new Float32Array(1024), b: new Float32Array(1024), row: new Int32Array(1024),
            src: new Int32Array(1024), i: new Int32Array(1024) };
  const textQ = [];
  let mouse = null; // the pointer over the canvas, or null
  let hover = -1; // index into H
  let chosen = null; // the selected event: {id, x0, x1, row}
  let flows = [];
  let range = null; // {a, b} ns: a selected range
  let found = { items: [], total: 0 };
  let at = -1; // the match the view was centred on

  function keep(a, b, row, src, i) {
    if (H.n === H.a.length) {
      const grow = (A) => { const B = new A.constructor(A.length * 2); B.set(A); return B; };
      H = { n: H.n, a: grow(H.a), b: grow(H.b), row: grow(H.row), src: grow(H.src), i: grow(H.i) };
    }
    H.a[H.n] = a; H.b[H.n] = b; H.row[H.n] = row; H.src[H.n] = src; H.i[H.n] = i;
    H.n += 1;
  }

  function scrolled() {
    // how far the stage's top has gone above the canvas's (0 until the page scrolls past it)
    const d = canvas.getBoundingClientRect().top - stage.getBoundingClientRect().top;
    return Math.max(0, Math.min(fullH - height, Math.round(d)));
  }
  const inSight = (row) => rowY[row] >= 0 && rowY[row] + rowH > off && rowY[row] < off + height - TOP;

  function draw() {
    const t0 = performance.now();
    off = scrolled();
    Y0 = TOP - off;
    const pw = plotW();
    const k = pw / (hi - lo);
    const pxNs = (hi - lo) / pw;
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, width, height);
    // step shading: every other step of each rank, in the rank's band of lanes
    if (steps && steps.n) {
      ctx.fillStyle = "#efefef";
      for (let i = 0; i < steps.n; i++) {
        if (steps.b[i] < lo || steps.a[i] > hi) continue;
        const a = Math.max(LEFT, LEFT + (steps.a[i] - lo) * k);
        const b = Math.min(LEFT + pw, LEFT + (steps.b[i] - lo) * k);
        if (b - a < 3) continue; // bands under 3 px are noise (as in the static plot)
        const band = rankBand.get(steps.rank[i]);
        if (band) ctx.fillRect(a, Y0 + band[0], b - a, band[1] - band[0]);
      }
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(LEFT, TOP, pw, height - TOP);
    ctx.clip();
    // which levels: down to the first as fine as a pixel; finer than all held: the kernel's
    const L = S.levels.length;
    let k1 = L - 1;
    for (let j = 0; j < L; j++) if (S.levels[j] <= pxNs) { k1 = j; break; }
    const finer = !S.complete && L > 0 && S.levels[L - 1] > pxNs;
    const useD = finer && D && D.lo <= lo && D.hi >= hi && (D.exact || D.pxNs <= pxNs * 1.5);
    const cols = Math.ceil(pw) + 2;
    if (grid.length < nRows * cols) grid = new Int32Array(nRows * cols);
    stamp += 1;
    H.n = 0;
    textQ.length = 0;
    const pad = rowH > 6 ? 1 : 0;
    const lwNow = Math.ceil(pw) + 2, lhNow = height - TOP + rowH; // the rows in sight, and one above
    if (lwNow !== lw || lhNow !== lh) {
      lw = lwNow; lh = lhNow;
      layer.width = lw; layer.height = lh;
      limg = lctx.createImageData(lw, lh);
      lbuf = new Uint32Array(limg.data.buffer);
    } else lbuf.fill(0);
    const put = (x0, x1, row, nm, src, i) => {
      let a = LEFT + (x0 - lo) * k;
      let b = LEFT + (x1 - lo) * k;
      if (b < LEFT || a > LEFT + pw) return;
      a = Math.max(a, LEFT - 1);
      b = Math.min(b, LEFT + pw + 1);
      let w = b - a;
      if (w < 2) {
        const px = Math.max(0, Math.floor(a - LEFT + 1));
        const cell = row * cols + px;
        if (grid[cell] === stamp) return; // this pixel of this row has a longer bar already
        grid[cell] = stamp;
        const line = (rowY[row] - off + rowH + pad) * lw; // one pixel row; copied down below
        lbuf[line + px] = rgba[nm];
        if (w > 1.2 && px + 1 < lw && grid[cell + 1] !== stamp) {
          grid[cell + 1] = stamp;
          lbuf[line + px + 1] = rgba[nm];
        }
        keep(a, a + Math.max(w, 1), row, src, i);
        return;
      }
      const pa = Math.max(0, Math.round(a - LEFT + 1));
      const pb = Math.min(lw, Math.round(b - LEFT + 1));
      const line = (rowY[row] - off + rowH + pad) * lw;
      lbuf.fill(rgba[nm], line + pa, line + pb);
      if (pb - pa > 2) lbuf[line + pb - 1] = dim(rgba[nm]);
      keep(a, b, row, src, i);
      if (w >= 24 && rowH >= 12) textQ.push(H.n - 1);
    };
    for (let lev = 0; lev <= k1 && L; lev++) {
      for (let row = 0; row < nRows; row++) {
        if (!inSight(row)) continue;
        const r = lev * nRows + row;
        const a = S.first[r], b = S.first[r + 1];
        if (a === b) continue;
        const i0 = lowerBound(S.x0, a, b, lo - S.longest[r]);
        const i1 = lowerBound(S.x0, i0, b, hi);
        for (let i = i0; i < i1; i++) {
          const x1 = S.x0[i] + S.dur[i];
          if (x1 < lo) continue;
          put(S.x0[i], x1, row, S.name[i], 0, i);
        }
      }
    }
    if (useD) {
      for (let i = 0; i < D.n; i++) if (inSight(D.row[i])) put(D.x0[i], D.x1[i], D.row[i], D.name[i], 1, i);
    }
    if (H.n) {
      for (let row = 0; row < nRows; row++) {
        if (!inSight(row)) continue;
        const line = (rowY[row] - off + rowH + pad) * lw;
        for (let y = 1; y < rowH - 2 * pad; y++) lbuf.copyWithin(line + y * lw, line, line + lw);
      }
      lctx.putImageData(limg, 0, 0);
      ctx.imageSmoothingEnabled = false; // a high-dpi screen scales the layer: keep edges sharp
      ctx.drawImage(layer, LEFT - 1, TOP - rowH);
    }
    // names inside the bars they fit in
    ctx.font = "11px sans-serif";
    ctx.textBaseline = "middle";
    ctx.textAlign = "left";
    let labelled = 0;
    for (const h of textQ) {
      const nm = H.src[h] ? D.name[H.i[h]] : S.name[H.i[h]];
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
    root.dataset.labels = String(labelled);
    // the selected event, its links, the search match, the range
    const outline = (x0, x1, row, colour, lw) => {
      if (rowY[row] < 0) return;
      const a = tx(x0), b = tx(x1);
      ctx.strokeStyle = colour;
      ctx.lineWidth = lw;
      ctx.strokeRect(a - 1, Y0 + rowY[row] + 0.5, Math.max(3, b - a + 2), rowH - 1);
    };
    if (at >= 0 && found.items[at]) {
      const m = found.items[at];
      outline(m[1], m[2], m[3], "#ff8c00", 2);
    }
    drawPath(pw);
    if (chosen) {
      outline(chosen.x0, chosen.x1, chosen.row, "#000000", 2);
      for (const f of flows) arrow(f);
    }
    if (hover >= 0 && hover < H.n) {
      ctx.strokeStyle = "#000000";
      ctx.lineWidth = 1;
      ctx.strokeRect(H.a[hover], Y0 + rowY[H.row[hover]] + 0.5, Math.max(2, H.b[hover] - H.a[hover]), rowH - 1);
    }
    if (range) {
      const a = tx(Math.min(range.a, range.b)), b = tx(Math.max(range.a, range.b));
      ctx.fillStyle = "rgba(40, 110, 220, 0.14)";
      ctx.fillRect(a, TOP, Math.max(1, b - a), height - TOP);
      ctx.fillStyle = "#2862c8";
      ctx.fillRect(a, TOP, 1, height - TOP);
      ctx.fillRect(b, TOP, 1, height - TOP);
    }
    ctx.restore();
    drawLanes(pw);
    drawAxis(pw, k);
    readout.textContent = `${fmtDur(hi - lo)} shown · ${H.n.toLocaleString()} events drawn` +
      (finer && !useD ? " · asking the kernel for finer events…" : "");
    if (finer && !useD) ask();
    refreshHover();
    root.dataset.lo = String(lo);
    root.dataset.hi = String(hi);
    root.dataset.drawn = String(H.n);
    root.dataset.level = String(k1);
    root.dataset.source = useD ? "kernel" : "summary";
    root.dataset.off = String(off);
    root.dataset.drawMs = (performance.now() - t0).toFixed(2);
    settle();
  }

  // a critical path shown on the timeline (CriticalPath.show): each segment a bar along the
  // bottom of its lane's first row, in its kind's colour, and a line where the path moves to
  // another lane (a launch, a kernel's end releasing the host, a sync)
  const PATH_INK = ["#d62728", "#ff7f0e", "#9467bd", "#7f7f7f", "#333333"];
  function drawPath(pw) {
    const path = model.get("path") || [];
    let shown = 0, prev = null;
    for (const [x0, x1, j, kind] of path) {
      const y = laneY[j];
      if (y === undefined || y < 0 || x1 < lo || x0 > hi) { prev = null; continue; }
      const a = Math.max(LEFT, tx(x0)), b = Math.min(LEFT + pw, tx(x1));
      const yb = Y0 + y + rowH - 3;
      ctx.fillStyle = PATH_INK[kind] || PATH_INK[4];
      ctx.fillRect(a, yb, Math.max(1, b - a), 3);
      if (prev && prev.y !== yb) {
        ctx.fillStyle = "#d62728";
        ctx.fillRect(a, Math.min(prev.y, yb), 1, Math.abs(prev.y - yb) + 3);
      }
      prev = { y: yb };
      shown += 1;
    }
    root.dataset.path = String(shown);
  }

  function arrow(f) {
    // a launch points at its kernel; a kernel's own flows point away from it
    const into = f.why === "launch";
    const [s, t] = into ? [f, chosen] : [chosen, f];
    if (rowY[s.row] < 0 || rowY[t.row] < 0) return;
    const x1 = tx(s.x0), y1 = Y0 + rowY[s.row] + rowH / 2;
    const x2 = tx(t.x0), y2 = Y0 + rowY[t.row] + rowH / 2;
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

  // a label that fits `w` px: elided in the middle, where lane labels repeat themselves (the
  // rank first, the thread or stream last); squeezing the glyphs made long ones illegible
  const fitted = new Map();
  function fit(text, w) {
    const key = `${ctx.font}|${w}|${text}`;
    let out = fitted.get(key);
    if (out !== undefined) return out;
    out = text;
    if (ctx.measureText(text).width > w) {
      const cut = (k) => text.slice(0, Math.ceil(k / 2)) + "…" + text.slice(text.length - Math.floor(k / 2));
      let lo = 0, hi = text.length - 1;
      while (lo < hi) {
        const k = (lo + hi + 1) >> 1;
        if (ctx.measureText(cut(k)).width <= w) lo = k;
        else hi = k - 1;
      }
      out = cut(lo);
    }
    if (fitted.size > 5000) fitted.clear();
    fitted.set(key, out);
    return out;
  }

  // a collapsed rank's or process's header row: what it stands for and how many lanes (a
  // pinned lane has its own header)
  function headerText(j) {
    const lane = lanes[j];
    const same = header[j] === "rank" ? (l) => l.rank === lane.rank
      : (l) => procKey(l) === procKey(lane);
    const n = lanes.filter((l) => same(l) && isPinned(l) === isPinned(lane)).length;
    const what = header[j] === "rank" ? `rank ${lane.rank}`
      : `rank ${lane.rank} · ${lane.process} (${lane.device ? "device" : "host"})`;
    return `${what} · ${n} lane${n === 1 ? "" : "s"}`;
  }

  // the lanes as drawn, for the kernel's figure() (a static export shows what was on screen):
  // each layout row's drawn row (-1: hidden), and each drawn lane's [row, rows, label,
  // pinned]; {} while nothing is collapsed or pinned (the kernel's own layout is the same)
  function sendArrangement() {
    const plain = !collapsed.size && !rankShut.size && !procShut.size && !pinned.size &&
      !commPinned && groupPinned === "";
    const lanesShown = order.filter((j) => laneY[j] >= 0).map((j) => [laneY[j] / rowH,
      laneN[j], header[j] ? headerText(j) : lanes[j].label, isPinned(lanes[j])]);
    const arranged = plain ? {} : { rows: Array.from(rowY, (v) => (v < 0 ? -1 : v / rowH)),
      lanes: lanesShown, height: contentH / rowH };
    if (JSON.stringify(arranged) === JSON.stringify(model.get("arranged") || {})) return;
    model.set("arranged", arranged);
    model.save_changes();
  }

  // each drawn lane's label as fitted: two that would read the same once cut (hostile names
  // alike but in the middle) keep a number each, so one lane never passes for another
  function laneTexts() {
    const out = new Map();
    const byText = new Map();
    for (const j of order) {
      if (laneY[j] < 0) continue;
      const full = header[j] ? headerText(j) : lanes[j].label;
      const w = header[j] ? LEFT - 34 : LEFT - 36;
      const t = fit(full, w);
      out.set(j, t);
      if (!byText.has(t)) byText.set(t, []);
      byText.get(t).push([j, full, w]);
    }
    for (const same of byText.values()) {
      if (same.length < 2) continue;
      same.forEach(([j, full, w], k) => {
        const tag = ` #${k + 1}`;
        out.set(j, fit(full, w - ctx.measureText(tag).width) + tag);
      });
    }
    return out;
  }

  function drawLanes(pw) {
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, TOP, LEFT, height - TOP);
    ctx.font = `${Math.min(11, rowH - 4)}px sans-serif`;
    ctx.textBaseline = "middle";
    const texts = laneTexts();
    const said = JSON.stringify([...texts.values()]);
    if (root.dataset.laneTexts !== said) root.dataset.laneTexts = said;
    let prevRank = null;
    let pinEnd = -1;
    for (const j of order) {
      const y = laneY[j];
      if (y < 0) continue;
      const lane = lanes[j];
      const top = Y0 + y;
      if (isPinned(lane)) pinEnd = top + laneN[j] * rowH;
      if (prevRank !== null) {
        const newRank = lane.rank !== prevRank;
        ctx.fillStyle = newRank ? "#555555" : "#dddddd";
        ctx.fillRect(4, top, LEFT + pw - 4, newRank ? 1 : 0.5);
      }
      prevRank = lane.rank;
      if (top + laneN[j] * rowH < TOP || top > height) continue; // out of sight
      const mid = top + rowH / 2;
      ctx.textAlign = "left";
      ctx.fillStyle = "#666666";
      if (header[j]) {
        ctx.fillText("▸", 4, mid);
        ctx.fillStyle = "#222222";
        ctx.fillText(texts.get(j), 30, mid);
        continue;
      }
      if (lane.rows > 1) ctx.fillText(collapsed.has(j) ? "▸" : "▾", 4, mid);
      ctx.fillText(isPinned(lane) ? "●" : "○", 16, mid);
      ctx.fillStyle = "#222222";
      ctx.textAlign = "right";
      ctx.fillText(texts.get(j), LEFT - 6, mid);
    }
    if (pinEnd > 0) {
      ctx.fillStyle = "#2862c8";
      ctx.fillRect(0, pinEnd - 1, LEFT + pw, 2);
    }
  }

  function drawAxis(pw, k) {
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
      const x = tx(t);
      ctx.fillRect(x, TOP - 5, 1, 5);
      ctx.fillText(`${+(t / scale).toFixed(6)}`, x, TOP - 12);
    }
    ctx.textAlign = "left";
    ctx.fillText(`time (${unit})${model.get("zero")}`, 4, TOP - 12);
    ctx.fillStyle = "#555555";
    ctx.fillRect(LEFT, TOP - 1, pw, 1);
    // step numbers along the top, thinned to labels 36 px apart at least
    const shown = [];
    if (marks && marks.n) {
      const i0 = lowerBound(marks.a, 0, marks.n, lo);
      const i1 = lowerBound(marks.a, i0, marks.n, hi);
      let stride = 1;
      for (const s of [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000]) {
        stride = s;
        let prevX = -1e9, ok = true;
        for (let i = i0; i < i1; i++) {
          if (marks.step[i] % s) continue;
          const x = LEFT + (marks.a[i] - lo) * k;
          if (x - prevX < 36) { ok = false; break; }
          prevX = x;
        }
        if (ok) break;
      }
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
      ctx.fillText(`${model.get("step_title")}${every}`, LEFT - 6, 12);
      root.dataset.stepStride = String(stride);
    }
    root.dataset.stepLabels = JSON.stringify(shown);
  }

  // ---- the kernel: finer events, the view shown -----------------------------------------
  function ask() {
    if (inFlight) return; // one at a time; the newest view is asked when the answer comes
    seq += 1;
    inFlight = seq;
    asked = performance.now();
    const s = hi - lo;
    model.set("view", [lo - s, hi + s, Math.round(3 * plotW()), seq]);
    model.save_changes();
  }

  function onDrawn() {
    const meta = model.get("drawn");
    if (!meta || meta.seq === undefined) return;
    readRects();
    if (meta.seq === inFlight) {
      root.dataset.redrawMs = (performance.now() - asked).toFixed(1);
      root.dataset.selectMs = String(meta.select_ms);
      root.dataset.seq = String(meta.seq);
      root.dataset.visible = String(meta.visible);
      inFlight = 0;
    }
    draw();
  }

  let settleTimer = 0;
  function settle() {
    // tell the kernel what is shown once the view rests (view.visible_range)
    clearTimeout(settleTimer);
    settleTimer = setTimeout(() => {
      const s = model.get("shown") || [];
      if (s[0] === lo && s[1] === hi) return;
      model.set("shown", [lo, hi]);
      model.save_changes();
    }, 250);
  }

  function setRange(a, b) {
    const fullSpan = full[1] - full[0];
    const s = Math.min(Math.max(b - a, 100), fullSpan * 1.02); // ns: a kernel is wider
    const mid = (a + b) / 2;
    a = mid - s / 2;
    b = mid + s / 2;
    const slack = fullSpan * 0.01;
    if (a < full[0] - slack) [a, b] = [full[0] - slack, full[0] - slack + s];
    if (b > full[1] + slack) [a, b] = [full[1] + slack - s, full[1] + slack];
    lo = a;
    hi = b;
    draw();
  }

  function zoomBy(f, t) {
    if (t === undefined) t = mouse && mouse.x > LEFT ? timeAt(mouse.x) : (lo + hi) / 2;
    setRange(t - (t - lo) * f, t + (hi - t) * f);
  }

  function centreOn(x0, x1) {
    const w = Math.max(x1 - x0, 1);
    let s = hi - lo;
    if (w > s * 0.6) s = w * 3;
    if ((w / s) * plotW() < 3) s = Math.max(w * 30, 2000);
    const mid = (x0 + x1) / 2;
    setRange(mid - s / 2, mid + s / 2);
  }

  // ---- the pointer ----------------------------------------------------------------------
  function pick(mx, my) {
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

  function ref(h) {
    // what a drawn bar is: layout id, start, end, row, name id, duration
    const i = H.i[h];
    if (H.src[h]) return { id: D.id[i], x0: D.x0[i], x1: D.x1[i], row: D.row[i], name: D.name[i], dur: D.dur[i] };
    return { id: S.id[i], x0: S.x0[i], x1: S.x0[i] + S.dur[i], row: S.row[i], name: S.name[i], dur: S.dur[i] };
  }

  function laneOf(row) {
    let found = null;
    for (const lane of lanes) if (lane.y0 <= row) found = lane;
    return found ? found.label : "";
  }

  function refreshHover() {
    // on every redraw: the event under the pointer now, never the one before the zoom
    const i = mouse && !drag ? pick(mouse.x, mouse.y) : -1;
    hover = i;
    if (i < 0) {
      tip.style.display = "none";
      delete root.dataset.hover;
      canvas.style.cursor = mouse && mouse.x < LEFT ? "pointer" : "grab";
      return;
    }
    const r = ref(i);
    canvas.style.cursor = "pointer";
    tip.textContent = `${names[r.name]}\n${fmtDur(r.dur)} · ${laneOf(r.row)}`;
    tip.style.display = "block";
    // beside the pointer, kept inside the canvas (left of it near the right edge, above it
    // near the bottom)
    const tw = tip.offsetWidth, th = tip.offsetHeight;
    tip.style.left = `${Math.max(0, Math.min(mouse.x + 14, width - tw - 4))}px`;
    const ty = mouse.y + 14 + th > height ? Math.max(0, mouse.y - th - 6) : mouse.y + 14;
    tip.style.top = `${off + ty}px`; // the stage's coordinates: the canvas is `off` down it
    root.dataset.hover = String(r.id);
  }

  function hoverRedraw() {
    // outline the hovered bar without a full redraw when it did not change
    const i = mouse ? pick(mouse.x, mouse.y) : -1;
    if (i !== hover) draw();
    else refreshHover();
  }

  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = canvas.getBoundingClientRect();
    mouse = { x: e.clientX - r.left, y: e.clientY - r.top };
    const t = timeAt(Math.max(LEFT, mouse.x));
    zoomBy(Math.exp(Math.max(-3, Math.min(3, e.deltaY * 0.0025))), t);
  }, { passive: false });

  let drag = null;
  // where a press on the lane labels began: the browser's click fires wherever over the canvas
  // a press ends, so a pan released over the labels would be a click on one (collapsing its
  // process); a label click counts only when it was pressed there and did not move
  let labelPress = null;
  canvas.addEventListener("mousedown", (e) => {
    root.focus({ preventScroll: true });
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    labelPress = x < LEFT ? { x: e.clientX, y: e.clientY } : null;
    if (x < LEFT) return;
    const selecting = e.shiftKey || y < TOP;
    drag = { x: e.clientX, lo, hi, moved: false, selecting, t: timeAt(x) };
    e.preventDefault();
  });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x;
    if (Math.abs(dx) > 3) drag.moved = true;
    if (!drag.moved) return;
    if (drag.selecting) {
      const r = canvas.getBoundingClientRect();
      range = { a: drag.t, b: timeAt(Math.max(LEFT, Math.min(e.clientX - r.left, LEFT + plotW()))) };
      showRange(false);
      draw();
      return;
    }
    const dt = (dx / plotW()) * (drag.hi - drag.lo);
    setRange(drag.lo - dt, drag.hi - dt);
  });
  window.addEventListener("mouseup", (e) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    const r = canvas.getBoundingClientRect();
    if (d.selecting && d.moved) {
      showRange(true);
      return;
    }
    if (!d.moved && e.target === canvas) {
      const mx = e.clientX - r.left, my = e.clientY - r.top;
      if (clickArrow(mx, my)) return;
      const i = pick(mx, my);
      if (i >= 0) select(ref(i));
    }
  });

  function clickArrow(mx, my) {
    // a click by an arrow's far end goes to the event there
    if (!chosen) return false;
    for (const f of flows) {
      const into = f.why === "launch";
      const t = into ? chosen : f;
      const s = into ? f : chosen;
      if (rowY[s.row] < 0) continue;
      const x = tx(s.x0), y = Y0 + rowY[s.row] + rowH / 2;
      if (into && Math.hypot(mx - x, my - y) < 8) { go(f); return true; }
      const x2 = tx(t.x0), y2 = Y0 + rowY[t.row] + rowH / 2;
      if (!into && Math.hypot(mx - x2, my - y2) < 8) { go(f); return true; }
    }
    return false;
  }

  function select(r) {
    chosen = { id: r.id, x0: r.x0, x1: r.x1, row: r.row };
    root.dataset.selected = String(r.id);
    if (model.get("selected") === r.id && (model.get("details") || {}).id === r.id) {
      showDetails(); // the same event again: the kernel has answered already (and would not
      return; // be asked again: an unchanged value is no change)
    }
    flows = [];
    details.textContent = "reading the event's details…";
    links.replaceChildren();
    model.set("selected", r.id);
    model.save_changes();
    draw();
  }

  // an event gone to (a search match, an arrow's end) in a collapsed lane, process or rank:
  // open what hides it
  function open_(row) {
    if (rowY[row] >= 0 && !laneHeaderOf(row)) return;
    const j = lanes.findIndex((l) => row >= l.y0 && row < l.y0 + l.rows);
    if (j < 0) return;
    collapsed.delete(j);
    rankShut.delete(lanes[j].rank);
    procShut.delete(procKey(lanes[j]));
    arrange();
    layout();
    showLanes();
  }
  const laneHeaderOf = (row) => {
    const j = lanes.findIndex((l) => row >= l.y0 && row < l.y0 + l.rows);
    return j >= 0 && (rankShut.has(lanes[j].rank) || procShut.has(procKey(lanes[j])));
  };

  // a row below or above the window: the page (or the notebook) scrolls it into sight
  const mark = el_("div", "dynprof-tl-mark");
  stage.append(mark);
  function reveal(row) {
    if (rowY[row] < 0 || inSightNow(row)) return;
    mark.style.top = `${TOP + rowY[row]}px`;
    mark.style.height = `${rowH}px`;
    mark.scrollIntoView({ block: "center" });
  }
  const inSightNow = (row) => {
    const c = canvas.getBoundingClientRect(), s = stage.getBoundingClientRect();
    const y = s.top + TOP + rowY[row]; // the row on the screen
    return y >= Math.max(0, c.top + TOP) && y + rowH <= Math.min(window.innerHeight, c.bottom);
  };

  function go(f) {
    open_(f.row);
    reveal(f.row);
    centreOn(f.x0, f.x1);
    select(f);
  }

  canvas.addEventListener("click", (e) => {
    const press = labelPress;
    labelPress = null;
    if (!press || Math.hypot(e.clientX - press.x, e.clientY - press.y) > 3) return; // a drag
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    if (x >= LEFT || y < TOP) return;
    const j = order.find((q) => laneY[q] >= 0 && y >= Y0 + laneY[q] && y < Y0 + laneY[q] + laneN[q] * rowH);
    if (j === undefined) return;
    const lane = lanes[j];
    if (header[j] === "rank") rankShut.delete(lane.rank);
    else if (header[j]) procShut.delete(procKey(lane));
    else if (x < 14) { if (lane.rows > 1) collapsed.has(j) ? collapsed.delete(j) : collapsed.add(j); }
    else if (x < 28) pinned.has(lane.thread) ? pinned.delete(lane.thread) : pinned.add(lane.thread);
    else if (e.shiftKey) rankShut.add(lane.rank);
    else procShut.add(procKey(lane));
    arrange();
    layout();
    draw();
    showLanes();
  });
  pinComm.addEventListener("click", () => {
    commPinned = !commPinned;
    arrange();
    layout();
    draw();
    showLanes();
  });
  pinGroup.addEventListener("change", () => {
    groupPinned = pinGroup.value;
    arrange();
    layout();
    draw();
    showLanes();
  });
  model.on("change:path", () => draw());
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect();
    mouse = { x: e.clientX - r.left, y: e.clientY - r.top };
    if (!drag) hoverRedraw();
  });
  canvas.addEventListener("mouseleave", () => {
    mouse = null;
    if (hover >= 0) draw();
    else refreshHover();
  });
  canvas.addEventListener("dblclick", (e) => {
    if (e.offsetX >= LEFT) setRange(full[0], full[1]);
  });
  reset.addEventListener("click", () => setRange(full[0], full[1]));

  // ---- keys: WASD and the arrows, as in Perfetto ----------------------------------------
  root.addEventListener("keydown", (e) => {
    if (e.target === search || e.target === pinGroup) return;
    const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    const s = hi - lo;
    const moves = {
      w: () => zoomBy(0.8), ArrowUp: () => zoomBy(0.8),
      s: () => zoomBy(1.25), ArrowDown: () => zoomBy(1.25),
      a: () => setRange(lo - 0.2 * s, hi - 0.2 * s), ArrowLeft: () => setRange(lo - 0.2 * s, hi - 0.2 * s),
      d: () => setRange(lo + 0.2 * s, hi + 0.2 * s), ArrowRight: () => setRange(lo + 0.2 * s, hi + 0.2 * s),
      Escape: () => { range = null; span.replaceChildren(); draw(); },
    };
    if (!moves[key] || e.ctrlKey || e.metaKey || e.altKey) return;
    e.preventDefault();
    e.stopPropagation();
    moves[key]();
  });
  root.addEventListener("keyup", (e) => e.stopPropagation());
  root.addEventListener("keypress", (e) => e.stopPropagation());

  // ---- search ---------------------------------------------------------------------------
  let searchTimer = 0;
  function ask_query() {
    model.set("query", search.value);
    model.save_changes();
  }
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(ask_query, 250);
  });
  search.addEventListener("keydown", (e) => {
    e.stopPropagation();
    if (e.key !== "Enter") return;
    e.preventDefault();
    if ((model.get("matches") || {}).query !== search.value.trim()) {
      clearTimeout(searchTimer);
      pendingStep = e.shiftKey ? -1 : 1;
      ask_query();
      return;
    }
    stepMatch(e.shiftKey ? -1 : 1);
  });
  search.addEventListener("keyup", (e) => e.stopPropagation());
  let pendingStep = 0;
  prev.addEventListener("click", () => stepMatch(-1));
  next.addEventListener("click", () => stepMatch(1));

  function stepMatch(d) {
    const n = found.items.length;
    if (!n) return;
    const pages = Math.ceil(found.total / (found.limit || n));
    if (pages > 1 && at >= 0 && (at + d >= n || at + d < 0)) {
      // past the page held: the kernel sends the next (or previous) one, wrapping around
      pendingStep = d;
      model.set("query_page", ((found.page || 0) + d + pages) % pages);
      model.save_changes();
      return;
    }
    at = at < 0 ? (d > 0 ? 0 : n - 1) : (at + d + n) % n;
    showMatch();
  }

  function showMatch() {
    const m = found.items[at];
    const first = (found.page || 0) * (found.limit || 0);
    count.textContent = `${(first + at + 1).toLocaleString()} / ${found.total.toLocaleString()}` +
      (found.total > found.items.length
        ? ` (${(first + 1).toLocaleString()}-${(first + found.items.length).toLocaleString()} listed)`
        : "");
    for (const [i, item] of [...list.children].entries()) item.classList.toggle("current", i === at);
    const cur = list.children[at];
    if (cur) cur.scrollIntoView({ block: "nearest" });
    root.dataset.match = String(m[0]);
    go({ id: m[0], x0: m[1], x1: m[2], row: m[3] });
  }

  function onMatches() {
    found = model.get("matches") || { items: [], total: 0 };
    found.items = found.items || [];
    at = -1;
    list.replaceChildren();
    for (const [i, m] of found.items.entries()) {
      const item = el_("div", "dynprof-tl-match",
        `${names[m[4]]} · ${laneOf(m[3])} · ${fmtDur(m[2] - m[1])} at ${(m[1] / 1e6).toFixed(3)} ms`);
      item.addEventListener("click", () => { at = i; showMatch(); });
      list.append(item);
    }
    list.style.display = found.items.length ? "block" : "none";
    count.textContent = found.query ? `${found.total.toLocaleString()} matches` : "";
    root.dataset.matches = String(found.total || 0);
    if (pendingStep) {
      const d = pendingStep;
      pendingStep = 0;
      stepMatch(d);
    } else draw();
  }

  // ---- a selected range: its duration now, its time per name from the kernel -----------
  function showRange(final) {
    if (!range) return;
    const a = Math.min(range.a, range.b), b = Math.max(range.a, range.b);
    span.replaceChildren(el_("b", "", `selection: ${fmtDur(b - a)}`),
      document.createTextNode(final ? " · summing its time per name…" : ""));
    root.dataset.range = JSON.stringify([a, b]);
    if (final) {
      const s = model.get("span_summary") || {};
      if (s.lo === a && s.hi === b) { onSpan(); return; } // answered already
      model.set("span", [a, b]);
      model.save_changes();
    }
  }

  function onSpan() {
    const s = model.get("span_summary");
    if (!s || s.lo === undefined) return;
    const head = el_("b", "", `selection: ${fmtDur(s.duration_ns)}`);
    const table = el_("table", "dynprof-tl-sums");
    for (const [name, ns, n] of s.names) {
      const tr = el_("tr");
      tr.append(el_("td", "", fmtDur(ns)), el_("td", "", `${n.toLocaleString()}×`), el_("td", "", name));
      table.append(tr);
    }
    span.replaceChildren(head, document.createTextNode(` · ${s.events.toLocaleString()} events in it; time per name:`), table);
    root.dataset.rangeEvents = String(s.events);
  }

  // ---- details and their links ----------------------------------------------------------
  function showDetails() {
    const d = model.get("details");
    if (!d || !d.name) return;
    details.textContent = Object.entries(d)
      .filter(([k]) => k !== "flows" && k !== "id")
      .map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`)
      .join("\n");
    root.dataset.selectedName = d.name;
    flows = chosen && chosen.id === d.id ? d.flows || [] : [];
    if (chosen && chosen.id === d.id && d.flows === undefined) flows = [];
    links.replaceChildren();
    for (const f of flows.slice(0, 12)) {
      const b = el_("button", "dynprof-tl-link", `→ ${f.why}: ${f.name.slice(0, 60)}`);
      b.addEventListener("click", () => go(f));
      links.append(b);
    }
    root.dataset.flows = String(flows.length);
    draw();
  }

  function showLegend() {
    legend.replaceChildren();
    for (const [name, color] of model.get("legend")) {
      const item = el_("span");
      const sw = el_("i");
      sw.style.background = color;
      item.append(sw, document.createTextNode(name));
      legend.append(item);
    }
  }

  model.on("change:drawn", onDrawn);
  model.on("change:details", showDetails);
  model.on("change:matches", onMatches);
  model.on("change:span_summary", onSpan);
  model.on("change:goto", () => {
    const g = model.get("goto");
    if (g && g.length >= 2) setRange(g[0], g[1]);
  });
  title.textContent = model.get("title");
  note.textContent = model.get("note");
  list.style.display = "none";
  readSteps();
  showLegend();
  arrange();
  layout();
  if (model.get("drawn").seq !== undefined) readRects();
  const g = model.get("goto");
  if (g && g.length >= 2) setRange(g[0], g[1]);
  else draw();
  showLanes();
  root.dataset.held = String(S.n);
  root.dataset.ready = "1";
  const ro = new ResizeObserver(() => {
    const w = Math.floor(el.getBoundingClientRect().width);
    if (w && Math.abs(w - width) > 2) {
      layout();
      draw();
    }
  });
  ro.observe(el);
  // a taller (or shorter) window: the canvas, as tall as the window, follows it
  const onResize = () => {
    if (canvas.isConnected && Math.min(fullH, Math.max(400, window.innerHeight || fullH)) !== height) {
      layout();
      draw();
    }
  };
  window.addEventListener("resize", onResize);
  // scrolling the page (or JupyterLab's notebook) brings other rows into sight
  let scrollPending = false;
  const onScroll = () => {
    if (scrollPending) return;
    scrollPending = true;
    requestAnimationFrame(() => {
      scrollPending = false;
      if (canvas.isConnected && scrolled() !== off) draw();
    });
  };
  document.addEventListener("scroll", onScroll, { capture: true, passive: true });
  return () => {
    ro.disconnect();
    window.removeEventListener("resize", onResize);
    document.removeEventListener("scroll", onScroll, { capture: true });
  };
}

export default { render };
