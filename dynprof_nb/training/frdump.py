"""The rank side of ``job.hang_report()``: this rank's Flight Recorder dump, on request.

Only with ``Monitor(flight_recorder=True)`` or the config key ``flight_recorder`` set. Then
the rank turns PyTorch's recorder on if the user has not (``TORCH_FR_BUFFER_SIZE``, read by
torch when a process group first records), and a daemon thread (``dynprof_nb-fr``) looks every
0.2 s for a request file the controller writes (see :mod:`dynprof_nb.flight_recorder.layout`).
On one it calls torch's documented dump, ``torch._C._distributed_c10d._dump_fr_trace()`` (NCCL
and gloo; ``torch_npu._C._distributed_c10d._dump_hccl_trace`` for HCCL), and writes the bytes
beside the stack dumps. The thread needs the GIL but not the main thread, so a rank stuck in
a collective wait (which releases the GIL) answers; one stuck holding the GIL does not, and
the report says so.

gloo records no process-group membership (its ``pg_config`` is empty), so the dump is read
back with the safe unpickler, the groups this rank knows (``torch.distributed``'s own table)
are filled in, and it is pickled again: torch's ``fr_trace`` reads the result as it reads an
NCCL dump. Without torch's recorder (the built-in backend, MindSpore) the answer is a note
saying why.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import sys
import threading
from pathlib import Path
from typing import Any

from dynprof_nb.flight_recorder import layout

log = logging.getLogger("dynprof_nb")


def enable_recorder() -> str:
    """Turn torch's recorder on for groups created (or first used) from now; what was done."""
    for var in layout.BUFFER_VARS:
        if os.environ.get(var, "").strip() not in ("", "0"):
            return f"{var}={os.environ[var]} (set by the user)"
    os.environ["TORCH_FR_BUFFER_SIZE"] = layout.DEFAULT_BUFFER
    os.environ.setdefault("TORCH_HCCL_TRACE_BUFFER_SIZE", layout.DEFAULT_BUFFER)
    return f"TORCH_FR_BUFFER_SIZE={layout.DEFAULT_BUFFER}"


def _groups(dist: Any) -> dict[str, dict[str, Any]]:
    """This rank's process groups as the recorder's ``pg_config`` spells them."""
    world = dist.distributed_c10d._world  # torch lists a group's name and ranks nowhere else
    out: dict[str, dict[str, Any]] = {}
    for pg, name in list(world.pg_names.items()):
        ranks = sorted(world.pg_group_ranks.get(pg, {}))
        desc = getattr(pg, "group_desc", "") or ("default_pg" if name == "0" else "undefined")
        out[str(name)] = {"name": str(name), "desc": str(desc), "ranks": str(ranks)}
    return out


def dump_bytes(rank: int, stack_traces: bool = False) -> tuple[bytes | None, str]:
    """This process's recorder dump (pickle bytes), or None and why there is none.

    ``stack_traces`` adds each entry's call site (``frames``); torch symbolises them the
    first time, which took 4-7 s on a loaded 2-core machine, so a hang report leaves them out
    by default (the ranks' Python stacks come from ``job.stacks()``)."""
    value, why = recorded(rank, stack_traces)
    if value is None:
        return None, why
    return pickle.dumps(value, protocol=4), ""


def collectives_since(rank: int, since_ns: int) -> tuple[list[dict[str, Any]], str]:
    """This rank's collectives entered at or after wall time ``since_ns`` (torch's clock for
    ``time_created_ns``), oldest first: ``name`` (``gloo:all_reduce``), ``pg``, ``seq``,
    ``created_ns``, and ``started_ns``/``completed_ns`` where the backend times them (NCCL
    with timing on; gloo has neither). ``([], why)`` without a recorder: the recent-steps
    record says so."""
    value, why = recorded(rank, stack_traces=False)
    if value is None:
        return [], why
    out = []
    for e in value.get("entries") or []:
        created = e.get("time_created_ns") if isinstance(e, dict) else None
        if not isinstance(created, int) or isinstance(created, bool) or created < since_ns:
            continue
        pg = e.get("process_group")
        out.append(
            {
                "name": str(e.get("profiling_name") or "collective")[:200],
                "pg": str(pg[0] if isinstance(pg, (tuple, list)) and pg else e.get("pg_id", "")),
                "seq": e.get("collective_seq_id") if not e.get("is_p2p") else e.get("p2p_seq_id"),
                "created_ns": created,
                "started_ns": _ns(e.get("time_discovered_started_ns")),
                "completed_ns": _ns(e.get("time_discovered_completed_ns")),
            }
        )
    out.sort(key=lambda c: c["created_ns"])
    return out, ""


