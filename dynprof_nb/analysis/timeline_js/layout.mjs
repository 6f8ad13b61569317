// The layout: where each lane and row is drawn (collapsed, pinned, shut to a header), which
// summary level a zoom draws and which of its events are in view, and the visible range's
// arithmetic (clamped, zoomed, centred). Pure functions: no DOM, no canvas.

export const LEFT = 210; // lane labels
export const TOP = 46; // step numbers, then the time axis
export const BOTTOM = 8;

// a process of a rank: its lanes shut to one header row together
export const procKey = (lane) => `${lane.rank}\u0001${lane.process}\u0001${lane.device}`;

// what the person chose: lanes collapsed to their top level, ranks and processes shut to one
// header row, threads/streams pinned (every rank's lane of it), communication pinned
export class LaneState {
  constructor() {
    this.collapsed = new Set(); // lane indices
    this.rankShut = new Set(); // ranks
    this.procShut = new Set(); // procKey
    this.pinned = new Set(); // thread/stream labels
    this.commPinned = false; // every rank's communication lanes, as one group
    this.groupPinned = ""; // the communication group whose lanes are pinned
  }

  isPinned(lane) {
    return this.pinned.has(lane.thread) || (this.commPinned && lane.comm) ||
      (this.groupPinned !== "" && (lane.groups || []).includes(this.groupPinned));
  }

  shut(lane) {
    return this.rankShut.has(lane.rank) ? "rank" : this.procShut.has(procKey(lane)) ? "process" : "";
  }

  plain() {
    return !this.collapsed.size && !this.rankShut.size && !this.procShut.size &&
      !this.pinned.size && !this.commPinned && this.groupPinned === "";
  }
}

