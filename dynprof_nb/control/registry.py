"""Finding jobs and attaching to one: the entry point every user interface starts from.

``attach`` picks the controller for what it is given (a job name on this machine, or a
MindSpore config directory) and returns it as a :class:`~dynprof_nb.control.base.Controller`.
"""

from __future__ import annotations

import difflib
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dynprof_nb.contract.segment import (
    NoSuchJob,
    Segment,
    SegmentError,
    check_job_name,
    list_jobs,
    other_users,
    segment_path,
)
from dynprof_nb.control.base import Controller, JobError
from dynprof_nb.control.filemode import FileJob
from dynprof_nb.control.job import Job

if TYPE_CHECKING:
    import pandas as pd

JOBS_COLUMNS = ["job", "ranks", "live", "generation", "owner", "problem"]
log = logging.getLogger("dynprof_nb")

ClusterAttach = Callable[..., Controller]
# ``attach(cluster=...)``: registered by the cluster package, which builds on this one, when it is
# imported (the facade's extensions import it on first use: Dask only for those who ask), so
# control/ imports nothing of cluster/
_CLUSTER: dict[str, ClusterAttach] = {}


def register_cluster_attach(func: ClusterAttach) -> None:
    """Make ``func(job, cluster, security=, allow_insecure=)`` what ``attach(cluster=)`` calls."""
    _CLUSTER["attach"] = func


def _cluster_attach() -> ClusterAttach:
    if "attach" not in _CLUSTER:
        from dynprof_nb.extensions import extend

        extend("cluster_attach")
    return _CLUSTER["attach"]


def attach(
    job: str = "default",
    *,
    create: bool = False,
    cfg_path: str | os.PathLike[str] | None = None,
    prof_path: str | os.PathLike[str] | None = None,
    cluster: Any = None,
    security: Any = None,
    allow_insecure: bool = False,
) -> Controller:
    """Attach to a running job by name.

    A name with no job on this machine is an error listing the jobs there are (a typo must
    not quietly make an empty job); ``create=True`` prepares the job instead, so a window can
    be asked for before the training side starts.

    ``cfg_path`` instead: file mode, a ``FileJob`` over that directory's
    ``profiler_config.json`` for an unmodified MindSpore job (no live status; see
    :mod:`dynprof_nb.control.filemode`), with windows under ``prof_path``.

    ``cluster`` instead: the job on every node of a Dask cluster (a ``distributed.Client`` or
    a scheduler address), a ``ClusterJob`` (see :mod:`dynprof_nb.cluster.controller`). A
    ``tls://`` address takes ``security`` (a ``distributed.security.Security``); a plain
    ``tcp://`` address off this machine is refused unless ``allow_insecure`` (docs/cluster.md).
    """
    if cluster is not None:
        if cfg_path is not None or prof_path is not None:
            raise JobError(
                "cluster= drives the job segments on every node; cfg_path/prof_path "
                "are file mode on this machine. Give one or the other."
            )
        return _cluster_attach()(job, cluster, security=security, allow_insecure=allow_insecure)
    if cfg_path is not None:
        return FileJob(cfg_path, prof_path=prof_path)
    if not create:
        try:
            check_job_name(job)
        except SegmentError as exc:
            raise JobError(str(exc)) from None
        if job not in list_jobs():
            raise JobError(unknown_job_message(job))
    deadline = time.monotonic() + ATTACH_WAIT_S
    while True:
        try:
            handle = Job.open(job, create=create)
            break
        except JobError as exc:
            if create:
                raise
            if job not in list_jobs():  # it was stale and is gone now
                raise JobError(f"{exc} {unknown_job_message(job)}") from None
            if time.monotonic() > deadline:
                raise JobError(
                    f"job {job!r} is listed on this machine but its segment could not be "
                    f"opened for {ATTACH_WAIT_S:g} s: {exc}"
                ) from None
            time.sleep(0.05)  # a segment its first rank is still creating: wait a little
    handle.removes_unjoined = True  # a person's handle: a job no rank joined goes with it
    return handle


ATTACH_WAIT_S = 2.0  # attach() waits this long for a segment being created under its name


