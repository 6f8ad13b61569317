"""Drop-in for MindSpore's ``DynamicProfilerMonitor``: switch a script with one import line.

    -from mindspore.profiler import DynamicProfilerMonitor
    +from dynprof_nb import DynamicProfilerMonitor

    dp = DynamicProfilerMonitor(cfg_path="./cfg", output_path="./prof", poll_interval=2)
    model.train(10, data, callbacks=[dp])      # or dp.step() once per iteration

The constructor is MindSpore's. The file at ``cfg_path`` keeps working (each ``step()`` looks
at it, so an edit made before a ``step()`` is applied by that ``step()``; a relay thread on one
process per node also reads it every ``poll_interval``), and the job is also a live job:
``dynprof_nb.attach(job_name_for(cfg_path))`` gives status and windows, as does
``dynprof_nb.attach(cfg_path=...)`` for the file. Step numbering is exact in both call styles
(the original records 21..31 for 20..30 in ``step()`` mode), with file mode's one exception: a
window the file asks for after its first step has begun starts at the next step with the same
length, in the directory named after the window asked for, as MindSpore's ``step()`` does (see
:mod:`dynprof_nb.control.filemode`).

When MindSpore is installed the class is a ``mindspore.train.Callback`` (``Model.train``
accepts only those), and so is a plain ``Monitor`` created in a process that has imported
MindSpore.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

from dynprof_nb.contract.config import ProfilerConfig, config_file
from dynprof_nb.training.callback import mindspore_callback
from dynprof_nb.training.monitor import FileModeMonitor, rank_from_env

__all__ = ["DynamicProfilerMonitor", "job_name_for"]


def job_name_for(cfg_path: str | os.PathLike[str]) -> str:
    """The job name a drop-in monitor uses for ``cfg_path``: the names of the config directory
    and of the directory that holds it, which a person recognises (``llama-cfg-1a2b3c`` for
    ``/home/me/llama/cfg``), and a short digest of the whole path, so two runs of one script
    from two copies of a project are two jobs (``DYNPROF_JOB`` in the environment wins).

    Only the path counts, not the script or the process: every rank, and a notebook that calls
    this with the same directory, must arrive at the same name."""
    if os.environ.get("DYNPROF_JOB"):
        return os.environ["DYNPROF_JOB"]
    real = os.path.realpath(os.fspath(cfg_path)).rstrip("/") or "/"
    parent, base = os.path.split(real)
    words = [_name_word(os.path.basename(parent))[:24], _name_word(base)[:24] or "cfg"]
    # fsencode: a directory's name need not be UTF-8 (its bytes come back as surrogates)
    digest = hashlib.sha1(os.fsencode(real)).hexdigest()[:6]
    return "-".join([w for w in words if w] + [digest])


def _name_word(text: str) -> str:
    """A directory's name as part of a job name: other characters become '-', and the name
    starts and ends with a letter or digit."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", text).strip("-._")


class DynamicProfilerMonitor(FileModeMonitor):
    """MindSpore's ``DynamicProfilerMonitor(cfg_path, output_path, poll_interval)`` on
    dynprof_nb: exact windows, validated config, live status, analysis off the training step.

    ``cfg_path`` is the directory of ``profiler_config.json`` (a default file is written on
    rank 0 when there is none, as MindSpore does); ``output_path`` is where windows go unless
    the file's ``prof_path`` says otherwise. An edit complete in the file before a ``step()``
    (or ``step_end``) is applied by that call, whatever the step time (one ``fstat`` per step,
    see :class:`~dynprof_nb.training.monitor.FileModeMonitor`); ``poll_interval`` (seconds) is
    how often the relay also reads the file, for edits made on another host of a shared
    filesystem (default 0.5 s, see :mod:`dynprof_nb.control.relay`; MindSpore's is 2 s).
    ``job`` defaults to :func:`job_name_for` ``(cfg_path)``.
    """

    def __init__(
        self,
        cfg_path: str | os.PathLike[str] | None = None,
        output_path: str | os.PathLike[str] | None = None,
        poll_interval: float | None = None,
        *,
        job: str | None = None,
        rank: int | None = None,
        backend: str | None = None,
        **kwargs: Any,
    ) -> None:
        if cfg_path is None:
            raise ValueError(
                "DynamicProfilerMonitor needs cfg_path, the directory of "
                "profiler_config.json (as MindSpore's does)."
            )
        if backend is None:
            backend = "mindspore" if mindspore_callback() is not None else "auto"
        _write_default_file(cfg_path, rank)
        super().__init__(
            job=job or job_name_for(cfg_path),
            rank=rank,
            output_path=output_path or "./dyn_profile_data",
            backend=backend,
            cfg_path=cfg_path,
            poll_interval=poll_interval,
        )
        self.cfg_path = cfg_path
        self.kwargs = kwargs  # MindSpore passes extra keywords through; keep them visible
        if self.rank == 0:  # once per job, where the user looks for MindSpore's own lines
            _say(
                f"dynprof_nb: this is job {self.job!r} (%dynprof attach {self.job}; dynprof status)"
            )

    def window_edge(self, text: str) -> None:
        """MindSpore's own lines at a window's edges, as its monitor prints them
        (``[Dynamic Profiler] Rank 0 Dynamic profiler start at step 10, will stop at step
        19``), so logs and scripts that look for them find them."""
        _say(f"[Dynamic Profiler] {text}")


def _say(text: str) -> None:
    """One line on stdout; a closed or full stdout is not the training loop's problem."""
    try:
        print(text, flush=True)
    except (OSError, ValueError):
        pass


def _write_default_file(cfg_path: str | os.PathLike[str], rank: int | None) -> None:
    """Rank 0 writes a default ``profiler_config.json`` when there is none, as MindSpore does,
    so the user has a file to edit."""
    path = config_file(cfg_path)
    if (rank_from_env() if rank is None else rank) == 0 and not path.exists():
        try:
            ProfilerConfig().save(path)
        except OSError:
            pass  # the relay reports the missing file
