"""Profile a block of code in *this* process: what ``%%dynprof`` runs around a cell.

The same backends and the same on-disk window as a training rank's (``rank0_start1_stopN`` with
its ``window.json``), so a cell's window loads, lists and compares like any other. A block is
one step; a loop inside it can mark its own with ``prof.step()`` (say how many with ``steps``, so
every backend labels them steps 1..N).

>>> with dynprof_nb.profile_block(with_stack=True) as prof:
...     train_one_batch()
>>> prof.window.summary()
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dynprof_nb.contract import window_dirs
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.training.backends import make_backend, resolve_backend

__all__ = ["LocalProfile", "profile_block"]

DEFAULT_OUTPUT = "./dyn_profile_data/local"


class LocalProfile:
    """The handle a ``profile_block`` yields; after the block, ``path`` and ``window`` are set."""

    def __init__(self, backend: Any, directory: Path, manifest: dict[str, Any]) -> None:
        self._backend = backend
        self._tmp = directory
        self._manifest = manifest
        self.steps = 0
        self.path: Path | None = None
        self.error: BaseException | None = None
        self._window: Any = None

    def step(self) -> None:
        """End a step inside the block (a loop of several steps); the block's end ends the last."""
        self.steps += 1
        self._backend.step(self.steps)

    @property
    def window(self) -> Any:
        """The recorded window as a ``TraceWindow`` (loaded once, on first use)."""
        if self.path is None:
            raise RuntimeError("the block has not finished yet; use the window after it.")
        if self._window is None:
            from dynprof_nb.traces import load_window

            self._window = load_window(self.path)
        return self._window

    def __repr__(self) -> str:
        where = self.path or "recording"
        return f"<LocalProfile {self.steps} step(s), {self._backend.name}, {where}>"


@contextmanager
def profile_block(
    config: ProfilerConfig | None = None,
    *,
    steps: int = 1,
    backend: str = "builtin",
    output: str | Path = DEFAULT_OUTPUT,
    job: str = "local",
    **changes: Any,
) -> Iterator[LocalProfile]:
    """Record the code in the ``with`` block with a backend and write it as a window.

    ``changes`` are config keys (``with_stack=True``, ``profile_memory=True`` ...) applied to
    ``config``; the window is steps ``1..steps``. The end of the block ends the last step unless
    the code already ended ``steps`` of them. The window is written even when the block raises
    (the exception goes on), so a failing cell can still be looked at.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: got {steps!r}; expected a number of steps >= 1.")
    cfg = (config or ProfilerConfig()).update(**changes, start_step=1, stop_step=steps)
    name = resolve_backend(backend)
    root = window_dirs.output_root(cfg.prof_path, output)
    tmp = window_dirs.create_window_dir(root, 0, 1, steps)
    manifest = window_dirs.new_manifest(
        job=job, rank=0, start=1, stop=steps, backend=name, config=cfg.to_dict()
    )
    window_dirs.write_manifest(tmp, manifest)
    recorder = make_backend(name)
    handle = LocalProfile(recorder, tmp, manifest)
    recorder.start(tmp, cfg, 1, {"job": job, "rank": 0, "world_size": 1})
    try:
        yield handle
    except BaseException as exc:
        handle.error = exc
        raise
    finally:
        if handle.steps < steps:
            handle.step()
        recorder.stop()
        recorder.save()
        last = handle.steps
        handle.path = window_dirs.publish(
            tmp,
            dict(
                manifest,
                stop_step=last,
                requested_stop_step=steps,
                status="complete",
                ended_at=time.time(),
            ),
        )