def unknown_job_message(job: str) -> str:
    """``no job named X``, the live jobs there are, and how to prepare one on purpose."""
    frame = jobs()
    live = list(frame[frame.live > 0].job) if len(frame) else []
    others = f"live jobs: {', '.join(live)}" if live else "no job on this machine has live ranks"
    close = close_job_names(job, frame)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    users = other_users()
    if users:  # their jobs are closed to us: the name may be one of theirs, so no --create
        who = ", ".join(map(str, users[:4])) + (" ..." if len(users) > 4 else "")
        return (
            f"no job of yours named {job!r} on this machine ({others}).{hint} It may belong "
            f"to another user, whose jobs you cannot see (uid {who} use dynprof_nb here): "
            "attach from that user's account, or check the name."
        )
    return (
        f"no job named {job!r} on this machine ({others}).{hint} If its ranks have all "
        "ended, the job ended with them; its windows stay where it wrote them "
        "(dynprof_nb.load_window(path) loads one). To prepare it before its ranks start, "
        "attach with create=True (--create)."
    )


def close_job_names(job: str, frame: pd.DataFrame | None = None) -> list[str]:
    """Other jobs on this machine whose names are close to ``job`` (a typo's intended name)."""
    frame = jobs() if frame is None else frame
    names = [n for n in (frame.job if len(frame) else []) if n != job]
    return difflib.get_close_matches(job, names, n=1)


def jobs(verbose: bool = False) -> pd.DataFrame:
    """This user's jobs on this machine: ``job, ranks, live, generation, owner, problem``.

    Looking also tidies: a segment whose processes are all gone is reclaimed, and one whose
    job is finished (every rank closed, no request pending) is removed when nobody else has
    it open. Neither is listed. That is logged only with ``verbose``.

    A segment that cannot be used (garbage, cut short, another layout, another owner, a
    planted symlink or FIFO under a job's name) is that job's problem only: it is listed with
    its ``owner`` uid and what is wrong in ``problem`` (empty for a sound job), and left in
    place; :func:`remove_damaged` removes those that are yours.
    """
    import pandas as pd

    rows = []
    for name in list_jobs():
        try:
            seg = Segment.open(name, create=False, quiet=not verbose)
        except NoSuchJob:
            continue  # stale or finished, reclaimed by looking
        except Exception as exc:  # one bad segment is its own job's problem
            rows.append(_damaged_row(name, exc))
            continue
        try:
            slots = seg.slots()
            row = {
                "job": name,
                "ranks": len(slots),
                "live": sum(s.live for s in slots),
                "generation": seg.generation,
                "owner": os.getuid(),
                "problem": "",
            }
        except Exception as exc:
            row = _damaged_row(name, exc)
        finally:
            try:
                removed = seg.close()
            except Exception:
                removed = False
        if removed:
            if verbose:
                log.warning(
                    "dynprof_nb: job %r is finished (no live rank, no pending request); "
                    "removed its segment",
                    name,
                )
            continue
        rows.append(row)
    return pd.DataFrame(rows, columns=JOBS_COLUMNS)


def _damaged_row(name: str, exc: BaseException) -> dict[str, Any]:
    reason = str(exc) if isinstance(exc, SegmentError) else f"{type(exc).__name__}: {exc}"
    return {
        "job": name,
        "ranks": 0,
        "live": 0,
        "generation": 0,
        "owner": _owner(name),
        "problem": reason or type(exc).__name__,
    }


def _owner(name: str) -> int:
    try:
        return os.lstat(segment_path(name)).st_uid
    except OSError:
        return -1


def remove_damaged(frame: pd.DataFrame | None = None) -> list[str]:
    """Remove the damaged job segments (rows of :func:`jobs` with a ``problem``) that belong
    to you; returns their names. Another user's file is never touched: its owner must."""
    frame = jobs() if frame is None else frame
    removed = []
    for row in frame[frame.problem != ""].itertuples():
        if row.owner != os.getuid():
            continue
        try:
            os.unlink(segment_path(row.job))
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("dynprof_nb: cannot remove the damaged segment of %r: %s", row.job, exc)
            continue
        removed.append(row.job)
    return removed


__all__ = ["JobError", "attach", "jobs", "remove_damaged", "unknown_job_message"]
