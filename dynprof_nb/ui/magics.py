"""``%dynprof`` and ``%%dynprof``: IPython magics over the controller, ``TraceWindow`` and
``profile_block``.

Load with ``%load_ext dynprof_nb``. Every subcommand is one call into the core; bad input is an
``IPython.core.error.UsageError`` (one line, no traceback) saying what to do. The options of
``start`` and ``%%dynprof`` are generated from ``ProfilerConfig`` (via the CLI's
``add_config_flags``), so they cannot drift from the schema.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser

from dynprof_nb.cluster.access import add_transport_flags, security_from_args
from dynprof_nb.contract.config import ConfigError, ProfilerConfig
from dynprof_nb.control.base import Controller, JobError, WaitInterrupted
from dynprof_nb.training.backends import BACKENDS as TRAINING_BACKENDS
from dynprof_nb.ui.cli import (
    add_config_flags,
    config_changes,
    describe_start,
    format_changes,
    nothing_to_wait_for,
    parse_assignments,
    stop_and_describe,
)
from dynprof_nb.ui.commands import ARGUMENTS, MAGIC_COMMANDS, helps
from dynprof_nb.ui.triggercmd import (
    TRIGGER_OPTIONS_TITLE,
    FireNotices,
    add_trigger_arguments,
    run_trigger,
)

__all__ = ["DynprofMagics", "load_ipython_extension"]

SUBCOMMANDS = helps(MAGIC_COMMANDS)
BACKENDS = (*TRAINING_BACKENDS, "auto")  # the training side's list, one source
JOB_VARIABLE = "job"  # where %dynprof attach leaves the handle: the name the docs go on with


class _Exit(Exception):
    """argparse wanted to exit (after printing ``-h`` help): end the magic quietly."""


class _Parser(MagicArgumentParser):
    """A magic parser whose errors are one-line UsageErrors and whose ``-h`` does not exit.

    It keeps what completion and ``%dynprof?`` read, as argparse's public calls return them:
    ``actions`` (every argument added, ``-h`` included; :meth:`add_config_flags` adds the
    config group's) and ``subcommands`` (the parser of each subcommand, filled by
    :func:`build_parser`), so nothing reads argparse's private ``_actions`` or
    ``_subparsers``."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("add_help", True)
        kwargs.setdefault("formatter_class", argparse.HelpFormatter)
        self.actions: list[argparse.Action] = []  # before argparse adds -h through add_argument
        self.subcommands: dict[str, _Parser] = {}
        super().__init__(**kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.actions.append(action)
        return action

    def add_config_flags(self, title: str | None = None) -> None:
        """One option per config key (the CLI's :func:`add_config_flags`), in its own group."""
        given = {} if title is None else {"title": title}
        self.actions += add_config_flags(self, **given)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}. See {self.prog.split()[0]}? for help.")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            print(message)
        raise _Exit()


