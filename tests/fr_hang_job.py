"""A real 4-rank PyTorch job (gloo) whose rank 3 never joins an all-reduce, with the Flight
Recorder on (``Monitor(flight_recorder=True)``).

Groups: the world, ``PAIR_A`` = [0, 1] and ``PAIR_B`` = [2, 3] (``group_desc``). Every step
all-reduces on the world and on each rank's pair. At step ``--hang-step`` rank 3 sleeps in
:func:`rank3_sleeps` (``--hang-s``) before its pair's all-reduce and the world's, while rank 2
waits in PAIR_B's all-reduce and ranks 0 and 1, done with PAIR_A, wait in the world's
(``--hold-gil``: rank 3 sleeps in C holding the GIL, so no thread of it can answer;
``--wake-file`` ends a plain sleep early, ``--gil-step`` adds a second hang holding the GIL). With
``--dump-dir`` each rank writes its dump there 1 s into the hang (rank 3 from its sleep), through
:func:`dynprof_nb.training.frdump.dump_bytes` (as ``job.hang_report()`` would have it), then
the job exits (``json/`` beside them: torch's own ``_dump_fr_trace_json()``, as written): how
``tests/data/flight_recorder/gloo_hang`` was made.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

import dynprof_nb


def rank3_sleeps(seconds: float, hold_gil: bool = False, wake: str = "") -> None:
    if hold_gil:  # in C, holding the GIL: no other Python thread of this rank runs meanwhile
        # a signal (job.stacks()'s) ends libc's sleep early, so sleep again; the long switch
        # interval keeps this thread from handing the GIL over between the two calls
        sys.setswitchinterval(1000.0)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ctypes.PyDLL(None).sleep(max(1, int(end - time.monotonic())))
    else:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (wake and os.path.exists(wake)):
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--hang-step", type=int, default=5)
    parser.add_argument("--hang-s", type=float, default=20.0)
    parser.add_argument("--step-s", type=float, default=0.02)
    parser.add_argument("--dump-dir", default="")
    parser.add_argument("--hold-gil", action="store_true", help="rank 3 sleeps holding the GIL")
    parser.add_argument("--wake-file", default="", help="ends rank 3's sleep when it appears")
    parser.add_argument("--gil-step", type=int, default=0,
                        help="a second hang, holding the GIL for --hang-s, at this step")
    args = parser.parse_args()
    torch.set_num_threads(1)
    monitor = dynprof_nb.Monitor(job=args.job, output_path=args.out, flight_recorder=True)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    pair_a = dist.new_group([0, 1], group_desc="PAIR_A")
    pair_b = dist.new_group([2, 3], group_desc="PAIR_B")
    pair = pair_a if rank < 2 else pair_b
    x = torch.ones(64)
    for step in range(1, args.steps + 1):
        if step == args.hang_step and args.dump_dir:
            threading.Timer(1.0, dump_and_exit, (rank, args.dump_dir)).start()
        if rank == 3 and step == args.hang_step:
            rank3_sleeps(args.hang_s, args.hold_gil, args.wake_file)
        if rank == 3 and step == args.gil_step:
            rank3_sleeps(args.hang_s, hold_gil=True)
        dist.all_reduce(x, group=pair)
        dist.all_reduce(x)
        x.div_(4.0)
        time.sleep(args.step_s)
        monitor.step()
    monitor.close()
    sys.stdout.write(f"rank {rank} done {monitor.step_count}\n")
    sys.stdout.flush()
    dist.destroy_process_group()


def dump_and_exit(rank: int, directory: str) -> None:
    import torch._C._distributed_c10d as c10d

    from dynprof_nb.training.frdump import dump_bytes

    # torch's own JSON form first, as written (gloo records no pg_config in it); then the
    # pickle with call sites (torch symbolises them: seconds, the hang outlasts it)
    os.makedirs(os.path.join(directory, "json"), exist_ok=True)
    with open(os.path.join(directory, "json", f"_dump_{rank}.json"), "wb") as fh:
        fh.write(c10d._dump_fr_trace_json())
    data, why = dump_bytes(rank, stack_traces=True)
    assert data is not None, why
    with open(os.path.join(directory, f"_dump_{rank}"), "wb") as fh:
        fh.write(data)
    os._exit(0)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
