"""What the package did not write is shown as text (issue 42): every ``_repr_html_`` in the
package, given a script in every string field, has it only escaped; event and process names
reach the timeline's labels and tooltips with their control and bidirectional characters
written out; lanes that would read the same stay apart; a job name is checked whole.
The same in a real JupyterLab: tests/ui/test_hostile_html.py."""

from __future__ import annotations

import ast
import re
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
from testdata import fixtures_dir

import dynprof_nb
from dynprof_nb import safetext
from dynprof_nb.analysis import plots
from dynprof_nb.contract import segment
from dynprof_nb.control.base import JobError

sys.path.insert(0, str(fixtures_dir() / "hostile"))
import make_names  # noqa: E402

PACKAGE = Path(dynprof_nb.__file__).resolve().parent
PAYLOAD = '<img src=x onerror="window.__pwned=1">\u202e<script>window.__pwned2=1</script>'
RAW = ("<img", "<script", "onerror=\"", "\u202e")  # none may reach a page as it is
HIDDEN = re.compile(f"[{safetext._CONTROL}{safetext._BIDI}]")


def _assert_text_only(html: str, where: str) -> None:
    for raw in RAW:
        assert raw not in html, f"{where}: {raw!r} reached the HTML as it is"


def repr_html_classes() -> set[str]:
    """``module:Class`` of every class in the package that defines ``_repr_html_``."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.FunctionDef) and b.name == "_repr_html_" for b in node.body
            ):
                found.add(f"{module}:{node.name}")
    return found


# ---- one instance of each, a payload in every string field -------------------------------


def _config():
    from dynprof_nb.contract.config import ProfilerConfig

    cfg = ProfilerConfig()
    for key in ProfilerConfig.keys():
        for value in (PAYLOAD, [PAYLOAD]):
            try:
                setattr(cfg, key, value)
                break
            except Exception:
                continue
    assert cfg.prof_path == PAYLOAD and cfg.mstx_domain_include == [PAYLOAD]
    return cfg


def _status() -> pd.DataFrame:
    from dynprof_nb.control.status import STATUS_COLUMNS

    return pd.DataFrame([{c: PAYLOAD for c in STATUS_COLUMNS}])


def _controller():
    from dynprof_nb.contract.config import ProfilerConfig
    from dynprof_nb.control.base import Controller

    class Shown(Controller):  # only what the repr reads: a name, a config, a status
        name = PAYLOAD
        generation = 1
        config = ProfilerConfig()
        start = stop = set = wait = _publish = roots = None

        def status(self) -> pd.DataFrame:
            return _status()

    return Shown()


def _stack_frame():
    from dynprof_nb.analysis.stacks import STACK_COLUMNS, StackFrame

    rows = [{c: PAYLOAD for c in STACK_COLUMNS} | {"rank": r, "depth": d, "pid": 1,
                                                    "thread_id": 1, "line": 3}
            for r in (0, 1) for d in (0, 1)]
    frame = StackFrame(pd.DataFrame(rows))
    frame.attrs["truncated"] = [{"rank": PAYLOAD, "pid": PAYLOAD, "node": PAYLOAD,
                                 "what": PAYLOAD}]
    return frame


def _stack_tree():
    from dynprof_nb.analysis.stacks import StackTree

    return StackTree(_stack_frame(), silent=[{"rank": PAYLOAD, "pid": PAYLOAD, "node": PAYLOAD,
                                               "why": PAYLOAD}])


def _hang():
    from dynprof_nb.control.hang import HangReport

    return HangReport([PAYLOAD, PAYLOAD], None, _stack_frame(), {0: PAYLOAD}, {1: PAYLOAD})


def _findings():
    from dynprof_nb.analysis.advise.findings import Finding, Findings

    found = [Finding(PAYLOAD, "high", PAYLOAD, PAYLOAD, PAYLOAD, lanes=[PAYLOAD])]
    checked = pd.DataFrame([{"rule": PAYLOAD, "peer": PAYLOAD, "status": "not applicable",
                             "note": PAYLOAD}])
    return Findings(None, found, checked)


def _explanation():
    from dynprof_nb.analysis.explain import Explanation

    frame = pd.DataFrame({PAYLOAD: [PAYLOAD], "us": [1.0]})
    return Explanation(PAYLOAD, 1, 2.0, 1.0, frame, frame, PAYLOAD, [PAYLOAD])


def _perfetto(tmp: Path):
    from dynprof_nb.analysis.perfetto import PerfettoFile

    return PerfettoFile(tmp / (PAYLOAD.replace("/", "") + ".json"), 3)


def _summary(tmp: Path):
    case = make_names.trace(tmp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = dynprof_nb.load_trace(case.path).summary()
    s.notes.append(PAYLOAD)
    s.findings.append(PAYLOAD)
    return s


def _doctor():
    from dynprof_nb.ui.doctor import Report

    report = Report()
    report.add(PAYLOAD, PAYLOAD, PAYLOAD, ok=False)
    return report


def _out_of_core(tmp: Path):
    import dask.dataframe as dd

    from dynprof_nb.traces.formats.chrome import out_of_core

    frame = dd.from_pandas(pd.DataFrame({"name": [PAYLOAD]}), npartitions=1)
    return out_of_core._out_of_core(frame, tmp, PAYLOAD)


MADE = {
    "dynprof_nb.contract.config:ProfilerConfig": lambda tmp: _config(),
    "dynprof_nb.control.base:Controller": lambda tmp: _controller(),
    "dynprof_nb.control.hang:HangReport": lambda tmp: _hang(),
    "dynprof_nb.analysis.advise.findings:Findings": lambda tmp: _findings(),
    "dynprof_nb.analysis.stacks:StackTree": lambda tmp: _stack_tree(),
    "dynprof_nb.analysis.explain:Explanation": lambda tmp: _explanation(),
    "dynprof_nb.analysis.perfetto:PerfettoFile": _perfetto,
    "dynprof_nb.analysis.summary:Summary": _summary,
    "dynprof_nb.ui.doctor:Report": lambda tmp: _doctor(),
    "dynprof_nb.traces.formats.chrome.out_of_core:OutOfCoreEvents": _out_of_core,
}


def test_every_repr_html_of_the_package_is_covered():
    assert repr_html_classes() == set(MADE), "a new _repr_html_: add it to MADE with a payload"


@pytest.mark.parametrize("where", sorted(MADE))
def test_a_script_in_every_field_is_shown_escaped(where: str, tmp_path: Path):
    html = MADE[where](tmp_path)._repr_html_()
    _assert_text_only(html, where)
    if where.endswith("HangReport"):
        html += _hang().findings_html().data
        _assert_text_only(html, where)
    assert "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in html
    assert "\\u202e" in html  # the override written out, not applied


def test_the_config_file_of_the_issue_is_shown_as_text(tmp_path: Path):
    from dynprof_nb.contract.config import ProfilerConfig

    case = make_names.config(tmp_path)
    html = ProfilerConfig.load(case.path)._repr_html_()
    assert "<img" not in html and "&lt;img src=x onerror=window.__pwned5=1&gt;" in html


def test_the_helpers():
    assert safetext.escape('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"
    assert safetext.escape("a\nb\tc\u202ed\x1b") == "a\nb\tc\\u202ed\\u001b"
    assert safetext.visible("a\nb\u2066c\x85\u200f") == "a\\u000ab\\u2066c\\u0085\\u200f"
    assert safetext.visible("aten::mm · 日本語 ü") == "aten::mm · 日本語 ü"
    assert safetext.visible_in({"k\u202e": ["\x07", 3, ("x",)]}) == {
        "k\\u202e": ["\\u0007", 3, ["x"]]}
    frame = pd.DataFrame({"n": pd.Series(["\u202e<b>", pd.NA], dtype="string"),
                          "o": ["'", None], "v": [1.5, float("nan")]})
    html = safetext.frame_html(frame, index=False, na_rep="-")
    assert "\\u202e&lt;b&gt;" in html and "&#x27;" in html
    assert html.count("<td>-</td>") == 3 and "NA" not in html


# ---- names -----------------------------------------------------------------------------


def test_a_job_name_with_a_trailing_newline_is_refused():
    for name in ("tinylm\n", "tinylm\r\n", "tiny\nlm", "tinylm\u202e"):
        with pytest.raises(segment.SegmentError, match=r"job name .* is not usable"):
            segment.check_job_name(name)
        with pytest.raises(JobError, match=r"job name .* is not usable"):
            dynprof_nb.attach(name, create=True)
    assert segment.check_job_name("tinylm") == "tinylm"


def _strings(value, path=""):
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k, f"{path}.key")
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def test_the_timeline_sends_names_as_they_are(tmp_path: Path):
    from dynprof_nb.analysis.timeline_view import TimelineView

    case = make_names.trace(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = dynprof_nb.load_trace(case.path)
        view = w.plot_timeline(interactive=True)
    assert isinstance(view, TimelineView)
    shown = [n for n in view.names if "aten::add" in n]
    assert shown == ["aten::add\\u202egnp.exe"]
    details = []
    for i in range(12):  # events with hostile names, categories and args: their details
        view.selected = i
        details.append(view.details)
    view.span = list(view.full)
    view.query = "\\u202e"  # what a person sees can be searched for
    assert view.matches["total"] > 0
    view.query = "aten::add\u202e"  # and what the name is
    assert view.matches["total"] > 0
    traits = TimelineView.class_own_traits(sync=lambda v: bool(v))
    # (the query is what the browser typed, sent back as it came)
    sent = {name: getattr(view, name) for name in traits if name != "query"}
    sent = sent | {"details": details, "matches": {**view.matches, "query": ""}}
    bad = [(name, where, text) for name, value in sent.items()
           for where, text in _strings(value) if HIDDEN.search(text)]
    assert any("\\u202e" in text for _, text in _strings(details))
    assert not bad, f"a control or bidirectional character sent as it is: {bad[:3]}"
    labels = [lane["label"] for lane in view.lanes]
    assert len(set(labels)) == len(labels), labels


def test_lane_labels_that_would_read_the_same_stay_apart():
    long = "python3 /very/long/shared/path/to/the/same/launcher/"
    lanes = pd.DataFrame({
        "rank": [0, 0, 0, 0, 1],
        "process": [long + "a/tail", long + "b/tail", long + "b/tail", "p\u202eq", "x"],
        "thread": ["MainThread", "MainThread", "MainThread", "t\x1b", ""],
        "tid": ["1", "1", "1", "2", "7"],
    })
    labels = plots.lane_labels(lanes)
    assert len(set(labels)) == len(labels), labels
    assert "a/tail" in labels[0] and "b/tail" in labels[1]  # cut where they differ
    assert labels[1].endswith("#1") and labels[2].endswith("#2")  # the same names and tid
    assert labels[3] == "rank 0 · p\\u202eq · t\\u001b"
    assert labels[4] == "rank 1 · thread 7"
    plain = pd.DataFrame({"rank": [0, 0], "process": ["python", "python"],
                          "thread": ["MainThread", "stream 7"], "tid": ["1", "7"]})
    assert plots.lane_labels(plain) == ["rank 0 · MainThread", "rank 0 · stream 7"]


@pytest.mark.parametrize("name", ["javascript:window.__pwnedP=1<!--.json",
                                  "data:text/html,<script>x</script>.json", "a b#c?.json"])
def test_a_link_to_a_written_file_is_a_path_never_a_scheme(tmp_path, monkeypatch, name):
    """The adversarial pass: a trace named ``javascript:...`` made the Perfetto link run script
    when clicked (escaping keeps markup out, not a scheme: the browser decodes ``&lt;`` first).
    The href is the file's path, percent-encoded, led by ``./``."""
    from urllib.parse import unquote

    from dynprof_nb.analysis.perfetto import PerfettoFile

    monkeypatch.chdir(tmp_path)
    html = PerfettoFile(tmp_path / name, 3)._repr_html_()
    href = re.search(r"<a href='([^']*)' download>", html).group(1)
    assert href.startswith("./") and ":" not in href and "<" not in href, href
    assert unquote(href) == f"./{name}"
    assert safetext.file_href("/abs/x:y.json") == "/abs/x%3Ay.json"