def build_parser(prog: str = "%dynprof") -> _Parser:
    """The line magic's parser: one subparser per entry of ``SUBCOMMANDS``."""
    parser = _Parser(prog=prog, description="Profile windows of a running training job.")
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", parser_class=_Parser)
    p = parser.subcommands = {
        name: sub.add_parser(name, help=text, description=text)
        for name, text in SUBCOMMANDS.items()
    }
    p["attach"].add_argument("job", nargs="?", help="job name; omitted = the only live job")
    p["attach"].add_argument(
        "--create",
        action="store_true",
        help="prepare the job if it does not exist yet (its ranks have "
        "not started); without it an unknown name is an error",
    )
    p["attach"].add_argument(
        "--cfg-path",
        default=None,
        metavar="DIR",
        help="file mode: the directory of an unmodified MindSpore job's profiler_config.json",
    )
    p["attach"].add_argument(
        "--prof-path",
        default=None,
        metavar="DIR",
        help="file mode: where that job writes its windows",
    )
    p["attach"].add_argument(
        "--cluster",
        default=None,
        metavar="ADDR",
        help="the job on every node of this Dask scheduler (tls://host:8786)",
    )
    add_transport_flags(p["attach"])
    p["start"].add_argument("start", help=ARGUMENTS["start"])
    p["start"].add_argument("stop", help=ARGUMENTS["stop"])
    p["start"].add_argument("--wait", action="store_true", help="wait for the window too")
    p["start"].add_config_flags("options for this window only (set makes a key standing)")
    p["set"].add_argument("assignments", nargs="+", metavar="key=value")
    add_trigger_arguments(p["trigger"])
    p["trigger"].add_config_flags(TRIGGER_OPTIONS_TITLE)
    p["wait"].add_argument("--timeout", type=float, default=None, metavar="S")
    p["wait"].add_argument("--no-progress", action="store_true", help="no progress bar")
    for name in ("load", "summary", "advise"):
        p[name].add_argument(
            "window",
            nargs="?",
            default=None,
            help="a row number of 'windows' or a path; omitted = the window asked last",
        )
    for name in ("load", "summary"):  # the window asked for, or an older one by choice
        p[name].add_argument("--run", type=int, default=None, metavar="N", help=ARGUMENTS["--run"])
        p[name].add_argument("--steps", default=None, metavar="A-B", help=ARGUMENTS["--steps"])
        p[name].add_argument("--no-wait", action="store_true", help=ARGUMENTS["--no-wait"])
    p["stacks"].add_argument("--last", action="store_true", help=ARGUMENTS["--last"])
    p["stacks"].add_argument(
        "--timeout", type=float, default=5.0, metavar="S", help=ARGUMENTS["--timeout-stacks"]
    )
    p["stacks"].add_argument(
        "-o",
        dest="name",
        default=None,
        metavar="NAME",
        help="also store the stacks DataFrame in variable NAME",
    )
    p["recent"].add_argument("steps", nargs="?", type=int, default=100, help="steps per rank")
    p["recent"].add_argument("--timeout", type=float, default=10.0, metavar="S")
    p["recent"].add_argument(
        "-o", dest="name", default=None, metavar="NAME", help="also store it in variable NAME"
    )
    p["hang"].add_argument(
        "--timeout", type=float, default=5.0, metavar="S", help=ARGUMENTS["--timeout-hang"]
    )
    p["hang"].add_argument("--keep", default=None, metavar="DIR", help=ARGUMENTS["--keep"])
    p["hang"].add_argument(
        "-o",
        dest="name",
        default=None,
        metavar="NAME",
        help="also store the report (.analysis, .stacks) in variable NAME",
    )
    p["load"].add_argument(
        "-o",
        dest="name",
        default=None,
        metavar="NAME",
        help="also store the TraceWindow in variable NAME",
    )
    p["cache"].add_argument(
        "--clear", nargs="?", const="", default=None, metavar="PATH", help=ARGUMENTS["--clear"]
    )
    return parser


def build_cell_parser(prog: str = "%%dynprof") -> _Parser:
    """``%%dynprof [options]``: profile the cell in this kernel."""
    parser = _Parser(
        prog=prog,
        description="Profile this cell in this kernel and show the summary of what it did.",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="builtin",
        help="profiler to record with (default: builtin)",
    )
    parser.add_argument(
        "--dir",
        default="./dyn_profile_data/local",
        metavar="DIR",
        help="where the window is written",
    )
    parser.add_argument(
        "-o",
        dest="name",
        default=None,
        metavar="NAME",
        help="also store the TraceWindow in variable NAME",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="do not show the summary")
    parser.add_config_flags()
    return parser


def _help_text() -> str:
    """The text ``%dynprof?`` shows: every subcommand, its usage, and the config options."""
    parts = [
        __doc__.split("\n\n")[0],
        "",
        "Examples:",
        "  %dynprof attach demo          (leaves the handle in `job`)",
        "  %dynprof start +10 +19 --memory --stack",
        "  %dynprof wait --timeout 120   %dynprof load -o trace",
        "",
        "+N is N steps after the most advanced rank's current step: at step 500,",
        "start +10 +19 records steps 510..519 (ten steps, both ends included).",
        "  %dynprof set profile_memory=true activities=CPU",
        "",
        "Options given to start (--stack, --memory, ...) hold for that window only;",
        "set makes a key standing: it holds for every later window until set again.",
        "Ctrl-C (or the stop button) during wait stops only the waiting.",
        "",
        "Subcommands (%dynprof SUBCOMMAND -h for one):",
        "",
    ]
    parts += [f"  {name:<8} {text}" for name, text in SUBCOMMANDS.items()]
    subs = build_parser().subcommands
    parts += [""] + [subs[name].format_usage().strip() for name in SUBCOMMANDS if name != "start"]
    parts += ["", subs["start"].format_help()]
    cell = build_cell_parser()
    parts += [
        "%%dynprof [--backend B] [--dir DIR] [-o NAME] [-q] [config options as for start]",
        "  " + (cell.description or ""),
        "  --backend {builtin,torch,mindspore,auto}  profiler to record with (builtin;"
        " it records Python calls unless --no-stack or --memory)",
        "  -o NAME  store the TraceWindow in NAME;  -q  do not show the summary",
        "%%dynprof sql [WINDOW] [-o NAME]",
        "  the cell's SQL over a window's frames (WINDOW, else the one last loaded or",
        "  recorded here): tables events, ops, steps, kernels, memory, communication",
    ]
    return "\n".join(parts)


