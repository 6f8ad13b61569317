"""``job.hang_report()``: which collective a hung job waits in, who never came, and where they are.

On request (or when ``status()`` has named a stall), every live rank whose Monitor has the
Flight Recorder on (``flight_recorder=True``; :mod:`dynprof_nb.training.frdump`) is asked for
its dump through a request file in the private stack directory
(:mod:`dynprof_nb.flight_recorder.layout`); the stacks of every rank are taken at the same
time (``job.stacks()``). The dumps are read with the safe reader and analysed
(:mod:`dynprof_nb.flight_recorder.analysis`), and each rank that never arrived is joined with
its main thread's place in the stacks: "rank 1 never called all_reduce #4 (PG 0 default_pg);
its main thread is in rank1_sleeps ← main ← <module>". A rank that did not answer (stuck
holding the GIL, or gone) is still a member of its groups, so it shows as missing, and its
stack (faulthandler needs no GIL) says where it is. Without a recorder on any rank (the
built-in backend, MindSpore, or ``flight_recorder`` off) the report is the stacks alone, and
says why.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynprof_nb.contract.segment import SlotView
from dynprof_nb.contract.shared_layout import stack_dir
from dynprof_nb.flight_recorder import layout
from dynprof_nb.flight_recorder.reader import Dump
from dynprof_nb.safetext import escape

if TYPE_CHECKING:
    from dynprof_nb.analysis.stacks import StackFrame

ANSWER_TIMEOUT_S = 5.0
FRAMES_SHOWN = 3  # innermost frames of a missing rank's main thread in its line
LINES_SHOWN = 8  # lines of one kind (ranks that never arrived, odd stacks) before "N more"


class HangReport:
    """What ``job.hang_report()`` found: ``.lines`` (one per finding), ``.analysis`` (the stuck
    collectives, or None without a recorder), ``.stacks``, ``.dumps`` (rank → file read),
    ``.notes`` (rank → why it has no dump). ``str()`` is the text; a notebook shows it as such."""

    def __init__(
        self,
        lines: list[str],
        analysis: Any,
        stacks: StackFrame,
        dumps: dict[int, str],
        notes: dict[int, str],
    ) -> None:
        self.lines, self.analysis, self.stacks = lines, analysis, stacks
        self.dumps, self.notes = dumps, notes

    @property
    def verdict(self) -> str:
        return self.lines[0] if self.lines else ""

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def __repr__(self) -> str:
        return str(self)

    def findings(self) -> list[str]:
        """The report without the stacks tree that ends it."""
        return self.lines[: self.lines.index("")] if "" in self.lines else list(self.lines)

    def findings_html(self) -> Any:
        """The findings for a notebook's output area (the panel shows the tree below)."""
        from IPython.display import HTML

        return HTML(f"<pre class='dynprof-hang'>{escape(chr(10).join(self.findings()))}</pre>")

    def _repr_html_(self) -> str:
        return f"<pre>{escape(str(self))}</pre>"


def where(stacks: StackFrame, rank: int) -> str:
    """``f ← g ← h``: the innermost frames of ``rank``'s main thread, or why there are none."""
    rows = stacks[(stacks["rank"] == rank) & (stacks["thread"] == "MainThread")]
    if not len(rows):
        silent = [s for s in getattr(stacks, "silent", []) if s.get("rank") == rank]
        return f"its stack is unknown ({silent[0]['why']})" if silent else "its stack is unknown"
    return f"its main thread is in {_shown(list(rows.sort_values('depth')['function']))}"


def _shown(outermost_first: list[str]) -> str:
    funcs = outermost_first[::-1]
    return " ← ".join(funcs[:FRAMES_SHOWN]) + (" ← ..." if len(funcs) > FRAMES_SHOWN else "")


def _at(steps: dict[int, int], ranks: list[int]) -> str:
    """`` (at step 40)``: where status() last saw ``ranks`` (one step for all, else a range)."""
    seen = sorted({steps[r] for r in ranks if r in steps})
    if not seen:
        return ""
    return f" (at step {seen[0]})" if len(seen) == 1 else f" (at steps {seen[0]}-{seen[-1]})"


