"""The interactive timeline's protocol page (dynprof_nb/analysis/timeline_js/PROTOCOL.md) names
exactly the traits the widget syncs, with their types, and marks as sent by the browser exactly
the traits the front-end sets: a trait added, renamed or retyped on either side without the
page fails here."""

from __future__ import annotations

import re

from dynprof_nb.analysis.timeline_view import FRONT_END, FRONT_END_MODULES, TimelineView

ROW = re.compile(r"^\| `(\w+)` \| (\w+) \| (Python → JS|JS → Python|both) \| (.+) \|$", re.M)


def documented() -> dict[str, tuple[str, str]]:
    text = (FRONT_END / "PROTOCOL.md").read_text(encoding="utf-8")
    rows = ROW.findall(text)
    names = [name for name, _, _, _ in rows]
    assert len(names) == len(set(names)), "a trait documented twice"
    return {name: (kind, direction) for name, kind, direction, _ in rows}


def test_the_protocol_page_lists_every_synced_trait_with_its_type():
    traits = TimelineView.class_own_traits(sync=lambda v: bool(v))
    assert len(traits) >= 27
    doc = documented()
    assert set(doc) == set(traits)
    for name, trait in traits.items():
        assert doc[name][0] == type(trait).__name__, name


def test_the_traits_the_browser_sends_are_the_ones_marked_js_to_python():
    source = "\n".join(
        (FRONT_END / f"{m}.mjs").read_text(encoding="utf-8") for m in FRONT_END_MODULES
    )
    sets = set(re.findall(r'model\.set\("(\w+)"', source))
    reads = set(re.findall(r'model\.(?:get|on)\("(?:change:)?(\w+)"', source))
    doc = documented()
    assert sets == {n for n, (_, d) in doc.items() if d != "Python → JS"}
    # every trait is used by the front-end: none is synced for nothing
    assert set(doc) == sets | reads
