"""A figure shows once, and not at all when assigned, as a person types the cells under
``%matplotlib inline`` (the backend JupyterLab uses): ``job.plot_step_times()`` against real
rank processes. A figure held by pyplot is shown again by the inline backend when the cell ends
(twice when returned, once when assigned): every plot is built without pyplot."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from jobutil import running_ranks, unique_job, wait_until


@pytest.fixture
def inline_shell():
    """The shell with ``%matplotlib inline`` as in JupyterLab's kernel (ipykernel's shell
    enables no GUI loop for inline: the terminal-less base class would refuse to), undone
    afterwards so that no other test runs under the inline backend."""
    from matplotlib_inline.backend_inline import flush_figures

    ip = InteractiveShell.instance()
    backend = matplotlib.get_backend()
    ip.enable_gui = lambda gui=None: None
    assert ip.run_cell("%matplotlib inline", store_history=False).success
    try:
        yield ip
    finally:
        del ip.enable_gui
        if flush_figures in ip.events.callbacks["post_execute"]:
            ip.events.unregister("post_execute", flush_figures)
        matplotlib.use(backend)


def images_shown(ip: InteractiveShell, cell: str) -> int:
    """How many images the cell shows: those the backend displays when it ends, plus its
    result's (what the display hook shows, formatted as the notebook formats it)."""
    with capture_output() as out:
        result = ip.run_cell(cell, store_history=False)
    assert result.success, result.error_in_exec
    shown = sum("image/png" in o.data for o in out.outputs)
    if result.result is not None:
        data, _ = ip.display_formatter.format(result.result)
        shown += "image/png" in data
    return shown


def test_step_times_figure_shows_once_and_not_when_assigned(inline_shell, tmp_path: Path):
    ip = inline_shell
    with running_ranks(unique_job("figonce"), tmp_path, ranks=2, step_ms=10) as (job, _):
        wait_until(lambda: len(job.step_times()) >= 4, what="step times of both ranks")
        ip.user_ns["job"] = job
        assert images_shown(ip, "job.plot_step_times()") == 1
        assert images_shown(ip, "fig = job.plot_step_times()") == 0
        assert images_shown(ip, "fig") == 1
        ip.user_ns.pop("job")
