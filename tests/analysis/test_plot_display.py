"""A figure returned from a cell is an image in a fresh notebook, with no setup cell: no
``%matplotlib inline``, no pyplot import. A real kernel (jupyter_client), as a frontend runs it;
what comes back is what JupyterLab would draw."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

import pytest
from matplotlib.image import imread

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "tests" / "data" / "ascend_real" / "cluster_2rank"  # has link bandwidths
PLOTS = {
    "samples.load('pytorch_cpu')": ("plot_timeline", "plot_ops", "plot_steps", "plot_memory"),
    "samples.load('ascend_db')": ("plot_rank_steps",),
    f"dynprof_nb.load_window({str(CLUSTER)!r})": ("plot_bandwidth",),
}


@pytest.fixture(scope="module")
def kernel():
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3",
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
    yield kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def _result(kc, code: str) -> dict:
    """The cell's execute_result data (what the frontend displays for its last value)."""
    data: dict = {"images": 0}
    errors: list[str] = []

    def hook(msg: dict) -> None:
        if msg["msg_type"] in ("execute_result", "display_data"):
            data["images"] += "image/png" in msg["content"]["data"]
        if msg["msg_type"] == "execute_result":
            data.update(msg["content"]["data"])
        elif msg["msg_type"] == "error":
            errors.append("\n".join(msg["content"]["traceback"]))

    reply = kc.execute_interactive(code, output_hook=hook, timeout=120)
    assert reply["content"]["status"] == "ok", errors
    return data


@pytest.mark.parametrize("window,method", [(w, m) for w, ms in PLOTS.items() for m in ms])
def test_a_returned_figure_is_an_image_in_a_fresh_kernel(kernel, window, method):
    code = f"import dynprof_nb\nfrom dynprof_nb import samples\n{window}.{method}()"
    data = _result(kernel, code)
    assert "image/png" in data, data.get("text/plain")
    pixels = imread(io.BytesIO(base64.b64decode(data["image/png"])), format="png")
    assert pixels.shape[0] > 100 and pixels.shape[1] > 300
    assert (pixels[..., :3] < 0.9).any(axis=-1).mean() > 0.01  # something drawn, not a blank
    modules = _result(kernel, "import sys\n'matplotlib.pyplot' in sys.modules")
    assert modules["text/plain"] == "False"  # the plots never touched pyplot's global state


def test_with_the_inline_backend_a_figure_is_still_one_image(kernel):
    _result(kernel, "%matplotlib inline")
    data = _result(kernel, "from dynprof_nb import samples\nsamples.load('pytorch_cpu').plot_ops()")
    assert data["images"] == 1


def test_no_notebook_needs_a_matplotlib_setup_cell_or_has_an_empty_cell():
    import json

    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        code = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                if c["cell_type"] == "code"]
        assert not [c for c in code if "%matplotlib" in c], path.name
        assert all(c.strip() for c in code), f"{path.name} has an empty code cell"
