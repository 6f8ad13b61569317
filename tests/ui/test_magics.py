"""``%dynprof`` / ``%%dynprof`` in a real IPython shell against the real two-rank demo job."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from demojob import demo_job
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.control.status import STATUS_COLUMNS
from dynprof_nb.training.backends.builtin import EVENT_BYTES
from dynprof_nb.ui.magics import HANDLERS, SUBCOMMANDS


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory):
    with demo_job(tmp_path_factory.mktemp("magics"), prefix="magic") as j:
        yield j


def line(ip: InteractiveShell, text: str):
    return ip.run_line_magic("dynprof", text)


def usage_error(ip: InteractiveShell, text: str) -> str:
    with pytest.raises(UsageError) as info:
        line(ip, text)
    assert type(info.value) is UsageError  # the class itself: IPython prints one line
    message = str(info.value)
    assert "\n" not in message and message
    return message


def test_extension_registers_line_and_cell_magic(ip: InteractiveShell) -> None:
    magics = ip.magics_manager.lsmagic()
    assert "dynprof" in magics["line"] and "dynprof" in magics["cell"]


def test_help_names_every_subcommand_and_config_flag(ip: InteractiveShell) -> None:
    doc = ip.object_inspect("%dynprof", detail_level=0)["docstring"]
    for name in SUBCOMMANDS:
        assert f"%dynprof {name}" in doc
    traits = ProfilerConfig.class_traits()
    for key in ProfilerConfig.keys():
        if key not in ("start_step", "stop_step"):
            assert "--" + traits[key].metadata["flag"] in doc
    assert "%%dynprof" in doc


def test_every_subcommand_has_exactly_one_handler() -> None:
    # the parser offers SUBCOMMANDS; HANDLERS is what runs them: a name in one and not the
    # other would be a subcommand that fails with a KeyError instead of running
    assert list(HANDLERS) == list(SUBCOMMANDS)


def test_subcommand_help_prints_and_does_not_raise(ip: InteractiveShell, magics) -> None:
    with capture_output() as out:
        assert line(ip, "start -h") is None
    assert "--memory" in out.stdout and "START" not in out.stderr


def test_needs_a_job_first(ip: InteractiveShell, magics) -> None:
    assert "attach" in usage_error(ip, "status")


@pytest.mark.parametrize("text, says", [
    ("bogus", "invalid choice"),
    ("attach a b", "unrecognized"),
])
def test_bad_input_without_a_job(ip: InteractiveShell, magics, text: str, says: str) -> None:
    assert says in usage_error(ip, text)


def test_advise_a_window_folder_needs_no_job(ip: InteractiveShell, magics) -> None:
    from testdata import fixtures_dir

    from dynprof_nb.analysis.advise import Findings

    found = line(ip, f"advise {fixtures_dir() / 'ascend_real' / 'db_level1'}")
    assert isinstance(found, Findings) and len(found) > 0
    assert "finding" in found._repr_html_()


def test_jobs_lists_the_running_job(ip: InteractiveShell, magics, job) -> None:
    frame = line(ip, "jobs")
    assert isinstance(frame, pd.DataFrame)
    row = frame[frame.job == job.name]
    assert len(row) == 1 and int(row.live.iloc[0]) == 2


def test_attach_and_status(ip: InteractiveShell, magics, job) -> None:
    attached = line(ip, f"attach {job.name}")
    assert attached.name == job.name and magics.job is attached
    status = line(ip, "status")
    assert list(status.columns) == STATUS_COLUMNS
    assert sorted(status["rank"]) == [0, 1] and status.alive.all()
    assert "<table" in attached._repr_html_()


def test_attach_leaves_job_in_the_notebook_and_says_so(ip: InteractiveShell, magics, job):
    """The examples go on with ``job.…`` after ``%dynprof attach``: typed as cells, the next
    cell finds ``job`` (the handle attached), and the attach said so in one line."""
    ip.user_ns.pop("job", None)
    with capture_output() as out:
        ip.run_cell(f"%dynprof attach {job.name}", store_history=False)
    (said,) = [text for text in out.stdout.splitlines() if text.startswith("attached to")]
    assert "`job` is its handle" in said and repr(job.name) in said
    result = ip.run_cell("frame = job.status()", store_history=False)
    assert result.success, result.error_in_exec
    assert ip.user_ns["job"] is magics.job
    assert sorted(ip.user_ns["frame"]["rank"]) == [0, 1]


def test_attach_never_overwrites_a_job_variable_of_the_users(ip, magics, job) -> None:
    ip.user_ns["job"] = "my training config"
    try:
        with capture_output() as out:
            ip.run_cell(f"%dynprof attach {job.name}", store_history=False)
        assert ip.user_ns["job"] == "my training config"
        assert "left as is" in out.stdout and "j = %dynprof attach" in out.stdout
    finally:
        ip.user_ns.pop("job", None)


def test_start_help_says_what_plus_n_means(ip: InteractiveShell) -> None:
    doc = ip.object_inspect("%dynprof", detail_level=0)["docstring"]
    assert "start +10 +19 records steps 510..519" in doc
    with capture_output() as out:
        line(ip, "start -h")
    assert "most advanced rank's current step" in " ".join(out.stdout.split())


@pytest.mark.parametrize("text, says", [
    ("start 50 40", "stop_step"),
    ("start 0 5", "1"),
    ("start 5", "required"),
    ("start x 5", "'+10'"),
    ("start +5 +10 --level Level9", "invalid choice"),
    ("start +5 +10 --activities TPU", "TPU"),
    ("start 1 2", "already begun"),
    ("set foo=1", "unknown config key"),
    ("set profile_memry=true", "did you mean 'profile_memory'"),
    ("set profile_memory=maybe", "true or false"),
    ("set profile_memory", "key=value"),
    ("load -o 1x", "variable name"),
    ("load 999", "no window 999"),
    ("wait --timeout soon", "invalid float"),
])
def test_bad_input_is_one_line_usage_error_and_writes_nothing(
        ip: InteractiveShell, magics, job, text: str, says: str) -> None:
    line(ip, f"attach {job.name}")
    before = job.generation
    assert says in usage_error(ip, text)
    assert job.generation == before


def test_window_start_wait_load_summary(ip: InteractiveShell, magics, job) -> None:
    line(ip, f"attach {job.name}")
    with capture_output() as out:
        line(ip, "start +5 +14 --memory --level Level1")
    assert "asked for" in out.stdout and "this window only" in out.stdout
    with capture_output() as out:
        cfg = line(ip, "config")
    assert isinstance(cfg, ProfilerConfig)
    # start's options hold for this window only: the standing config is unchanged
    assert not cfg.profile_memory and cfg.profiler_level == "Level0"
    assert "profile_memory=True" in out.stdout and "this window only" in out.stdout
    assert job.window_config.profile_memory and job.window_config.profiler_level == "Level1"
    assert cfg.stop_step - cfg.start_step == 9
    status = line(ip, "wait --timeout 120 --no-progress")
    assert (status.generation == job.generation).all()
    windows = line(ip, "windows")
    mine = windows[(windows.start == cfg.start_step) & (windows.status == "complete")]
    assert sorted(mine["rank"]) == [0, 1]
    assert set(mine.config) == {"profiler_level=Level1, profile_memory=True"}
    trace = line(ip, "load -o tw")
    assert ip.user_ns["tw"] is trace
    assert sorted(trace.ranks) == [0, 1]
    assert {"matmul", "forward", "allreduce"} <= set(trace.ops["name"])
    assert sorted(trace.steps["step"].unique()) == list(range(cfg.start_step, cfg.stop_step + 1))
    summary = line(ip, "summary")
    assert "matmul" in str(summary) and "<table" in summary._repr_html_()
    advice = line(ip, "advise")  # the latest window's findings, every rule checked
    assert len(advice.checked) == len(advice.checked["rule"].unique()) > 10
    one = line(ip, f"load {len(windows) - 1}")
    assert one.ranks == [int(windows.iloc[-1]["rank"])]


def test_set_and_stop_write_the_segment(ip: InteractiveShell, magics, job) -> None:
    line(ip, f"attach {job.name}")
    gen = job.generation
    with capture_output():
        line(ip, "set profile_memory=false activities=CPU ranks=0,1 mstx_domain_include=a,b")
    cfg = job.config
    assert job.generation == gen + 1
    assert (cfg.profile_memory, cfg.activities, cfg.ranks, cfg.mstx_domain_include) == (
        False, ["CPU"], [0, 1], ["a", "b"])
    with capture_output():
        line(ip, "stop")
    assert job.generation == gen + 2 and not job.config.has_window


def test_tab_completion(ip: InteractiveShell, magics, job) -> None:
    def complete(text: str) -> list[str]:
        return ip.Completer.complete(line_buffer=text, cursor_pos=len(text))[1]

    assert {"start", "status", "stop"} <= set(complete("%dynprof st"))
    assert set(complete("%dynprof ")) >= set(SUBCOMMANDS)
    assert job.name in complete(f"%dynprof attach {job.name[:4]}")
    assert "--memory" in complete("%dynprof start +1 +2 --mem")
    assert "profile_memory=" in complete("%dynprof set profile_m")
    assert "--stack" in complete("%%dynprof --st")


def test_panel_subcommand_returns_the_panel(ip: InteractiveShell, magics, job) -> None:
    from dynprof_nb.ui.panel import Panel

    line(ip, f"attach {job.name}")
    panel = line(ip, "panel")
    try:
        assert isinstance(panel, Panel) and panel.job is magics.job
    finally:
        panel.close()


def test_cell_magic_profiles_the_cell_and_shows_its_summary(
        ip: InteractiveShell, magics, tmp_path: Path) -> None:
    cell = ("import dynprof_nb, numpy as np\n"
            "with dynprof_nb.range('cell_matmul'):\n"
            "    product = np.ones((200, 200)) @ np.ones((200, 200))\n")
    with capture_output() as out:
        ip.run_cell_magic("dynprof", f"--dir {tmp_path} -o cellwin --memory", cell)
    assert ip.user_ns["product"].shape == (200, 200)  # the cell ran in the user namespace
    window = ip.user_ns["cellwin"]
    assert "cell_matmul" in set(window.ops["name"])
    assert list(window.steps["step"]) == [1]
    assert not window.memory.empty
    assert any("cell_matmul" in str(o.data) for o in out.outputs)  # the summary was shown
    assert len(list(tmp_path.glob("rank0_start1_stop1*"))) == 1


def test_cell_magic_shows_the_python_functions_of_a_plain_cell(
        ip: InteractiveShell, magics, tmp_path: Path) -> None:
    cell = ("import json\n"
            "def encode_rows():\n"
            "    return [json.dumps({'row': i}) for i in range(300)]\n"
            "for _ in range(3):\n"
            "    encode_rows()\n")
    ip.run_cell_magic("dynprof", f"--dir {tmp_path} -o plain -q", cell)
    ops = ip.user_ns["plain"].ops.set_index("name")
    mine = [n for n in ops.index if n.endswith("encode_rows")]
    assert len(mine) == 1 and ops.loc[mine[0], "count"] == 3
    assert ops.filter(like="dumps", axis=0)["count"].sum() == 900
    ip.run_cell_magic("dynprof", f"--dir {tmp_path} -o nostack -q --no-stack", cell)
    assert not any("encode_rows" in n for n in ip.user_ns["nostack"].ops["name"])


def _rss() -> int:
    with open("/proc/self/statm") as f:  # what the built-in backend's memory reads
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_cell_magic_memory_records_memory_not_the_profilers_own_events(
        ip: InteractiveShell, magics, tmp_path: Path) -> None:
    """``%%dynprof --memory`` typed in a cell: the window is recorded without Python calls
    (each would be an event held in this process, counted in the RSS it reports), its
    header says so, and the memory it reports is the cell's, not the profiler's."""
    body = "def bump(i):\n    return i + 1\nfor i in range(200_000):\n    bump(i)\n"
    before = _rss()
    with capture_output() as out:
        result = ip.run_cell(f"%%dynprof --dir {tmp_path} -o mem --memory\n{body}")
    assert result.success, result.error_in_exec
    mem = ip.user_ns["mem"]
    assert mem.config["profile_memory"] and not mem.config["with_stack"]
    header = str(out.outputs[0].data["text/plain"]).splitlines()[0]
    assert "profile_memory=True" in header and "with_stack" not in header
    assert not any(n.endswith("bump") for n in mem.ops["name"])
    grew = int(mem.memory["allocated_bytes"].max()) - before
    # both asked for: the user's --stack holds, and its events are what the RSS then counts
    ip.run_cell(f"%%dynprof --dir {tmp_path} -o both -q --memory --stack\n{body}")
    both = ip.user_ns["both"]
    assert both.config["profile_memory"] and both.config["with_stack"]
    calls = int(both.ops.set_index("name").filter(like="bump", axis=0)["count"].sum())
    assert calls == 200_000
    assert grew < calls * EVENT_BYTES / 4, (grew, calls)


def test_cell_magic_keeps_the_window_when_the_cell_raises(
        ip: InteractiveShell, magics, tmp_path: Path) -> None:
    with capture_output() as out:
        ip.run_cell_magic("dynprof", f"--dir {tmp_path} -q", "x = 1\nraise KeyError('boom')")
    assert "the cell raised" in out.stdout
    assert len(list(tmp_path.glob("rank0_start1_stop1*/trace.json"))) == 1


def test_cell_magic_bad_option_is_usage_error(ip: InteractiveShell, magics) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("dynprof", "--backend nope", "x = 1")
    assert type(info.value) is UsageError and "invalid choice" in str(info.value)


def test_attach_file_mode_writes_profiler_config_json(ip: InteractiveShell, magics,
                                                      tmp_path: Path) -> None:
    job = line(ip, f"attach --cfg-path {tmp_path} --prof-path {tmp_path / 'out'}")
    assert magics.job is job
    with capture_output():
        line(ip, "start 20 29 --memory")
    saved = ProfilerConfig.load(tmp_path)
    assert (saved.start_step, saved.stop_step, saved.profile_memory) == (20, 29, True)
    assert "--prof-path goes with --cfg-path" in usage_error(ip, "attach x --prof-path y")


def test_cache_lists_and_clears_the_frame_cache(
    ip: InteractiveShell, magics, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dynprof_nb.traces import load_trace

    monkeypatch.setenv("DYNPROF_NB_CACHE", str(tmp_path / "cache"))
    trace = tmp_path / "rank0.pt.trace.json"
    trace.write_text('{"traceEvents": [{"name": "a", "ph": "X", "ts": 1, "dur": 2}]}')
    load_trace(trace).load_all()
    with capture_output() as out:
        table = line(ip, "cache")  # a table (HTML in a notebook), not wrapping text
    assert list(table.columns) == ["path", "exists", "frames", "size", "last_used"]
    assert list(table.path) == [str(trace.resolve())] and table.exists.all()
    frames = table.frames.iloc[0].split(", ")
    assert len(frames) == len(set(frames)), frames  # each kind of frame once
    assert "<table" in table._repr_html_()
    assert "1 window(s)" in out.stdout
    with capture_output() as out:
        line(ip, f"cache --clear {trace}")
    assert "removed 7 cached frame file(s)" in out.stdout
    with capture_output() as out:
        table = line(ip, "cache")
    assert table.empty and "0 window(s)" in out.stdout
