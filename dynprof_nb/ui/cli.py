"""``dynprof``: the command line over ``Job``.

    dynprof jobs [-v]
    dynprof status [JOB]            (no JOB, several running: one row per job)
    dynprof start JOB START STOP [--memory] [--stack] [--level Level1] ... [--create]
    dynprof stop JOB
    dynprof set JOB key=value ... [--create]
    dynprof windows JOB
    dynprof wait JOB [--timeout S]
    dynprof stacks JOB [--last] [--timeout S]
    dynprof hang JOB [--timeout S] [--keep DIR]
    dynprof fr DIR_or_files ...
    dynprof relay --cfg-path DIR --job JOB [--poll-interval S]
    dynprof demo
    dynprof advise WINDOW_DIR [--rule NAME ...]

The config flags of ``start`` are generated from ``ProfilerConfig``'s traits, so they cannot
drift from the schema. They hold for that window only; ``set`` makes a key standing (every
later window). A job name that does not exist is an error unless ``--create`` prepares it.
Ctrl-C during ``wait`` stops only the waiting.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from dynprof_nb.cluster.access import add_transport_flags
from dynprof_nb.contract.config import ConfigError, ProfilerConfig, coerce_cli_value
from dynprof_nb.ui.commands import ARGUMENTS, CLI_COMMANDS, helps
from dynprof_nb.ui.triggercmd import TRIGGER_OPTIONS_TITLE, add_trigger_arguments, run_trigger

WINDOW_KEYS = ("start_step", "stop_step")


def add_config_flags(
    parser: argparse.ArgumentParser, title: str = "profiler config (see ProfilerConfig)"
) -> list[argparse.Action]:
    """One option per config key (except the window), typed and documented from the trait.
    Returns the options added (the magics' completion offers them)."""
    group = parser.add_argument_group(title)
    traits = ProfilerConfig.class_traits()
    added = []
    for key in ProfilerConfig.keys():
        trait = traits[key]
        if key in WINDOW_KEYS:
            continue
        flag = "--" + (trait.metadata.get("flag") or key.replace("_", "-"))
        added.append(
            group.add_argument(flag, dest=key, default=None, **_argparse_options(key, trait))
        )
    return added


def _argparse_options(key: str, trait: Any) -> dict[str, Any]:
    """How argparse reads a key: chosen by the kind of field the trait declares."""
    help_text = trait.metadata.get("help", "")
    if trait.widget == "checkbox":
        return {"action": argparse.BooleanOptionalAction, "help": help_text}
    if trait.widget == "dropdown":
        return {"choices": trait.choices, "help": help_text}
    hint = ""
    if trait.widget == "toggles" or isinstance(trait.default_value, list):
        choices = trait.choices
        hint = f" (comma-separated{': ' + ','.join(choices) if choices else ''})"
    return {
        "type": _text_parser(key),
        "metavar": "LIST" if hint else None,
        "help": help_text + hint,
    }


def _text_parser(key: str) -> Callable[[str], Any]:
    """An argparse ``type`` that parses with the key's trait (errors name the key)."""

    def parse(text: str) -> Any:
        try:
            return coerce_cli_value(key, text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def config_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The config keys given on the command line (flags left out are not changes)."""
    return {k: v for k in ProfilerConfig.keys() if (v := getattr(args, k, None)) is not None}


def format_changes(changes: dict[str, Any]) -> str:
    """``key=value, ...`` as it was written (``applied stop_step=209, mstx=True``)."""

    def show(v: Any) -> str:
        return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)

    return ", ".join(f"{k}={show(v)}" for k, v in changes.items()) or "nothing"


def describe_start(job: Any, generation: int, options: dict[str, Any]) -> str:
    """What ``start`` asked for: the window, and the options that hold for it only."""
    cfg = job.config
    text = f"window {cfg.start_step}-{cfg.stop_step} asked for (generation {generation})"
    if options:
        text += f"; this window only: {format_changes(options)}"
    from dynprof_nb.control.asks import no_rank_note
    from dynprof_nb.control.job import Job

    note = no_rank_note(job.name, job.slots()) if isinstance(job, Job) else ""
    return f"{text}\n{note}" if note else text


def nothing_to_wait_for(job: Any) -> str:
    """Why ``wait`` would return at once, in words (``""`` when there is something to wait
    for, or the controller cannot see its ranks)."""
    from dynprof_nb.control.waiting import BUSY_STATES

    live_slots = getattr(job, "live_slots", None)
    live = live_slots() if live_slots is not None else []
    gen = job.generation
    if not live or any(s.applied < gen or s.state in BUSY_STATES for s in live):
        return ""
    cfg = job.config
    if cfg.has_window:
        return (
            f"nothing to wait for: window {cfg.start_step}-{cfg.stop_step} has already ended "
            "on every live rank (windows() lists what each rank recorded; load() loads it)"
        )
    return "nothing to wait for: no window is asked for (start one first)"


def stop_and_describe(job: Any) -> str:
    """Stop, and say what it ended or cancelled (or that there was nothing to stop)."""
    before = job.generation
    what = job.describe_stop()
    gen = job.stop()
    return f"{what} (generation {gen}{', unchanged' if gen == before else ''})"


def parse_assignments(items: Sequence[str]) -> dict[str, Any]:
    """``key=value`` words into config changes, each value typed by its key."""
    changes = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"{item!r} is not key=value; e.g. profile_memory=true.")
        changes[key.strip()] = coerce_cli_value(key.strip(), value.strip())
    return changes


def _jobs(verbose: bool, remove: bool) -> int:
    """``dynprof jobs``: the table; damaged segments listed with what is wrong, and with
    ``-v`` an offer to remove those that are yours (``--remove-damaged``: no question)."""
    from dynprof_nb.control.registry import jobs, remove_damaged

    frame = jobs(verbose=verbose)
    if not len(frame):
        print("no jobs on this machine")
        return 0
    sound = frame[frame.problem == ""]
    damaged = frame[frame.problem != ""]
    if len(sound):
        print(sound.drop(columns=["owner", "problem"]).to_string(index=False))
    for row in damaged.itertuples():
        print(f"damaged: {row.job} (owner uid {row.owner}): {row.problem}")
    mine = damaged[damaged.owner == os.getuid()]
    if not len(mine) or not (verbose or remove):
        if len(mine):
            print("dynprof jobs -v offers to remove your damaged segments.")
        return 0
    names = ", ".join(mine.job)
    if not remove:
        if not sys.stdin.isatty():
            print(f"remove them with: dynprof jobs --remove-damaged ({names})")
            return 0
        answer = input(f"remove your damaged segments {names}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            return 0
    print(f"removed: {', '.join(remove_damaged(frame)) or 'nothing'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dynprof", description="Profile windows of a running training job."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    text = helps(CLI_COMMANDS)
    _add_window_commands(sub, text)
    _add_tool_commands(sub, text)
    _add_cluster_flags(sub)
    return parser


def _add_window_commands(sub: Any, text: dict[str, str]) -> None:
    """The commands that drive one job: jobs, status, start, set, stop, wait, windows,
    stacks, hang."""
    jobs_p = sub.add_parser(
        "jobs", help=text["jobs"] + " (and quietly remove the segments of finished or crashed ones)"
    )
    jobs_p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="say which segments were removed, and offer to remove your damaged ones",
    )
    jobs_p.add_argument(
        "--remove-damaged",
        action="store_true",
        help="remove the damaged segments that are yours, without asking",
    )
    sub.add_parser("status", help=text["status"]).add_argument(
        "job", nargs="?", default=None, help="optional when exactly one job is running"
    )
    for name in ("stop", "windows"):
        sub.add_parser(name, help=text[name]).add_argument("job")
    start = sub.add_parser("start", help=text["start"])
    start.add_argument("job")
    start.add_argument("start", help=ARGUMENTS["start"])
    start.add_argument("stop", help=ARGUMENTS["stop"])
    start.add_argument("--wait", action="store_true", help="wait until the window is written")
    start.add_argument("--create", action="store_true", help=ARGUMENTS["--create"])
    add_config_flags(start, "options for this window only (set makes a key standing)")
    setp = sub.add_parser("set", help=text["set"])
    setp.add_argument("job")
    setp.add_argument("assignments", nargs="+", metavar="key=value")
    setp.add_argument("--create", action="store_true", help=ARGUMENTS["--create"])
    wait = sub.add_parser("wait", help=text["wait"])
    wait.add_argument("job")
    wait.add_argument("--timeout", type=float, default=None)
    stacks = sub.add_parser("stacks", help=text["stacks"])
    stacks.add_argument("job")
    stacks.add_argument("--last", action="store_true", help=ARGUMENTS["--last"])
    stacks.add_argument("--timeout", type=float, default=5.0, help=ARGUMENTS["--timeout-stacks"])
    hang = sub.add_parser("hang", help=text["hang"])
    hang.add_argument("job")
    hang.add_argument("--timeout", type=float, default=5.0, help=ARGUMENTS["--timeout-hang"])
    hang.add_argument("--keep", default=None, metavar="DIR", help=ARGUMENTS["--keep"])


def _add_tool_commands(sub: Any, text: dict[str, str]) -> None:
    """The commands around the jobs: fr, relay, trigger, cache, doctor, advise, demo."""
    fr = sub.add_parser("fr", help=text["fr"])
    fr.add_argument("paths", nargs="+", metavar="DIR_or_file")
    relay = sub.add_parser("relay", help=text["relay"])
    relay.add_argument(
        "--cfg-path", required=True, help="directory of profiler_config.json (or the file)"
    )
    relay.add_argument("--job", required=True, help="job to drive")
    relay.add_argument(
        "--poll-interval",
        type=float,
        default=None,
        help="seconds between looks at the file (default 0.5)",
    )
    trig = sub.add_parser("trigger", help=text["trigger"])
    trig.add_argument("job")
    add_trigger_arguments(trig)
    add_config_flags(trig, TRIGGER_OPTIONS_TITLE)
    cache = sub.add_parser("cache", help=text["cache"])
    cache.add_argument(
        "--clear", nargs="?", const="", default=None, metavar="PATH", help=ARGUMENTS["--clear"]
    )
    sub.add_parser("doctor", help=text["doctor"])
    adv = sub.add_parser("advise", help=text["advise"])
    adv.add_argument("window", help="a window folder or one trace file")
    adv.add_argument("--rule", action="append", default=None, help="only this rule (repeatable)")
    demo = sub.add_parser("demo", help=text["demo"])
    demo.add_argument("--output", default="./dyn_profile_data/demo")


def _add_cluster_flags(sub: Any) -> None:
    """``--cluster`` and the transport flags, on every command that can drive a cluster."""
    for name in (
        "status",
        "stop",
        "windows",
        "start",
        "set",
        "wait",
        "trigger",
        "stacks",
        "hang",
    ):  # on a cluster
        sub.choices[name].add_argument(
            "--cluster",
            default=None,
            metavar="ADDR",
            help="the job on every node of this Dask scheduler (tls://host:8786)",
        )
        add_transport_flags(sub.choices[name])


def say_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """A warning as the command line says it: ``dynprof: WindowDropped: ...`` on stderr, one
    line, never the file and source line of ours it was raised in."""
    print(f"dynprof: {category.__name__}: {message}", file=file or sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the command itself (not a caller in its own process): its display
        warnings.showwarning = say_warning
    args = build_parser().parse_args(argv)
    if args.command == "doctor":  # before anything that needs a working pandas
        from dynprof_nb.ui.doctor import doctor

        print(doctor().text())
        return 0
    try:
        return _run(args)
    except (ConfigError, ValueError, RuntimeError, TimeoutError) as exc:
        print(f"dynprof: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # WaitInterrupted says where the window is
        print(f"dynprof: {exc}" if str(exc) else "dynprof: interrupted", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    import pandas as pd

    from dynprof_nb.control.registry import attach

    pd.set_option("display.width", 160)
    pd.set_option("display.max_columns", 20)
    done = _run_without_job(args)
    if done is not None:
        return done
    cluster = {}
    if args.cluster is not None:
        from dynprof_nb.cluster.access import security_from_args

        cluster = {
            "cluster": args.cluster,
            "security": security_from_args(args),
            "allow_insecure": args.insecure,
        }
    if args.job is None:  # only status may leave it out
        running = running_jobs(cluster=args.cluster)
        if len(running) > 1:
            print(several_jobs_status(running))
            return 0
        args.job = running[0]
    job = attach(args.job, create=getattr(args, "create", False), **cluster)
    _run_on_job(job, args)
    return 0


def running_jobs(cluster: str | None = None) -> list[str]:
    """The jobs ``dynprof status`` means when none is named: this user's jobs on this machine
    with a live rank. None running is a ValueError that says what to type."""
    if cluster is not None:
        raise ValueError("name the job to look at on the cluster: dynprof status JOB --cluster ...")
    from dynprof_nb.control.registry import jobs

    frame = jobs()
    running = list(frame.job[(frame.problem == "") & (frame.live > 0)]) if len(frame) else []
    if not running:
        raise ValueError(
            "no job is running on this machine (no rank of yours is live); "
            "dynprof jobs lists the prepared and damaged ones, dynprof status JOB shows one."
        )
    return running


def several_jobs_status(names: Sequence[str]) -> str:
    """``dynprof status`` with several jobs running: one row per job (ranks live/total, a
    count per state, window, run, newest heartbeat), condensed from each job's ``status()``,
    and how to see one in full. A job that ends between the listing and the look is left out
    and said."""
    from dynprof_nb.control.registry import JobError, attach
    from dynprof_nb.control.status import jobs_view

    statuses, gone = {}, []
    for name in names:
        try:
            job = attach(name)
        except JobError:  # finished since it was listed
            gone.append(name)
            continue
        try:
            statuses[name] = job.status()
        finally:
            job.close()
    lines = [
        f"{len(statuses)} jobs are running "
        f"(ranks: live/total; last_heartbeat_s: the newest beat of any rank)",
        jobs_view(statuses).to_string(index=False),
        f"one job's ranks in full: dynprof status {next(iter(statuses), names[0])}",
    ]
    if gone:
        lines.append(f"ended since listed: {', '.join(gone)}")
    return "\n".join(lines)


def _run_without_job(args: argparse.Namespace) -> int | None:
    """The commands that attach to no job (their exit status); None for the others."""
    if args.command == "jobs":
        return _jobs(args.verbose, args.remove_damaged)
    if args.command == "demo":
        from dynprof_nb.ui.demo import run_demo

        return run_demo(args.output)
    if args.command == "relay":
        return _relay(args.cfg_path, args.job, args.poll_interval)
    if args.command == "cache":
        print(cache_report(args.clear))
        return 0
    if args.command == "advise":
        from dynprof_nb.ui.advisecmd import run_advise

        print(run_advise(args.window, args.rule))
        return 0
    if args.command == "fr":
        from dynprof_nb.flight_recorder.analysis import analyse

        paths = args.paths[0] if len(args.paths) == 1 else args.paths
        print("\n".join(analyse(paths).log()))
        return 0
    return None


def _run_on_job(job: Any, args: argparse.Namespace) -> None:
    """The commands that drive ``job`` (a Job or a ClusterJob)."""
    if args.command == "status":
        print(job)
        print(job.status().to_string(index=False))
    elif args.command == "start":
        options = config_changes(args)
        gen = job.start(args.start, args.stop, **options)
        print(describe_start(job, gen, options), flush=True)
        if args.wait:
            print(job.wait().to_string(index=False))
    elif args.command == "stop":
        print(stop_and_describe(job))
    elif args.command == "set":
        changes = parse_assignments(args.assignments)
        print(f"standing config: {format_changes(changes)} (generation {job.set(**changes)})")
    elif args.command == "windows":
        frame = job.windows()
        print(frame.to_string(index=False) if len(frame) else "no windows yet")
    elif args.command == "wait":
        idle = nothing_to_wait_for(job)
        if idle:
            print(idle)
        print(job.wait(timeout=args.timeout).to_string(index=False))
    elif args.command == "trigger":
        print(run_trigger(job, args, config_changes(args)))
    elif args.command == "hang":
        print(job.hang_report(timeout=args.timeout, keep=args.keep))
    elif args.command == "stacks":
        stacks = job.last_stacks if args.last else job.stacks(timeout=args.timeout)
        if stacks is None:
            print(
                f"job {args.job!r} has not been found stalled: no stacks were kept "
                f"(dynprof stacks {args.job} takes them now)"
            )
        else:
            reason = stacks.attrs.get("reason")
            print(f"{reason}\n" if reason else "", end="")
            print(stacks.tree())


def cache_report(clear: str | None = None) -> str:
    """What ``dynprof cache`` prints: the cached windows and their total, or what ``--clear``
    (``clear`` is ``""`` for everything, else a path) removed."""
    from dynprof_nb.traces import cache

    where = cache.cache_dir()
    if where is None:
        return f"the frame cache is off ({cache.ENV_DIR}={os.environ.get(cache.ENV_DIR)})"
    if clear is not None:
        n = cache.clear(clear or None)
        if not clear:
            from dynprof_nb.traces.cache import partitions

            parts = partitions.prune()
            return (
                f"removed {n} cached frame file(s) (all) and {parts} partition folder(s) of "
                f"ended loads from {where}"
            )
        if n == 0 and not os.path.lexists(os.path.expanduser(clear)):
            return (
                f"nothing cached is from {clear}: there is no such file or folder "
                f"(a typo?); `dynprof cache` lists the cached paths"
            )
        return f"removed {n} cached frame file(s) of {clear} from {where}"
    table = cache.summary()
    if table.empty:
        return f"the frame cache {where} is empty"
    rows = [("path", "frames", "size", "last used")] + [
        (
            r.path + ("" if os.path.exists(r.path) else " (gone)"),
            r.frames,
            _size(r.bytes),
            str(r.used),
        )
        for r in table.itertuples()
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [f"{p:<{widths[0]}}  {f:<{widths[1]}}  {s:>{widths[2]}}  {u}" for p, f, s, u in rows]
    lines.append(
        f"{len(table)} window(s), {_size(int(table['bytes'].sum()))} in {where} "
        f"(bound {_size(cache.limit_bytes())}; {cache.ENV_LIMIT} changes it)"
    )
    return "\n".join(lines)


def cache_frame() -> Any:
    """``%dynprof cache`` in a notebook: this user's cached windows as a DataFrame (an HTML
    table that does not wrap), ``path, exists, frames, size, last_used``; ``.attrs["note"]``
    the total, the folder and its bound. A string when the cache is off."""
    from dynprof_nb.traces import cache

    where = cache.cache_dir()
    if where is None:
        return f"the frame cache is off ({cache.ENV_DIR}={os.environ.get(cache.ENV_DIR)})"
    table = cache.summary()
    frame = table.assign(
        exists=[os.path.exists(p) for p in table["path"]],
        size=[_size(b) for b in table["bytes"]],
    ).rename(columns={"used": "last_used"})[["path", "exists", "frames", "size", "last_used"]]
    frame.attrs["note"] = (
        f"{len(table)} window(s), {_size(int(table['bytes'].sum()))} in {where} "
        f"(bound {_size(cache.limit_bytes())}; {cache.ENV_LIMIT} changes it)"
    )
    return frame


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _relay(cfg_path: str, job: str, poll_interval: float | None) -> int:
    """Foreground relay until Ctrl-C; waits its turn if another relay has this job here."""
    from dynprof_nb.control.relay import POLL_INTERVAL_S, Relay, relay_lock

    relay = Relay(cfg_path, job, poll_interval or POLL_INTERVAL_S)
    with relay_lock(job) as _:
        print(
            f"relaying {relay.path} into job {job!r} every {relay.poll_interval} s "
            "(Ctrl-C to stop)",
            flush=True,
        )
        relay.run()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
