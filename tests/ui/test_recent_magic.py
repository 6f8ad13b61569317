"""``%dynprof recent N`` as a person types it in a notebook, against real rank processes.

Two built-in-backend ranks at ~10 ms a step; rank 1 has a 5-step hiccup (60 ms each) inside its
``dynprof_nb.range("work")``, over before the magic runs. What a person wants from the record is
why those steps were slow: the cell shows its explanation (naming rank 1 and the range), and one
line says where the record is and how to keep it (``-o NAME``). A new user got only the window's
repr, with no word of what to do next.
"""

from __future__ import annotations

from pathlib import Path

from jobutil import finish, spawn_rank, unique_job, wait_until

from dynprof_nb.contract import segment

SLOW_RANK = 1


def test_recent_shows_why_the_slow_steps_were_slow(ip, magics, tmp_path: Path, capsys) -> None:
    slow = tmp_path / "slow"
    extra = ["--slow-file", str(slow), "--slow-ms", "60", "--slow-steps", "5"]
    name = unique_job("magicrecent")
    ip.run_line_magic("dynprof", f"attach {name} --create")
    job = magics.job
    procs = [spawn_rank(name, r, tmp_path / "out", step_ms=10,
                        extra=extra if r == SLOW_RANK else None) for r in range(2)]
    try:
        wait_until(lambda: len(job.live_slots()) == 2
                   and all(s.step > 40 for s in job.live_slots()), 60,
                   "40 normal steps on each rank", proc=procs[0])  # fmt: skip
        slow.touch()
        wait_until(Path(f"{slow}.done").exists, 60, "the 5 slow steps", proc=procs[SLOW_RANK])
        capsys.readouterr()

        why = ip.run_line_magic("dynprof", "recent 150 -o rec")
        said = capsys.readouterr().out
        assert why.rank == SLOW_RANK and why.cause == "range: work", why.text
        # the count said is the steps kept: a young job's ranks hold fewer than asked
        kept = int(ip.user_ns["rec"].steps.groupby("rank").size().max())
        assert f"the last {kept} steps of ranks [0, 1]" in said, said
        assert kept == 150 or "(asked 150: all a rank held" in said, said
        assert "the record is in rec" in said
        assert ip.user_ns["rec"] is magics.window and sorted(ip.user_ns["rec"].ranks) == [0, 1]
        assert f"rank {SLOW_RANK}" in why._repr_html_()
    finally:
        for p in procs:
            finish(p)
        segment.unlink(name)