@magics_class
class DynprofMagics(Magics):
    """The state of the magics in one kernel: the attached job."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.job: Any = None
        self.window: Any = None  # the window last loaded or recorded here (%%dynprof sql's)
        self._parser = build_parser()
        self._cell_parser = build_cell_parser()
        self._sql_parser = build_sql_parser()

    @line_cell_magic
    def dynprof(self, line: str, cell: str | None = None) -> Any:
        try:
            if cell is not None:
                return self._cell(line, cell)
            args = self._parser.parse_argstring(line)
            if args.command is None:
                print(_help_text())
                return None
            return HANDLERS[args.command](self, args)
        except _Exit:
            return None
        except WaitInterrupted as exc:  # only the waiting stopped: one line, no traceback
            print(exc)
            return None
        except (ConfigError, TimeoutError) as exc:
            raise UsageError(str(exc)) from None
        except UsageError:
            raise
        except Exception as exc:
            if _is_user_error(exc):
                raise UsageError(str(exc)) from None
            raise

    # -- subcommands --------------------------------------------------------------------------

    def _need_job(self) -> Any:
        if self.job is None:
            raise UsageError(
                "no job attached: run %dynprof attach JOB first (%dynprof jobs lists them)."
            )
        return self.job

    def _do_jobs(self, args: argparse.Namespace) -> Any:
        from dynprof_nb.control.registry import jobs

        return jobs()

    def _do_attach(self, args: argparse.Namespace) -> Any:
        """Attach, keep the handle, and leave it in the notebook as ``job`` (the name every
        example goes on with), saying so in one line."""
        job = self._attach(args)
        self.job = job
        print(self._bind_job(job))
        return job

    def _attach(self, args: argparse.Namespace) -> Any:
        from dynprof_nb.control import registry

        if args.cluster is not None:
            if not args.job:
                raise UsageError("--cluster needs a job name: %dynprof attach JOB --cluster ADDR.")
            return registry.attach(
                args.job,
                cluster=args.cluster,
                security=security_from_args(args),
                allow_insecure=args.insecure,
            )
        if args.cfg_path is not None:
            if args.job:
                raise UsageError("give a job name or --cfg-path DIR, not both.")
            return registry.attach(cfg_path=args.cfg_path, prof_path=args.prof_path)
        if args.prof_path is not None:
            raise UsageError("--prof-path goes with --cfg-path (file mode).")
        name = args.job or _only_live_job()
        current = self.job
        if getattr(current, "name", None) == name and not getattr(current, "closed", True):
            return current  # the cell run again: the same handle, not a second one
        try:
            return registry.attach(name, create=args.create)
        except JobError as exc:
            kept = f" Still attached to {self.job.name!r}." if self.job is not None else ""
            raise UsageError(f"{exc}{kept}") from None

    def _bind_job(self, job: Any) -> str:
        """Put ``job`` in the user's namespace, unless that name holds something of their own
        (not a handle the magics left there): that is never overwritten."""
        user_ns = self.shell.user_ns if self.shell is not None else {}
        held = user_ns.get(JOB_VARIABLE)
        what = f"attached to {job.name!r}"
        if held is not None and held is not job and not _is_job_handle(held):
            return (
                f"{what}; `{JOB_VARIABLE}` holds a {type(held).__name__} of yours, so it is left "
                f"as is: `j = %dynprof attach {job.name}` gives the handle another name."
            )
        user_ns[JOB_VARIABLE] = job
        return (
            f"{what}: `{JOB_VARIABLE}` is its handle (job.status(), job.start('+10', '+19'), "
            "w = job.load())."
        )

    def _do_start(self, args: argparse.Namespace) -> None:
        job = self._need_job()
        changes = config_changes(args)
        gen = job.start(args.start, args.stop, **changes)
        print(describe_start(job, gen, changes))
        if args.wait:
            return job.wait()
        return None

    def _do_stop(self, args: argparse.Namespace) -> None:
        print(stop_and_describe(self._need_job()))

    def _do_set(self, args: argparse.Namespace) -> None:
        changes = parse_assignments(args.assignments)
        gen = self._need_job().set(**changes)
        print(f"standing config: {format_changes(changes)} (generation {gen})")

    def _do_config(self, args: argparse.Namespace) -> ProfilerConfig:
        job = self._need_job()
        options = job.window_options
        if options:
            cfg = job.config
            print(
                f"window {cfg.start_step}-{cfg.stop_step} also records with "
                f"{format_changes(options)} (this window only)"
            )
        return job.config

    def _do_trigger(self, args: argparse.Namespace) -> None:
        job = self._need_job()
        print(run_trigger(job, args, config_changes(args)))
        if not args.off and job.triggers.get("armed"):
            FireNotices(job)  # one line printed each time it fires a window

    def _do_status(self, args: argparse.Namespace) -> Any:
        return self._need_job().status()

    def _do_wait(self, args: argparse.Namespace) -> Any:
        job = self._need_job()
        idle = nothing_to_wait_for(job)
        if idle:
            print(idle)
        return job.wait(timeout=args.timeout, progress=not args.no_progress)

    def _do_windows(self, args: argparse.Namespace) -> Any:
        return self._need_job().windows()

    def _do_load(self, args: argparse.Namespace) -> Any:
        if args.name and not args.name.isidentifier():
            raise UsageError(f"-o {args.name!r}: not a Python variable name.")
        window = self._need_job().load(_window_arg(args.window), **_load_choice(args))
        self.window = window
        if args.name:
            self.shell.user_ns[args.name] = window
        return window

    def _do_cache(self, args: argparse.Namespace) -> Any:
        """Clearing says what it removed; listing is a table (a DataFrame) of this user's
        cached windows, its total printed above it."""
        from dynprof_nb.ui.cli import cache_frame, cache_report

        if args.clear is not None:
            print(cache_report(args.clear))
            return None
        frame = cache_frame()
        if isinstance(frame, str):
            print(frame)
            return None
        print(frame.attrs["note"])
        return frame

    def _do_summary(self, args: argparse.Namespace) -> Any:
        return self._need_job().load(_window_arg(args.window), **_load_choice(args)).summary()

    def _do_advise(self, args: argparse.Namespace) -> Any:
        """A window's findings; a path needs no job (a folder or trace file from anywhere)."""
        arg = _window_arg(args.window)
        if isinstance(arg, str) and self.job is None:
            from dynprof_nb.ui.advisecmd import load_for_advice

            return load_for_advice(arg).advise()
        return self._need_job().load(arg).advise()

    def _do_stacks(self, args: argparse.Namespace) -> Any:
        """The merged tree (HTML in a notebook); ``-o NAME`` keeps the frame itself."""
        if args.name and not args.name.isidentifier():
            raise UsageError(f"-o {args.name!r}: not a Python variable name.")
        job = self._need_job()
        stacks = job.last_stacks if args.last else job.stacks(timeout=args.timeout)
        if stacks is None:
            print(
                f"job {job.name!r} has not been found stalled: no stacks were kept. "
                "'%dynprof stacks' takes them now."
            )
            return None
        if args.name:
            self.shell.user_ns[args.name] = stacks
        return stacks.tree()

    def _do_recent(self, args: argparse.Namespace) -> Any:
        if args.name and not args.name.isidentifier():
            raise UsageError(f"-o {args.name!r}: not a Python variable name.")
        window = self._need_job().recent(args.steps, timeout=args.timeout)
        self.window = window
        if args.name:
            self.shell.user_ns[args.name] = window
        # what a person asks the record for is why the steps were slow: its explanation, with
        # one line saying where the record itself is
        keep = f"in {args.name}" if args.name else "with -o NAME"
        steps = window.steps
        kept = int(steps.groupby("rank").size().max()) if "rank" in steps else len(steps)
        fewer = (
            f" (asked {args.steps}: all a rank held, at most its recent_steps)"
            if kept < args.steps
            else ""
        )
        print(
            f"the last {kept} steps of ranks {window.ranks}{fewer}, kept in {window.path}: the "
            f"record is {keep} (%%dynprof sql queries it); why its slow steps were slow:"
        )
        return window.explain()

    def _do_hang(self, args: argparse.Namespace) -> Any:
        """The hang report (see ``Job.hang_report``); ``-o NAME`` keeps it."""
        if args.name and not args.name.isidentifier():
            raise UsageError(f"-o {args.name!r}: not a Python variable name.")
        report = self._need_job().hang_report(timeout=args.timeout, keep=args.keep)
        if args.name:
            self.shell.user_ns[args.name] = report
        return report

    def _do_panel(self, args: argparse.Namespace) -> Any:
        from dynprof_nb.ui.panel import panel

        return panel(self._need_job())

    # -- %%dynprof ----------------------------------------------------------------------------

    def _cell(self, line: str, cell: str) -> Any:
        from IPython.display import display

        from dynprof_nb.training.backends import resolve_backend
        from dynprof_nb.training.block import profile_block

        if line.split()[:1] == ["sql"]:
            return self._sql_cell(line.strip()[3:], cell)
        args = self._cell_parser.parse_argstring(line)
        if args.name and not args.name.isidentifier():
            raise UsageError(f"-o {args.name!r}: not a Python variable name.")
        changes = cell_changes(args, resolve_backend(args.backend))
        with profile_block(backend=args.backend, output=args.dir, **changes) as prof:
            result = self.shell.run_cell(cell, store_history=False)
        window = self.window = prof.window
        if args.name:
            self.shell.user_ns[args.name] = window
        if not result.success:
            print(f"dynprof: the cell raised; the window in {prof.path} holds what ran.")
        if not args.quiet:
            display(window.summary())

    def _sql_cell(self, line: str, cell: str) -> Any:
        """``%%dynprof sql [WINDOW] [-o NAME]``: the cell's SQL over the window in variable
        WINDOW, else the one last loaded (``%dynprof load``) or recorded (``%%dynprof``)
        here; the answer is the cell's output (a DataFrame), and NAME's with ``-o``."""
        args = self._sql_parser.parse_argstring(line)
        for name in (args.window, args.name):
            if name and not name.isidentifier():
                raise UsageError(f"{name!r}: not a Python variable name.")
        if args.window:
            if args.window not in self.shell.user_ns:
                raise UsageError(f"%%dynprof sql {args.window}: no variable {args.window!r}.")
            window = self.shell.user_ns[args.window]
        elif self.window is not None:
            window = self.window
        else:
            raise UsageError(
                "%%dynprof sql: no window loaded here yet: %dynprof load (or a %%dynprof "
                "cell) first, or name a window variable: %%dynprof sql w"
            )
        if not callable(getattr(window, "sql", None)):
            raise UsageError(f"%%dynprof sql: {type(window).__name__} is not a window.")
        try:
            answer = window.sql(cell)
        except ImportError as exc:
            raise UsageError(str(exc)) from None
        except Exception as exc:
            if type(exc).__module__.split(".")[0] in ("duckdb", "_duckdb"):  # the SQL's fault
                raise UsageError(f"%%dynprof sql: {exc}") from None
            raise
        if args.name:
            self.shell.user_ns[args.name] = answer
        return answer

    # The handler of every line-magic subcommand, by its name (the keys are MAGIC_COMMANDS, checked
    # by tests/ui/test_magics.py): an explicit table, so "find usages" reaches every handler.
    # In the class body, where the handlers are plain names.
    HANDLERS: ClassVar[dict[str, Callable[[DynprofMagics, argparse.Namespace], Any]]] = {
        "jobs": _do_jobs,
        "attach": _do_attach,
        "start": _do_start,
        "stop": _do_stop,
        "set": _do_set,
        "config": _do_config,
        "status": _do_status,
        "wait": _do_wait,
        "windows": _do_windows,
        "load": _do_load,
        "summary": _do_summary,
        "advise": _do_advise,
        "stacks": _do_stacks,
        "recent": _do_recent,
        "hang": _do_hang,
        "panel": _do_panel,
        "trigger": _do_trigger,
        "cache": _do_cache,
    }


