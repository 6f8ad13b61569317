"""ProfilerConfig: MindSpore's ``profiler_config.json`` schema as a traitlets object.

The schema lives here once. The panel's form, the magic's options and the CLI's flags are all
generated from the traits below (their ``help`` and ``flag`` metadata), so they cannot drift.
Each trait also parses its own text (``from_string``, traitlets' convention), writes it back
(``to_string``) and names the kind of field that edits it (``widget``), so no consumer needs an
``isinstance`` ladder over the trait classes.

Unlike the original, a wrong value is an error that names the key, the value given and what is
accepted; it is never silently reset to a default.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from traitlets import HasTraits, TraitError, TraitType

from dynprof_nb.safetext import escape

__all__ = ["ConfigError", "ProfilerConfig", "CONFIG_FILE", "config_file"]

CONFIG_FILE = "profiler_config.json"


def config_file(cfg_path: str | os.PathLike[str]) -> Path:
    """``DIR/profiler_config.json`` for a directory (as MindSpore's ``cfg_path``), else the path."""
    path = Path(cfg_path).expanduser()
    return path if path.suffix == ".json" else path / CONFIG_FILE


LEVELS = ("LevelNone", "Level0", "Level1", "Level2")
ACTIVITIES = ("CPU", "NPU", "GPU")
AIC_METRICS = (
    "AiCoreNone",
    "PipeUtilization",
    "ArithmeticUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "ResourceConflictRatio",
    "L2Cache",
    "MemoryAccess",
)
EXPORT_TYPES = ("text", "db")
HOST_SYS = ("cpu", "mem", "disk", "network", "osrt")
INT64_MAX = 2**63 - 1


class ConfigError(TraitError, ValueError):
    """A config value is wrong. Catchable as ``traitlets.TraitError`` or ``ValueError``."""


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


class _Checked(TraitType):
    """Base for the strict traits: errors name the key, the value and what is accepted."""

    accepted = "a valid value"
    widget = "text"  # the kind of field that edits it: text, int, checkbox, dropdown, toggles
    choices: tuple[str, ...] | None = None

    def __init__(self, default_value: Any = None, flag: str | None = None, **kwargs: Any) -> None:
        super().__init__(default_value, **kwargs)
        if flag:
            self.tag(flag=flag)  # the option name the CLI, magic and panel use

    def error(self, obj: Any, value: Any, error: Any = None, info: Any = None) -> None:
        raise ConfigError(f"{self.name}: got {_describe(value)}; expected {self.accepted}.")

    def from_string(self, s: str) -> Any:
        """The value typed as text (a CLI word, a magic's ``key=value``, a form field)."""
        try:
            return json.loads(s)
        except json.JSONDecodeError:
            return s

    def to_string(self, value: Any) -> str:
        """The text a person would type for ``value`` (``from_string`` reads it back)."""
        return str(value)


# the recent-steps record's size (dynprof_nb.training.recent, which checks it keeps these):
# its default, and the most the training thread's end times hold safely
RECENT_STEPS_DEFAULT = 300
RECENT_STEPS_MAX = 2046


class StrictInt(_Checked):
    """An int that refuses bools and strings (``"20"`` must not silently mean 'no window')."""

    default_value = 0
    info_text = "an integer"
    widget = "int"

    def __init__(
        self,
        default_value: int = 0,
        minimum: int | None = None,
        maximum: int | None = None,
        accepted: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.minimum, self.maximum = minimum, maximum
        self.accepted = accepted or "an integer" + (f" >= {minimum}" if minimum is not None else "")
        super().__init__(default_value, **kwargs)

    def validate(self, obj: Any, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(obj, value)
        if self.minimum is not None and value < self.minimum:
            self.error(obj, value)
        if self.maximum is not None and value > self.maximum:
            self.error(obj, value)
        if value > INT64_MAX:  # steps travel in the segment's int64 words
            raise ConfigError(f"{self.name}: got {value}; expected an integer <= {INT64_MAX}.")
        return int(value)

    def from_string(self, s: str) -> int:
        text = s.strip()
        if not text.lstrip("-").isdigit():  # "12x5" is a typo, never 125
            raise ConfigError(f"{self.name}: {s!r} is not a number; expected {self.accepted}.")
        return int(text)


class StrictBool(_Checked):
    """A bool that refuses 0/1 and strings: ``"false"`` in a JSON file is a mistake, not False."""

    default_value = False
    info_text = "true or false"
    accepted = "true or false"
    widget = "checkbox"
    WORDS = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}

    def validate(self, obj: Any, value: Any) -> bool:
        if not isinstance(value, bool):
            self.error(obj, value)
        return value

    def from_string(self, s: str) -> bool:
        word = s.strip().lower()
        if word not in self.WORDS:
            raise ConfigError(f"{self.name}: got {s!r}; expected true or false.")
        return self.WORDS[word]

    def to_string(self, value: Any) -> str:
        return "true" if value else "false"


class Choice(_Checked):
    """One of a fixed set of names; a legacy int form maps onto a name."""

    widget = "dropdown"

    def __init__(
        self,
        choices: tuple[str, ...],
        default_value: str,
        legacy: dict[int, str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.choices = choices
        self.legacy = legacy or {}
        self.accepted = "one of " + ", ".join(repr(c) for c in choices)
        if self.legacy:
            self.accepted += f" (or a legacy int {min(self.legacy)}..{max(self.legacy)})"
        super().__init__(default_value, **kwargs)

    def validate(self, obj: Any, value: Any) -> str:
        if isinstance(value, int) and not isinstance(value, bool) and value in self.legacy:
            return self.legacy[value]
        if isinstance(value, str):
            for choice in self.choices:
                if value.lower() == choice.lower():
                    return choice
        self.error(obj, value)


class _TextList(_Checked):
    """A list typed as comma-separated words (or a JSON list)."""

    def from_string(self, s: str) -> list[Any]:
        if s.strip().startswith("["):
            return super().from_string(s)
        return [p.strip() for p in s.split(",") if p.strip()]

    def to_string(self, value: Any) -> str:
        return ",".join(str(v) for v in value)


class ChoiceList(_TextList):
    """A list of names from a fixed set (deduplicated, order kept); legacy ints map onto lists."""

    widget = "toggles"

    def __init__(
        self,
        choices: tuple[str, ...],
        default_value: list[str],
        legacy: dict[int, list[str]] | None = None,
        allow_empty: bool = True,
        **kwargs: Any,
    ) -> None:
        self.choices = choices
        self.legacy = legacy or {}
        self.allow_empty = allow_empty
        self.accepted = "a list of " + ", ".join(repr(c) for c in choices)
        if self.legacy:
            self.accepted += f" (or a legacy int {min(self.legacy)}..{max(self.legacy)})"
        if not allow_empty:
            self.accepted = "a non-empty " + self.accepted[2:]
        super().__init__(list(default_value), **kwargs)

    def validate(self, obj: Any, value: Any) -> list[str]:
        if isinstance(value, int) and not isinstance(value, bool) and value in self.legacy:
            return list(self.legacy[value])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)):
            self.error(obj, value)
        out: list[str] = []
        for item in value:
            match = next(
                (c for c in self.choices if isinstance(item, str) and item.lower() == c.lower()),
                None,
            )
            if match is None:
                raise ConfigError(
                    f"{self.name}: {item!r} in {value!r} is not accepted; expected {self.accepted}."
                )
            if match not in out:
                out.append(match)
        if not out and not self.allow_empty:
            self.error(obj, value)
        return out

    def make_dynamic_default(self) -> list[str]:
        return list(self.default_value)


class StrList(_TextList):
    """A list of strings (mstx domain filters)."""

    accepted = "a list of strings"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__([], **kwargs)

    def validate(self, obj: Any, value: Any) -> list[str]:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            self.error(obj, value)
        return list(value)

    def make_dynamic_default(self) -> list[str]:
        return []


class RankList(_TextList):
    """A list of non-negative rank numbers; empty means every rank."""

    accepted = "a list of rank numbers >= 0 (empty = all ranks)"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__([], **kwargs)

    def validate(self, obj: Any, value: Any) -> list[int]:
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
        ):
            self.error(obj, value)
        return sorted(set(value))

    def from_string(self, s: str) -> list[Any]:
        words = super().from_string(s)
        if s.strip().startswith("["):
            return words
        try:
            return [int(w) for w in words]
        except ValueError:
            raise ConfigError(
                f"{self.name}: got {s!r}; expected rank numbers like 0,1,3."
            ) from None

    def make_dynamic_default(self) -> list[int]:
        return []


class Text(_Checked):
    """A string (a path); text is taken as typed."""

    accepted = "a string"

    def validate(self, obj: Any, value: Any) -> str:
        if not isinstance(value, str):
            self.error(obj, value)
        return value

    def from_string(self, s: str) -> str:
        return s


class ProfilerConfig(HasTraits):
    """Every key of MindSpore 2.7's ``profiler_config.json``, with its defaults, plus ``ranks``.

        >>> cfg = ProfilerConfig(start_step=20, stop_step=30, profile_memory=True)
        >>> cfg.to_dict()["activities"]
        ['CPU', 'NPU']

    Steps are 1-based and the window is inclusive: ``start_step=20, stop_step=30`` records
    iterations 20..30. ``start_step=-1`` means no window. Types are checked per key on
    assignment; the window as a whole is checked by :meth:`validate`.
    """

    start_step = StrictInt(-1, minimum=-1, help="first step of the window (1-based); -1 = none")
    stop_step = StrictInt(-1, minimum=-1, help="last step of the window, inclusive; -1 = none")
    profiler_level = Choice(
        LEVELS,
        "Level0",
        legacy={-1: "LevelNone", 0: "Level0", 1: "Level1", 2: "Level2"},
        help="how much to collect",
        flag="level",
    )
    activities = ChoiceList(
        ACTIVITIES,
        ["CPU", "NPU"],
        allow_empty=False,
        legacy={0: ["CPU", "NPU"], 1: ["CPU"], 2: ["NPU"]},
        help="devices to profile: CPU, and NPU for the accelerator (CUDA on a GPU; none: dropped)",
        flag="activities",
    )
    aic_metrics = Choice(
        AIC_METRICS,
        "AiCoreNone",
        legacy={-1: "AiCoreNone", **{i: m for i, m in enumerate(AIC_METRICS[1:])}},
        help="AI Core hardware counters (Ascend)",
        flag="aic-metrics",
    )
    export_type = ChoiceList(
        EXPORT_TYPES,
        ["text"],
        allow_empty=False,
        legacy={0: ["text"], 1: ["db"], 2: ["text", "db"]},
        help="output formats",
        flag="export-type",
    )
    analyse = StrictBool(
        False, help="run the framework's analysis after the window", flag="analyse"
    )
    analyse_mode = StrictInt(
        -1,
        minimum=-1,
        maximum=1,
        accepted="-1 (none), 0 (sync) or 1 (async)",
        help="-1 none, 0 sync, 1 async analysis",
        flag="analyse-mode",
    )
    profile_memory = StrictBool(False, help="record memory", flag="memory")
    mstx = StrictBool(False, help="record user ranges (mstx / dynprof_nb.range)", flag="mstx")
    parallel_strategy = StrictBool(
        False, help="record the parallel strategy", flag="parallel-strategy"
    )
    with_stack = StrictBool(False, help="record Python call stacks", flag="stack")
    data_simplification = StrictBool(
        True, help="drop intermediate data after analysis", flag="simplify"
    )
    l2_cache = StrictBool(False, help="collect L2 cache data (Ascend)", flag="l2-cache")
    record_shapes = StrictBool(False, help="record operator input shapes", flag="shapes")
    sys_io = StrictBool(False, help="collect NIC/RoCE data (Ascend)", flag="sys-io")
    sys_interconnection = StrictBool(
        False, help="collect HCCS/PCIe data (Ascend)", flag="sys-interconnection"
    )
    prof_path = Text(
        "./", help="output root; wins over the monitor's output_path", flag="prof-path"
    )
    mstx_domain_include = StrList(help="only these mstx domains", flag="mstx-include")
    mstx_domain_exclude = StrList(help="all mstx domains but these", flag="mstx-exclude")
    host_sys = ChoiceList(HOST_SYS, [], help="host system data to collect", flag="host-sys")
    flight_recorder = StrictBool(
        False,
        help="let job.hang_report() ask PyTorch ranks for their Flight Recorder dump",
        flag="flight-recorder",
    )
    recent_steps = StrictInt(
        RECENT_STEPS_DEFAULT,
        minimum=0,
        maximum=RECENT_STEPS_MAX,
        accepted=f"an integer from 0 (off) to {RECENT_STEPS_MAX}",
        help="steps each rank's recent-steps record keeps, read when its Monitor starts "
        "(0: off; Monitor(recent_steps=) and DYNPROF_NB_RECENT_STEPS win)",
        flag="recent-steps",
    )
    ranks = RankList(help="ranks to profile; empty = all", flag="ranks")

    # -- construction -------------------------------------------------------------------

    def __init__(self, /, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(self.keys()))
        if unknown:
            raise ConfigError(unknown_keys_message(unknown))
        super().__init__(**kwargs)

    @classmethod
    def keys(cls) -> list[str]:
        """Config keys in MindSpore's order (``ranks`` last)."""
        return list(_traits())

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, strict: bool = False) -> ProfilerConfig:
        """Build from a dict such as a parsed ``profiler_config.json``.

        Unknown keys give one warning naming them (MindSpore ignores them, so files written
        for MindSpore keep loading); with ``strict=True`` they are an error instead.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"a profiler config must be a JSON object, got {_describe(data)}.")
        known = set(cls.keys())
        unknown = sorted(k for k in data if k not in known and k != "is_valid")
        if unknown:
            if strict:
                raise ConfigError(unknown_keys_message(unknown))
            warnings.warn(unknown_keys_message(unknown) + " They are ignored.", stacklevel=2)
        cfg = cls(**_not_default({k: v for k, v in data.items() if k in known}))
        cfg.validate()
        return cfg

    def to_dict(self) -> dict[str, Any]:
        """Every key with its value, JSON-ready, in MindSpore's order."""
        return {k: _copy(getattr(self, k)) for k in self.keys()}

    def copy(self) -> ProfilerConfig:
        return type(self)(**self.to_dict())

    def update(self, /, **changes: Any) -> ProfilerConfig:
        """A new config with ``changes`` applied and checked; ``self`` is not modified."""
        data = self.to_dict()
        unknown = sorted(set(changes) - set(data))
        if unknown:
            raise ConfigError(unknown_keys_message(unknown))
        data.update(changes)
        cfg = type(self)(**_not_default(data))
        cfg.validate()
        return cfg

    # -- files ----------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ProfilerConfig:
        """Read MindSpore's ``profiler_config.json`` (a directory means the file inside it)."""
        path = Path(path)
        if path.is_dir():
            path = path / CONFIG_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read profiler config {path}: {exc.strerror}.") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path} is not valid JSON at line {exc.lineno} column "
                f"{exc.colno}: {exc.msg}. Fix the file; the last good config "
                "stays in force."
            ) from exc
        return cls.from_dict(data)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write MindSpore's file atomically (temp file + rename): a poller never sees half."""
        path = Path(path)
        if path.is_dir():
            path = path / CONFIG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".profiler_config.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.to_dict(), fh, indent=4)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    # -- checks ---------------------------------------------------------------------------

    @property
    def has_window(self) -> bool:
        return self.start_step >= 1

    def validate(self) -> None:
        """Check every key again and what no single key can: the window is (-1, -1) or
        1 <= start <= stop. Nothing returns before a key is checked, so a bad value can never
        ride in on a config without a window and block every later one."""
        # A trait checks on assignment; set_trait(force) etc. do not. Every value that was set,
        # however, is in _trait_values; a key never set holds its default, valid by definition
        # (checking all 23 cost a rank ~50 µs of its training step for each command).
        traits = _traits()
        for key, value in list(self._trait_values.items()):
            if key in traits:
                traits[key].validate(self, value)
        start, stop = self.start_step, self.stop_step
        if start == -1 and stop == -1:
            return
        if start == 0:
            raise ConfigError(
                "start_step: got 0; steps are 1-based, the first step is 1 (-1 means no window)."
            )
        if start == -1:
            raise ConfigError(
                f"start_step: got -1 with stop_step={stop}; set both, "
                "e.g. start_step=20, stop_step=30."
            )
        if stop < start:
            raise ConfigError(
                f"stop_step: got {stop}, which is before start_step={start}; "
                "the window is inclusive, so stop_step must be >= start_step."
            )

    def __repr__(self) -> str:
        changed = {k: v for k, v in self.to_dict().items() if v != _default(k)}
        inner = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        return f"ProfilerConfig({inner})"

    def _repr_html_(self) -> str:
        # values come from files and segments anyone may have written: escaped, never markup
        rows = "".join(
            f"<tr><td><code>{escape(k)}</code></td><td>{'<b>' if v != _default(k) else ''}"
            f"{escape(repr(v))}{'</b>' if v != _default(k) else ''}</td>"
            f"<td>{escape(self.trait_metadata(k, 'help') or '')}</td></tr>"
            for k, v in self.to_dict().items()
        )
        return f"<table><tr><th>key</th><th>value</th><th>meaning</th></tr>{rows}</table>"


