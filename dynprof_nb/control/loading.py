"""Which window ``load()`` means: the window asked for, or one the user chose, never an older
one in silence.

``load()`` with no choice loads the window the job was last asked for (the config's window, of
its run): once recorded, that one; while it is still pending, ``load()`` waits for it with
``wait()``'s progress (Ctrl-C stops only the waiting), or with ``wait=False`` raises
:class:`WindowPending` naming what is pending. With no window asked (none yet, or stopped) it
is the latest complete window. An older window is the user's explicit choice: ``index=``
(a row of ``windows()``), ``run=`` (the job's run, see :mod:`dynprof_nb.control.runs`) or
``steps=(first, last)``.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

from dynprof_nb.contract import window_dirs
from dynprof_nb.control.errors import JobError
from dynprof_nb.userframe import user_stacklevel

if TYPE_CHECKING:
    import pandas as pd

    from dynprof_nb.traces import TraceWindow

# ranks' windows with the same steps that started this close together are one window (s)
SAME_WINDOW_SLACK_S = 600
WINDOW_COLUMNS = ["rank", "start", "stop", "status", "path"]
# config: the keys a window was recorded with that differ from the defaults
# (window_dirs.config_delta)
# reason: why the window was asked for (a trigger's sentence), "" for a person's window
# run: the job's run the rank recorded it in (a job restarted under its name is a new run)
WINDOW_EXTRA_COLUMNS = [
    "backend",
    "started_at",
    "ended_at",
    "error",
    "config",
    "reason",
    "run",
    # when that run began: two runs of one number (a job whose segment was made anew counts its
    # runs from 1 again) are told apart by it
    "run_started_at",
    "recent",  # "trigger"/"asked": a recent-steps record (training/recent.py), "" a window
]
BUSY_STATES = ("armed", "recording", "saving")
ASKED_SLACK_S = 1.0  # a window begun this long before it was asked is still taken (clocks)


class OtherRunWarning(UserWarning):
    """The window ``load()`` took as the latest is of another run than the live one."""


def warn_other_run(frame: pd.DataFrame, paths: list[str], live_started: float | None) -> None:
    """Say so when the latest window (``paths``) was recorded by another run than the live one
    (its run began at ``live_started``, wall clock s): the live run has no window yet, and a
    window of the dead run's steps is not what the job is doing now."""
    import pandas as pd

    if live_started is None or not paths:
        return
    rows = frame[frame["path"].isin(paths)]
    began = rows["run_started_at"].dropna()
    if began.empty:
        return
    live = pd.Timestamp(live_started, unit="s")
    if (abs(began - live) <= pd.Timedelta(seconds=1e-3)).all():
        return
    row = rows.iloc[0]
    warnings.warn(
        f"the latest window (steps {row.start}-{row.stop}) is of an earlier run, begun "
        f"{began.iloc[0]:%Y-%m-%d %H:%M:%S} UTC, not of the live run begun {live:%H:%M:%S} UTC: "
        "the live run has recorded no window yet (start() one)",
        OtherRunWarning,
        stacklevel=user_stacklevel(),
    )


class WindowPending(JobError):
    """``load(wait=False)`` while the window asked for is not recorded yet."""


Asked = tuple[int, int, "int | None"]  # (first step, last step, run or None)


def asked_text(asked: Asked) -> str:
    first, last, run = asked
    return f"window {first}-{last}" + (f" of run {run}" if run else "")


def window_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """``windows()`` rows as a frame (times as datetimes, the run a nullable int)."""
    import pandas as pd

    frame = pd.DataFrame(rows, columns=WINDOW_COLUMNS + WINDOW_EXTRA_COLUMNS)
    for col in ("started_at", "ended_at", "run_started_at"):
        frame[col] = pd.to_datetime(frame[col], unit="s", errors="coerce")
    frame["run"] = pd.to_numeric(frame["run"], errors="coerce").astype("Int64")
    frame["recent"] = [v if isinstance(v, str) else "" for v in frame["recent"]]
    frame["paired"] = paired_windows(frame)
    return frame


def paired_windows(frame: pd.DataFrame) -> list[str]:
    """For a recent-steps record the trigger kept: the path of the same rank's window that
    trigger then recorded (same reason, the first window after the record's last step), else
    "" (the record is written as that window starts, so steps order them, not times)."""
    out = []
    windows = frame[frame["recent"] == ""]
    for row in frame.itertuples():
        found = ""
        if row.recent == "trigger" and row.reason:
            after = windows[
                (windows["rank"] == row.rank)
                & (windows["reason"] == row.reason)
                & (windows["start"] > row.stop)
            ].sort_values("start")
            found = str(after.iloc[0].path) if not after.empty else ""
        out.append(found)
    return out