def main_threads(stacks: StackFrame, steps: dict[int, int]) -> list[str]:
    """Without a recorder: the ranks grouped by where their main thread is, the crowd first,
    then each odd group (at most LINES_SHOWN): at 1,024 ranks, two lines, not 1,024.
    "1,023 of 1,024 ranks' main threads are in all_reduce ← ... (at step 40)" / "rank 517:
    in sleep ← ... (at step 40)"."""
    from dynprof_nb.analysis.stacks import rank_set

    main = stacks[stacks["thread"] == "MainThread"].sort_values(["rank", "depth"])
    if not len(main):
        return []
    where_of = main.groupby("rank")["function"].agg(tuple)
    groups: dict[tuple, list[int]] = {}
    for rank, funcs in where_of.items():
        groups.setdefault(funcs, []).append(int(rank))
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    crowd, ranks = ordered[0]
    total = len(where_of)
    lines = [
        f"{len(ranks):,} of {total:,} ranks' main threads are in {_shown(list(crowd))}"
        + _at(steps, ranks)
        + (":" if len(ordered) > 1 else "")
    ]
    for funcs, odd in ordered[1 : 1 + LINES_SHOWN]:
        lines.append(f"  {rank_set(odd)}: in {_shown(list(funcs))}{_at(steps, odd)}")
    if len(ordered) > 1 + LINES_SHOWN:
        rest = [r for _, g in ordered[1 + LINES_SHOWN :] for r in g]
        lines.append(f"  and {len(rest):,} more ranks elsewhere (the tree below)")
    return lines


def _capped(lines: list[str], what: str) -> list[str]:
    if len(lines) <= LINES_SHOWN:
        return lines
    return [*lines[:LINES_SHOWN], f"... and {len(lines) - LINES_SHOWN:,} more {what}"]


def _notes(notes: dict[int, str]) -> list[str]:
    """Ranks without a dump, one line per reason: ``ranks 0-511: no dump: ...``."""
    from dynprof_nb.analysis.stacks import rank_set

    by_why: dict[str, list[int]] = {}
    for rank, why in sorted(notes.items()):
        by_why.setdefault(why, []).append(rank)
    lines = []
    for why, ranks in by_why.items():
        named = rank_set([r for r in ranks if r >= 0])
        lines.append(f"{named or 'a node'}: no dump: {why}")
    return lines


def _paths(directory: Path, job: str, s: SlotView) -> dict[str, Path]:
    return {
        "on": directory / layout.on_name(job, s.rank, s.pid),
        "request": directory / layout.request_name(job, s.rank, s.pid),
        "dump": directory / layout.dump_name(job, s.rank, s.pid),
        "note": directory / layout.note_name(job, s.rank, s.pid),
    }


