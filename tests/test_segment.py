"""The job segment: per-job naming, 0600, owner check, seqlock, stale reclaim, no tracker noise."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import zlib

import pytest
from jobutil import unique_job

from dynprof_nb.contract import segment
from dynprof_nb.contract.segment import (
    H_GEN,
    H_SEQ,
    S_PID,
    S_PID_START,
    Segment,
    SegmentError,
    list_jobs,
    slot_base,
)
from dynprof_nb.contract.slot import claim_slot


@pytest.fixture
def job():
    name = unique_job("seg")
    yield name
    segment.unlink(name)


def test_one_segment_per_job_with_mode_0600(job):
    other = unique_job("seg-other")
    try:
        a, b = Segment.open(job), Segment.open(other)
        assert a.name != b.name and job in list_jobs() and other in list_jobs()
        a.write_config(b'{"x":1}')
        assert b.read_config() == (0, b"")  # jobs never share a segment
        mode = stat.S_IMODE(os.stat(segment.segment_path(job)).st_mode)
        assert mode == 0o600
        a.close()
        b.close()
    finally:
        segment.unlink(other)


def test_second_attach_sees_the_same_config(job):
    with Segment.open(job) as a, Segment.open(job) as b:
        assert a.created and not b.created
        gen = a.write_config(b'{"hello":"world"}')
        assert b.read_config() == (gen, b'{"hello":"world"}')
        assert b.generation == gen == 1


def test_segment_of_another_user_is_refused(job):
    if os.getuid() != 0:
        pytest.fail("this test needs root to create a segment owned by another uid")
    with Segment.open(job) as seg:
        os.fchown(seg.fileno(), 12345, -1)
        with pytest.raises(SegmentError, match="belongs to uid 12345"):
            Segment.open(job)


def test_world_readable_segment_is_refused(job):
    with Segment.open(job) as seg:
        os.fchmod(seg.fileno(), 0o644)
        with pytest.raises(SegmentError, match="readable by others"):
            Segment.open(job)


def test_bad_job_names_are_refused():
    for name in ("", "../etc", "a/b", "x" * 80, ".hidden"):
        with pytest.raises(SegmentError, match="job name"):
            Segment.open(name)


def test_writer_that_died_mid_write_does_not_block_readers_or_writers(job):
    with Segment.open(job) as seg:
        seg.write_config(b'{"good":1}')
        seg.words[H_SEQ] += 1  # what a writer killed inside the critical section leaves
        seg.raw[segment.CONFIG_OFFSET:segment.CONFIG_OFFSET + 4] = b"XXXX"
        assert seg.read_config(attempts=20) is None  # no torn config is ever returned
        gen = seg.write_config(b'{"next":2}')  # the next writer repairs the sequence
        assert seg.read_config() == (gen, b'{"next":2}')
        assert seg.words[H_SEQ] % 2 == 0


def test_crc_catches_bytes_changed_under_an_even_sequence(job):
    with Segment.open(job) as seg:
        seg.write_config(b'{"a":1}')
        seg.raw[segment.CONFIG_OFFSET] = ord("[")
        assert seg.read_config(attempts=5) is None


def test_stale_segment_is_reclaimed_with_one_log_line(job, caplog):
    seg = Segment.open(job)
    seg.write_config(b'{"old":1}')
    base = claim_slot(seg, 0).base
    # pretend every user of the segment is a process that is gone
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    seg.words[base + S_PID] = int(dead)
    seg.words[base + S_PID_START] = 1
    seg.words[segment.H_CREATOR] = int(dead)
    seg.words[segment.H_WRITER] = int(dead)
    seg.close()
    with caplog.at_level("WARNING", logger="dynprof_nb"):
        fresh = Segment.open(job)
    assert fresh.created and fresh.generation == 0
    assert sum("reclaiming stale segment" in r.message for r in caplog.records) == 1
    fresh.close()


def test_live_segment_is_never_clobbered(job):
    code = textwrap.dedent(f"""
        import sys, time
        from dynprof_nb.contract.segment import Segment
        from dynprof_nb.contract.slot import claim_slot
        seg = Segment.open({job!r}); claim_slot(seg, 3); seg.write_config(b'{{"live":1}}')
        print("ready", flush=True); sys.stdin.readline()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with Segment.open(job) as seg:
            assert not seg.created
            assert seg.read_config() == (1, b'{"live":1}')
            assert [s.rank for s in seg.slots()] == [3]
    finally:
        proc.communicate("bye\n", timeout=10)


def test_attaching_process_leaves_no_tracker_warning_and_no_unlink(job):
    Segment.open(job).write_config(b'{"k":1}')
    code = textwrap.dedent(f"""
        import warnings; warnings.simplefilter("always")
        from dynprof_nb.contract.segment import Segment
        seg = Segment.open({job!r}, create=False); assert seg.read_config()[1] == b'{{"k":1}}'
        seg.close()
    """)
    result = subprocess.run([sys.executable, "-W", "always", "-c", code],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "resource_tracker" not in result.stderr and "leaked" not in result.stderr
    assert result.stderr == ""
    assert job in list_jobs()  # still there for everybody else


def test_dead_rank_slot_is_reused_by_the_same_rank(job):
    with Segment.open(job) as seg:
        first = claim_slot(seg, 5).index
        seg.words[slot_base(first) + S_PID] = 999_999_999  # no such process
        again = claim_slot(seg, 5).index
        assert again == first
        assert seg.read_slot(again).pid == os.getpid()


def test_config_checksum_survives_many_generations(job):
    with Segment.open(job) as seg:
        for i in range(200):
            payload = f'{{"i":{i},"pad":"{"x" * (i * 13 % 900)}"}}'.encode()
            gen = seg.write_config(payload)
            got_gen, data = seg.read_config()
            assert got_gen == gen and zlib.crc32(data) == zlib.crc32(payload)
        assert seg.words[H_GEN] == 200


def test_a_whole_error_message_fits_in_the_slot(job):
    message = ("window 120-130 could not be written (OSError: [Errno 28] No space left on "
               "device: '/data/prof/.rank3_start120_stop130.tmp-4242/trace.json'); it is kept as "
               "incomplete in /data/prof/.rank3_start120_stop130.failed-4242. Free some space "
               "or point prof_path elsewhere, then ask for the window again.")
    assert 256 < len(message) < segment.ERROR_BYTES
    with Segment.open(job) as seg:
        slot = claim_slot(seg, 3)
        slot.write_text("error", message)
        assert seg.read_slot(slot.index).error == message