def build_sql_parser(prog: str = "%%dynprof sql") -> _Parser:
    """``%%dynprof sql [WINDOW] [-o NAME]``: SQL over a window's frames."""
    parser = _Parser(
        prog=prog,
        description="Run the cell's SQL over a window's frames (w.sql) and show the answer.",
    )
    parser.add_argument(
        "window",
        nargs="?",
        default=None,
        help="variable holding the window (default: the one last loaded or recorded here)",
    )
    parser.add_argument(
        "-o", dest="name", default=None, metavar="NAME", help="also store the answer in NAME"
    )
    return parser


def cell_changes(args: argparse.Namespace, backend: str) -> dict[str, Any]:
    """The config keys a ``%%dynprof`` line asks for, with the cell's one default: the
    built-in backend records Python calls (``with_stack``), without which it sees only the
    cell as one step. Not with ``--memory``: every recorded call is an event held in the
    process's memory, so the RSS the window reports grew with the profiler's own events (56 MB
    for a cell of 300,000 calls that allocates nothing) and the cell ran 20x slower, and its
    header said ``with_stack=True``, which nobody asked for. ``--stack`` still asks for both."""
    changes = config_changes(args)
    if backend == "builtin" and not changes.get("profile_memory"):
        changes.setdefault("with_stack", True)
    return changes


