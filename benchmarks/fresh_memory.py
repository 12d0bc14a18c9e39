"""Does this machine slow down once a job has written a few GB of fresh memory? (issue 48)

    python benchmarks/fresh_memory.py [--procs 2] [--step-mb 384] [--steps 10] [--free-behind 0]

Each process spins 1.5 s, then writes --step-mb of new files to /dev/shm (64 MiB calls), as
benchmarks/scr_ckpt_app.py writes a checkpoint; with --free-behind K it deletes the files of K
steps back first, as SCR's cache does with SCR_CACHE_SIZE K. Printed: each step's write time
per process. On bare metal every step takes about as long as the first. On the project's
machine (a Firecracker guest that hands every freed page back to its host:
/sys/module/page_reporting, order 9, min_free_ms 0) the steps go at memory speed until the job
has written about 3 GB, then 5-8x slower (the host faults each page in), whether the files
are kept or freed two steps back, and again in the next job: the "step" every real-SCR grid's
later checkpoints showed. See benchmarks/HISTORY.md, "Tenth round".
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import tempfile
import time


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _steps(args: argparse.Namespace, folder: str, out) -> None:
    call_mb = min(args.step_mb, 64)
    block = os.urandom(call_mb << 20)
    calls = args.step_mb // call_mb
    times = []
    for step in range(args.steps):
        _spin(args.compute_s)
        started = time.perf_counter()
        for call in range(calls):
            with open(os.path.join(folder, f"{step}-{call}"), "wb") as handle:
                handle.write(block)
        times.append(time.perf_counter() - started)
        if args.free_behind and step >= args.free_behind:
            for call in range(calls):
                os.unlink(os.path.join(folder, f"{step - args.free_behind}-{call}"))
    out.put(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--step-mb", type=int, default=384)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--compute-s", type=float, default=1.5)
    parser.add_argument("--free-behind", type=int, default=0,
                        help="delete the files of this many steps back (0: keep them all)")
    args = parser.parse_args()
    if min(args.procs, args.steps, args.step_mb) < 1 or args.free_behind < 0 \
            or (args.step_mb > 64 and args.step_mb % 64):
        parser.error("--procs, --steps and --step-mb must be positive (--step-mb at most 64 or "
                     "a multiple of it), --free-behind not negative")
    base = tempfile.mkdtemp(prefix="scrtune-fresh-", dir="/dev/shm")
    try:
        out: multiprocessing.Queue = multiprocessing.Queue()
        workers = []
        for index in range(args.procs):
            folder = os.path.join(base, str(index))
            os.makedirs(folder)
            workers.append(multiprocessing.Process(target=_steps, args=(args, folder, out)))
        for worker in workers:
            worker.start()
        results = [out.get() for _ in workers]
        for worker in workers:
            worker.join()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    written_mb = args.procs * args.step_mb
    print(f"{args.procs} processes x {args.step_mb} MB a step ({written_mb} MB a step in all), "
          "seconds per step:")
    for times in results:
        print("  " + " ".join(f"{t:.2f}" for t in times))


if __name__ == "__main__":
    main()
