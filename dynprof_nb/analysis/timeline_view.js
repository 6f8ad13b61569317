// The interactive timeline's front-end (anywidget, no dependency, no network): a canvas that
// zooms with the mouse wheel and pans by dragging. It draws the rectangles the kernel chose
// for the visible range (the longest event in each pixel of each row), redrawing the last ones
// moved and scaled at once while it asks for the new range, so a wheel turn never waits on
// the kernel. Hover: name, duration, lane. Click: the kernel's details (args included).
// The container's data-* attributes say what is drawn (tests read them).

const LEFT = 190; // lane labels
const TOP = 34; // step numbers and the time axis
const BOTTOM = 8;

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

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "dynprof-timeline";
  const bar = document.createElement("div");
  bar.className = "dynprof-tl-bar";
  const title = document.createElement("span");
  title.className = "dynprof-tl-title";
  const reset = document.createElement("button");
  reset.className = "dynprof-tl-reset";
  reset.textContent = "whole window";
  reset.title = "zoom out to the whole window (or double-click the timeline)";
  const readout = document.createElement("span");
  readout.className = "dynprof-tl-readout";
  bar.append(title, reset, readout);
  const note = document.createElement("div");
  note.className = "dynprof-tl-note";
  const canvas = document.createElement("canvas");
  canvas.className = "dynprof-tl-canvas";
  const tip = document.createElement("div");
  tip.className = "dynprof-tl-tip";
  const details = document.createElement("pre");
  details.className = "dynprof-tl-details";
  details.textContent = "click an event for its details; wheel to zoom, drag to pan";
  const legend = document.createElement("div");
  legend.className = "dynprof-tl-legend";
  const stage = document.createElement("div");
  stage.className = "dynprof-tl-stage";
  stage.append(canvas, tip);
  root.append(bar, note, stage, legend, details);
  el.appendChild(root);

  const ctx = canvas.getContext("2d");
  let width = 0;
  let height = 0;
  let rowH = 12;
  let lanes = model.get("lanes");
  let names = model.get("names");
  let colors = model.get("colors");
  const full = model.get("full");
  let lo = full[0];
  let hi = full[1];
  // the last rectangles from the kernel, absolute times (ns on the aligned axis)
  let R = { n: 0, x0: new Float64Array(0), x1: new Float64Array(0), id: new Int32Array(0),
            row: new Int32Array(0), name: new Int32Array(0), dur: new Float32Array(0) };
  let steps = null;
  let seq = 0;
  let inFlight = 0; // the seq of the request the kernel is answering, 0 when none
  let asked = 0; // performance.now() of that request
  let hoverIdx = -1;

  function layout() {
    const w = Math.max(400, Math.floor(el.getBoundingClientRect().width || 1000));
    const rows = model.get("rows");
    rowH = model.get("row_height");
    width = w;
    height = TOP + rows * rowH + BOTTOM;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.floor(width * dpr);
    canvas.height = Math.floor(height * dpr);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }

  function plotW() {
    return width - LEFT - 10;
  }

  function tx(t) {
    return LEFT + ((t - lo) / (hi - lo)) * plotW();
  }

  function readSteps() {
    const buf = copyOf(model.get("steps"));
    const f = new Float64Array(buf);
    const n = f.length / 4;
    steps = { n, a: f.subarray(0, n), b: f.subarray(n, 2 * n), top: f.subarray(2 * n, 3 * n),
              bottom: f.subarray(3 * n, 4 * n) };
  }

  function readRects() {
    const meta = model.get("drawn");
    const n = meta.count || 0;
    const buf = copyOf(model.get("rects"));
    const f = new Float32Array(buf, 0, 2 * n);
    const base = meta.lo;
    const x0 = new Float64Array(n);
    const x1 = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      x0[i] = base + f[i];
      x1[i] = base + f[n + i];
    }
    R = { n, x0, x1, id: new Int32Array(buf, 8 * n, n), row: new Int32Array(buf, 12 * n, n),
          name: new Int32Array(buf, 16 * n, n), dur: new Float32Array(buf, 20 * n, n) };
  }

  function draw() {
    const t0 = performance.now();
    ctx.clearRect(0, 0, width, height);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, width, height);
    const pw = plotW();
    const k = pw / (hi - lo);
    // step shading: every other step of each rank, in the rank's band of lanes
    if (steps && steps.n) {
      ctx.fillStyle = "#ececec";
      for (let i = 0; i < steps.n; i++) {
        if (steps.b[i] < lo || steps.a[i] > hi) continue;
        const a = Math.max(LEFT, LEFT + (steps.a[i] - lo) * k);
        const b = Math.min(LEFT + pw, LEFT + (steps.b[i] - lo) * k);
        if (b - a < 0.5) continue;
        ctx.fillRect(a, TOP + steps.top[i] * rowH, b - a, (steps.bottom[i] - steps.top[i]) * rowH);
      }
    }
    // events: at least one pixel wide, clipped to the plot
    ctx.save();
    ctx.beginPath();
    ctx.rect(LEFT, TOP, pw, height - TOP);
    ctx.clip();
    const pad = rowH > 6 ? 1 : 0;
    let lastColor = "";
    for (let i = 0; i < R.n; i++) {
      let a = LEFT + (R.x0[i] - lo) * k;
      let b = LEFT + (R.x1[i] - lo) * k;
      if (b < LEFT || a > LEFT + pw) continue;
      a = Math.max(a, LEFT - 1);
      b = Math.min(b, LEFT + pw + 1);
      const c = colors[R.name[i]] || "#b8b8b8";
      if (c !== lastColor) {
        ctx.fillStyle = c;
        lastColor = c;
      }
      ctx.fillRect(a, TOP + R.row[i] * rowH + pad, Math.max(1, b - a), rowH - 2 * pad);
    }
    if (hoverIdx >= 0 && hoverIdx < R.n) {
      const a = LEFT + (R.x0[hoverIdx] - lo) * k;
      const b = LEFT + (R.x1[hoverIdx] - lo) * k;
      ctx.strokeStyle = "#000000";
      ctx.lineWidth = 1.5;
      ctx.strokeRect(a, TOP + R.row[hoverIdx] * rowH + 0.5, Math.max(2, b - a), rowH - 1);
    }
    ctx.restore();
    // lane labels and separators (a darker line between ranks)
    ctx.font = `${Math.min(11, Math.max(7, rowH - 2))}px sans-serif`;
    ctx.textBaseline = "middle";
    const every = Math.max(1, Math.ceil(9 / rowH)); // labels at least 9 px apart
    lanes.forEach((lane, j) => {
      const y = TOP + lane.y0 * rowH;
      if (j > 0) {
        ctx.fillStyle = lane.rank_first ? "#555555" : "#dddddd";
        ctx.fillRect(LEFT, y, pw, lane.rank_first ? 1 : 0.5);
      }
      if (j % every === 0) {
        ctx.fillStyle = "#222222";
        ctx.textAlign = "right";
        ctx.fillText(lane.label, LEFT - 6, y + rowH / 2, LEFT - 10);
      }
    });
    // time axis: nice ticks in the range's unit
    const span = hi - lo;
    const [scale, unit] = units(span);
    const step = niceStep(span / Math.max(2, pw / 110));
    ctx.fillStyle = "#333333";
    ctx.textAlign = "center";
    ctx.font = "10px sans-serif";
    for (let t = Math.ceil(lo / step) * step; t <= hi; t += step) {
      const x = tx(t);
      ctx.fillRect(x, TOP - 5, 1, 5);
      ctx.fillText(`${+(t / scale).toFixed(6)}`, x, TOP - 12);
    }
    ctx.textAlign = "left";
    const zero = model.get("zero");
    ctx.fillText(`time (${unit})${zero}`, 4, TOP - 12);
    ctx.fillStyle = "#555555";
    ctx.fillRect(LEFT, TOP - 1, pw, 1);
    readout.textContent = `${fmtDur(span)} shown · ${R.n.toLocaleString()} events drawn`;
    root.dataset.lo = String(lo);
    root.dataset.hi = String(hi);
    root.dataset.drawn = String(R.n);
    root.dataset.drawMs = (performance.now() - t0).toFixed(1);
  }

  function ask() {
    // one request at a time; the newest range is asked again when the answer comes
    if (inFlight) return;
    seq += 1;
    inFlight = seq;
    asked = performance.now();
    model.set("view", [lo, hi, Math.round(plotW()), seq]);
    model.save_changes();
  }

  function onDrawn() {
    const meta = model.get("drawn");
    if (!meta || meta.seq === undefined) return;
    readRects();
    hoverIdx = -1;
    const matches = meta.seq === inFlight;
    if (matches) {
      root.dataset.redrawMs = (performance.now() - asked).toFixed(1);
      root.dataset.selectMs = String(meta.select_ms);
      root.dataset.seq = String(meta.seq);
      root.dataset.visible = String(meta.visible);
      inFlight = 0;
    }
    draw();
    if (matches && (meta.lo !== lo || meta.hi !== hi)) ask(); // moved again meanwhile
  }

  function setRange(a, b) {
    const fullSpan = full[1] - full[0];
    const minSpan = 100; // ns: a kernel is wider than this
    let span = Math.min(Math.max(b - a, minSpan), fullSpan * 1.02);
    const mid = (a + b) / 2;
    a = mid - span / 2;
    b = mid + span / 2;
    const slack = fullSpan * 0.01;
    if (a < full[0] - slack) [a, b] = [full[0] - slack, full[0] - slack + span];
    if (b > full[1] + slack) [a, b] = [full[1] + slack - span, full[1] + slack];
    lo = a;
    hi = b;
    draw();
    ask();
  }

  function timeAt(x) {
    return lo + ((x - LEFT) / plotW()) * (hi - lo);
  }

  function pick(mx, my) {
    const row = Math.floor((my - TOP) / rowH);
    if (mx < LEFT || row < 0) return -1;
    const t = timeAt(mx);
    const px = (hi - lo) / plotW(); // an event is at least one pixel wide
    let best = -1;
    for (let i = 0; i < R.n; i++) {
      if (R.row[i] !== row) continue;
      if (R.x0[i] - px <= t && t <= Math.max(R.x1[i], R.x0[i] + px) + px) {
        if (best < 0 || R.dur[i] < R.dur[best]) best = i;
      }
    }
    return best;
  }

  function laneOf(row) {
    let found = null;
    for (const lane of lanes) if (lane.y0 <= row) found = lane;
    return found ? found.label : "";
  }

  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = canvas.getBoundingClientRect();
    const t = timeAt(Math.max(LEFT, e.clientX - r.left));
    const f = Math.exp(Math.max(-3, Math.min(3, e.deltaY * 0.0025)));
    setRange(t - (t - lo) * f, t + (hi - t) * f);
  }, { passive: false });

  let drag = null;
  canvas.addEventListener("mousedown", (e) => {
    drag = { x: e.clientX, lo, hi, moved: false };
  });
  window.addEventListener("mousemove", (e) => {
    if (drag) {
      const dx = e.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (drag.moved) {
        const dt = (dx / plotW()) * (drag.hi - drag.lo);
        setRange(drag.lo - dt, drag.hi - dt);
      }
      return;
    }
  });
  window.addEventListener("mouseup", (e) => {
    if (!drag) return;
    const wasClick = !drag.moved;
    drag = null;
    if (wasClick) {
      const r = canvas.getBoundingClientRect();
      const i = pick(e.clientX - r.left, e.clientY - r.top);
      if (i >= 0 && e.target === canvas) {
        details.textContent = "reading the event's details…";
        model.set("selected", R.id[i]);
        model.save_changes();
      }
    }
  });
  canvas.addEventListener("mousemove", (e) => {
    if (drag) return;
    const r = canvas.getBoundingClientRect();
    const mx = e.clientX - r.left;
    const my = e.clientY - r.top;
    const i = pick(mx, my);
    if (i !== hoverIdx) {
      hoverIdx = i;
      draw();
    }
    if (i < 0) {
      tip.style.display = "none";
      canvas.style.cursor = "grab";
      return;
    }
    canvas.style.cursor = "pointer";
    tip.textContent = `${names[R.name[i]]}\n${fmtDur(R.dur[i])} · ${laneOf(R.row[i])}`;
    tip.style.display = "block";
    tip.style.left = `${Math.min(mx + 14, width - 260)}px`;
    tip.style.top = `${my + 14}px`;
  });
  canvas.addEventListener("mouseleave", () => {
    tip.style.display = "none";
    if (hoverIdx >= 0) {
      hoverIdx = -1;
      draw();
    }
  });
  canvas.addEventListener("dblclick", () => setRange(full[0], full[1]));
  reset.addEventListener("click", () => setRange(full[0], full[1]));

  function showDetails() {
    const d = model.get("details");
    if (!d || !d.name) return;
    details.textContent = Object.entries(d)
      .map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`)
      .join("\n");
    root.dataset.selectedName = d.name;
  }

  function showLegend() {
    legend.replaceChildren();
    for (const [name, color] of model.get("legend")) {
      const item = document.createElement("span");
      const sw = document.createElement("i");
      sw.style.background = color;
      item.append(sw, document.createTextNode(name));
      legend.append(item);
    }
  }

  model.on("change:drawn", onDrawn);
  model.on("change:details", showDetails);
  title.textContent = model.get("title");
  note.textContent = model.get("note");
  readSteps();
  showLegend();
  layout();
  if (model.get("drawn").seq !== undefined) readRects();
  draw();
  ask();
  const ro = new ResizeObserver(() => {
    const w = Math.floor(el.getBoundingClientRect().width);
    if (w && Math.abs(w - width) > 2) {
      layout();
      draw();
      ask();
    }
  });
  ro.observe(el);
  return () => ro.disconnect();
}

export default { render };