def _copy(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


def _default(key: str) -> Any:
    return ProfilerConfig.class_traits()[key].default()


_DEFAULTS: dict[str, Any] = {}
_TRAITS: dict[str, TraitType] = {}


def _traits() -> dict[str, TraitType]:
    """The config's traits by key, in MindSpore's order (``ranks`` last); built once."""
    if not _TRAITS:
        _TRAITS.update((k, v) for k, v in vars(ProfilerConfig).items() if isinstance(v, TraitType))
    return _TRAITS


def _not_default(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the keys that hold their default (same value, same types).

    A rank decodes every command inside its training loop, and validating each of the 23
    traits costs ~4 µs there: a command is mostly defaults, and a default needs no check.
    Same types matter: ``1`` for a bool key or ``0`` for a level (MindSpore's legacy codes) is
    not the default and goes through its trait as before.
    """
    if not _DEFAULTS:
        _DEFAULTS.update({k: _default(k) for k in ProfilerConfig.keys()})
    return {k: v for k, v in data.items() if not _same(v, _DEFAULTS[k])}


def _same(value: Any, default: Any) -> bool:
    if type(value) is not type(default):
        return False
    if isinstance(value, list):
        return len(value) == len(default) and all(
            type(a) is type(b) and a == b for a, b in zip(value, default, strict=True)
        )
    return value == default


def unknown_keys_message(unknown: list[str]) -> str:
    """Name each unknown key with its closest real key, as the tutorial itself misspells one."""
    parts = []
    for key in unknown:
        close = difflib.get_close_matches(key, ProfilerConfig.keys(), n=1)
        parts.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return "unknown config key " + ", ".join(parts) + "."


def coerce_cli_value(key: str, text: str) -> Any:
    """Turn ``key=value`` text from the CLI or a magic into the key's type.

    The key's trait parses it (``activities=CPU,NPU``, ``profiler_level=Level1``,
    ``with_stack=true``); assigning it then checks it.
    """
    if key not in ProfilerConfig.keys():
        raise ConfigError(unknown_keys_message([key]))
    return ProfilerConfig.class_traits()[key].from_string(text)
