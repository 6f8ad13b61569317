"""Where a rank leaves its Flight Recorder dump when ``job.hang_report()`` asks: the contract
the rank side (:mod:`dynprof_nb.training.frdump`) and the controller
(:mod:`dynprof_nb.control.hang`) both import.

The files live beside the stack dumps, in this user's private directory
(:func:`dynprof_nb.contract.shared_layout.stack_dir`: 0700, owner-checked): the controller writes
``<job>.<rank>.<pid>.frreq``
to a rank that announced its recorder with ``<job>.<rank>.<pid>.fron`` (written once it is
enabled); the rank answers with ``<job>.<rank>.<pid>.frdump`` (the
recorder's pickle, its process groups filled in where the backend records none) or, when it
has no recorder, ``<job>.<rank>.<pid>.frnote`` (JSON: why). Files of dead processes are swept
with the stack files (the pid is the name's second-to-last part).
"""

from __future__ import annotations

POLL_S = 0.2  # how often a rank looks for a request
DEFAULT_BUFFER = "2000"  # TORCH_FR_BUFFER_SIZE set by flight_recorder=True when unset
BUFFER_VARS = (
    "TORCH_FR_BUFFER_SIZE",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_HCCL_TRACE_BUFFER_SIZE",
)


def request_name(job: str, rank: int, pid: int) -> str:
    return f"{job}.{rank}.{pid}.frreq"


def dump_name(job: str, rank: int, pid: int) -> str:
    return f"{job}.{rank}.{pid}.frdump"


def note_name(job: str, rank: int, pid: int) -> str:
    return f"{job}.{rank}.{pid}.frnote"


def on_name(job: str, rank: int, pid: int) -> str:
    return f"{job}.{rank}.{pid}.fron"
