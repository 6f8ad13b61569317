"""The ipywidgets panel without a browser (``click()``, ``set_state``) against the real demo job.

What Apply writes is read back from the job segment through a second, independent attach.
"""

from __future__ import annotations

import threading

import ipywidgets as widgets
import pytest
from demojob import demo_job
from jobutil import wait_until

import dynprof_nb
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.ui.panel import Panel, Toggles, panel


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory):
    with demo_job(tmp_path_factory.mktemp("panel"), prefix="panel") as j:
        yield j


@pytest.fixture
def p(job):
    job.set(**ProfilerConfig().to_dict())  # every test starts from the defaults, no window
    made = panel(job, interval=0.2)
    yield made
    made.close()


def segment_config(job) -> ProfilerConfig:
    """The config as a fresh attach reads it from the job segment."""
    other = dynprof_nb.attach(job.name, create=False)
    try:
        return other.config
    finally:
        other.close()


def errors(p: Panel) -> dict[str, str]:
    return {k: w.value for k, w in p.errors.items() if w.value}


def toggle(p: Panel, key: str, chosen: tuple[str, ...]) -> None:
    """Click the toggle buttons of a multiple choice as a person would."""
    for button in p.fields[key].buttons:
        button.set_state({"value": button.description in chosen})


def test_form_is_generated_from_the_schema(p: Panel) -> None:
    assert list(p.fields) == ProfilerConfig.keys()
    traits = ProfilerConfig.class_traits()
    for key, widget in p.fields.items():
        trait = traits[key]
        expected = {"checkbox": widgets.Checkbox, "dropdown": widgets.Dropdown,
                    "toggles": Toggles, "int": widgets.Text, "text": widgets.Text}
        assert isinstance(widget, expected[trait.widget]), key
        if trait.widget in ("dropdown", "toggles"):
            assert tuple(widget.options) == tuple(trait.choices)
        if trait.widget in ("int", "text"):
            assert widget.continuous_update  # synced as you type, not on Enter
        assert widget.description == key
        tip = widget.tooltip_text if isinstance(widget, Toggles) else widget.tooltip
        assert tip == trait.metadata["help"]


def test_widgets_and_draft_are_linked_both_ways(p: Panel) -> None:
    p.fields["with_stack"].set_state({"value": True})  # as the browser would send it
    assert p.draft.with_stack is True
    p.draft.profiler_level = "Level2"
    assert p.fields["profiler_level"].value == "Level2"
    toggle(p, "activities", ("CPU",))
    assert p.draft.activities == ("CPU",)
    p.draft.activities = ("CPU", "NPU")
    assert [b.value for b in p.fields["activities"].buttons] == [True, True, False]


def test_apply_writes_the_form_to_the_segment_in_one_write(p: Panel, job) -> None:
    step = max(s.step for s in job.live_slots())
    gen = job.generation
    for key, value in {"start_step": str(step + 100_000), "stop_step": str(step + 100_009),
                       "profile_memory": True, "ranks": "1",
                       "mstx_domain_include": "a, b"}.items():
        p.fields[key].set_state({"value": value})
    p.fields["profiler_level"].set_state({"index": 2})  # selections sync as indices
    toggle(p, "activities", ("CPU",))
    p.apply_button.click()
    assert errors(p) == {}
    assert job.generation == gen + 1
    cfg = segment_config(job)
    assert (cfg.start_step, cfg.stop_step) == (step + 100_000, step + 100_009)
    assert cfg.profile_memory and cfg.profiler_level == "Level1" and cfg.ranks == [1]
    assert cfg.activities == ["CPU"] and cfg.mstx_domain_include == ["a", "b"]
    assert "applied" in p.message.value
    wait_until(lambda: {r.state for r in job.status().itertuples()} == {"armed", "excluded"},
               what="rank 1 armed and rank 0 excluded")


@pytest.mark.parametrize("values, field", [
    ({"start_step": "50", "stop_step": "40"}, "stop_step"),
    ({"start_step": "-5"}, "start_step"),
    ({"stop_step": "12x5"}, "stop_step"),  # a typo is "not a number", never 125
    ({"start_step": "+x"}, "start_step"),
    ({"ranks": "x"}, "ranks"),
    ({"ranks": "-1"}, "ranks"),
    ({"analyse_mode": "7", "start_step": "10000000", "stop_step": "10000001"}, "analyse_mode"),
])
def test_a_bad_field_shows_its_error_and_nothing_is_written(p: Panel, job, values, field
                                                            ) -> None:
    before, gen = segment_config(job).to_dict(), job.generation
    for key, value in values.items():
        p.fields[key].set_state({"value": value})
    p.apply_button.click()
    assert list(errors(p)) == [field]
    assert "not applied" in p.message.value
    assert job.generation == gen and segment_config(job).to_dict() == before


