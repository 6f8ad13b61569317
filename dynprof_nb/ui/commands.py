"""The subcommands of ``%dynprof`` and ``dynprof``, with their help, defined once.

The magic and the CLI share their verbs (``start``, ``stop``, ``set``, ``status``, ...); each
offers the ones that make sense where it runs (``panel`` only in a notebook, ``relay`` and
``demo`` only in a terminal), with the same words.
"""

from __future__ import annotations

COMMANDS = {
    "jobs": "list this user's jobs on this machine",
    "attach": "attach to a job by name (JOB; --create to prepare one before its ranks "
    "start), or to a file-mode job (--cfg-path DIR)",
    "start": "record steps START..STOP (inclusive; '+N' = N steps after the most advanced "
    "rank's current step: at step 500, start +10 +19 records 510..519); its options hold for "
    "this window only",
    "stop": "end the active window now (what was recorded is saved), or cancel a pending one",
    "set": "change standing config keys for every rank and every later window: key=value ...",
    "config": "show the job's standing config (and the pending window's own options)",
    "status": "every rank's step, state, heartbeat and error",
    "wait": "wait until every live rank has finished the window",
    "windows": "the job's windows on disk",
    "load": "load a window into a TraceWindow: the window asked for last (waiting while it "
    "is pending), else the latest; an older one by choice (a row of 'windows', --run, --steps)",
    "summary": "the summary of a window (latest by default)",
    "advise": "what msprof-analyze's advisor and HTA would flag in a window (latest by default, "
    "or a window folder / trace file): one finding per line with its numbers and thresholds",
    "stacks": "where every thread of every live rank is now (even a rank stuck in C code), "
    "identical stacks merged into one tree, the odd ranks first",
    "recent": "every rank's record of its last N steps (default 100), written now and loaded: "
    "step times, user ranges, GC pauses, data-loader waits; .explain() compares its slow steps "
    "with its normal ones",
    "hang": "when a job hangs: which collective it waits in, which ranks never arrived "
    "(their Flight Recorder dumps, Monitor(flight_recorder=True)) and where those ranks' main "
    "threads are; without a recorder, the stacks alone",
    "fr": "the same analysis of Flight Recorder dumps collected elsewhere (DIR or files: a "
    "torchrun watchdog's, a SLURM job's output)",
    "panel": "the interactive panel: config form, live ranks, windows",
    "relay": "mirror a profiler_config.json into a job (one per node), as MindSpore's monitor "
    "process does",
    "demo": "run the two-rank demo job and profile ten steps",
    "trigger": "arm a window that starts by itself when a step slows (--slowdown 2 --steps 10), "
    "disarm it (--off), or show it",
    "cache": "the frame cache: the windows whose frames are kept as Parquet for a fast second "
    "load (--clear empties it, --clear PATH forgets one trace or window)",
    "doctor": "this environment: Python, platform, every dependency's version, optional parts "
    "on/off and why, /dev/shm, the cache directory, frameworks, known incompatibilities",
}

# arguments both spell the same way
ARGUMENTS = {
    "start": "first step (1-based), or +N: N steps after the most advanced rank's current step",
    "stop": "last step, inclusive, or +N: N steps after the most advanced rank's current step",
    "--create": "prepare the job if its ranks have not started yet",
    "--last": "the stacks taken automatically when the job was last found stalled",
    "--timeout-stacks": "seconds to wait for every rank's dump (the silent ones are named)",
    "--timeout-hang": "seconds to wait for the ranks' dumps and stacks",
    "--keep": "also copy the dumps into DIR (_dump_<rank>, as torch names them)",
    "--run": "a window of this run of the job (a job restarted under its name is a new run)",
    "--steps": "the window of these steps, FIRST-LAST (recorded or asked)",
    "--no-wait": "do not wait for a pending window: say what is pending instead",
    "--clear": "remove every cached frame, or (with PATH) those of one trace file or window",
}

MAGIC_COMMANDS = (
    "jobs",
    "attach",
    "start",
    "stop",
    "set",
    "config",
    "status",
    "wait",
    "windows",
    "load",
    "summary",
    "advise",
    "stacks",
    "recent",
    "hang",
    "panel",
    "trigger",
    "cache",
)
CLI_COMMANDS = (
    "jobs",
    "status",
    "stop",
    "windows",
    "start",
    "set",
    "wait",
    "stacks",
    "hang",
    "fr",
    "relay",
    "demo",
    "trigger",
    "cache",
    "doctor",
    "advise",
)


def helps(names: tuple[str, ...]) -> dict[str, str]:
    """``{name: help}`` for ``names``, in that order."""
    return {name: COMMANDS[name] for name in names}