def _own_file(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()


def wants_report(job: Any) -> bool:
    """Whether the panel's Stacks button should take the hang report: a job on this machine
    with a live rank whose Flight Recorder is on."""
    live_slots = getattr(job, "live_slots", None)  # a local Job (not a file-mode or cluster one)
    return callable(live_slots) and any_recorder(job.name, live_slots())


def any_recorder(job: str, slots: list[SlotView]) -> bool:
    """Whether a live rank of ``job`` has announced its Flight Recorder."""
    try:
        directory = stack_dir(create=False)
    except (OSError, RuntimeError):
        return False
    return any(_own_file(_paths(directory, job, s)["on"]) for s in slots)


def ask(
    job: str, slots: list[SlotView], stack_traces: bool = False
) -> tuple[dict[int, dict[str, Path]], dict[int, str]]:
    """Write a request to every rank that announced its recorder; the others' reasons."""
    directory = stack_dir()
    asked: dict[int, dict[str, Path]] = {}
    notes: dict[int, str] = {}
    for s in slots:
        p = _paths(directory, job, s)
        if not _own_file(p["on"]):
            notes[s.rank] = "flight_recorder is off for this rank (Monitor(flight_recorder=True))"
            continue
        for old in (p["dump"], p["note"]):
            try:
                os.unlink(old)
            except OSError:
                pass
        fd = os.open(p["request"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"stack_traces": stack_traces}, fh)
        asked[s.rank] = p
    return asked, notes


def collect(
    asked: dict[int, dict[str, Path]], timeout: float, since: float | None = None
) -> tuple[dict[int, Path], dict[int, str]]:
    """Wait for the ranks' answers (until ``timeout`` s after ``since``, the monotonic time
    they were asked; now by default): their dump files, and the reasons of those with none."""
    deadline = (time.monotonic() if since is None else since) + timeout
    dumps: dict[int, Path] = {}
    notes: dict[int, str] = {}
    pending = dict(asked)
    while pending and time.monotonic() < deadline:
        for rank, p in list(pending.items()):
            if _own_file(p["dump"]):
                dumps[rank] = p["dump"]
                del pending[rank]
            elif _own_file(p["note"]):
                try:
                    notes[rank] = str(json.loads(p["note"].read_bytes()[:65536]).get("why", ""))
                except (OSError, ValueError, AttributeError):
                    notes[rank] = "an unreadable answer"
                del pending[rank]
        if pending:
            time.sleep(0.02)
    for rank, p in pending.items():
        notes[rank] = (
            f"no dump within {timeout:.0f} s (the rank may hold the GIL, e.g. stuck in C code)"
        )
        try:
            os.unlink(p["request"])
        except OSError:
            pass
    return dumps, notes


def report(
    job: str,
    slots: list[SlotView],
    take_stacks: Any,
    timeout: float = ANSWER_TIMEOUT_S,
    keep: str | Path | None = None,
    stack_traces: bool = False,
    steps: dict[int, int] | None = None,
) -> HangReport:
    """The hang report of ``job`` on this machine (see the module's doc). ``stack_traces``
    asks the recorder for each entry's call site too (slow the first time: seconds)."""
    from dynprof_nb.flight_recorder.reader import read_dump

    asked_at = time.monotonic()
    asked, notes = ask(job, slots, stack_traces)
    stacks = take_stacks(timeout)  # meanwhile the ranks answer: one timeout for both
    paths, more = collect(asked, timeout, asked_at)
    notes.update(more)
    dumps = []
    for rank, path in sorted(paths.items()):
        try:
            dumps.append(read_dump(path))
        except (OSError, ValueError) as exc:
            notes[rank] = f"its dump could not be read: {exc}"
    return build(stacks, dumps, notes, keep, steps)


def keep_dumps(dumps: list[Dump], keep: str | Path) -> dict[int, str]:
    """Copy the dumps into ``keep`` as ``_dump_<rank>`` (what torch's ``fr_trace`` reads)."""
    out = Path(keep)
    out.mkdir(parents=True, exist_ok=True)
    kept = {}
    for d in dumps:
        target = out / f"_dump_{d.rank}"
        if os.path.exists(d.path):
            shutil.copyfile(d.path, target)
        else:  # a dump that came over the wire: its plain data, pickled again
            target.write_bytes(pickle.dumps(as_plain(d), protocol=4))
        kept[d.rank] = str(target)
    return kept


def as_plain(d: Dump) -> dict[str, Any]:
    """A dump as the recorder's own dict (what an agent sends: plain data only)."""
    config = {
        name: {"name": name, "desc": cfg["desc"], "ranks": str(list(cfg["ranks"]))}
        for name, cfg in d.pg_config.items()
    }
    return {
        "version": d.version,
        "rank": d.rank,
        "pg_config": config,
        "pg_status": d.pg_status,
        "entries": d.entries,
    }


def build(
    stacks: StackFrame,
    dumps: list[Dump],
    notes: dict[int, str],
    keep: str | Path | None = None,
    steps: dict[int, int] | None = None,
) -> HangReport:
    """Analyse the dumps and join the ranks the others wait for with their stacks. ``steps``
    (rank -> its step in ``status()``) says where each named rank stopped. Its findings are
    summarised whatever the ranks: one line per rank that never arrived (at most
    LINES_SHOWN), one per reason a rank has no dump, one per place main threads are."""
    steps = steps or {}
    lines: list[str] = []
    analysis = None
    if dumps:
        from dynprof_nb.flight_recorder.analysis import analyse, culprits, waited_in
        from dynprof_nb.flight_recorder.frames import frame_of

        analysis = analyse(frame_of(sorted(dumps, key=lambda d: d.rank)))
        lines.append(analysis.verdict)
        if len(analysis):
            never = []
            for rank in culprits(analysis):
                first = waited_in(analysis, rank)
                never.append(
                    f"rank {rank} never called {first['op']} #{first['seq']} "
                    f"(PG {first['pg_id']} {first['pg_desc']}); {where(stacks, rank)}"
                    + _at(steps, [rank])
                )
            lines += _capped(never, "ranks that never arrived (report.analysis lists them)")
            lines += _capped([f"  {x}" for x in analysis.log()], "findings (report.analysis)")
        lines += _notes(notes)
    else:
        why = sorted(set(notes.values())) or ["no live rank"]
        lines.append(
            "No Flight Recorder dump (" + "; ".join(why) + "): the stacks alone say where each "
            "rank is."
        )
        lines += main_threads(stacks, steps)
    lines.append("")
    lines += str(stacks.tree()).splitlines()
    files = (
        keep_dumps(dumps, keep) if keep is not None and dumps else {d.rank: d.path for d in dumps}
    )
    return HangReport(lines, analysis, stacks, files, notes)