def test_revert_reloads_the_job_config_and_clears_errors(p: Panel, job) -> None:
    job.set(with_stack=True, host_sys=["cpu", "mem"])
    p.fields["with_stack"].value = False
    p.fields["ranks"].value = "bad"
    p.apply_button.click()
    assert errors(p)
    p.revert_button.click()
    assert errors(p) == {} and p.fields["with_stack"].value is True
    assert p.fields["host_sys"].value == ("cpu", "mem") and p.fields["ranks"].value == ""
    assert [b.value for b in p.fields["host_sys"].buttons][:2] == [True, True]
    gen = job.generation
    p.apply_button.click()
    assert "nothing changed" in p.message.value and job.generation == gen


def test_clearing_the_window_with_another_change_is_one_write(p: Panel, job) -> None:
    step = max(s.step for s in job.live_slots())
    job.start(step + 100_000, step + 100_001)
    p.revert()
    gen = job.generation
    p.fields["start_step"].value = "-1"
    p.fields["stop_step"].value = "-1"
    p.fields["record_shapes"].value = True
    p.apply_button.click()
    assert errors(p) == {} and job.generation == gen + 1
    cfg = segment_config(job)
    assert not cfg.has_window and cfg.record_shapes


def test_poller_keeps_ranks_and_progress_live_then_load_and_summary(p: Panel, job) -> None:
    first = job.status().step.max()
    wait_until(lambda: p.ranks.value.count("<tr") == 3, what="a row per rank")
    p.fields["start_step"].value = str(int(first) + 20)
    p.fields["stop_step"].value = str(int(first) + 25)
    p.fields["profile_memory"].value = True
    p.apply_button.click()
    assert errors(p) == {}, errors(p)
    wait_until(lambda: p.progress.value == 1.0, timeout=120, what="the window to complete")
    assert "12/12 rank-steps" in p.progress_label.value
    start = int(first) + 20
    label = f"steps {start}-{start + 5} · ranks 2/2 complete"
    row = wait_until(lambda: next((r for r in p.window_rows.children
                                   if label in r.children[0].value), None),
                     what="one row for both ranks' window")
    assert "profile_memory=True" in row.children[0].value  # the config it was recorded with
    row.children[2].click()  # Summary
    assert p.trace is not None and sorted(p.trace.ranks) == [0, 1]
    kinds = [set(o.get("data", {})) for o in p.output.outputs]
    assert any("text/html" in k for k in kinds)  # the summary
    assert sum("image/png" in k for k in kinds) >= 3  # the plots
    row.children[1].click()  # Load
    assert sorted(p.trace.ranks) == [0, 1]
    assert "loaded into panel.trace" in "".join(o.get("text", "") for o in p.output.outputs)
    row.children[4].click()  # Advice: w.advise()'s findings, rendered
    shown = [o.get("data", {}).get("text/html", "") for o in p.output.outputs]
    assert any("finding" in h for h in shown), p.output.outputs


def test_poller_stops_when_the_panel_closes(job) -> None:
    made = Panel(job, interval=0.05)
    assert made.polling
    threads = {t.name for t in threading.enumerate()}
    assert "dynprof_nb-panel" in threads
    made.close()
    assert not made.polling and made.comm is None
    made.close()  # twice is harmless


def test_text_repr_for_frontends_without_widgets(p: Panel, job) -> None:
    bundle = p._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    text = bundle["text/plain"]
    assert job.name in text and "heartbeat_age_s" in text and len(text.splitlines()) >= 4


def test_a_typo_in_a_window_step_names_the_accepted_forms() -> None:
    """'1O' typed into start_step says what a step looks like (20 or +10), as '+x' does, not
    the config's "an integer >= -1" (a new user's first typo in the browser)."""
    from dynprof_nb.contract.config import ConfigError
    from dynprof_nb.ui.panel import from_form

    for typo in ("1O", "+x", "ten"):
        with pytest.raises(ConfigError, match=r"start_step: .* expected a step like 20 or \+10"):
            from_form("start_step", typo)
    assert from_form("stop_step", "+5") == "+5"
    assert from_form("stop_step", " 12 ") == 12
