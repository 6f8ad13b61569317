"""Finding jobs and attaching to one: the entry point every user interface starts from.

``attach`` picks the controller for what it is given (a job name on this machine, or a
MindSpore config directory) and returns it as a :class:`~dynprof_nb.control.base.Controller`.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from dynprof_nb.control.base import Controller, JobError
from dynprof_nb.control.filemode import FileJob
from dynprof_nb.control.job import Job
from dynprof_nb.segment import Segment, SegmentError, list_jobs

if TYPE_CHECKING:
    import pandas as pd

JOBS_COLUMNS = ["job", "ranks", "live", "generation"]
log = logging.getLogger("dynprof_nb")


def attach(job: str = "default", *, create: bool = True,
           cfg_path: str | os.PathLike[str] | None = None,
           prof_path: str | os.PathLike[str] | None = None) -> Controller:
    """Attach to a job by name. With ``create`` (the default) a job that has not started yet
    is created, so a window can be asked for before the training side runs.

    ``cfg_path`` instead: file mode, a ``FileJob`` over that directory's
    ``profiler_config.json`` for an unmodified MindSpore job (no live status; see
    :mod:`dynprof_nb.control.filemode`), with windows under ``prof_path``.
    """
    if cfg_path is not None:
        return FileJob(cfg_path, prof_path=prof_path)
    return Job.open(job, create=create)


def jobs(verbose: bool = False) -> pd.DataFrame:
    """This user's jobs on this machine: ``job, ranks, live, generation``.

    Looking also tidies: a segment whose processes are all gone is reclaimed, and one whose
    job is finished (every rank closed, no request pending) is removed when nobody else has
    it open. Neither is listed. That is logged only with ``verbose``.
    """
    import pandas as pd

    rows = []
    for name in list_jobs():
        try:
            seg = Segment.open(name, create=False, quiet=not verbose)
        except (SegmentError, OSError, ValueError):
            continue
        try:
            slots = seg.slots()
            row = {"job": name, "ranks": len(slots), "live": sum(s.live for s in slots),
                   "generation": seg.generation}
        finally:
            removed = seg.close()
        if removed:
            if verbose:
                log.warning("dynprof_nb: job %r is finished (no live rank, no pending request); "
                            "removed its segment", name)
            continue
        rows.append(row)
    return pd.DataFrame(rows, columns=JOBS_COLUMNS)


__all__ = ["JobError", "attach", "jobs"]
