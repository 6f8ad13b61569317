"""``%dynprof trigger`` and ``dynprof trigger JOB``: one set of flags, one way to run them."""

from __future__ import annotations

import argparse
from typing import Any

HELP = (
    "arm a window that starts by itself when a step slows (--slowdown 2 --steps 10), "
    "or disarm it (--off); no flags: show it"
)


TRIGGER_OPTIONS_TITLE = "options for the triggered windows only"


def add_trigger_arguments(parser: argparse.ArgumentParser) -> None:
    """The trigger's own flags; the caller adds the config flags (``add_config_flags``, with
    :data:`TRIGGER_OPTIONS_TITLE`) beside them."""
    parser.add_argument(
        "--slowdown",
        type=float,
        default=None,
        metavar="X",
        help="fire when a rank's step takes more than X times its own median "
        "(or the job's median X times its median when armed); default 2",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=10,
        metavar="N",
        help="steps the window records on every rank (default 10)",
    )
    parser.add_argument(
        "--cooldown",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds between two triggered windows (default 600)",
    )
    parser.add_argument(
        "--max-windows",
        type=int,
        default=3,
        metavar="N",
        help="windows at most, until armed again (default 3)",
    )
    parser.add_argument(
        "--confirm",
        type=int,
        default=1,
        metavar="N",
        help="slow observations in a row before it fires (default 1)",
    )
    parser.add_argument(
        "--disk-budget-mb",
        type=float,
        default=None,
        metavar="MB",
        help="fire no more once the job's windows use this much disk",
    )
    parser.add_argument("--off", action="store_true", help="disarm the trigger")


def run_trigger(job: Any, args: argparse.Namespace, options: dict[str, Any]) -> str:
    """Arm, disarm or show ``job``'s trigger as ``args`` say, its windows recorded with
    ``options`` (the config flags given); what happened, in words."""
    if args.off:
        job.trigger(None)
        return f"job {job.name}: trigger disarmed"
    if args.slowdown is None and not options and args.steps == 10:
        return describe(job.triggers, job.name)
    t = job.trigger(
        slowdown=2.0 if args.slowdown is None else args.slowdown,
        steps=args.steps,
        cooldown_s=args.cooldown,
        max_windows=args.max_windows,
        confirm=args.confirm,
        disk_budget_mb=args.disk_budget_mb,
        **options,
    )
    return describe(t, job.name)


def describe(t: dict[str, Any], name: str) -> str:
    if not t.get("armed"):
        return f"job {name}: no trigger armed"
    text = (
        f"job {name}: trigger {t['state']}: slowdown {t['slowdown']:g}x, {t['steps']} "
        f"steps, cooldown {t['cooldown_s']:g} s, {t['fired']}/{t['max_windows']} windows"
    )
    if t.get("last_reason"):
        text += f"; last: {t['last_reason']}"
    return text
