"""``dynprof doctor`` and ``dynprof_nb.doctor()``: this environment, in one report a user runs
first and pastes into a bug report.

Python and the platform, every dependency's version (and whether it is inside the declared
range), which optional parts are on and why any are off (:mod:`dynprof_nb.optional`), whether
/dev/shm is usable (jobs live there), the frame cache's directory, the frameworks found (read
from their metadata, never imported: importing torch or MindSpore takes seconds) and whether
their versions are tested, and each known incompatibility with its fix. In a log (stdout not a
terminal) one ``key: value`` line per fact, as the progress output writes a log; in a
terminal the same, grouped and aligned; in a notebook an HTML table.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import metadata

from dynprof_nb.safetext import escape

# what the test matrix runs (`make test`, .venv/matrix/*): the versions a user can rely on
TESTED_FRAMEWORKS = {"torch": ("2.13",), "mindspore": ("2.7",), "torch_npu": ()}
_FALLBACK_DEPENDENCIES = (
    "ipython",
    "ipywidgets",
    "anywidget",
    "traitlets",
    "pandas",
    "numpy",
    "matplotlib",
    "tqdm",
    "orjson",
    "msgspec",
    "pyarrow",
)


@dataclass(frozen=True)
class Fact:
    """One line of the report: ``key: value``; ``ok`` False marks a problem."""

    section: str
    key: str
    value: str
    ok: bool = True


@dataclass
class Report:
    """The facts; printed as lines (a log), aligned groups (a terminal) or HTML (a notebook)."""

    facts: list[Fact] = field(default_factory=list)

    def add(self, section: str, key: str, value: str, ok: bool = True) -> None:
        self.facts.append(Fact(section, key, value, ok))

    @property
    def problems(self) -> list[Fact]:
        return [f for f in self.facts if not f.ok]

    def lines(self) -> str:
        """One ``key: value`` line per fact (the progress output's format in a log)."""
        return "\n".join(f"{f.key}: {f.value}" for f in self.facts)

    def table(self) -> str:
        """The facts grouped by section, keys aligned, problems marked ``!``."""
        width = max((len(f.key) for f in self.facts), default=0)
        out, section = [], None
        for f in self.facts:
            if f.section != section:
                section = f.section
                out.append(("" if not out else "\n") + f"{section}")
            out.append(f"  {'!' if not f.ok else ' '} {f.key:<{width}}  {f.value}")
        return "\n".join(out)

    def text(self, tty: bool | None = None) -> str:
        if tty is None:
            tty = sys.stdout.isatty()
        return self.table() if tty else self.lines()

    def __str__(self) -> str:
        return self.lines()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        rows, section = [], None
        for f in self.facts:
            if f.section != section:
                section = f.section
                rows.append(f"<tr><th colspan='2' style='text-align:left'>{escape(section)}")
            style = " style='color:#b00'" if not f.ok else ""
            rows.append(
                f"<tr{style}><td>{escape(f.key)}</td>"
                f"<td style='text-align:left'>{escape(f.value)}</td></tr>"
            )
        return "<table class='dynprof-doctor'>" + "".join(rows) + "</table>"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _requirements() -> list[tuple[str, str, str]]:
    """(name, specifier, extra or '') of each declared dependency, from the installed
    metadata (else the base list, unversioned)."""
    try:
        reqs = metadata.requires("dynprof_nb") or []
    except metadata.PackageNotFoundError:
        return [(n, "", "") for n in _FALLBACK_DEPENDENCIES]
    from packaging.requirements import Requirement

    out, seen = [], set()
    for text in reqs:
        r = Requirement(text)
        extra = ""
        if r.marker is not None:
            m = str(r.marker)
            if "extra" not in m:
                if not r.marker.evaluate():
                    continue
            else:
                extra = m.split("==")[-1].strip().strip("'\"")
                if extra == "test":
                    continue
        if r.name.lower() in seen:
            continue
        seen.add(r.name.lower())
        out.append((r.name, str(r.specifier), extra))
    return out


def _dependencies(report: Report) -> None:
    from packaging.version import Version

    for name, spec, extra in _requirements():
        v = _version(name)
        where = f" [{extra}]" if extra else ""
        if v is None:
            report.add(
                "dependencies",
                name,
                f"not installed ({spec or 'any'}{where})",
                ok=bool(extra),
            )
            continue
        inside = True
        if spec:
            from packaging.specifiers import SpecifierSet

            inside = SpecifierSet(spec).contains(Version(v), prereleases=True)
        text = v if inside else f"{v}, outside the declared {spec}"
        report.add("dependencies", name, text + where, ok=inside)


def _shm() -> tuple[str, bool]:
    d = "/dev/shm"
    try:
        st = os.statvfs(d)
        with tempfile.NamedTemporaryFile(dir=d, prefix="dynprof_nb-doctor-"):
            pass
    except OSError as exc:
        return f"not usable ({exc.strerror or exc}): jobs cannot be attached on this host", False
    free = st.f_bavail * st.f_frsize
    return f"usable, {free / 2**30:.1f} GiB free", True


def _cache(report: Report) -> None:
    from dynprof_nb.traces import cache

    d = cache.cache_dir()
    if d is None:
        report.add("storage", "cache dir", f"off ({cache.ENV_DIR}=off)")
        return
    state = "exists" if d.is_dir() else "not created yet"
    if d.is_dir() and not os.access(d, os.W_OK):
        report.add("storage", "cache dir", f"{d} (not writable)", ok=False)
        return
    report.add("storage", "cache dir", f"{d} ({state}; set {cache.ENV_DIR} to move it)")


def _frameworks(report: Report) -> None:
    for name, tested in TESTED_FRAMEWORKS.items():
        v = _version(name)
        if v is None:
            report.add("frameworks", name, "not installed")
            continue
        ok = any(v == t or v.startswith(t + ".") or v.startswith(t + "+") for t in tested)
        says = "tested" if ok else f"not a tested version (tested: {', '.join(tested) or 'none'})"
        report.add("frameworks", name, f"{v}, {says}", ok=ok or not tested)


def known_incompatibilities() -> list[tuple[str, bool]]:
    """Each known incompatibility this environment has, with its fix, and whether it loses
    the user something (False: handled, said for a bug report)."""
    from packaging.version import Version

    def ver(name: str) -> Version | None:
        v = _version(name)
        return Version(v) if v else None

    out = []
    numpy, pyarrow, pandas, ms = ver("numpy"), ver("pyarrow"), ver("pandas"), ver("mindspore")
    if numpy and pyarrow and numpy.major < 2 and pyarrow.major >= 26:
        out.append(
            (
                f"pyarrow {pyarrow} needs numpy 2 (this is {numpy}): the frame cache and "
                "out-of-core frames are off. Fix: pip install 'pyarrow>=14,<26'",
                True,
            )
        )
    if ms and ms.major == 2 and ms.minor <= 7 and numpy and numpy.major >= 2:
        out.append(
            (
                f"MindSpore {ms} is built for numpy<2 (this is {numpy}). "
                "Fix: pip install 'numpy<2'",
                True,
            )
        )
    if pandas and pandas < Version("2.1"):
        out.append(
            (
                f"pandas {pandas}: categorical columns are built with a validation pass that "
                "pandas 2.1+ skips (loads are correct, a little slower). "
                "Fix: pip install 'pandas>=2.1'",
                False,
            )
        )
    if sys.version_info < (3, 11):
        out.append(
            (
                "Python 3.10: sqlite3 has no Connection.setlimit; the .db readers set SQLite's "
                "value length limit through sqlite3_limit (ctypes) instead. Nothing to do.",
                False,
            )
        )
    return out


def doctor() -> Report:
    """This environment, fact by fact: print it (``dynprof doctor``), or show it in a notebook
    (an HTML table). Paste it into a bug report."""
    from dynprof_nb import optional

    # the package is imported before its modules: no import edge back to the facade
    __version__ = getattr(sys.modules.get("dynprof_nb"), "__version__", "(unknown)")

    r = Report()
    impl = sys.implementation.name
    r.add("python", "python", f"{sys.version.split()[0]} ({impl}, {sys.executable})")
    r.add("python", "platform", f"{platform.platform()} ({platform.machine()})")
    r.add("python", "dynprof_nb", f"{__version__} ({os.path.dirname(__file__).rsplit('/', 1)[0]})")
    _dependencies(r)
    for s in optional.states():
        if s.on:
            r.add("optional parts", s.part.name, f"on ({s.part.gives})")
        else:
            r.add("optional parts", s.part.name, f"off: {s.why}. To turn it on: {s.part.enable}")
    shm, ok = _shm()
    r.add("storage", "/dev/shm", shm, ok=ok)
    _cache(r)
    _frameworks(r)
    found = known_incompatibilities()
    for i, (text, problem) in enumerate(found, 1):
        r.add("known incompatibilities", f"incompatibility {i}", text, ok=not problem)
    if not found:
        r.add("known incompatibilities", "incompatibilities", "none known here")
    return r


__all__ = ["Fact", "Report", "doctor", "known_incompatibilities"]
