"""A Monitor's windows and saves: starting the backend, the window-I/O thread, writing windows.

The Monitor holds one :class:`Windows`. The training thread starts and stops the backend
(quick); the window-I/O thread makes each window's directory and manifest and writes it when
it ends, in the order they were asked. Backends that can (``save_in_child``) are written by a
forked writer process, which the training thread forks between two steps (see
:meth:`Windows.fork_here`), so the training process keeps its GIL. The bounds that protect the
job live here too: windows started per minute, the disk budget of the output root.

It works on the Monitor's slots (its state, window, config, timings): this object is the
part of the Monitor that turns a window asked for into files on disk.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dynprof_nb.contract import window_dirs
from dynprof_nb.contract.config import ProfilerConfig
from dynprof_nb.contract.segment import SegmentError, run_of
from dynprof_nb.contract.slot import RankSlot
from dynprof_nb.training import saver
from dynprof_nb.training.backends import make_backend, resolve_backend
from dynprof_nb.training.history import adopt
from dynprof_nb.training.stepstate import StepState
from dynprof_nb.training.steptimes import median_before, note_refused

log = logging.getLogger("dynprof_nb")

# no step for this long, and for 3 of the rank's recent steps: the window-I/O thread forks the
# writer itself (the loop has ended or waits; a 10 s LLM step is not mistaken for that)
FORK_GRACE_S = 2.0
# close() waits for a save on this process's thread (MindSpore's analysis) as long as it writes;
# one that has written nothing into its window for this long is taken as hung, and left
SAVE_STALL_S = 300.0
NOTE = "note: "  # a status message that informs (a cost, a choice made), not an error


class WriterFailed(Exception):
    """The writer process could not write a window (it marked the window incomplete)."""

    def __init__(self, reason: str, kept: str | Path) -> None:
        super().__init__(reason)
        self.reason, self.kept = reason, kept


class Windows:
    """The windows side of one Monitor ``m``: start, finish, and save on the I/O thread."""

    __slots__ = (
        "m",
        "slot",
        "state",
        "status",
        "commands",
        "schedule",
        "nudge",
        "starts",
        "disk_over",
        "saving",
        "saving_dir",
        "saved",
        "io",
        "io_thread",
        "handoff",
        "fork_lock",
    )

    def __init__(
        self,
        monitor: Any,
        slot: RankSlot,
        state: StepState,
        status: Any,
        commands: Any,
        schedule: Callable[[int], None],
        nudge: Callable[[], None],
    ) -> None:
        self.m = monitor  # its public attributes: job, rank, window, config, budgets, timings
        self.slot = slot  # where the window's root and final folder are published
        self.state = state  # the step path's shared state: the recording, history, fork job
        self.status = status  # the rank's RankStatus: its state and its errors
        self.commands = commands  # the rank's CommandReader: why the window was asked
        self.schedule = schedule  # the Monitor's _schedule: what step() watches after step n
        self.nudge = nudge  # the next step() takes the slow path
        self.starts: collections.deque[float] = collections.deque()
        self.disk_over = ""  # why the last save found the output over its disk budget
        self.saving = 0  # windows ended and not yet written
        # the window a backend's save() writes into on the window-I/O thread (None: none does)
        self.saving_dir: Path | None = None
        self.saved = threading.Condition()
        self.io: Any = None  # the window-I/O thread's queue (see run_io)
        self.io_thread: threading.Thread | None = None
        self.handoff = threading.Event()
        self.fork_lock = threading.Lock()  # one thread forks a writer process at a time

    def start_io(self) -> None:
        self.io = queue.SimpleQueue()
        self.io_thread = threading.Thread(
            target=self.run_io, name="dynprof_nb-windows", daemon=True
        )
        self.io_thread.start()

    def run_io(self) -> None:
        """The window-I/O thread: opens and saves windows, in the order they were asked."""
        while True:
            job = self.io.get()
            if job is None:
                return
            fn, *args = job
            try:
                fn(*args)
            except Exception as exc:  # never lose the thread
                self.status.report(f"window I/O: {exc!r}")

    # -- starting a window (the training thread) -------------------------------------------

    def refusal(self) -> str:
        """Why no window may start now ("" when one may): too many starts lately, or the
        output over its disk budget. Cheap: no clock read beyond one, no disk access."""
        now = time.monotonic()
        starts, limit = self.starts, self.m.max_windows_per_minute
        while starts and now - starts[0] > 60.0:
            starts.popleft()
        if len(starts) >= limit:
            return (
                f"{len(starts)} windows started on this rank in the last minute (the "
                f"Monitor's max_windows_per_minute={limit}). "
                "Ask for longer windows, less often."
            )
        if self.disk_over:
            return self.disk_over
        starts.append(now)
        return ""

    def start(self, n: int) -> None:
        """Start the backend on this thread; the window's directory and manifest are made by
        the window-I/O thread (a mkdir and an fsync cost milliseconds on a busy disk), unless
        the backend needs its directory to start (MindSpore's profiler does)."""
        m = self.m
        cfg = m.window_config
        start, stop = m.window
        refusal = self.refusal()
        if refusal:
            self.refuse(cfg, f"window {start}-{stop} refused: {refusal}")
            return
        t0 = time.perf_counter()
        asked = self.commands
        rec: dict[str, Any] = {
            "backend": None,
            "dir": None,
            "manifest": None,
            "first": n + 1,
            "failed": "",
            "config": cfg,
            "options": m.window_options,
            "window": (start, stop),
            "asked": asked.asked,
            "shift_note": m.last_error if asked.asked else "",
            "reason": asked.reason,
        }
        try:
            backend = rec["backend"] = make_backend(resolve_backend(m.backend))
            needs_dir = getattr(backend, "needs_directory_at_start", False)
            if needs_dir:
                self.open_window(rec)
                if rec["failed"]:
                    self.status.set_state("idle")
                    return
            t1 = time.perf_counter()
            backend.start(rec["dir"], cfg, start, self.backend_context())
            t2 = time.perf_counter()
        except Exception as exc:
            self.status.set_state("idle")
            self.failed_to_start(rec, exc)
            return
        history = self.state.history
        if history is not None:  # the window begins with the steps kept before it
            rec["history"] = adopt(backend, history.take())
        self.state.recording = rec
        if not needs_dir:
            self.io.put((self.open_window, rec))
        self.status.set_state("recording")
        m.window_edge(
            f"Rank {m.rank} Dynamic profiler start at step {start}, will stop at step {stop}"
        )
        # the profiler's own start (torch, MindSpore) is counted apart from dynprof_nb's
        m.timings = {
            "start_s": time.perf_counter() - t0 - (t2 - t1),
            "profiler_start_s": t2 - t1,
        }

    def backend_context(self) -> dict[str, Any]:
        """What a backend's ``start`` is told about the job besides the window."""
        m = self.m
        return {
            "job": m.job,
            "rank": m.rank,
            "world_size": m.world_size,
            "memory_budget": int(m.memory_budget_mb * 2**20),
        }

    def run_started_at(self) -> float | None:
        """When this rank's run began (wall clock, s), while its segment says so."""
        seg, run = self.slot.seg, self.m.run
        try:
            now, started = run_of(seg) if seg is not None else (0, 0)
            return started / 1e9 if started and now == run else None
        except (OSError, SegmentError):
            return None

    def refuse(self, cfg: ProfilerConfig, message: str) -> None:
        """A window refused by the bounds: say so (a trigger's refusal is counted apart), and
        after a refusal for disk measure again, so freed space lets the next window in."""
        self.status.set_state("idle")
        self.status.report(message)
        if self.commands.reason and self.slot.seg is not None:  # the trigger's: counted apart
            try:
                note_refused(self.slot.seg, self.state.applied)
            except (OSError, SegmentError):
                pass
        if self.disk_over:
            threading.Thread(target=self.recheck_disk, args=(cfg,), daemon=True).start()

    def recheck_disk(self, cfg: ProfilerConfig) -> None:
        """After a refusal for disk: measure again, so freed space lets the next window in."""
        root = window_dirs.output_root(cfg.prof_path, self.m.output_path)
        if window_dirs.output_bytes(root) < self.m.disk_budget_mb * 2**20:
            self.disk_over = ""

    def failed_to_start(self, rec: dict[str, Any], exc: Exception) -> None:
        start, stop = rec["window"]
        self.status.report(
            f"window {start}-{stop} could not start: {exc}. Training goes on; "
            "fix the cause and ask again."
        )
        if rec["dir"] is not None:
            mark_failed(rec["dir"], str(exc))

    def open_window(self, rec: dict[str, Any]) -> None:
        """Make the window's temporary directory and its "recording" manifest. A failure is
        reported as the window not starting; the training thread drops it at its next step."""
        m = self.m
        cfg, (start, stop) = rec["config"], rec["window"]
        try:
            root = window_dirs.output_root(cfg.prof_path, m.output_path)
            # a window file mode moved keeps the name of the window asked for (MindSpore's)
            rec["dir"] = window_dirs.create_window_dir(
                root, m.rank, *(rec["asked"] or rec["window"])
            )
            rec["manifest"] = manifest = window_dirs.new_manifest(
                job=m.job,
                rank=m.rank,
                start=start,
                stop=stop,
                backend=rec["backend"].name,
                config=cfg.to_dict(),
                window_options=rec["options"],
                run=m.run,
                run_started_at=self.run_started_at(),
            )
            if rec["asked"] is not None:
                manifest.update(
                    window_dirs.shifted_fields(rec["asked"], rec["window"], rec["shift_note"])
                )
            # the job's own step time just before the window (unprofiled): what the window's
            # steps are measured against, so the profiler's cost on them is said
            before = median_before(self.state.ends, self.state.exact_from, rec["first"] - 1)
            if before is not None:
                manifest["steps_before_ms"] = round(before, 4)
            if rec.get("history"):  # steps kept before the window (history_steps)
                manifest["history_steps"] = list(rec["history"])
            if rec["reason"]:  # why a trigger started this window
                manifest["reason"] = rec["reason"]
            window_dirs.write_manifest(rec["dir"], manifest)
            if hasattr(rec["backend"], "directory"):
                rec["backend"].directory = rec["dir"]
            if self.slot.seg is not None:
                self.slot.write_text("root", str(root))
        except Exception as exc:
            rec["failed"] = str(exc)
            self.failed_to_start(rec, exc)

    # -- ending a window (the training thread) -------------------------------------------

    def finish(self, n: int, stopped: bool = False, reason: str | None = None) -> None:
        """Stop the backend on this thread (quick); the window-I/O thread writes the window.

        ``reason`` says why the window ended before its last step (a budget, the process
        exiting); it goes into the manifest (``stop_reason``) and the rank's status.
        """
        m, status = self.m, self.status
        t0 = time.perf_counter()
        rec, self.state.recording = self.state.recording, None
        # "idle" is published only once the save is counted (then it reads "saving"):
        # a controller's wait() must not see an idle rank between the stop and the save.
        m.state = "idle"
        if rec is None:
            status.publish_state()
            return
        t1 = time.perf_counter()
        try:
            rec["backend"].stop()
        except Exception as exc:  # keep what was recorded: save() may still write it
            status.report(f"stopping the profiler: {exc!r}")
        t2 = time.perf_counter()
        if self.state.history is not None:
            self.state.history.attach()
        if rec["failed"]:  # its directory could not be made (reported): nothing to save
            status.publish_state()
            return
        if n < rec["first"]:  # stopped before its first step ended: nothing to keep
            self.io.put((self.discard, rec, "stopped before any step was recorded"))
            status.publish_state()
            return
        m.timings.update(stop_s=time.perf_counter() - t0 - (t2 - t1), profiler_stop_s=t2 - t1)
        m.window_edge(f"Rank {m.rank} Dynamic profiler stop at step {n}")
        end = {
            "stop_step": n,
            "stopped_early": stopped,
            "ended_at": time.time(),
            "stop_reason": reason,
            "disk_budget_bytes": int(m.disk_budget_mb * 2**20),
            # what this window cost the training thread: dynprof_nb's part and the
            # profiler's own (torch's stop processes its events there, seconds for big ones)
            "training_thread_s": {k: round(v, 6) for k, v in m.timings.items()},
        }
        if t2 - t1 > 0.1:
            status.report(  # what it cost, not a failure: a note (status shows it apart)
                f"{NOTE}window {rec['window'][0]}-{n}: the profiler's own stop held the "
                f"training thread {t2 - t1:.2f} s (saving it does not)."
            )
        if reason:
            status.report(
                f"window {rec['window'][0]}-{rec['window'][1]} ended at step {n}: "
                f"{reason}; what was recorded is saved."
            )
        with self.saved:
            self.saving += 1
        status.publish_state()
        self.io.put((self.save, rec, end))

    def discard(self, rec: dict[str, Any], reason: str) -> None:
        if rec["dir"] is not None:
            mark_failed(rec["dir"], reason)

    def abandon(self) -> None:
        """Drop the window after an internal error: stop the backend, mark its directory."""
        m = self.m
        rec, self.state.recording = self.state.recording, None
        if rec is not None:
            try:
                rec["backend"].stop()
            except Exception:
                pass
            self.io.put((self.discard, rec, m.last_error))
        m.state = "idle"
        self.schedule(0)
        try:
            self.status.publish_state()
        except Exception:
            pass

    # -- saving (the window-I/O thread) -----------------------------------------------------

    def save(self, rec: dict[str, Any], end: dict[str, Any]) -> None:
        """Write and publish one window; failures mark it incomplete and are reported.

        Backends that can (``save_in_child``) are written by a forked child process, so the
        training process keeps its GIL; the others on this thread, and the time their save
        held it is kept in the manifest (``save_s``) and in ``timings``.
        """
        m = self.m
        backend, directory = rec["backend"], rec["dir"]
        manifest = dict(rec["manifest"] or {}, **end)
        try:
            if rec["failed"] or directory is None:
                return
            if window_dirs.output_bytes(directory.parent) >= end["disk_budget_bytes"]:
                self.disk_over = (
                    f"the windows under {directory.parent} are over the disk budget "
                    f"({m.disk_budget_mb:.0f} MB, the Monitor's disk_budget_mb); nothing is "
                    "deleted for you: remove old windows, or raise the budget"
                )
                raise OSError(self.disk_over)
            if getattr(backend, "save_in_child", False) and saver.can_fork():
                final = self.save_in_child(backend, directory, manifest)
                if final is None:
                    return
            else:
                final = self.save_here(backend, directory, manifest)
            m.last_window = final
            if self.slot.seg is not None:
                self.slot.write_text("window", str(final))
            log.info(
                "dynprof_nb rank %d: window %d-%d written to %s",
                m.rank,
                manifest["start_step"],
                manifest["stop_step"],
                final,
            )
        except Exception as exc:
            if isinstance(exc, WriterFailed):  # the writer process marked it already
                reason, kept = exc.reason, exc.kept
            else:
                reason = f"{type(exc).__name__}: {exc}"
                kept = mark_failed(directory, reason, manifest)
            self.status.report(
                f"window {manifest['start_step']}-{manifest['stop_step']} could not "
                f"be written ({reason}); it is kept as incomplete in {kept}."
            )
        finally:
            self.saving_dir = None
            with self.saved:
                self.saving -= 1
                self.saved.notify_all()
            self.status.publish_state()

    def save_here(self, backend: Any, directory: Path, manifest: dict[str, Any]) -> Path:
        """Save on this thread (a backend that cannot be forked, MindSpore's) and publish;
        how long it held the GIL goes into the manifest and ``timings``."""
        m = self.m
        self.saving_dir = directory
        t0, cpu0 = time.perf_counter(), time.thread_time()
        backend.save()
        held = time.perf_counter() - t0
        # this thread's CPU time bounds how long the save held the GIL, so how long
        # it can have stalled the training thread (MindSpore's analysis is Python)
        gil = time.thread_time() - cpu0
        m.timings.update(save_s=held, save_gil_s=gil)
        thread_s = dict(manifest.get("training_thread_s") or {}, save_gil_s=round(gil, 6))
        if gil > 0.1:
            self.status.report(
                f"window {manifest['start_step']}-{manifest['stop_step']}: "
                f"saving it held this process's GIL up to {gil:.2f} s of "
                f"{held:.2f} s (the profiler's analysis); training steps "
                "waited for it."
            )
        return window_dirs.publish(
            directory,
            dict(manifest, status="complete", save_s=round(held, 3), training_thread_s=thread_s),
        )

    def save_in_child(self, backend: Any, directory: Path, manifest: dict[str, Any]) -> Path | None:
        """Fork the writer; wait for it unless close() gave up waiting (then None)."""
        m = self.m
        child = self.fork_here(backend, directory, manifest)
        if child is None:  # close() gave up waiting before a step came to fork it
            return None
        m.timings["fork_s"] = child.fork_s
        while True:
            result = saver.wait(child, 0.1)
            if result is not None:
                break
            if self.handoff.is_set():
                m.handed_off.append(child.pid)
                log.warning(
                    "dynprof_nb rank %d: window %d-%d is left to its writer process "
                    "(pid %d), which publishes it after this process ends",
                    m.rank,
                    manifest["start_step"],
                    manifest["stop_step"],
                    child.pid,
                )
                return None
        m.timings["write_s"] = time.monotonic() - child.forked_at
        release = getattr(backend, "release", None)
        if release is not None:
            release()
        if "error" in result:
            raise WriterFailed(result["error"], result.get("path") or directory)
        return Path(result["path"])

    def fork_here(self, backend: Any, directory: Path, manifest: dict[str, Any]) -> Any:
        """Have the training thread fork the writer at its next ``step()``, and wait for it.

        ``fork()`` runs every library's atfork handlers, and OpenBLAS's shuts down its thread
        pool: forked from this thread while the training thread was inside a BLAS call, the
        training thread spun forever on workers that were gone (a numpy job hung right after
        its window). Between two steps the training thread is in none, so it forks there.
        When no step comes for :data:`FORK_GRACE_S` and three of the rank's recent steps (the
        loop ended, or waits in this process), or in close(), this thread forks itself."""
        m = self.m
        job: dict[str, Any] = {
            "args": (backend, directory, manifest),
            "child": None,
            "error": None,
            "done": threading.Event(),
        }
        state = self.state
        state.fork_job = job  # the step path's mailbox (see Monitor._advance)
        step, since = m.step_count, time.monotonic()
        while not job["done"].wait(0.02):
            if m.step_count != step:  # steps come: the next one forks
                step, since = m.step_count, time.monotonic()
            grace = max(FORK_GRACE_S, 3 / state.rate) if state.rate > 0 else FORK_GRACE_S
            if state.closing or time.monotonic() - since > grace:
                self.run_fork_job()
            elif self.handoff.is_set():
                return None
            else:
                self.nudge()  # the next step() takes the slow path (_advance), which forks
        if job["error"] is not None:
            raise job["error"]
        return job["child"]

    def run_fork_job(self) -> None:
        """Fork the writer process the window-I/O thread asked for (one thread does it)."""
        if not self.fork_lock.acquire(blocking=False):
            return
        state = self.state
        try:
            job, state.fork_job = state.fork_job, None
            if job is None:
                return
            try:
                job["child"] = saver.fork_save(*job["args"])
            except Exception as exc:
                job["error"] = exc
            job["done"].set()
        finally:
            self.fork_lock.release()

    # -- waiting for saves ----------------------------------------------------------------

    def wait_saved(self, timeout: float | None = None) -> bool:
        """Wait until every window that ended has been written (or failed); False on timeout,
        forking on this thread (the training loop's) a writer the I/O thread asks for."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.saved:
            while self.saving:
                self.saved.release()
                try:
                    self.run_fork_job()
                finally:
                    self.saved.acquire()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self.saved.wait(0.05 if left is None else min(0.05, left))
            return True

    def wait_for_saves(self, wait_s: float, dying: bool) -> None:
        """Let the window-I/O thread finish; after ``wait_s`` leave windows to their writer
        processes. A save that runs in this process (MindSpore's) is waited for to its end
        while it writes into its window (its analysis of a large window takes minutes), unless
        the process is dying (then it is bounded too, and said so): one that has written
        nothing for :data:`SAVE_STALL_S` is hung (a worker it forked that never ends), and the
        job is not held for it."""
        m, thread = self.m, self.io_thread
        self.io.put(None)
        thread.join(wait_s)
        writing = _Writing()
        while thread.is_alive() and self.saving_dir is not None and not dying:
            thread.join(0.5)
            if writing.idle_s(self.saving_dir) > SAVE_STALL_S:
                self.status.report(
                    f"close() stopped waiting for the save of {self.saving_dir}: the "
                    f"profiler's analysis has written nothing there for {SAVE_STALL_S:.0f} "
                    "s (hung); what it recorded stays there, incomplete."
                )
                break
        if not thread.is_alive():
            return
        self.handoff.set()  # a save waiting on its writer process stops waiting
        thread.join(0.5)
        if m.handed_off:
            pids = ", ".join(map(str, m.handed_off))
            self.status.report(
                f"close() waited {wait_s:.0f} s; the writer process (pid {pids}) "
                "finishes the window after this process ends and publishes it."
            )
        if thread.is_alive():
            self.status.report(
                f"close() waited {wait_s:.0f} s; a window is still being saved on a "
                "thread of this process and is lost if the process ends first."
            )


class _Writing:
    """How long nothing under a directory has changed (files, sizes, times), looked at once
    every few seconds: a save that still writes is waited for, a silent one is not."""

    EVERY_S = 5.0

    def __init__(self) -> None:
        self.seen: tuple[int, int, int] | None = None
        self.since = self.looked = time.monotonic()

    def idle_s(self, directory: Path | None) -> float:
        now = time.monotonic()
        if now - self.looked >= self.EVERY_S or self.seen is None:
            self.looked = now
            state = _tree_state(directory)
            if state != self.seen:
                self.seen, self.since = state, now
        return now - self.since


def _tree_state(directory: Path | None) -> tuple[int, int, int]:
    """(files, bytes, newest mtime in ns) under ``directory``; zeros when it is gone."""
    files = size = newest = 0
    for st in window_dirs.file_stats(directory) if directory is not None else ():
        files, size, newest = files + 1, size + st.st_size, max(newest, st.st_mtime_ns)
    return files, size, newest


def mark_failed(directory: Path, reason: str, manifest: dict[str, Any] | None = None) -> Path:
    """Leave a failed window listed as ``incomplete`` (see ``window_dirs.mark_failed``)."""
    try:
        return window_dirs.mark_failed(directory, reason, manifest)
    except Exception:
        return directory