HANDLERS = DynprofMagics.HANDLERS


def _window_arg(text: str | None) -> int | str | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return text


def _load_choice(args: argparse.Namespace) -> dict[str, Any]:
    """``load()``'s keywords from ``--run N --steps A-B --no-wait``: only those given (a
    cluster's load takes none of them)."""
    steps = None
    if args.steps is not None:
        first, _, last = args.steps.partition("-")
        if not (first.strip().isdigit() and last.strip().isdigit()):
            raise UsageError(f"--steps {args.steps!r}: expected FIRST-LAST, e.g. 200-204.")
        steps = (int(first), int(last))
    given = {"run": args.run, "steps": steps, "wait": False if args.no_wait else None}
    return {k: v for k, v in given.items() if v is not None}


def _only_live_job() -> str:
    from dynprof_nb.control.registry import jobs

    frame = jobs()
    live = list(frame[frame.live > 0].job) if len(frame) else []
    if len(live) == 1:
        return live[0]
    names = ", ".join(frame.job) if len(frame) else "none"
    raise UsageError(
        f"which job? {len(live)} have live ranks (jobs: {names}); run %dynprof attach JOB."
    )


def _is_job_handle(value: Any) -> bool:
    """Whether ``value`` is a job handle (local, file-mode or cluster), that an attach may
    replace in the user's namespace."""
    return isinstance(value, Controller)


