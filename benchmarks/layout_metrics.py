"""The layout's numbers (issue 31): imports of another module's private names, import cycles
counting ``TYPE_CHECKING`` ones, classes of more than 30 methods, and functions of 60+ lines
per 1,000 lines, for the package and for its parts.

Uses the import graph of ``tests/test_layout.py`` (the rules the test enforces)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/layout_metrics.py
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import test_layout as layout  # noqa: E402

LONG = layout.LONG_LINES
MANY = layout.MAX_METHODS
PARTS = ("traces", "traces/formats", "traces/cache", "analysis", "cluster", "control", "ui",
         "training", "training/monitor.py")


def _functions(tree: ast.AST) -> list[ast.AST]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def file_metrics(path: Path) -> dict[str, object]:
    """Lines, long functions and big classes of one file."""
    text = path.read_text()
    tree = ast.parse(text)
    long_fns = [f"{f.name}:{f.lineno}" for f in _functions(tree)
                if f.end_lineno - f.lineno + 1 >= LONG]
    big = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            methods = [n for n in node.body
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if len(methods) > MANY:
                big.append(f"{node.name} ({len(methods)} methods)")
    return {"lines": len(text.splitlines()), "long": long_fns, "big": big}


def part_metrics(paths: list[Path]) -> dict[str, object]:
    each = [file_metrics(p) for p in paths]
    lines = sum(m["lines"] for m in each)
    long_fns = sum(len(m["long"]) for m in each)
    return {
        "files": len(paths),
        "lines": lines,
        "long_functions": long_fns,
        "long_per_1k": round(1000 * long_fns / lines, 2) if lines else 0.0,
        "big_classes": [c for m in each for c in m["big"]],
    }


def main() -> int:
    pkg = layout.PACKAGE
    private = layout.private_imports()
    cycle = layout.find_cycle(layout.import_graph(type_checking=True))
    everything = sorted(pkg.rglob("*.py"))
    print(f"private-name imports: {len(private)}")
    for p in private:
        print("  " + p)
    print("import cycles (TYPE_CHECKING counted): " + (" -> ".join(cycle) if cycle else "0"))
    whole = part_metrics(everything)
    print(f"package: {whole['files']} files, {whole['lines']} lines, "
          f"{whole['long_functions']} functions of {LONG}+ lines = {whole['long_per_1k']} "
          f"per 1k lines; classes over {MANY} methods: {whole['big_classes'] or 'none'}")
    for part in PARTS:
        target = pkg / part
        paths = [target] if target.is_file() else sorted(target.rglob("*.py"))
        m = part_metrics(paths)
        print(f"  {part:22s} {m['lines']:6d} lines  {m['long_functions']:3d} long  "
              f"{m['long_per_1k']:5.2f}/1k  big classes: {', '.join(m['big_classes']) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
