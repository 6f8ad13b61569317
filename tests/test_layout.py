"""The layout keeps its promises: no import cycles, a light training side, an honest facade.

Cycles are found by reading every import statement of every module (deferred imports inside
functions included, ``if TYPE_CHECKING:`` blocks excluded), ``importlib.import_module("...")``
calls and every string that is a module path (``"dynprof_nb.x.y"`` or ``"dynprof_nb.x.y:name"``
in a dispatch table), so a cycle cannot hide in a function body or a string. Between
subpackages too: ``control`` -> ``cluster`` -> ``control`` is a cycle even through different
modules. The training-side check runs in a fresh interpreter, as a training rank would.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import dynprof_nb

PACKAGE = Path(dynprof_nb.__file__).resolve().parent
MODULE_PATH = re.compile(r"dynprof_nb(?:\.\w+)+(?::\w+)?")
HEAVY = ("pandas", "numpy", "IPython", "ipywidgets", "matplotlib", "dask", "distributed")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _is_import_module(func: ast.AST) -> bool:
    return (isinstance(func, ast.Name) and func.id == "import_module") or (
        isinstance(func, ast.Attribute) and func.attr == "import_module")


def imported_modules(path: Path, modules: set[str], type_checking: bool = False) -> set[str]:
    """Package modules ``path`` imports anywhere except under ``if TYPE_CHECKING:`` (there too
    with ``type_checking``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def named(text: str, anchor: str | None = None) -> None:
        """A module named by a string: absolute, or relative to ``anchor`` (import_module's)."""
        if text.startswith(".") and anchor is not None:
            parts = anchor.split(".")
            dots = len(text) - len(text.lstrip("."))
            text = ".".join(parts[: len(parts) - (dots - 1)] + [text.lstrip(".")])
        text = text.split(":")[0]
        while text and text not in modules:  # "pkg.module.attr": the module
            text = text.rpartition(".")[0]
        if text:
            found.add(text)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]
            submodules = [n for n in names if n in modules]
            # ``from pkg import module`` imports the module; ``from pkg import obj`` the package
            found.update(submodules if len(submodules) == len(names) else [base, *submodules])
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                named(first.value, package)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and MODULE_PATH.fullmatch(node.value)):
            named(node.value)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m in modules and m != name}


