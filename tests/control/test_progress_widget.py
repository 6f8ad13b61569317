"""The notebook's wait bar: its texts keep their width and the bar takes the rest, so the
description and the ranks' steps no longer wrap onto two ragged lines (seen in JupyterLab with
``%dynprof wait``)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

from tqdm.notebook import tqdm as notebook_tqdm

from dynprof_nb.control.progress import _keep_texts_on_one_line


def test_widget_bar_texts_do_not_shrink_and_the_bar_does():
    with redirect_stdout(io.StringIO()):  # outside a kernel the widget prints its repr
        bar = notebook_tqdm(total=20, desc="job quickstart-1392: window 31741-31750",
                            unit="rank-step")
    try:
        _keep_texts_on_one_line(bar)
        left, progress, right = bar.container.children
        assert left.layout.flex == right.layout.flex == "0 0 auto"
        assert progress.layout.flex == "1 1 auto" and progress.layout.min_width == "60px"
    finally:
        with redirect_stdout(io.StringIO()):
            bar.close()


def test_a_text_bar_is_left_alone():
    from tqdm import tqdm

    bar = tqdm(total=3, file=io.StringIO())
    _keep_texts_on_one_line(bar)  # no container: nothing to do, no error
    bar.close()
