"""Find the files of one window directory, and the windows inside a folder of several ranks."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dynprof_nb.contract.protocol import THREAD_CPU_FILE

from .errors import TraceFormatError, TraceRepairWarning, warn

WINDOW_RE = re.compile(r"^rank(\d+)_start(\d+)_stop(\d+)")
RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)", re.IGNORECASE)
PARTIAL_SUFFIXES = (".tmp", ".partial")
ASCEND_DIRS = ("*_ascend_ms", "*_ascend_pt")
MEMORY_CSVS = ("memory_record", "operator_memory", "npu_module_mem")
FRAMEWORK_FILES = ("cpu_op_detail_info", "cpu_op_execute_timestamp", "cpu_ms_memory_record")
# known Ascend tables with no frame of their own (the last two: msprof-analyze outputs)
OTHER_ASCEND_CSVS = (
    "operator_details",
    "l2_cache",
    "static_op_mem",
    "api_statistic",
    "op_summary",
    "task_time",
    "data_preprocess",
    "hccl_statistic",
    "compute_op_sum",
    "hccl_sum",
)


@dataclass
class WindowFiles:
    """Which files of a window feed which reader."""

    root: Path
    traces: list[Path] = field(default_factory=list)
    csv: dict[str, Path] = field(default_factory=dict)
    framework: dict[str, Path] = field(default_factory=dict)
    communication: Path | None = None
    matrix: Path | None = None  # communication_matrix.json
    db: Path | None = None  # the profiler database (ascend_*_profiler_N.db, msprof_*.db)
    analysis_db: Path | None = (
        None  # analysis.db (torch_npu) / communication_analyzer.db (MindSpore)
    )
    device: int | None = None  # the NPU the rank ran on (not its rank)
    rank_source: str | None = None  # where ``rank`` came from
    manifest: dict | None = None
    framework_name: str = "unknown"
    rank: int | None = None
    start_step: int | None = None
    stop_step: int | None = None
    incomplete: str | None = None  # why the window looks unfinished, or None
    step_markers: Path | None = None  # dynprof_steps.csv from the MindSpore backend
    thread_cpu: Path | None = None  # thread_cpu.json: the training thread's CPU and run queue
    # a lone file that feeds no frame: profiler_info / profiler_metadata / communication_group
    # JSON (read for the rank), or an Ascend table kept as read (``TraceWindow.tables``)
    metadata: Path | None = None
    # symlinks that lead out of the window: never read (nor quoted in an error)
    outside: list[Path] = field(default_factory=list)
    table: Path | None = None
    # source name -> its files, for a format that finds its own (``Source.find``)
    found: dict[str, list[Path]] = field(default_factory=dict)


def _ascend_roots(root: Path, wf: WindowFiles) -> list[Path]:
    roots = [root]
    for pat in ASCEND_DIRS:
        roots += sorted(p for p in root.glob(pat) if p.is_dir() and _inside(p, wf))
    return roots


def _inside(p: Path, wf: WindowFiles) -> bool:
    """Whether ``p`` (a file or folder found in the window) really lies in it: a symlink to
    somewhere else (``/etc/passwd``, another user's folder) is noted in ``wf.outside`` and
    never read, so no reader can be pointed out of the window, nor quote such a file."""
    try:
        p.resolve(strict=True).relative_to(wf.root.resolve())
        return True
    except (OSError, ValueError, RuntimeError):
        if p not in wf.outside:
            wf.outside.append(p)
        return False


def find_window_files(
    root: Path, finders: dict[str, Callable[[Path], list[Path]]] | None = None
) -> WindowFiles:
    """The files of the window directory ``root``, by role; ``finders`` (source name -> its
    ``find``, :data:`dynprof_nb.traces.formats.FINDERS`) add the files of the formats that find
    their own, under ``found[name]``."""
    wf = WindowFiles(root=root)
    man = root / "window.json"
    if man.is_file() and _inside(man, wf):
        try:
            wf.manifest = json.loads(man.read_text())
        except (OSError, ValueError):
            wf.manifest = None
    for base in _ascend_roots(root, wf):
        out = base / "ASCEND_PROFILER_OUTPUT"
        for d in (base, out):
            if not d.is_dir() or not _inside(d, wf):
                continue
            for p in sorted(d.iterdir()):
                n = p.name
                if not _inside(p, wf):
                    continue
                if (
                    n in ("trace.json", "trace_view.json")
                    or n.endswith((".pt.trace.json", ".pt.trace.json.gz"))
                    or (d == root and n.endswith(("trace.json.gz",)))
                ):
                    if p not in wf.traces:
                        wf.traces.append(p)
                elif n.endswith(".csv") and d.name == "ASCEND_PROFILER_OUTPUT":
                    wf.csv.setdefault(n.rsplit(".", 1)[0], p)
                elif n == "communication.json":
                    wf.communication = p
                elif n == "communication_matrix.json":
                    wf.matrix = p
                elif (
                    n in ("analysis.db", "communication_analyzer.db")
                    and d.name == "ASCEND_PROFILER_OUTPUT"
                ):
                    wf.analysis_db = p
                elif _is_profiler_db(n) and (d.name == "ASCEND_PROFILER_OUTPUT" or d == root):
                    wf.db = wf.db or p
        fw = base / "FRAMEWORK"
        if fw.is_dir() and _inside(fw, wf):
            for p in sorted(q for q in fw.iterdir() if _inside(q, wf)):
                key = re.sub(r"_\d+$", "", p.stem)
                wf.framework.setdefault(key, p)
    for name, find in (finders or {}).items():  # the formats that find their own files
        wf.found[name] = [p for p in find(root) if _inside(p, wf)]
    if (root / "dynprof_steps.csv").is_file() and _inside(root / "dynprof_steps.csv", wf):
        wf.step_markers = root / "dynprof_steps.csv"
    if (root / THREAD_CPU_FILE).is_file() and _inside(root / THREAD_CPU_FILE, wf):
        wf.thread_cpu = root / THREAD_CPU_FILE
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
    if wf.db is None:
        for p in sorted(root.glob("PROF_*/mindstudio_profiler_output/msprof_*.db")):
            if _inside(p, wf):
                wf.db = p
                break
    if wf.rank is None:
        wf.rank, wf.rank_source = job_rank(root, wf.traces)
    else:
        wf.rank_source = "window.json" if (wf.manifest or {}).get("rank") is not None else "name"
    wf.device = _device(root)
    wf.framework_name = _framework(root, wf)
    if wf.outside:
        names = ", ".join(str(p.relative_to(root)) for p in wf.outside[:5])
        warn(
            TraceRepairWarning(
                f"{root}: not read: {len(wf.outside)} symlink(s) that lead out of the window "
                f"({names}); dynprof_nb reads only files inside the window"
            ),
            stacklevel=3,
        )
    return wf


def find_file(path: Path) -> WindowFiles:
    """The window that is one file: the file in the slot its name says it feeds, so the window
    reads it as it would in a directory. Raises on a table name no reader knows."""
    wf = WindowFiles(root=path.parent)
    name = path.name
    wf.framework_name = (
        "pytorch"
        if ".pt.trace.json" in name
        else ("ascend" if path.suffix in (".csv", ".db") else "chrome")
    )
    if name.endswith((".csv", ".txt")):
        _file_table(wf, path)
    elif path.suffix == ".db":
        wf.db = path
    elif name.endswith(".json") and (
        name.startswith(("profiler_info", "profiler_metadata"))
        or name == "communication_group.json"
    ):
        wf.metadata = path
    elif "communication_matrix" in name and name.endswith(".json"):
        wf.matrix = path
    elif name.startswith(("communication", "cluster_communication")) and name.endswith(".json"):
        wf.communication = path
    else:
        wf.traces = [path]
    return wf


def _file_table(wf: WindowFiles, path: Path) -> None:
    """A CSV/TXT table alone, under the key its reader looks for."""
    name = path.name
    if key := _prefix(name, ("kernel_details", "op_statistic")):
        wf.csv[key] = path
    elif "step_trace_time" in name:
        wf.csv["step_trace_time"] = path
    elif key := _prefix(name, MEMORY_CSVS):
        wf.csv[key] = path
    elif key := _prefix(name, FRAMEWORK_FILES):
        wf.framework[key] = path
    elif _prefix(name, OTHER_ASCEND_CSVS):
        wf.table = path
    else:
        raise TraceFormatError(
            path,
            "unrecognised file name",
            offset=0,
            hint="expected kernel_details / op_statistic / step_trace_time / memory "
            "CSVs, communication.json, a Chrome trace JSON, an Ascend .db or a saved "
            "key_averages() table (str(prof.key_averages().table(row_limit=-1)))",
        )


def _prefix(name: str, prefixes: tuple[str, ...]) -> str | None:
    return next((k for k in prefixes if name.startswith(k)), None)


def _is_profiler_db(name: str) -> bool:
    return name.endswith(".db") and (
        name.startswith(("ascend_pytorch_profiler", "msprof_", "ascend_mindspore_profiler"))
    )


def read_json_object(path: Path) -> dict:
    """profiler_info_N.json / profiler_metadata.json as a dict ({} if unreadable)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _bases(root: Path) -> list[Path]:
    return [root, *(p for pat in ASCEND_DIRS for p in sorted(root.glob(pat)) if p.is_dir())]


def job_rank(root: Path, traces: list[Path] = ()) -> tuple[int | None, str | None]:
    """The job's rank of a torch_npu / MindSpore window, and where it was found: the
    ``distributed_args.rank`` of profiler_metadata.json, then ``rank_id`` / the N of
    profiler_info_N.json, then a ``rank<N>`` in the directory or trace name. Never the device
    id: a 4-rank job on devices 0, 1, 4, 5 has ranks 0-3."""
    for base in _bases(root):
        meta = read_json_object(base / "profiler_metadata.json")
        args = meta.get("distributed_args")
        if isinstance(args, dict) and isinstance(args.get("rank"), int) and args["rank"] >= 0:
            return args["rank"], f"{base.name}/profiler_metadata.json distributed_args.rank"
    for base in _bases(root):
        for p in sorted(base.glob("profiler_info*.json")):
            rid = read_json_object(p).get("rank_id")
            if isinstance(rid, int) and rid >= 0:
                return rid, f"{p.name} rank_id"
            m = re.search(r"profiler_info_(\d+)", p.name)
            if m:
                return int(m.group(1)), p.name
    for p in [root, *traces]:
        m = RANK_IN_NAME.search(p.name)
        if m:
            return int(m.group(1)), f"the name {p.name}"
    return None, None


def _device(root: Path) -> int | None:
    """The device id from PROF_*/device_N (None when absent or ambiguous)."""
    devs = {
        int(m.group(1))
        for base in _bases(root)
        for p in base.glob("PROF_*/device_*")
        if (m := re.fullmatch(r"device_(\d+)", p.name))
    }
    return devs.pop() if len(devs) == 1 else None


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
    subs = sorted(
        (p for p in root.iterdir() if p.is_dir() and WINDOW_RE.match(p.name)),
        key=lambda p: [int(g) for g in WINDOW_RE.match(p.name).groups()],
    )
    if subs:
        return subs
    asc = [p for pat in ASCEND_DIRS for p in sorted(root.glob(pat)) if p.is_dir()]
    if len(asc) > 1:
        return asc
    # other names (e.g. test_rank_0/) that hold an ASCEND_PROFILER_OUTPUT or profiler_info
    outs = sorted(
        p
        for p in root.iterdir()
        if p.is_dir()
        and not p.name.endswith(".tmp")
        and ((p / "ASCEND_PROFILER_OUTPUT").is_dir() or any(p.glob("profiler_info*.json")))
    )
    if len(outs) > 1:
        return outs
    traces = sorted(root.glob("*.pt.trace.json*"))
    if len(traces) > 1:
        return traces
    return []
