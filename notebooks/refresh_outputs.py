"""Re-run the notebooks and store only the outputs nbval checks.

    .venv/bin/python notebooks/refresh_outputs.py [NAME.ipynb ...]

Each notebook is executed in this environment's Python from its own folder. Cells marked
``# NBVAL_CHECK_OUTPUT`` keep their outputs and execution counts (what ``pytest --nbval-lax``
compares, after ``sanitize.cfg``); every other cell is cleared, so the committed notebooks hold
no pids, paths or timings.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
CHECK = "# NBVAL_CHECK_OUTPUT"


def refresh(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if not any(line.strip() == CHECK for line in cell.source.splitlines()):
            cell.execution_count = None  # nbval compares only cells that ran and are checked
            cell.outputs = []
    nbformat.write(nb, path)
    print(f"{path.name}: refreshed")


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(p.name for p in HERE.glob("*.ipynb"))
    for name in names:
        refresh(HERE / name)
