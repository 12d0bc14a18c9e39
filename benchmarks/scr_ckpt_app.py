"""A training-like MPI job checkpointing through the real SCR library (its Python module `scr`
from $SCRTUNE_SCR_PREFIX), configured by the environment as a job script would.

Each step computes by spinning on the rank's core (a training loop's CPU side busy-waits on its
GPU), then every step is a checkpoint: per rank, a metadata file written in many small calls
and tensor files written in large ones (the study's bimodal sizes), all through route_file.
With `--trace DIR` the real tracer (dftracer 2.x) records the calls and the checkpoint regions.

Rank 0 writes OUT (JSON): blocking time of each checkpoint (Start_output to Complete_output,
max over ranks), its phases (SCR_Start_output, the application's writes, SCR_Complete_output:
the slowest rank's each) and its wall-clock end (Unix seconds, the last rank's), the job's wall
time from SCR_Init to a durable end (SCR_Finalize, which flushes what is not flushed yet, then
sync), and the flush times SCR_DEBUG printed (parsed by the caller).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from mpi4py import MPI

sys.path.insert(0, os.path.join(os.environ["SCRTUNE_SCR_PREFIX"], "share", "scr", "python"))
import scr  # noqa: E402
from schedstat import every_thread  # noqa: E402  (this script's folder)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _write(path: str, total: int, call_bytes: int, block: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        done = 0
        while done < total:
            done += os.write(fd, block[:min(call_bytes, total - done)])
    finally:
        os.close(fd)


def _what_threads_did(before: dict[int, tuple[float, float, int]],
                      after: dict[int, tuple[float, float, int]]) -> list[float]:
    """[this thread's seconds on a CPU, its seconds queued, the same summed over the threads
    started between `before` and `after` and still there]."""
    me = threading.get_native_id()
    started = [after[tid] for tid in after.keys() - before.keys()]
    return [after[me][0] - before[me][0], after[me][1] - before[me][1],
            sum(times[0] for times in started), sum(times[1] for times in started)]


def _tracer(args: argparse.Namespace, rank: int):
    if not args.trace:
        return None, None
    from dftracer.python import dft_fn, dftracer

    log = dftracer.initialize_log(os.path.join(args.trace, f"rank{rank}"), args.traced_dir, -1)
    return log, dft_fn


def checkpoint(args: argparse.Namespace, step: int, rank: int, block: bytes,
               phases: list[list[float]], sched: list[list[float]]) -> float:
    """One checkpoint's blocking seconds; appends [SCR_Start_output, the application's writes,
    SCR_Complete_output] seconds to `phases` (with --direct, [0, the writes, the barrier]) and
    to `sched` what SCR_Complete_output's threads did: [the rank's seconds on a CPU, its
    seconds queued for one, those of the threads the phase started and were still there at
    its end (AXL's transfer threads, which outlive it)]."""
    started = time.perf_counter()
    folder = os.path.join(os.getcwd(), f"global_step{step}")
    if args.direct:  # the same files, straight to the directory, no SCR: what bypass adds to
        _write(os.path.join(folder, f"meta-{rank}.json"), args.meta_writes * 1024, 1024, block)
        for index in range(args.tensor_files):
            _write(os.path.join(folder, f"layer-{index}-rank{rank}.pt"), args.tensor_bytes,
                   args.tensor_write_bytes, block)
        written = time.perf_counter()
        MPI.COMM_WORLD.Barrier()  # as SCR_Complete_output, done when every rank is
        phases.append([0.0, written - started, time.perf_counter() - written])
        return time.perf_counter() - started
    scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
    opened = time.perf_counter()
    _write(scr.route_file(os.path.join(folder, f"meta-{rank}.json")), args.meta_writes * 1024,
           1024, block)
    for index in range(args.tensor_files):
        _write(scr.route_file(os.path.join(folder, f"layer-{index}-rank{rank}.pt")),
               args.tensor_bytes, args.tensor_write_bytes, block)
    written = time.perf_counter()
    if args.transfer_cores:  # SCR's transfer threads start in Complete_output and inherit this
        os.sched_setaffinity(0, args.transfer_cores)
    before = every_thread()
    scr.complete_output(True)
    sched.append(_what_threads_did(before, every_thread()))
    if args.transfer_cores:
        os.sched_setaffinity(0, args.app_cores)
    ended = time.perf_counter()
    phases.append([opened - started, written - opened, ended - written])
    return ended - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--compute-s", type=float, default=2.0)
    parser.add_argument("--meta-writes", type=int, default=256, help="1 KiB writes per rank")
    parser.add_argument("--tensor-files", type=int, default=3)
    parser.add_argument("--tensor-bytes", type=int, default=128 << 20)
    parser.add_argument("--tensor-write-bytes", type=int, default=64 << 20)
    parser.add_argument("--bind", action="store_true", help="bind rank r to core r")
    parser.add_argument("--transfer-cores", default="",
                        help="cores SCR's transfer threads start on, e.g. 0,1")
    parser.add_argument("--direct", action="store_true",
                        help="no SCR: write each checkpoint's files straight to the directory")
    parser.add_argument("--trace", help="trace directory (real tracer)")
    parser.add_argument("--traced-dir", default=os.getcwd())
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    cores = sorted(os.sched_getaffinity(0))
    args.app_cores = {cores[rank % len(cores)]} if args.bind else set(cores)
    os.sched_setaffinity(0, args.app_cores)
    args.transfer_cores = {int(c) for c in args.transfer_cores.split(",") if c}
    log, region = _tracer(args, rank)
    block = os.urandom(max(args.tensor_write_bytes, 1024))
    comm.Barrier()
    started = time.perf_counter()
    if not args.direct:
        scr.init()
    blocking, ends = [], []  # ends: wall clock, to set against other processes' times
    phases: list[list[float]] = []
    sched: list[list[float]] = []
    for step in range(1, args.steps + 1):
        _spin(args.compute_s)
        if region is not None:
            with region(cat="CHECKPOINT", name="checkpoint.save", step=step):
                blocking.append(checkpoint(args, step, rank, block, phases, sched))
        else:
            blocking.append(checkpoint(args, step, rank, block, phases, sched))
        ends.append(time.time())
    if not args.direct:
        scr.finalize()
    if rank == 0:
        os.sync()
    comm.Barrier()
    wall_s = time.perf_counter() - started
    if log is not None:
        log.finalize()
    worst = comm.reduce(blocking, op=lambda a, b: [max(x, y) for x, y in zip(a, b)], root=0)
    last = comm.reduce(ends, op=lambda a, b: [max(x, y) for x, y in zip(a, b)], root=0)
    slowest = comm.reduce(phases, op=lambda a, b: [[max(x, y) for x, y in zip(p, q)]
                                                   for p, q in zip(a, b)], root=0)
    every_sched = comm.gather(sched, root=0)
    if rank == 0:
        with open(args.out, "w") as handle:
            json.dump({"blocking_s": worst, "checkpoint_end_unix_s": last, "wall_s": wall_s,
                       "phases_s": slowest, "ranks": comm.Get_size(),
                       "complete_sched_s": every_sched}, handle)


if __name__ == "__main__":
    main()
