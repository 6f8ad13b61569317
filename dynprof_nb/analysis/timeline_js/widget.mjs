// The widget: anywidget's render(), which builds the DOM, holds what is shown now (the range,
// the lanes as arranged, the selection, the search) and wires the model's changes and the DOM's
// events to the model (model.mjs), layout (layout.mjs), drawing (draw.mjs) and input
// (input.mjs) modules. What it syncs with the kernel: PROTOCOL.md.
//
// Zoom and pan are drawn here, from the multi-resolution summary the kernel sent once; only
// when the view is finer than the finest level held does it ask the kernel (`view` -> `rects`),
// without waiting: the summary is drawn meanwhile and the answer redraws. Every redraw
// recomputes what is under the pointer, so a tooltip never names an event that has moved away.
// The container's data-* attributes say what is drawn (tests read them).

import { decodeRects, decodeSteps, decodeSummary, eventOf } from "./model.mjs";
import {
  BOTTOM, LEFT, LaneState, TOP, arrange, arrangement, centreRange, clampRange, eventsInRange,
  laneAtY, laneIndexOfRow, laneLabelOfRow, procKey, summaryLevel, zoomRange,
} from "./layout.mjs";
import {
  Bars, drawArrow, drawAxis, drawLanes, drawPath, drawStepBands, fmtDur, makeFitter, outline,
  rgbaWords, textColour,
} from "./draw.mjs";
import {
  Pointer, SearchBox, applyLabelAction, arrowAt, labelAction, listenKeys, matchCount, pick,
  stepMatch,
} from "./input.mjs";

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
    "wheel or W/S zoom · drag the lanes or A/D: pan · drag the time axis (or shift-drag): a " +
    "range · click: details · " +
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
  const fit = makeFitter(ctx);
  let width = 0;
  let height = 0;
  const rowH = model.get("row_height");
  const lanes = model.get("lanes");
  const nRows = model.get("rows");
  const names = model.get("names");
  const colors = model.get("colors");
  const inks = colors.map(textColour);
  // bars under 2 px go into one pixel layer (one write per pixel row), composited at once:
  // a wide view of a dense window is tens of thousands of them, too many for fillRect
  const bars = new Bars(document.createElement("canvas"), rgbaWords(colors));
  const nameW = new Float32Array(names.length); // measured at the bar font, lazily
  const full = model.get("full");
  let lo = full[0];
  let hi = full[1];

  // ---- the data ------------------------------------------------------------------------
  const S = decodeSummary(model.get("summary_info"), model.get("summary"), nRows);
  let D = null; // the kernel's answer for a view finer than the summary
  const { steps, marks } = decodeSteps(model.get("steps"), model.get("step_labels"), lanes);
  let seq = 0;
  let inFlight = 0;
  let asked = 0;

  // ---- lanes: collapsed, pinned, and where each row is drawn ---------------------------
  const state = new LaneState();
  if (!lanes.some((lane) => lane.comm)) pinComm.style.display = "none";
  let arr = null; // layout.arrange's answer: rowY, laneY, laneN, header, order, rankBand

  function rearrange() {
    arr = arrange(lanes, nRows, rowH, state);
  }

  function showLanes() {
    root.dataset.rows = String(arr.contentH / rowH);
    root.dataset.pinned = JSON.stringify([...state.pinned]);
    root.dataset.commPinned = state.commPinned ? "1" : "0";
    root.dataset.groupPinned = state.groupPinned;
    root.dataset.headers = JSON.stringify(arr.order.filter((j) => arr.header[j]).map((j) => arr.header[j]));
    pinComm.textContent = `${state.commPinned ? "●" : "○"} pin communication`;
    root.dataset.order = JSON.stringify(arr.order.filter((j) => arr.laneY[j] >= 0).map((j) => lanes[j].label));
    // the lanes as drawn, for the kernel's figure() (a static export shows what was on screen)
    const arranged = arrangement(lanes, arr, state);
    if (JSON.stringify(arranged) === JSON.stringify(model.get("arranged") || {})) return;
    model.set("arranged", arranged);
    model.save_changes();
  }

  function relayout() {
    rearrange();
    sizeCanvas();
    draw();
    showLanes();
  }

  // A window of thousands of rows is taller than any screen (and than the largest canvas a
  // browser draws): the stage is as tall as every row, the canvas only as tall as the window
  // and sticky in it, and a frame draws the rows in sight, scrolled by `off` (Y0: where row 0
  // is on the canvas; the time axis stays at the top).
  let fullH = 0, off = 0, Y0 = TOP;
  function sizeCanvas() {
    width = Math.max(500, Math.floor(el.getBoundingClientRect().width || 1000));
    fullH = TOP + arr.contentH + BOTTOM;
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
  const scene = () => ({ ctx, width, height, lo, hi, pw: plotW(), k: plotW() / (hi - lo), Y0, off,
                         rowH, lanes, arr, state });

  // ---- one frame -----------------------------------------------------------------------
  let hover = -1; // index into the frame's hit list
  let chosen = null; // the selected event: {id, x0, x1, row}
  let flows = [];
  let range = null; // {a, b} ns: a selected range
  let found = { items: [], total: 0 };
  let at = -1; // the match the view was centred on

  function scrolled() {
    // how far the stage's top has gone above the canvas's (0 until the page scrolls past it)
    const d = canvas.getBoundingClientRect().top - stage.getBoundingClientRect().top;
    return Math.max(0, Math.min(fullH - height, Math.round(d)));
  }
  const inSight = (row) => arr.rowY[row] >= 0 && arr.rowY[row] + rowH > off &&
    arr.rowY[row] < off + height - TOP;

  function draw() {
    const t0 = performance.now();
    off = scrolled();
    Y0 = TOP - off;
    const sc = scene();
    const pw = sc.pw;
    const pxNs = (hi - lo) / pw;
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, width, height);
    drawStepBands(ctx, sc, steps);
    ctx.save();
    ctx.beginPath();
    ctx.rect(LEFT, TOP, pw, height - TOP);
    ctx.clip();
    // which levels: down to the first as fine as a pixel; finer than all held: the kernel's
    const L = S.levels.length;
    const { level: k1, finer } = summaryLevel(S.levels, pxNs, S.complete);
    const useD = finer && D && D.lo <= lo && D.hi >= hi && (D.exact || D.pxNs <= pxNs * 1.5);
    bars.begin(sc, nRows);
    for (let lev = 0; lev <= k1 && L; lev++) {
      for (let row = 0; row < nRows; row++) {
        if (!inSight(row)) continue;
        const r = lev * nRows + row;
        if (S.first[r] === S.first[r + 1]) continue;
        const [i0, i1] = eventsInRange(S, r, lo, hi);
        for (let i = i0; i < i1; i++) {
          const x1 = S.x0[i] + S.dur[i];
          if (x1 < lo) continue;
          bars.put(S.x0[i], x1, row, S.name[i], 0, i);
        }
      }
    }
    if (useD) {
      for (let i = 0; i < D.n; i++) if (inSight(D.row[i])) bars.put(D.x0[i], D.x1[i], D.row[i], D.name[i], 1, i);
    }
    bars.composite(ctx, nRows, inSight);
    const H = bars.hits;
    const nameOf = (h) => (H.src[h] ? D.name[H.i[h]] : S.name[H.i[h]]);
    root.dataset.labels = String(bars.names(ctx, nameOf, names, nameW, inks));
    // the selected event, its links, the search match, the range
    if (at >= 0 && found.items[at]) {
      const m = found.items[at];
      outline(ctx, sc, m[1], m[2], m[3], "#ff8c00", 2);
    }
    root.dataset.path = String(drawPath(ctx, sc, model.get("path") || []));
    if (chosen) {
      outline(ctx, sc, chosen.x0, chosen.x1, chosen.row, "#000000", 2);
      for (const f of flows) drawArrow(ctx, sc, chosen, f);
    }
    if (hover >= 0 && hover < H.n) {
      ctx.strokeStyle = "#000000";
      ctx.lineWidth = 1;
      ctx.strokeRect(H.a[hover], Y0 + arr.rowY[H.row[hover]] + 0.5, Math.max(2, H.b[hover] - H.a[hover]), rowH - 1);
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
    const texts = drawLanes(ctx, sc, fit);
    const said = JSON.stringify([...texts.values()]);
    if (root.dataset.laneTexts !== said) root.dataset.laneTexts = said;
    const axis = drawAxis(ctx, sc, marks, model.get("zero"), model.get("step_title"));
    if (axis.stride !== null) root.dataset.stepStride = String(axis.stride);
    root.dataset.stepLabels = JSON.stringify(axis.shown);
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
    D = decodeRects(meta, model.get("rects"));
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
    [lo, hi] = clampRange(a, b, full);
    draw();
  }

  function zoomBy(f, t) {
    const mouse = pointer.mouse;
    if (t === undefined) t = mouse && mouse.x > LEFT ? timeAt(mouse.x) : (lo + hi) / 2;
    setRange(...zoomRange(lo, hi, f, t));
  }

  const centreOn = (x0, x1) => setRange(...centreRange(lo, hi, x0, x1, plotW()));

  // ---- the pointer ----------------------------------------------------------------------
  const pickAt = (mx, my) => pick(bars.hits, arr.rowY, rowH, Y0, mx, my);
  const ref = (h) => eventOf(S, D, bars.hits.src[h], bars.hits.i[h]);

  function refreshHover() {
    // on every redraw: the event under the pointer now, never the one before the zoom
    const mouse = pointer.mouse;
    const i = mouse && !pointer.drag ? pickAt(mouse.x, mouse.y) : -1;
    hover = i;
    if (i < 0) {
      tip.style.display = "none";
      delete root.dataset.hover;
      canvas.style.cursor = mouse && mouse.x < LEFT ? "pointer" : "grab";
      return;
    }
    const r = ref(i);
    canvas.style.cursor = "pointer";
    tip.textContent = `${names[r.name]}\n${fmtDur(r.dur)} · ${laneLabelOfRow(lanes, r.row)}`;
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
    const mouse = pointer.mouse;
    const i = mouse ? pickAt(mouse.x, mouse.y) : -1;
    if (i !== hover) draw();
    else refreshHover();
  }

  const pointer = new Pointer(canvas, root, {
    xy: (e) => {
      const r = canvas.getBoundingClientRect();
      return { x: e.clientX - r.left, y: e.clientY - r.top };
    },
    timeAt,
    plotW,
    range: () => [lo, hi],
    setRange,
    zoomBy,
    selecting: (a, b) => {
      range = { a, b };
      showRange(false);
      draw();
    },
    selected: () => showRange(true),
    click: (mx, my) => {
      // a click by an arrow's far end goes to the event there
      const onScreen = (ev) => (arr.rowY[ev.row] < 0 ? null : [tx(ev.x0), Y0 + arr.rowY[ev.row] + rowH / 2]);
      const f = arrowAt(chosen, flows, onScreen, mx, my);
      if (f) { go(f); return; }
      const i = pickAt(mx, my);
      if (i >= 0) select(ref(i));
    },
    label: (x, y, shift) => {
      const j = laneAtY(arr, y - Y0);
      if (j === undefined) return;
      applyLabelAction(state, lanes, j, labelAction(lanes[j], arr.header[j], x, shift), procKey);
      relayout();
    },
    moved: hoverRedraw,
    left: () => {
      if (hover >= 0) draw();
      else refreshHover();
    },
    whole: () => setRange(full[0], full[1]),
  });

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
    const j = laneIndexOfRow(lanes, row);
    if (arr.rowY[row] >= 0 && !(j >= 0 && state.shut(lanes[j]))) return;
    if (j < 0) return;
    state.collapsed.delete(j);
    state.rankShut.delete(lanes[j].rank);
    state.procShut.delete(procKey(lanes[j]));
    rearrange();
    sizeCanvas();
    showLanes();
  }

  // a row below or above the window: the page (or the notebook) scrolls it into sight
  const mark = el_("div", "dynprof-tl-mark");
  stage.append(mark);
  function reveal(row) {
    if (arr.rowY[row] < 0 || inSightNow(row)) return;
    mark.style.top = `${TOP + arr.rowY[row]}px`;
    mark.style.height = `${rowH}px`;
    mark.scrollIntoView({ block: "center" });
  }
  const inSightNow = (row) => {
    const c = canvas.getBoundingClientRect(), s = stage.getBoundingClientRect();
    const y = s.top + TOP + arr.rowY[row]; // the row on the screen
    return y >= Math.max(0, c.top + TOP) && y + rowH <= Math.min(window.innerHeight, c.bottom);
  };

  function go(f) {
    open_(f.row);
    reveal(f.row);
    centreOn(f.x0, f.x1);
    select(f);
  }

  pinComm.addEventListener("click", () => {
    state.commPinned = !state.commPinned;
    relayout();
  });
  pinGroup.addEventListener("change", () => {
    state.groupPinned = pinGroup.value;
    relayout();
  });
  model.on("change:path", () => draw());
  reset.addEventListener("click", () => setRange(full[0], full[1]));

  // ---- keys: WASD and the arrows, as in Perfetto ----------------------------------------
  listenKeys(root, [search, pinGroup], (act) => {
    const s = hi - lo;
    if (act.zoom) zoomBy(act.zoom);
    else if (act.pan) setRange(lo + act.pan * s, hi + act.pan * s);
    else {
      range = null;
      span.replaceChildren();
      draw();
    }
  });

  // ---- search ---------------------------------------------------------------------------
  const searchBox = new SearchBox(search, prev, next, model, (d) => stepTo(d));

  function stepTo(d) {
    const step = stepMatch(found, at, d);
    if (!step) return;
    if (step.page !== undefined) {
      // past the page held: the kernel sends the next (or previous) one, wrapping around
      searchBox.after(d);
      model.set("query_page", step.page);
      model.save_changes();
      return;
    }
    at = step.at;
    showMatch();
  }

  function showMatch() {
    const m = found.items[at];
    count.textContent = matchCount(found, at);
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
        `${names[m[4]]} · ${laneLabelOfRow(lanes, m[3])} · ${fmtDur(m[2] - m[1])} at ${(m[1] / 1e6).toFixed(3)} ms`);
      item.addEventListener("click", () => { at = i; showMatch(); });
      list.append(item);
    }
    list.style.display = found.items.length ? "block" : "none";
    count.textContent = found.query ? `${found.total.toLocaleString()} matches` : "";
    root.dataset.matches = String(found.total || 0);
    const d = searchBox.take();
    if (d) stepTo(d);
    else draw();
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
  showLegend();
  rearrange();
  sizeCanvas();
  if (model.get("drawn").seq !== undefined) D = decodeRects(model.get("drawn"), model.get("rects"));
  const g = model.get("goto");
  if (g && g.length >= 2) setRange(g[0], g[1]);
  else draw();
  showLanes();
  root.dataset.held = String(S.n);
  root.dataset.ready = "1";
  const ro = new ResizeObserver(() => {
    const w = Math.floor(el.getBoundingClientRect().width);
    if (w && Math.abs(w - width) > 2) {
      sizeCanvas();
      draw();
    }
  });
  ro.observe(el);
  // a taller (or shorter) window: the canvas, as tall as the window, follows it
  const onResize = () => {
    if (canvas.isConnected && Math.min(fullH, Math.max(400, window.innerHeight || fullH)) !== height) {
      sizeCanvas();
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
