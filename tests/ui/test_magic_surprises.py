"""No silent surprises in ``%dynprof``: completion offers only the magic's own candidates, a
mistyped ``attach`` keeps the current job and leaves no segment, ``stop`` says what it
stopped, and Ctrl-C during ``wait`` stops only the waiting, in one line (a real SIGINT to the
kernel's main thread via ``_thread.interrupt_main``; the real ranks go on)."""

from __future__ import annotations

import _thread
import threading

import pytest
from demojob import demo_job
from IPython.core.completer import provisionalcompleter
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from jobutil import unique_job, wait_until

from dynprof_nb.contract import segment
from dynprof_nb.ui.magics import SUBCOMMANDS


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory):
    with demo_job(tmp_path_factory.mktemp("surprises"), prefix="surprise") as j:
        yield j


def completions(ip: InteractiveShell, text: str) -> list[str]:
    """What a frontend's Tab shows (the same API ipykernel's complete_request uses)."""
    with provisionalcompleter():
        return [c.text for c in ip.Completer.completions(text, len(text))]


@pytest.mark.parametrize("text, expected", [
    ("%dynprof ", set(SUBCOMMANDS)),
    ("%dynprof st", {"start", "status", "stop", "stacks"}),
    ("%dynprof start +1 +2 --", None),
    ("%dynprof set profile_m", {"profile_memory="}),
    ("%%dynprof --st", {"--stack"}),
    ("%dynprof wait --", {"--timeout", "--no-progress", "--help"}),
    # a key's own values, after its option or its "=" (not keywords, magics, file names)
    ("%dynprof start +5 +10 --level ", {"LevelNone", "Level0", "Level1", "Level2"}),
    ("%dynprof start +5 +10 --level Level", {"LevelNone", "Level0", "Level1", "Level2"}),
    ("%dynprof set profiler_level=", {"LevelNone", "Level0", "Level1", "Level2"}),
    ("%dynprof set profiler_level=Level1", {"Level1"}),
    ("%dynprof set activities=CPU,", {"CPU", "NPU", "GPU"}),
    ("%dynprof set with_stack=", {"true", "false"}),
    ("%%dynprof --backend ", {"builtin", "torch", "mindspore", "auto"}),
    ("%%dynprof --level L", {"LevelNone", "Level0", "Level1", "Level2"}),
])
def test_completion_offers_only_the_magics_candidates(ip, text, expected) -> None:
    found = completions(ip, text)
    assert found, text
    assert not {"and", "if", "--map", "abs", "map"} & set(found), found
    if expected is None:
        assert all(c.startswith("--") for c in found) and "--memory" in found
    else:
        assert set(found) == expected


def test_completion_of_job_names_and_of_plain_python_is_untouched(ip, job) -> None:
    assert job.name in completions(ip, f"%dynprof attach {job.name[:6]}")
    assert "abs" in completions(ip, "ab")  # outside %dynprof, Python's completion as usual


def test_attach_typo_says_so_keeps_the_job_and_leaves_no_segment(ip, magics, job) -> None:
    ip.run_line_magic("dynprof", f"attach {job.name}")
    typo = unique_job("nosuchjob")
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("dynprof", f"attach {typo}")
    message = str(info.value)
    assert f"no job named {typo!r}" in message and job.name in message  # the live jobs
    assert "--create" in message and f"Still attached to {job.name!r}" in message
    assert magics.job.name == job.name
    assert typo not in segment.list_jobs()


def test_attach_create_prepares_a_job_before_its_ranks(ip, magics) -> None:
    name = unique_job("prepared")
    try:
        prepared = ip.run_line_magic("dynprof", f"attach {name} --create")
        # the segment appears with the first accepted request, ready for the ranks to find it
        assert magics.job is prepared and name not in segment.list_jobs()
        with capture_output() as out:
            ip.run_line_magic("dynprof", "stop")
        assert "nothing to stop" in out.stdout
        with capture_output():
            ip.run_line_magic("dynprof", "start 20 29")
        assert name in segment.list_jobs() and prepared.config.start_step == 20
    finally:
        if magics.job is not None:
            magics.job.close()
        segment.unlink(name)


def test_stop_says_what_it_cancelled(ip, magics, job) -> None:
    ip.run_line_magic("dynprof", f"attach {job.name}")
    with capture_output():
        ip.run_line_magic("dynprof", "start +100000 +100009")
    target = job.generation
    wait_until(lambda: all(s.applied == target for s in job.live_slots()), what="armed")
    with capture_output() as out:
        ip.run_line_magic("dynprof", "stop")
    assert "window" in out.stdout and "cancelled on ranks 0,1 (not begun)" in out.stdout


def interrupt_soon(delay: float = 1.0) -> threading.Timer:
    """A real SIGINT to this (the kernel's) main thread, as Jupyter's stop button sends."""
    timer = threading.Timer(delay, _thread.interrupt_main)
    timer.start()
    return timer


def test_ctrl_c_in_wait_stops_only_the_waiting_in_one_line(ip, magics, job) -> None:
    ip.run_line_magic("dynprof", f"attach {job.name}")
    with capture_output():
        ip.run_line_magic("dynprof", "start +100000 +100009")
    cfg = job.config
    pids = sorted(s.pid for s in job.live_slots())
    interrupt_soon()
    with capture_output() as out:
        result = ip.run_line_magic("dynprof", "wait --no-progress")
    assert result is None
    text = out.stdout.strip()
    assert text.startswith(f"stopped waiting; window {cfg.start_step}-{cfg.stop_step} is "
                           "still armed; rank 0 at "), text
    assert "\n" not in text and "Traceback" not in out.stdout + out.stderr
    assert sorted(s.pid for s in job.live_slots()) == pids  # the ranks go on
    assert {s.state for s in job.live_slots()} == {"armed"}  # and so does the window
    job.stop()


def test_ctrl_c_in_job_wait_shows_one_line_not_a_traceback(ip, magics, job, capsys) -> None:
    ip.user_ns["job"] = job
    job.start("+100000", "+100009")
    interrupt_soon()
    ip.run_cell("job.wait(progress=False)")
    shown = capsys.readouterr()
    text = (shown.out + shown.err).strip()
    assert text.startswith("stopped waiting; window"), text
    assert "Traceback" not in text and len(text.splitlines()) == 1
    assert len(job.live_slots()) == 2
    job.stop()