// The lanes in drawing order (pinned first) and where each row goes, in px below TOP:
// rowY[row] (-1: not drawn), laneY/laneN per lane (-1/0: hidden), header[j] "rank" or
// "process" where lane j is drawn as a collapsed header, rankBand: rank -> [top, bottom] of its
// unpinned lanes, contentH: every drawn row. Rows never overlap: each drawn lane takes the
// rows below the one before; a shut rank's or process's lanes share one header row.
export function arrange(lanes, nRows, rowH, state) {
  const pin = [], rest = [];
  lanes.forEach((lane, j) => (state.isPinned(lane) ? pin : rest).push(j));
  const pinnedSet = new Set(pin);
  const order = [...pin, ...rest];
  const rowY = new Float64Array(nRows).fill(-1);
  const laneY = lanes.map(() => -1);
  const laneN = lanes.map(() => 0);
  const header = lanes.map(() => "");
  const rankBand = new Map();
  const headed = new Map(); // header key -> its row's px below TOP
  let y = 0;
  for (const j of order) {
    const lane = lanes[j];
    const shut = state.shut(lane);
    if (shut) {
      // one header row per collapsed rank or process: every lane's top level drawn in it
      const key = `${pinnedSet.has(j)}:${shut === "rank" ? lane.rank : procKey(lane)}`;
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
    const n = state.collapsed.has(j) ? 1 : lane.rows;
    laneY[j] = y;
    laneN[j] = n;
    for (let d = 0; d < n; d++) rowY[lane.y0 + d] = y + d * rowH;
    const band = rankBand.get(lane.rank);
    if (!pinnedSet.has(j)) rankBand.set(lane.rank, [band ? band[0] : y, y + n * rowH]);
    y += n * rowH;
  }
  return { order, rowY, laneY, laneN, header, rankBand, contentH: y, rowH };
}

// the lane (its index) that layout row `row` belongs to, -1 for none
export const laneIndexOfRow = (lanes, row) => lanes.findIndex((l) => row >= l.y0 && row < l.y0 + l.rows);

// the label of the lane that layout row `row` belongs to ("" for none)
export function laneLabelOfRow(lanes, row) {
  let found = null;
  for (const lane of lanes) if (lane.y0 <= row) found = lane;
  return found ? found.label : "";
}

// the drawn lane at `y` px below row 0 (undefined for none)
export const laneAtY = (arr, y) =>
  arr.order.find((j) => arr.laneY[j] >= 0 && y >= arr.laneY[j] && y < arr.laneY[j] + arr.laneN[j] * arr.rowH);

// a collapsed rank's or process's header row: what it stands for and how many lanes (a
// pinned lane has its own header)
export function headerText(lanes, arr, state, j) {
  const lane = lanes[j];
  const same = arr.header[j] === "rank" ? (l) => l.rank === lane.rank
    : (l) => procKey(l) === procKey(lane);
  const n = lanes.filter((l) => same(l) && state.isPinned(l) === state.isPinned(lane)).length;
  const what = arr.header[j] === "rank" ? `rank ${lane.rank}`
    : `rank ${lane.rank} · ${lane.process} (${lane.device ? "device" : "host"})`;
  return `${what} · ${n} lane${n === 1 ? "" : "s"}`;
}

// the `arranged` trait (the lanes as drawn, for the kernel's figure()): each layout row's drawn
// row (-1: hidden), each drawn lane's [row, rows, label, pinned], and the rows drawn; {} while
// nothing is collapsed or pinned (the kernel's own layout is the same)
export function arrangement(lanes, arr, state) {
  if (state.plain()) return {};
  const rowH = arr.rowH;
  const shown = arr.order.filter((j) => arr.laneY[j] >= 0).map((j) => [arr.laneY[j] / rowH,
    arr.laneN[j], arr.header[j] ? headerText(lanes, arr, state, j) : lanes[j].label,
    state.isPinned(lanes[j])]);
  return { rows: Array.from(arr.rowY, (v) => (v < 0 ? -1 : v / rowH)), lanes: shown,
           height: arr.contentH / rowH };
}

// ---- the summary's levels and the events in a view -------------------------------------
export function lowerBound(arr, a, b, v) {
  while (a < b) {
    const m = (a + b) >> 1;
    if (arr[m] < v) a = m + 1;
    else b = m;
  }
  return a;
}

// The levels a view of `pxNs` ns per pixel draws: 0..level, down to the first whose buckets
// are as fine as a pixel (the finest held when none is); `finer`: the view is finer than every
// level held and the summary does not hold every event, so the kernel is asked.
export function summaryLevel(levels, pxNs, complete) {
  const L = levels.length;
  let level = L - 1;
  for (let j = 0; j < L; j++) if (levels[j] <= pxNs) { level = j; break; }
  return { level, finer: !complete && L > 0 && levels[L - 1] > pxNs };
}

// the summary's events of run `r` (level * rows + row) that may overlap [lo, hi): [i0, i1)
export function eventsInRange(S, r, lo, hi) {
  const a = S.first[r], b = S.first[r + 1];
  const i0 = lowerBound(S.x0, a, b, lo - S.longest[r]);
  return [i0, lowerBound(S.x0, i0, b, hi)];
}

// ---- the visible range -----------------------------------------------------------------
// [a, b) made a range the view can show: 100 ns at least, the whole window (and 2%) at most,
// kept within 1% of the window's ends
export function clampRange(a, b, full) {
  const fullSpan = full[1] - full[0];
  const s = Math.min(Math.max(b - a, 100), fullSpan * 1.02); // ns: a kernel is wider
  const mid = (a + b) / 2;
  a = mid - s / 2;
  b = mid + s / 2;
  const slack = fullSpan * 0.01;
  if (a < full[0] - slack) [a, b] = [full[0] - slack, full[0] - slack + s];
  if (b > full[1] + slack) [a, b] = [full[1] + slack - s, full[1] + slack];
  return [a, b];
}

// [lo, hi) zoomed by `f` (< 1: in) about time `t`, which stays where it is on the screen
export const zoomRange = (lo, hi, f, t) => [t - (t - lo) * f, t + (hi - t) * f];

// a range about [x0, x1): the view's span kept where the event fits it and is 3 px wide at
// least, else one where it is
export function centreRange(lo, hi, x0, x1, plotW) {
  const w = Math.max(x1 - x0, 1);
  let s = hi - lo;
  if (w > s * 0.6) s = w * 3;
  if ((w / s) * plotW < 3) s = Math.max(w * 30, 2000);
  const mid = (x0 + x1) / 2;
  return [mid - s / 2, mid + s / 2];
}

// step numbers along the top, thinned: the smallest stride of steps whose markers (marks.a,
// ns; i0..i1 in view; `k` px per ns) stand 36 px apart at least
export function stepStride(marks, i0, i1, lo, k) {
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
  return stride;
}
