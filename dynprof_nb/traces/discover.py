"""Find the files of one window directory, and the windows inside a folder of several ranks."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

WINDOW_RE = re.compile(r"^rank(\d+)_start(\d+)_stop(\d+)")
RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)", re.IGNORECASE)
PARTIAL_SUFFIXES = (".tmp", ".partial")
ASCEND_DIRS = ("*_ascend_ms", "*_ascend_pt")


@dataclass
class WindowFiles:
    """Which files of a window feed which reader."""

    root: Path
    traces: list[Path] = field(default_factory=list)
    csv: dict[str, Path] = field(default_factory=dict)
    framework: dict[str, Path] = field(default_factory=dict)
    communication: Path | None = None
    db: Path | None = None
    manifest: dict | None = None
    framework_name: str = "unknown"
    rank: int | None = None
    start_step: int | None = None
    stop_step: int | None = None
    incomplete: str | None = None  # why the window looks unfinished, or None
    step_markers: Path | None = None  # dynprof_steps.csv from the MindSpore backend


def _ascend_roots(root: Path) -> list[Path]:
    roots = [root]
    for pat in ASCEND_DIRS:
        roots += sorted(p for p in root.glob(pat) if p.is_dir())
    return roots


def find_window_files(root: Path) -> WindowFiles:
    wf = WindowFiles(root=root)
    man = root / "window.json"
    if man.is_file():
        try:
            wf.manifest = json.loads(man.read_text())
        except (OSError, ValueError):
            wf.manifest = None
    for base in _ascend_roots(root):
        out = base / "ASCEND_PROFILER_OUTPUT"
        for d in (base, out):
            if not d.is_dir():
                continue
            for p in sorted(d.iterdir()):
                n = p.name
                if n in ("trace.json", "trace_view.json") or n.endswith((".pt.trace.json", ".pt.trace.json.gz")) \
                        or (d == root and n.endswith(("trace.json.gz",))):
                    if p not in wf.traces:
                        wf.traces.append(p)
                elif n.endswith(".csv") and d.name == "ASCEND_PROFILER_OUTPUT":
                    wf.csv.setdefault(n.rsplit(".", 1)[0], p)
                elif n == "communication.json":
                    wf.communication = p
                elif n.endswith(".db") and d.name == "ASCEND_PROFILER_OUTPUT":
                    wf.db = p
        fw = base / "FRAMEWORK"
        if fw.is_dir():
            for p in sorted(fw.iterdir()):
                key = re.sub(r"_\d+$", "", p.stem)
                wf.framework.setdefault(key, p)
    if (root / "dynprof_steps.csv").is_file():
        wf.step_markers = root / "dynprof_steps.csv"
    m = WINDOW_RE.match(root.name)
    if m:
        wf.rank, wf.start_step, wf.stop_step = (int(g) for g in m.groups())
    if wf.manifest:
        for k, attr in (("rank", "rank"), ("start_step", "start_step"), ("stop_step", "stop_step")):
            if isinstance(wf.manifest.get(k), int):
                setattr(wf, attr, wf.manifest[k])
        if wf.manifest.get("status") not in (None, "complete"):
            wf.incomplete = f"its window.json says status={wf.manifest.get('status')!r}"
    if root.name.endswith(PARTIAL_SUFFIXES):
        wf.incomplete = "it is still under a temporary name (being written, or its writer died)"
    if wf.rank is None:
        for p in [*root.glob("*_ascend_*/profiler_info_*.json"), *wf.traces]:
            m2 = re.search(r"profiler_info_(\d+)", p.name) or RANK_IN_NAME.search(p.name)
            if m2:
                wf.rank = int(m2.group(1))
                break
    wf.framework_name = _framework(root, wf)
    return wf


def _framework(root: Path, wf: WindowFiles) -> str:
    backend = (wf.manifest or {}).get("backend")
    if any(root.glob("*_ascend_ms")) or root.name.endswith("_ascend_ms"):
        return "mindspore"
    if any(root.glob("*_ascend_pt")) or root.name.endswith("_ascend_pt"):
        return "torch_npu"
    if any(p.name.endswith((".pt.trace.json", ".pt.trace.json.gz")) for p in wf.traces):
        return "pytorch"
    if backend:
        return str(backend)
    if any(p.name == "trace.json" for p in wf.traces):
        return "builtin"
    if wf.csv or wf.db or any(p.name == "trace_view.json" for p in wf.traces):
        return "ascend"
    return "unknown"


def rank_windows(root: Path) -> list[Path]:
    """Sub-windows of a folder holding several ranks' windows ([] when root is one window)."""
    subs = sorted((p for p in root.iterdir() if p.is_dir() and WINDOW_RE.match(p.name)),
                  key=lambda p: [int(g) for g in WINDOW_RE.match(p.name).groups()])
    if subs:
        return subs
    asc = [p for pat in ASCEND_DIRS for p in sorted(root.glob(pat)) if p.is_dir()]
    if len(asc) > 1:
        return asc
    traces = sorted(root.glob("*.pt.trace.json*"))
    if len(traces) > 1:
        return traces
    return []