def import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imported_modules(p, modules, type_checking) for p in paths}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports() -> list[str]:
    """Where a package module takes another module's private name: ``from m import _x``, or
    ``m._x`` on a module ``m`` it imported (``self._x`` of its own classes is not counted)."""
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    found = []
    for path in paths:
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for a in node.names:
                    if f"{base}.{a.name}" in modules:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
                    elif base in modules and base != name and _private(a.name):
                        found.append(f"{name}:{node.lineno} from {base} import {a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in modules and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and _private(node.attr)):
                found.append(f"{name}:{node.lineno} {aliases[node.value.id]}.{node.attr}")
    return sorted(found)


def subpackage(module: str) -> str:
    """``dynprof_nb.traces.window`` -> ``dynprof_nb.traces``; a top-level module is its own."""
    return ".".join(module.split(".")[:2])


def subpackage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        if module == "dynprof_nb":  # the facade names everything, lazily, for users
            continue
        edges = out.setdefault(subpackage(module), set())
        edges.update(subpackage(d) for d in deps if d != "dynprof_nb")
    return {k: v - {k} for k, v in out.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among modules (a package ``__init__`` counts as its own module)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := dfs(node)):
            return found
    return None


def test_the_graph_sees_deferred_imports():
    graph = import_graph()
    # file mode imports the relay inside FileRelay.start only (for cost): still an edge
    assert "dynprof_nb.control.relay" in graph["dynprof_nb.training.filerelay"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_graph_reads_string_imports():
    modules = {"dynprof_nb.a", "dynprof_nb.a.b", "dynprof_nb.c", "dynprof_nb.c.d"}
    src = PACKAGE / "c" / "d.py"
    code = ('import importlib\nT = {"x": "dynprof_nb.a.b:func"}\n'
            'def f():\n    return importlib.import_module("..a", __name__)\n'
            'DOC = "see dynprof_nb.c for more"\n')
    tree_modules = set()
    original = Path.read_text
    try:
        Path.read_text = lambda self, *a, **k: code if self == src else original(self, *a, **k)
        tree_modules = imported_modules(src, modules)
    finally:
        Path.read_text = original
    assert tree_modules == {"dynprof_nb.a.b", "dynprof_nb.a"}
    graph = {"dynprof_nb.x.m": {"dynprof_nb.y.n"}, "dynprof_nb.y.k": {"dynprof_nb.x.j"}}
    assert find_cycle(subpackage_graph(graph)) == ["dynprof_nb.x", "dynprof_nb.y", "dynprof_nb.x"]


def test_no_import_cycles_between_subpackages():
    cycle = find_cycle(subpackage_graph(import_graph()))
    assert cycle is None, "subpackage import cycle: " + " -> ".join(cycle)


def test_the_controller_side_imports_nothing_of_the_rank_side():
    """``control/`` and ``cluster/`` read what ranks write (the step-time ring, the trigger
    words, the stack dumps) through the contract modules (``segment``, ``protocol``,
    ``shared_layout``), never from ``training/``: a rank hosts a relay (Monitor's
    ``cfg_path``), so an edge back would close a cycle."""
    graph = subpackage_graph(import_graph())
    for side in ("dynprof_nb.control", "dynprof_nb.cluster"):
        assert "dynprof_nb.training" not in graph[side], side


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_training_side_imports_nothing_heavy():
    code = ("import sys, dynprof_nb\n"
            "dynprof_nb.Monitor, dynprof_nb.range\n"
            "import dynprof_nb.training.backends.builtin, dynprof_nb.training.dropin\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"a training rank would import: {out}"


def test_public_names_are_exactly_the_documented_ones():
    assert dynprof_nb.__all__ == sorted(dynprof_nb.__all__)
    assert set(dynprof_nb.__all__) == set(dynprof_nb._EXPORTS)
    for name in dynprof_nb.__all__:
        assert getattr(dynprof_nb, name) is not None, name
    public = {n for n in dir(dynprof_nb) if not n.startswith("_")}
    helpers = {"annotations", "importlib", "TYPE_CHECKING", "Any", *dynprof_nb._HOOKS}
    # subpackages become attributes once imported; everything else public must be exported
    subpackages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert public - set(dynprof_nb.__all__) - helpers - subpackages - modules == set()


def test_type_checking_block_names_every_export():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    seen: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                seen.update(a.asname or a.name for a in imp.names)
    assert seen == set(dynprof_nb.__all__)


def test_the_step_marker_is_spelled_in_one_module():
    spelled = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
               if "ProfilerStep#" in p.read_text()]
    assert spelled == ["contract/protocol.py"]


def test_the_version_is_defined_once():
    pyproject = (PACKAGE.parent / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and "dynprof_nb.__version__" in pyproject
    from importlib.metadata import version

    assert version("dynprof_nb") == dynprof_nb.__version__


def test_load_ext_finds_the_magics_hook():
    from dynprof_nb.ui.magics import load_ipython_extension

    assert dynprof_nb.load_ipython_extension is load_ipython_extension


def test_traces_imports_and_names_nothing_of_analysis():
    """The analysis builds on the readers, never the other way: no import, and no module path in
    a string (a dispatch table the import graph could not see)."""
    graph = import_graph()
    up = {m: sorted(d for d in deps if d.startswith("dynprof_nb.analysis"))
          for m, deps in graph.items() if m.startswith("dynprof_nb.traces")}
    assert not {m: d for m, d in up.items() if d}
    named = [p.name for p in (PACKAGE / "traces").rglob("*.py")
             if "dynprof_nb.analysis" in p.read_text()]
    assert named == []


def test_window_shortcuts_come_from_the_analysis_side():
    from dynprof_nb.analysis.summary import summarize
    from dynprof_nb.traces import shortcuts

    code = ("import sys\nfrom dynprof_nb.traces.window import TraceWindow\n"
            "print(any(m.startswith('dynprof_nb.analysis') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"  # loading the readers registers nothing yet
    w = dynprof_nb.load_trace(PACKAGE / "samples" / "pytorch_cpu" /
                              "rank0.1795968823191922673.pt.trace.json")
    assert str(w.summary()) == str(summarize(w))
    assert set(shortcuts._REGISTERED) >= {"summary", "timeline", "slow_ranks", "bandwidth_heatmap"}


#: at most this many reaches into another object's private fields, package-wide (httpx's level)
MAX_PRIVATE_REACHES = 20
#: every reach the package makes into another object's private fields: ``module:attribute`` ->
#: why. Each is a library's documented underscore API or one named upstream private that has no
#: public form; none is a part of ours reaching into another (the Monitor's parts get their
#: slot, its shared StepState and callbacks when built: training/stepstate.py).
ALLOWED_REACHES = {
    "traces/parallel.py:_exit": "os._exit: a forked worker must not run the parent's atexit",
    "training/saver.py:_exit": "os._exit: the forked window writer must not run the "
    "training process's atexit handlers",
    "training/stackdump.py:_current_frames": "sys._current_frames, documented: the main "
    "thread's stack, which faulthandler's dump leaves out",
    "training/frdump.py:_world": "torch.distributed's group names and ranks (no public "
    "call lists them), for the Flight Recorder's pg_config",
    "training/frdump.py:_C": "torch._C._distributed_c10d: where torch keeps the Flight "
    "Recorder's dump call (its only form)",
    "training/frdump.py:_distributed_c10d": "the same (torch's and torch_npu's)",
    "ui/panel.py:_repr_mimebundle_": "IPython's rich display protocol (super()'s bundle)",
    "analysis/timeline_view.py:_repr_mimebundle_": "IPython's rich display protocol",
    "traces/formats/chrome/out_of_core.py:_repr_html_": "IPython's display protocol (dask's)",
    "cluster/gate.py:_prepare_stream": "Dask's TLS handshake hook, the one override bounding "
    "it; pinned by tests/cluster/test_upstream_privates.py",
    "cluster/tls.py:_name": "cryptography's OpenSSL name of an OID, read in "
    "tls.openssl_attribute_name only; pinned by tests/cluster/test_upstream_privates.py",
    "control/filemode.py:_write": "super()._write of its own base class (Controller split)",
}


def private_reaches() -> list[str]:
    """``module:line .name`` for every attribute ``x._name`` (not a dunder) of the package
    where ``x`` is not the bare name ``self`` or ``cls``: another object's private field."""
    reaches = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            own = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                node.value.id in ("self", "cls"))
            if (isinstance(node, ast.Attribute) and _private(node.attr) and not own):
                reaches.append(f"{rel}:{node.lineno} .{node.attr}")
    return reaches


def test_windows_reach_into_no_other_windows_private_fields():
    """MultiRankWindow and ClusterWindow use other windows through the public protocols of
    traces/interface.py (``frame``, ``sources``, ``loaded``, ``parsed_events`` ...): an
    attribute ``x._name`` is read only on ``self`` (or ``cls``)."""
    windows = ("traces/multirank.py", "cluster/cluster_window.py", "traces/lazyframe.py")
    assert [r for r in private_reaches() if r.split(":")[0] in windows] == []


def test_every_private_reach_is_named_with_its_reason():
    """Every reach into another object's private fields, in any module, is one
    :data:`ALLOWED_REACHES` names with why; and every name there is still used (a stale entry
    would let a new reach of that name in unseen)."""
    found = {f"{r.split(':')[0]}:{r.split('.')[-1]}" for r in private_reaches()}
    assert found - set(ALLOWED_REACHES) == set(), "a new reach: give the part what it needs"
    assert set(ALLOWED_REACHES) - found == set(), "an entry no reach uses any more: drop it"


def test_private_reaches_package_wide_stay_at_httpx_level():
    """Parts get what they need when built, never another object's private fields: at most
    :data:`MAX_PRIVATE_REACHES` reaches in the whole package (httpx has 15)."""
    reaches = private_reaches()
    assert len(reaches) <= MAX_PRIVATE_REACHES, "\n".join(reaches)


def test_no_module_imports_another_modules_private_name():
    """A module uses another through its public names (tests are exempt): a private name is
    free to change with its own module."""
    assert private_imports() == []


def test_no_import_cycles_counting_type_checking_imports():
    """Not even for type hints: a reader is typed against ``formats.base.ReadContext``, not
    the window that imports the formats; ``cluster.stacks`` takes callables, not the
    controller that imports it."""
    cycle = find_cycle(import_graph(type_checking=True))
    assert cycle is None, "import cycle (TYPE_CHECKING included): " + " -> ".join(cycle)


#: traces/'s format-neutral vocabulary; everything a format owns is under traces/formats/
NEUTRAL = {"__init__", "load", "errors", "window", "multirank", "parallel", "discover",
           "lazyframe", "shortcuts", "interface", "schema", "comm", "intervals", "partitioned",
           "owner", "validate"}


def test_every_formats_files_are_under_its_folder():
    """One folder per format (issue 31): traces/ holds only the format-neutral modules and the
    ``formats/`` and ``cache/`` packages; each registered source is the ``source.py`` (Ascend:
    ``*_source.py``) of its format's folder, and that folder holds no other format's source."""
    traces = PACKAGE / "traces"
    assert {p.stem for p in traces.glob("*.py")} == NEUTRAL
    packages = {p.parent.name for p in traces.glob("*/*.py")}  # (a folder of stale bytecode
    assert packages == {"formats", "cache"}                    # left by a move is no package)
    from dynprof_nb.traces import formats

    homes: dict[str, set[str]] = {}
    for src in formats.SOURCES:
        module = next(m for m in sys.modules.values()
                      if getattr(m, "SOURCE", None) is src)
        rel = Path(module.__file__).resolve().relative_to(traces / "formats")
        assert len(rel.parts) == 2 and rel.stem.endswith("source"), rel
        homes.setdefault(rel.parts[0], set()).add(src.name)
    # a folder is one format (Ascend's is two sources of one format: its text and .db exports)
    assert all(len(names) == 1 for folder, names in homes.items() if folder != "ascend"), homes
    formats_dirs = {p.parent.name for p in (traces / "formats").glob("*/*.py")}
    assert formats_dirs == set(homes) | {"common"}


#: a class with more methods than this holds several responsibilities (issue 31): split it into
#: collaborator objects, as Monitor, Job and ClusterJob are
MAX_METHODS = 30
#: functions this long, per 1,000 lines of the package, at most this many
LONG_LINES, MAX_LONG_PER_1K = 60, 0.8


def big_classes() -> list[str]:
    """``module:Class (n methods)`` for every class of more than :data:`MAX_METHODS` methods
    (its own ``def``s: properties and dunders count, inherited ones do not)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                n = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in node.body)
                if n > MAX_METHODS:
                    found.append(f"{module_name(path)}:{node.name} ({n} methods)")
    return found


def long_functions() -> tuple[list[str], int]:
    """The package's functions of :data:`LONG_LINES`+ lines (nested ones too), and its lines."""
    found, lines = [], 0
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        lines += len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and node.end_lineno - node.lineno + 1 >= LONG_LINES):
                found.append(f"{module_name(path)}:{node.name}:{node.lineno}")
    return found, lines


def test_no_class_has_more_than_30_methods():
    assert big_classes() == []


def test_long_functions_stay_under_the_bound():
    found, lines = long_functions()
    assert 1000 * len(found) / lines <= MAX_LONG_PER_1K, "\n".join(found)


#: parameter names that hold a window in the analysis rules
WINDOW_PARAMS = {"w", "window", "ref", "base", "baseline"}


def window_params_taken_as_any(root: Path) -> list[str]:
    """``file:function(param)`` for each function under ``root`` whose window parameter is
    unannotated or ``Any``, not the :class:`~dynprof_nb.traces.interface.Window` protocol (or
    another named type: a rule's ``ref`` may be a frame): a rule that takes ``Any`` may read a
    private field or a frame no window has, and nothing says so."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            for a in args:
                if a.arg in WINDOW_PARAMS and (
                    a.annotation is None or ast.unparse(a.annotation) in ("Any", "Any | None")
                ):
                    found.append(f"{path.relative_to(root)}:{node.name}({a.arg})")
    return found


def test_the_rule_finds_a_window_taken_as_any(tmp_path):
    (tmp_path / "rule.py").write_text(
        "def f(w: Any, n: int) -> None: ...\n"
        "def g(w: Window, ref: pd.DataFrame | None = None) -> None: ...\n"
        "def h(window, baseline: Any | None = None) -> None: ...\n"
    )
    assert window_params_taken_as_any(tmp_path) == [
        "rule.py:f(w)", "rule.py:h(window)", "rule.py:h(baseline)"]


def test_analysis_rules_take_the_window_protocol():
    assert window_params_taken_as_any(PACKAGE / "analysis") == []