def _ns(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def no_recorder() -> str:
    """Why this process has no Flight Recorder to read, or "" (cheap: no dump is made)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return "this rank does not use PyTorch (no Flight Recorder)"
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return "torch.distributed is not initialised in this rank"
    return ""


def recorded(rank: int, stack_traces: bool = False) -> tuple[dict[str, Any] | None, str]:
    """This process's recorder dump, decoded by the safe unpickler (the one way the package
    reads a pickle, even its own process's bytes) and with the groups filled in (see the
    module's doc), or None and why there is none."""
    missing = no_recorder()
    if missing:
        return None, missing
    torch = sys.modules["torch"]
    import torch.distributed as dist

    c10d = torch._C._distributed_c10d
    dump = getattr(c10d, "_dump_fr_trace", None) or getattr(c10d, "_dump_nccl_trace", None)
    if "torch_npu" in sys.modules:  # HCCL's recorder, where torch_npu keeps it
        npu_c10d = getattr(getattr(sys.modules["torch_npu"], "_C", None), "_distributed_c10d", None)
        dump = getattr(npu_c10d, "_dump_hccl_trace", None) or dump
    if dump is None:
        return None, f"torch {torch.__version__} has no Flight Recorder dump"
    try:
        raw = dump(includeStackTraces=stack_traces)
    except TypeError:  # a dump function without the keyword (older torch, torch_npu)
        raw = dump()
    from dynprof_nb.flight_recorder.safe_pickle import loads

    value = loads(raw, f"rank {rank}'s own dump")
    if not isinstance(value, dict):
        return None, f"torch's Flight Recorder dump is a {type(value).__name__}, not a dict"
    if not value.get("entries"):
        have = [v for v in layout.BUFFER_VARS if os.environ.get(v, "0") not in ("", "0")]
        if not have:
            return None, "the Flight Recorder is off (TORCH_FR_BUFFER_SIZE is not set)"
    config = value.get("pg_config") or {}
    known = {k: v for k, v in config.items() if isinstance(v, dict) and v.get("ranks") != "[]"}
    for name, cfg in _groups(dist).items():
        known.setdefault(name, cfg)
    value["pg_config"] = known
    value["rank"] = rank
    return value, ""


class FlightRecorderResponder:
    """Answers the controller's dump requests for one Monitor (see the module's doc)."""

    def __init__(self, monitor: Any, directory: Path) -> None:
        self.monitor = monitor
        self.directory = directory
        pid = os.getpid()
        self.request = directory / layout.request_name(monitor.job, monitor.rank, pid)
        self.dump = directory / layout.dump_name(monitor.job, monitor.rank, pid)
        self.note = directory / layout.note_name(monitor.job, monitor.rank, pid)
        self.on = directory / layout.on_name(monitor.job, monitor.rank, pid)
        self._stop = threading.Event()
        self._enabled_note = ""
        self._thread = threading.Thread(target=self._run, name="dynprof_nb-fr", daemon=True)
        self._thread.start()

    def enabled(self) -> bool:
        cfg = getattr(self.monitor, "config", None)
        on = bool(self.monitor.flight_recorder or getattr(cfg, "flight_recorder", False))
        if on and not self._enabled_note:
            self._enabled_note = enable_recorder()
            self._write(self.on, json.dumps({"recorder": self._enabled_note}).encode())
        return on

    def _run(self) -> None:
        while not self._stop.wait(layout.POLL_S):
            try:
                if self.enabled() and os.path.lexists(self.request):
                    self.answer()
            except Exception as exc:  # the responder never takes the rank down
                log.debug("dynprof_nb flight recorder: %r", exc)

    def answer(self) -> None:
        try:
            ask = _request(self.request)
            data, why = dump_bytes(self.monitor.rank, bool(ask.get("stack_traces")))
        except Exception as exc:
            data, why = None, f"the dump failed: {exc!r}"
        if data is not None:
            self._write(self.dump, data)
        else:
            self._write(self.note, json.dumps({"rank": self.monitor.rank, "why": why}).encode())
        _unlink(self.request)

    def _write(self, path: Path, data: bytes) -> None:
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        for p in (self.request, self.dump, self.note, self.on):
            _unlink(p)


def _request(path: Path) -> dict[str, Any]:
    """The request's options (JSON; empty for a plain request)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            value = json.loads(fh.read(4096) or b"{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def start(monitor: Any) -> FlightRecorderResponder | None:
    """The responder of ``monitor`` (None when the private directory cannot be used)."""
    from dynprof_nb.contract.shared_layout import stack_dir

    try:
        responder = FlightRecorderResponder(monitor, stack_dir())
    except Exception as exc:
        log.warning("dynprof_nb: job.hang_report() will not get this rank's recorder: %r", exc)
        return None
    if monitor.flight_recorder:
        responder.enabled()  # the env var now, before the first collective
    return responder
