"""The panel applies exactly what the person edited, against the real two-rank demo job.

Issue 15's held-out check: a key set and a window started from a cell survive an Apply of
another field; a field typed into without Enter is applied as typed; a conflicting edit is
refused instead of undoing the other change. What Apply wrote is read back through a second,
independent attach.
"""

from __future__ import annotations

import ipywidgets as widgets
import pytest
from demojob import demo_job
from jobutil import wait_until

import dynprof_nb
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.ui.panel import CELL_WIDTH, CONFLICT, Panel, _descendants, sections


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory):
    with demo_job(tmp_path_factory.mktemp("apply"), prefix="apply") as j:
        yield j


@pytest.fixture(params=["idle poller", "live poller"])
def p(job, request):
    job.set(**ProfilerConfig().to_dict())  # defaults, no window
    # "idle poller": the poller never runs before Apply, so Apply alone must see the cell's
    # changes; "live poller": the form follows the job while the person edits
    made = Panel(job, interval=3600 if request.param == "idle poller" else 0.1)
    yield made
    made.close()


def segment_config(job) -> ProfilerConfig:
    other = dynprof_nb.attach(job.name)
    try:
        return other.config
    finally:
        other.close()


def type_text(field, text: str) -> None:
    """Keystrokes as the browser syncs them (continuous_update): no Enter, no blur."""
    for i in range(1, len(text) + 1):
        field.set_state({"value": text[:i]})


def test_cell_edits_and_a_pending_window_survive_apply_of_another_field(p: Panel, job):
    job.set(record_shapes=True)  # a cell
    job.start("+3000", "+3009")  # a cell
    window = (job.config.start_step, job.config.stop_step)
    gen = job.generation
    p.fields["mstx"].set_state({"value": True})  # the one field edited in the panel
    p.apply_button.click()
    assert "applied mstx=True" in p.message.value, p.message.value
    assert job.generation == gen + 1
    cfg = segment_config(job)
    assert cfg.mstx and cfg.record_shapes
    assert (cfg.start_step, cfg.stop_step) == window
    target = job.generation
    wait_until(lambda: all(s.applied == target and s.state == "armed"
                           for s in job.live_slots()), what="both ranks still armed")
    assert p.fields["start_step"].value == str(window[0])  # the form caught up with the cell


def test_a_window_option_given_in_a_cell_survives_apply(p: Panel, job):
    job.start("+3000", "+3009", with_stack=True)  # this window only
    p.fields["profile_memory"].set_state({"value": True})
    p.apply_button.click()
    assert "applied profile_memory=True" in p.message.value
    assert job.window_options == {"with_stack": True}
    assert not job.config.with_stack and job.config.profile_memory


def test_typed_without_enter_is_what_apply_sends(p: Panel, job):
    step = max(s.step for s in job.live_slots())
    start, stop = step + 50_000, step + 50_009
    type_text(p.fields["start_step"], str(start))
    type_text(p.fields["stop_step"], str(stop))
    p.apply_button.click()
    assert f"applied start_step={start}, stop_step={stop}" in p.message.value, p.message.value
    cfg = segment_config(job)
    assert (cfg.start_step, cfg.stop_step) == (start, stop)


def test_relative_steps_in_the_form(p: Panel, job):
    step = max(s.step for s in job.live_slots())
    type_text(p.fields["start_step"], "+5000")
    type_text(p.fields["stop_step"], "+5009")
    p.apply_button.click()
    cfg = segment_config(job)
    assert cfg.stop_step - cfg.start_step == 9 and cfg.start_step >= step + 5000
    assert p.fields["start_step"].value == str(cfg.start_step)  # shown as the step it meant
    assert f"start_step={cfg.start_step}" in p.message.value


def test_a_conflicting_edit_is_refused_and_revert_shows_the_new_value(p: Panel, job):
    p.fields["profiler_level"].set_state({"index": 2})  # Level1, as the browser sends it
    assert p.draft.profiler_level == "Level1"
    job.set(profiler_level="Level2")  # somebody else, meanwhile
    gen = job.generation
    p.apply_button.click()
    assert CONFLICT in p.errors["profiler_level"].value
    assert "Revert?" in p.message.value and "not applied" in p.message.value
    assert job.generation == gen and segment_config(job).profiler_level == "Level2"
    p.revert_button.click()
    assert p.fields["profiler_level"].value == "Level2" and not p.errors["profiler_level"].value


