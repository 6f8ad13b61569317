"""A digest of everything the trace readers produce on every fixture, to show a refactor
changes no behaviour.

Loads every window the repository ships or the tests build (``dynprof_nb/samples``, every file
and window directory under ``tests/data``, the builders of ``tests/testdata.py`` and
``tests/ascend_variants.py``), reads every frame and side table, and writes, per window: its
repr before and after loading, every frame's columns, dtypes, a hash of its values and its
attrs, ``sources``, rank/device identity, each warning said (category and message) and each
error raised. Run it before and after a change and compare the two files::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/compare_frames.py /tmp/before.json
    PYTHONPATH=$PWD .venv/bin/python benchmarks/compare_frames.py /tmp/after.json \
        --against /tmp/before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from dynprof_nb.traces import load_trace, load_window  # noqa: E402

FRAMES = ("events", "ops", "steps", "kernels", "memory", "communication")
TEXT_FILES = (".json", ".gz", ".csv", ".txt", ".db")
#: the keys TraceWindow adds to each ``sources`` note to say who built the frame (issue 24)
PROVENANCE = ("source", "provider", "path")


def frame_digest(df: pd.DataFrame) -> dict[str, Any]:
    """Columns, dtypes, a hash of every value (index included) and attrs of one frame."""
    try:
        values = pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes()
    except TypeError:  # unhashable cells (lists, dicts): their repr stands in
        values = df.astype(str).to_csv().encode()
    return {
        "rows": len(df),
        "columns": [str(c) for c in df.columns],
        "dtypes": [str(t) for t in df.dtypes],
        "values": hashlib.sha256(values).hexdigest(),
        "index": str(df.index.dtype),
        "attrs": repr(sorted(df.attrs.items())) if df.attrs else "",
    }


def _scrub(value: Any, tmp: str) -> Any:
    """A temporary directory's name stands as ``<tmp>`` so two runs compare."""
    return json.loads(json.dumps(value, default=str).replace(tmp, "<tmp>"))


def _call(out: dict, key: str, fn) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = fn()
            out[key] = frame_digest(value) if isinstance(value, pd.DataFrame) else value
        except Exception as exc:  # noqa: BLE001  (the error is part of the behaviour)
            out[key] = {"error": type(exc).__name__, "message": str(exc)}
    if caught:
        out[key + ".warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]


def _split_provenance(value: Any, into: list) -> Any:
    """``value`` (a sources dict) without the provenance keys of its notes, which go to ``into``."""
    if isinstance(value, dict):
        if "files" in value:
            into.append({k: value[k] for k in PROVENANCE if k in value})
        return {k: _split_provenance(v, into) for k, v in value.items()
                if not ("files" in value and k in PROVENANCE)}
    if isinstance(value, list):
        return [_split_provenance(v, into) for v in value]
    return value


def window_digest(load, path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    holder: dict[str, Any] = {}

    def opened():
        holder["w"] = load(path)
        return repr(holder["w"])

    _call(out, "load", opened)
    w = holder.get("w")
    if w is None:
        return out
    for kind in FRAMES:
        _call(out, kind, lambda kind=kind: getattr(w, kind))
    _call(out, "links", w.communication_links)
    _call(out, "bandwidth", w.communication_bandwidth)
    _call(out, "memory_copies", w.memory_copies)
    out["tables"] = {k: frame_digest(v) for k, v in sorted(w.tables.items())}
    out["identity"] = {
        "ranks": w.ranks, "rank": w.rank, "device": w.device, "framework": w.framework,
        "format": w.format, "start": w.start_step, "stop": w.stop_step,
        "devices": getattr(w, "devices", None), "config": w.config,
    }
    # the provenance TraceWindow adds to each note (issue 24: "source", "path") is kept apart,
    # so the notes themselves compare with a digest taken before it existed
    provenance: list = []
    out["sources"] = _split_provenance(w.sources, provenance)
    out["provenance"] = provenance
    out["repr"] = repr(w)
    _call(out, "summary", lambda: str(w.summary()))
    return out


def built_windows(tmp: Path) -> list[tuple[str, Path]]:
    """The windows the tests build from the fixtures."""
    import ascend_variants as av
    import testdata as td

    made = []
    td.write_builtin_window(tmp / "builtin", rank=0, slow_step=2)
    td.write_builtin_window(tmp / "builtin", rank=1, extra_ops={"allreduce_x": 5.0})
    made += [("builtin-2rank", tmp / "builtin"),
             ("builtin-rank1", tmp / "builtin" / "rank1_start1_stop3")]
    made.append(("npu-text-3", td.npu_text_window(tmp / "npu3", 3)))
    for form in ("db", "text"):
        made.append((f"four-rank-{form}", av.four_rank_job(tmp / f"four_{form}", form)))
    return made


def fixture_paths() -> list[Path]:
    roots = [REPO / "dynprof_nb" / "samples", REPO / "tests" / "data"]
    files = sorted(p for r in roots for p in r.rglob("*")
                   if p.is_file() and p.name.endswith(TEXT_FILES) and p.name != "SOURCES.md")
    dirs = sorted({p for r in roots for p in r.rglob("*") if p.is_dir()} | set(roots))
    return files + dirs


def digest_all() -> dict[str, Any]:
    result: dict[str, Any] = {}
    for p in fixture_paths():
        key = str(p.relative_to(REPO))
        load = load_trace if p.is_file() else load_window
        result[key] = window_digest(load, p)
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in built_windows(Path(tmp)):
            result["built:" + name] = _scrub(window_digest(load_window, path), tmp)
    return json.loads(json.dumps(result, default=str, sort_keys=True))


def count_frames(digest: dict[str, Any]) -> int:
    return sum(1 for w in digest.values() for v in w.values()
               if isinstance(v, dict) and "values" in v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--against", type=Path, help="an earlier digest to compare with")
    ap.add_argument("--new", default="provenance",
                    help="comma-separated keys the earlier digest may lack (added since)")
    ap.add_argument("--ignore", default="",
                    help="comma-separated keys not compared (e.g. provenance, when a change is "
                         "to what the provenance says)")
    args = ap.parse_args()
    digest = digest_all()
    args.out.write_text(json.dumps(digest, indent=1, sort_keys=True))
    print(f"{len(digest)} windows, {count_frames(digest)} frames -> {args.out}")
    if args.against is None:
        return 0
    before = json.loads(args.against.read_text())
    new = set(filter(None, args.new.split(",")))
    ignore = set(filter(None, args.ignore.split(",")))
    diffs = [(w, k) for w in sorted(set(before) | set(digest))
             for k in sorted(set(before.get(w, {})) | set(digest.get(w, {})))
             if k not in ignore and before.get(w, {}).get(k) != digest.get(w, {}).get(k)
             and not (k in new and k not in before.get(w, {}))]
    for w, k in diffs[:40]:
        print(f"DIFFERS {w} [{k}]:\n  before {before.get(w, {}).get(k)!s:.300}\n"
              f"  after  {digest.get(w, {}).get(k)!s:.300}")
    print(f"{len(diffs)} differences against {args.against}" if diffs
          else f"identical to {args.against}")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