def _is_user_error(exc: Exception) -> bool:
    """Errors whose message already tells the user what to do (no traceback needed)."""
    from dynprof_nb.control.base import JobError

    names = {c.__name__ for c in type(exc).__mro__}
    return isinstance(exc, (JobError, FileNotFoundError)) or "TraceFormatError" in names


# -- tab completion ---------------------------------------------------------------------------


def candidates(text: str) -> list[str] | None:
    """What may follow in a ``%dynprof`` / ``%%dynprof`` line typed up to the cursor, as whole
    words: the subcommands, job names after ``attach``, options, config keys after ``set``,
    and a key's own values after its option (``--level Level1``) or its ``=``
    (``profiler_level=Level1``). ``None`` when the line is not ours (other completers then
    run as usual)."""
    stripped = text.lstrip()
    try:
        words = shlex.split(stripped, posix=False) if stripped else []
    except ValueError:
        words = stripped.split()
    if text.endswith((" ", "\t")):
        words.append("")
    if not words or words[0] not in ("%dynprof", "%%dynprof", "dynprof"):
        return None
    if len(words) == 1:
        return None  # still typing the magic's name: IPython completes it
    if words[0] == "%%dynprof":
        cell = build_cell_parser()
        values = _option_values(cell, words[1:])
        return values if values is not None else _flags(cell)
    words = words[1:]
    if len(words) <= 1:
        return list(SUBCOMMANDS)
    command, current = words[0], words[-1]
    if command == "attach" and len(words) == 2 and not current.startswith("-"):
        from dynprof_nb.contract.segment import list_jobs

        return list_jobs()
    if command == "set" and not current.startswith("-"):
        key, eq, value = current.partition("=")
        if eq and key in ProfilerConfig.keys():
            return _with_prefix(f"{key}={value}", _key_values(key), _is_list(key))
        return [f"{k}=" for k in ProfilerConfig.keys()]
    subs = build_parser().subcommands
    if command in subs:
        values = _option_values(subs[command], words[1:])
        if values is not None:
            return values
        if current.startswith("-"):
            return _flags(subs[command])
    return []