def asked_steps(frame: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The steps each window was asked for: its directory's name (a window file mode moved
    records other steps but keeps the name of the window asked, as MindSpore does), else the
    steps recorded."""
    import pandas as pd

    named = frame.path.astype(str).map(_named_steps)
    first = pd.Series([n[0] for n in named], index=frame.index).fillna(frame.start)
    last = pd.Series([n[1] for n in named], index=frame.index).fillna(frame.stop)
    return first, last


def _named_steps(path: str) -> tuple[int | None, int | None]:
    name = os.path.basename(path.rstrip("/"))
    hidden = window_dirs.TMP_RE.match(name) or window_dirs.FAILED_RE.match(name)
    m = window_dirs.WINDOW_RE.match(hidden["name"] if hidden else name)
    return (int(m["start"]), int(m["stop"])) if m else (None, None)


def ranks_busy(status: pd.DataFrame, generation: int) -> bool | None:
    """Whether a live rank has not applied ``generation`` yet or is still at its window
    (what ``wait()`` waits for); None when the controller cannot see its ranks (file mode)."""
    if not len(status) or status.alive.isna().all():
        return None
    live = status[status.alive.fillna(False).astype(bool) & (status["rank"] >= 0)]
    applied = live.generation.fillna(generation) < generation
    return bool((applied | live.state.isin(BUSY_STATES)).any())


def current_run(status: pd.DataFrame) -> int | None:
    """The run of the live ranks (None when none says one)."""
    if "run" not in status or not len(status):
        return None
    runs = status[status.alive.fillna(False).astype(bool)].run.dropna()
    return int(runs.max()) if len(runs) else None


def load_asked(ctl: Any, steps: tuple[int, int], wait: bool, timeout: float | None) -> TraceWindow:
    """The window ``ctl`` (a controller) was last asked for: now when recorded, after
    ``ctl.wait()`` while it is pending; :class:`WindowPending` with ``wait=False``."""
    status = ctl.status()
    asked = (*steps, current_run(status))
    since = status.attrs.get("asked_at")
    busy = ranks_busy(status, ctl.generation)
    rows = of_asked(ctl.windows(), asked, since)
    done = bool((rows.status == "complete").any())
    if busy or (busy is None and not done):
        if not wait:
            raise pending_error(ctl.name, asked, status, describe_rows(ctl.windows()))
        ctl.wait(timeout=timeout)
        status = ctl.status()
        rows = of_asked(ctl.windows(), asked, since)
    if not (rows.status == "complete").any():
        raise not_recorded(ctl.name, asked, status)
    return load_paths(*paths_of(ctl.name, rows, asked_text(asked)), name=ctl.name)


def choose(
    frame: pd.DataFrame,
    index: int | None = None,
    run: int | None = None,
    steps: tuple[int, int] | None = None,
) -> pd.DataFrame:
    """The rows of ``windows()`` the user chose: of ``run``, with ``steps`` (recorded or
    asked), and (``index``) the one row at that position among them."""
    chosen = frame
    if run is not None:
        chosen = chosen[(chosen["run"] == run).fillna(False).astype(bool)]
    if steps is not None:
        first, last = _steps(steps)
        recorded = (chosen.start == first) & (chosen.stop == last)
        named = asked_steps(chosen)
        chosen = chosen[recorded | ((named[0] == first) & (named[1] == last))]
    if index is not None:
        if isinstance(index, bool) or not isinstance(index, int):
            raise JobError(f"index: got {index!r}; expected a row number of windows().")
        if not -len(chosen) <= index < len(chosen):
            raise JobError(f"no window {index}: {_what(run, steps)} lists {len(chosen)}.")
        chosen = chosen.iloc[[index]]
    return chosen


def _steps(steps: Any) -> tuple[int, int]:
    try:
        first, last = (int(s) for s in steps)
    except (TypeError, ValueError):
        raise JobError(f"steps: got {steps!r}; expected (first, last), e.g. (200, 204).") from None
    return first, last


def describe_choice(run: int | None, steps: Any) -> str:
    """``run=1, steps=(200, 204)``: what the user chose, as they wrote it."""
    parts = ([f"run={run}"] if run is not None else []) + (
        [f"steps={tuple(steps)}"] if steps is not None else []
    )
    return ", ".join(parts)


def _what(run: int | None, steps: Any) -> str:
    parts = describe_choice(run, steps)
    return f"windows({parts})" if parts else "windows()"


def of_asked(frame: pd.DataFrame, asked: Asked, since: float | None = None) -> pd.DataFrame:
    """The rows of the window asked: its steps (as asked: a window file mode moved is named
    after them), its run (rows of windows that do not say their run are taken) and, with
    ``since`` (when the config was last written, wall clock s), those ended since when there
    are any: a window of the same steps from before (a job whose segment was made anew counts
    its runs from 1 again) is not it. (A later ``set()`` rewrites the config with the window
    in it, so an older row is not refused outright.)"""
    import pandas as pd

    first, last, run = asked
    rows = frame[asked_steps(frame)[0] == first]
    if run:
        rows = rows[(rows["run"].isna() | (rows["run"] == run)).fillna(True).astype(bool)]
    if since:
        # ended, not begun: a stop() rewrites the config while the window records, and the
        # window it ends began before that write (test_live_browser's Stop lost rank 0 so)
        after = rows.ended_at >= pd.Timestamp(since - ASKED_SLACK_S, unit="s")
        if after.any():
            rows = rows[rows.ended_at.isna() | after]
    return rows


def paths_of(job: str, rows: pd.DataFrame, what: str) -> tuple[list[str], list[str]]:
    """The complete ranks' paths of the window in ``rows`` and what is missing; raises
    naming ``what`` when no rank recorded it whole."""
    paths, missing = latest_window(rows)
    if not paths:
        states = "; ".join(
            f"rank {r.rank}: {r.status}" + (f" ({r.error})" if isinstance(r.error, str) else "")
            for r in rows.itertuples()
        )
        states = f": {states}" if states else ""
        raise JobError(f"job {job!r}: {what} has no complete rank{states}.")
    return paths, missing


def not_recorded(job: str, asked: Asked, status: pd.DataFrame) -> JobError:
    """The asked window is not on disk and no rank is at work on it: why, from the ranks."""
    errors = [
        f"rank {r.rank}: {r.error}"
        for r in status.itertuples()
        if isinstance(r.error, str) and r.error
    ]
    live = bool(len(status)) and status.alive.fillna(False).astype(bool).any()
    if not live:
        return WindowPending(
            f"job {job!r}: {asked_text(asked)} is not recorded: no rank of the job is running "
            "(it is recorded when they start). Load an older window by choice: load(index=-1)."
        )
    why = "; ".join(errors[:4]) or "no rank recorded it"
    return JobError(
        f"job {job!r}: {asked_text(asked)} was not recorded ({why}). "
        "Ask for another window, or load an older one by choice: load(index=-1)."
    )


def pending_error(job: str, asked: Asked, status: pd.DataFrame, latest: str) -> WindowPending:
    """``load(wait=False)``: what is pending, where the ranks are, and the ways out."""
    live = status[status.alive.fillna(False).astype(bool)] if len(status) else status
    where = ", ".join(
        f"rank {r.rank} {r.state} at step {r.step}" for r in live.head(4).itertuples()
    )
    older = f" or load an older window by choice (the latest recorded: {latest})" if latest else ""
    return WindowPending(
        f"job {job!r}: {asked_text(asked)} is pending"
        + (f" ({where})" if where else "")
        + f"; load() waits for it (wait=True){older}, e.g. load(index=-1)."
    )


def describe_rows(rows: pd.DataFrame) -> str:
    """``steps 200-204 of run 1``: the latest complete window in ``rows``, or ""."""
    done = rows[rows.status == "complete"]
    if done.empty:
        return ""
    row = done.iloc[-1]
    run = row["run"]
    return f"steps {row.start}-{row.stop}" + ("" if run is None or run != run else f" of run {run}")


def load_paths(paths: Any, missing: list[str], name: str = "") -> TraceWindow:
    """Load these rank directories as one window; never a subset without a word."""
    from dynprof_nb.traces import load_window

    if missing:
        import warnings

        warnings.warn(
            f"job {name!r}: the window is loaded without {', '.join(missing)}: only "
            f"{len(paths)} rank(s) wrote it whole.",
            stacklevel=user_stacklevel(),
        )
    if isinstance(paths, list) and len(paths) == 1:
        paths = paths[0]
    return load_window(paths)


def latest_window_paths(frame: pd.DataFrame) -> list[str]:
    """The rank directories of the latest complete window in a ``windows()`` frame, one per
    rank: see :func:`latest_window`."""
    return latest_window(frame)[0]


def latest_window(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """``(paths, missing)`` of the latest window with a complete rank: the rank directories of
    every rank that recorded it (same first step, started within ``SAME_WINDOW_SLACK_S``;
    ranks that ended it at another step too, e.g. one that read a stop late), and what is
    missing from it, in words ("rank 1 (incomplete: ...)")."""
    import pandas as pd

    if "recent" in frame:  # a recent-steps record is loaded by name (job.recent()), not as latest
        frame = frame[frame["recent"].fillna("").astype(str) == ""]
    complete = frame[frame.status == "complete"]
    if complete.empty:
        return [], []
    latest = complete.iloc[-1]
    slack = pd.Timedelta(seconds=SAME_WINDOW_SLACK_S)
    near = frame.started_at.isna() | (
        (frame.started_at >= latest.started_at - slack)
        & (frame.started_at <= latest.started_at + slack)
    )
    group = frame[(frame.start == latest.start) & near]
    done = group[group.status == "complete"].drop_duplicates("rank", keep="last")
    done = done.sort_values("rank")
    missing = []
    for rank, rows in group[~group["rank"].isin(done["rank"])].groupby("rank"):
        row = rows.iloc[-1]
        why = f": {row.error}" if isinstance(getattr(row, "error", None), str) and row.error else ""
        missing.append(f"rank {rank} ({row.status}{why})")
    return list(done.path), missing