def test_the_form_follows_keys_changed_elsewhere(job):
    job.set(**ProfilerConfig().to_dict())
    made = Panel(job, interval=0.1)
    try:
        made.fields["mstx"].value = True  # being edited: not overwritten
        job.set(profile_memory=True, mstx=False)
        wait_until(lambda: made.fields["profile_memory"].value is True,
                   what="the panel to follow the cell")
        assert made.fields["mstx"].value is True
        made.apply_button.click()
        assert "applied mstx=True" in made.message.value
        assert segment_config(job).profile_memory
    finally:
        made.close()


def test_stop_says_what_it_cancelled_or_that_there_was_nothing(p: Panel, job):
    p.stop_button.click()
    assert "nothing to stop" in p.message.value
    job.start("+3000", "+3009")
    target = job.generation
    wait_until(lambda: all(s.applied == target for s in job.live_slots()), what="armed")
    p.stop_button.click()
    assert "cancelled on ranks 0,1 (not begun)" in p.message.value, p.message.value
    assert not segment_config(job).has_window


def test_errors_stay_under_their_field_in_a_fixed_height_line(p: Panel, job):
    type_text(p.fields["stop_step"], "12x5")
    p.apply_button.click()
    box = p.errors["stop_step"]
    assert "not a number" in box.value and box.layout.height == "16px"
    assert "ellipsis" in box.value  # a long message is cut, its whole text in the tooltip
    assert {b.layout.height for b in p.errors.values()} == {"16px"}
    # under its field the line starts with what is wrong, not the key again (the key made the
    # browser cut "expected an integer >= -1" to "expected an integer >= -")
    shown = box.value.split(">", 1)[1]
    assert shown.startswith("&#x27;12x5&#x27; is not a number"), shown
    assert 'title="stop_step: ' in box.value


def test_the_form_wraps_its_columns_instead_of_scrolling_sideways(p: Panel):
    """Three fixed 345 px columns were wider than JupyterLab's notebook (a scroll bar under
    every section); the grid now holds as many columns as fit, and three fit its default
    width (about 1,050 px for a cell's output)."""
    grids = [w for w in _descendants(p) if isinstance(w, widgets.GridBox)]
    assert grids and {g.layout.grid_template_columns for g in grids} == {
        f"repeat(auto-fill, {CELL_WIDTH})"}
    assert 3 * int(CELL_WIDTH.removesuffix("px")) + 2 * 16 <= 1040


def test_without_a_window_the_progress_line_says_so(p: Panel, job):
    job.stop()
    p.refresh()
    assert p.progress_label.value.startswith("no window asked for (config edit #"), \
        p.progress_label.value
    assert "none:" not in p.progress_label.value and "0/0" not in p.progress_label.value


def test_ascend_only_keys_have_their_own_section():
    found = dict(sections())
    assert {"aic_metrics", "l2_cache", "sys_io", "sys_interconnection"} <= set(found["Ascend"])
    assert "with_stack" not in found["Ascend"] and found["Window"][:2] == ["start_step",
                                                                           "stop_step"]
    assert sorted(k for ks in found.values() for k in ks) == sorted(ProfilerConfig.keys())


def test_fields_take_values_from_code_as_the_old_int_fields_did(p: Panel, job):
    job.start("+3000", "+3009")
    p.follow()  # what the poller does: the person sees the window before editing its stop
    p.fields["stop_step"].value = job.config.start_step + 20  # an int, as on an IntText
    p.apply()
    assert f"applied stop_step={job.config.start_step + 20}" in p.message.value
    p.draft.ranks = [0]
    p.apply()
    assert "applied ranks=0" in p.message.value and segment_config(job).ranks == [0]


def test_typing_a_window_then_stop_then_apply_is_no_conflict(p: Panel, job):
    """A person types a window, presses Stop (their own change to start/stop), then Apply:
    the typed window is applied, not refused as changed elsewhere."""
    job.start("+3000", "+3009")  # a window waiting
    p.follow()
    type_text(p.fields["start_step"], "+5")
    type_text(p.fields["stop_step"], "+9")
    p.stop_button.click()
    assert job.config.start_step == -1
    p.apply_button.click()
    assert "applied start_step=" in p.message.value, p.message.value
    assert CONFLICT not in p.errors["start_step"].value
    cfg = segment_config(job)
    assert cfg.stop_step - cfg.start_step == 4