def _key_values(key: str) -> list[str]:
    """The values a config key takes, as typed: its choices, or true/false."""
    trait = ProfilerConfig.class_traits()[key]
    if getattr(trait, "widget", "") == "checkbox":
        return ["true", "false"]
    return list(getattr(trait, "choices", None) or ())


def _is_list(key: str) -> bool:
    return isinstance(ProfilerConfig.class_traits()[key].default_value, list)


def _with_prefix(current: str, values: list[str], is_list: bool) -> list[str]:
    """``values`` as whole words for the word being typed: after ``key=`` (and, in a comma
    list, after the values already given: ``activities=CPU,`` offers ``activities=CPU,NPU``)."""
    cut = current.rfind(",") if is_list else -1
    head = current[: (cut if cut >= 0 else current.find("=")) + 1]
    return [head + v for v in values]


def _option_values(parser: _Parser, words: list[str]) -> list[str] | None:
    """The values of the option just before the word being typed (``--level L``), or None
    when that word is not an option's value (or the option's values are free text)."""
    if len(words) < 2 or not words[-2].startswith("-") or words[-1].startswith("-"):
        return None
    action = next((a for a in parser.actions if words[-2] in a.option_strings), None)
    if action is None or action.nargs == 0:
        return None
    if action.choices:
        return list(action.choices)
    if action.dest in ProfilerConfig.keys() and _key_values(action.dest):
        values = _key_values(action.dest)
        if _is_list(action.dest) and "," in words[-1]:
            return _with_prefix(words[-1], values, True)
        return values
    return None


def complete(_shell: Any, event: Any) -> list[str]:
    """The ``complete_command`` hook's form of :func:`candidates`."""
    return candidates(event.text_until_cursor) or []


def _flags(parser: _Parser) -> list[str]:
    return sorted(o for a in parser.actions for o in a.option_strings)


def _matcher() -> Any:
    """An IPython matcher that, on a ``%dynprof`` line, offers only the magic's candidates
    and suppresses every other completer (Jedi would add Python builtins: ``and``, ``if``)."""
    from IPython.core.completer import SimpleCompletion, context_matcher

    @context_matcher()
    def dynprof_matcher(context: Any) -> dict[str, Any]:
        text = context.text_until_cursor
        found = candidates(text)
        if found is None:
            return {"completions": [], "suppress": False}
        # the candidates are whole words; IPython's token may be only the end of the word
        # (after "=" or ","): complete the token with the rest of each word
        word = "" if text.endswith((" ", "\t")) else text.split()[-1]
        token = context.token
        cut = len(word) - len(token) if word.endswith(token) else 0
        shown = [c[cut:] for c in found if c.startswith(word[:cut] + token)]
        return {
            "completions": [SimpleCompletion(text=c, type="dynprof") for c in shown],
            "suppress": True,
            "ordered": True,
        }

    return dynprof_matcher


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%dynprof`` / ``%%dynprof`` and their tab completion."""
    ipython.register_magics(DynprofMagics)
    completer = getattr(ipython, "Completer", None)
    if completer is not None and not any(
        getattr(m, "__qualname__", "").endswith("dynprof_matcher")
        for m in completer.custom_matchers
    ):
        completer.custom_matchers.append(_matcher())


DynprofMagics.dynprof.__doc__ = _help_text()
