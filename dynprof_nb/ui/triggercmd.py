"""``%dynprof trigger`` and ``dynprof trigger JOB``: one set of flags, one way to run them."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from typing import Any

from dynprof_nb.contract.shared_layout import TRIGGER_DEFAULTS

HELP = (
    "arm a window that starts by itself when a step slows (--slowdown 1.5 --confirm 5 "
    "--steps 10), or disarm it (--off); no flags: show it"
)
NOTICE_POLL_S = 0.5  # how often the magic's notice looks for a window fired


TRIGGER_OPTIONS_TITLE = "options for the triggered windows only"


def add_trigger_arguments(parser: argparse.ArgumentParser) -> None:
    """The trigger's own flags; the caller adds the config flags (``add_config_flags``, with
    :data:`TRIGGER_OPTIONS_TITLE`) beside them."""
    parser.add_argument(
        "--slowdown",
        type=float,
        default=None,
        metavar="X",
        help="fire when --confirm of a rank's steps in a row take more than X times its "
        "median over its last 64 steps (or the job's median X times its median when "
        f"armed); default {TRIGGER_DEFAULTS['slowdown']:g}",
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
        default=None,
        metavar="S",
        help="seconds between two triggered windows (default: auto, 20 windows' worth of "
        "the job's steps, at least 10 s)",
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
        default=TRIGGER_DEFAULTS["confirm"],
        metavar="N",
        help=f"slow steps in a row before it fires (default {TRIGGER_DEFAULTS['confirm']})",
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
        slowdown=TRIGGER_DEFAULTS["slowdown"] if args.slowdown is None else args.slowdown,
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
    text = f"job {name}: trigger {t['state']}: {armed_values(t)}"
    if t.get("last_reason"):
        text += f"; last: {t['last_reason']}"
    return text


def armed_values(t: dict[str, Any]) -> str:
    """The armed trigger's values in words (the panel and the magic say the same)."""
    auto = " (auto)" if t.get("cooldown_s") is None else ""
    refused = f", {t['refused']} refused" if t.get("refused") else ""
    return (
        f"slowdown {t['slowdown']:g}x, confirm {t['confirm']} steps, {t['steps']}-step "
        f"windows, cooldown {t.get('cooldown_effective_s', t.get('cooldown_s') or 0):g} s"
        f"{auto}, fired {t['fired']}/{t['max_windows']}{refused}"
    )


def fired_notice(name: str, t: dict[str, Any]) -> str:
    """The one line said when the trigger has fired a window."""
    return f"dynprof_nb: job {name}: the trigger fired a window: {t.get('last_reason', '')}"


#: the watcher of each job by its name, so that arming again stops the one before
_RUNNING: dict[str, FireNotices] = {}


class FireNotices:
    """Says one line (``say``) each time ``job``'s trigger fires a window, until it is
    disarmed or armed again (which starts a new watcher): a daemon thread, one per job."""

    def __init__(self, job: Any, say: Callable[[str], None] = print) -> None:
        self.job, self.say = job, say
        self.armed_at = job.triggers.get("armed_at")
        self.fired = job.triggers.get("fired", 0)
        self.stopped = threading.Event()
        old = _RUNNING.get(job.name)
        if old is not None:
            old.stopped.set()
        _RUNNING[job.name] = self
        threading.Thread(target=self._run, name="dynprof_nb-notices", daemon=True).start()

    def _run(self) -> None:
        while not self.stopped.wait(NOTICE_POLL_S):
            try:
                t = self.job.triggers
            except Exception:  # a closed handle: nothing more to say
                return
            if not t.get("armed") or t.get("armed_at") != self.armed_at:
                return
            if t.get("fired", 0) > self.fired:
                self.fired = t["fired"]
                self.say(fired_notice(self.job.name, t))
