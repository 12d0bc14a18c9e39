"""Which copy buffers SCR should be given: ones glibc reuses, or ones it maps afresh (issue 48).

    SCRTUNE_SCR_PREFIX=... python benchmarks/file_buffer.py --reps 3 \
        --json benchmarks/results/file_buffer.json

AXL mallocs SCR_FILE_BUF_SIZE for every file it flushes and frees it after; redset allocates
SCR_MPI_BUF_SIZE for every encode. glibc maps a request of 32 MiB or more afresh each time, so
such a buffer's pages are faulted in anew for every file (every encode). Measured here:

1. without SCR: AXL's copy loop (malloc per file, read and write in buffer-sized calls, free),
   7 files of 96 MiB copied 5 times by 1 and 4 threads started anew each time, as a PTHREAD
   flush does: seconds and minor page faults per buffer size;
2. the real SCR (the benchmark job of real_scr_tuning.py: 2 ranks on 2 fake nodes, 5
   checkpoints of 384 MB a rank, a 2 ms call to its parallel file system): a synchronous
   SINGLE flush with 31 MiB (what `recommend` sets), 32 MiB (SCR's default) and 64 MiB (the
   dominant write, what `recommend` set before) buffers; PARTNER with an asynchronous flush
   and MPI buffers of 1 MiB (SCR's default), 31 and 64 MiB (what `recommend` set before);
   interleaved, --reps times. Per configuration: SCR_DEBUG's seconds per flush, blocking
   and wall seconds a job, and the minor page faults of the job's processes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import real_scr_tuning as tuning  # noqa: E402

COPY_LOOP = os.path.join(HERE, "axl_copy_loop.c")
COPY_SIZES_MIB = (8, 31, 32, 64)
SYNC = {"SCR_CACHE_BYPASS": "0", "SCR_FLUSH": "1"}
ASYNC = {**SYNC, "SCR_FLUSH_TYPE": "PTHREAD", "SCR_FLUSH_ASYNC": "1", "SCR_CACHE_SIZE": "2"}


def configs() -> dict[str, tuning.GridConfig]:
    made = {f"SINGLE sync, file buffer {size}": tuning.GridConfig(
        {**SYNC, "SCR_COPY_TYPE": "SINGLE", "SCR_FILE_BUF_SIZE": size})
        for size in ("31MB", "32MB", "64MB")}
    made.update({f"PARTNER async, MPI buffer {size}": tuning.GridConfig(
        {**ASYNC, "SCR_COPY_TYPE": "PARTNER", "SCR_FILE_BUF_SIZE": "31MB",
         "SCR_MPI_BUF_SIZE": size}) for size in ("1MB", "31MB", "64MB")})
    return made


def copy_loop(work: str) -> list[dict]:
    """AXL's per-file copy outside SCR: seconds and minor faults per buffer and thread count."""
    binary = os.path.join(work, "axl_copy_loop")
    subprocess.run(["cc", "-O2", "-pthread", "-o", binary, COPY_LOOP], check=True)
    sources = []
    for index in range(7):
        path = os.path.join("/dev/shm", f"scrtune-copy-{os.getpid()}-{index}")
        with open(path, "wb") as handle:
            handle.write(bytes(96 << 20))
        sources.append(path)
    results = []
    try:
        for threads in (1, 4):
            for size in COPY_SIZES_MIB:
                done = subprocess.run([binary, str(size), str(threads), *sources],
                                      capture_output=True, text=True, check=True)
                seconds, faults = done.stdout.split()
                results.append({"buffer_mib": size, "threads": threads,
                                "seconds": float(seconds), "minor_faults": int(faults)})
                print(f"copy loop: {size} MiB, {threads} threads: {float(seconds):.3f} s, "
                      f"{int(faults)} minor faults", flush=True)
    finally:
        for path in sources:
            os.unlink(path)
        for leftover in os.listdir("/dev/shm"):
            if re.fullmatch(rf"scrtune-copy-{os.getpid()}-out\d+", leftover):
                os.unlink(os.path.join("/dev/shm", leftover))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--pfs", default=os.path.join(tempfile.gettempdir(), "slowpfs"))
    parser.add_argument("--json", help="write the runs here")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="scrtune-buffer-")
    report = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                         f"{platform.python_version()}", "copy_loop": copy_loop(work)}
    os.makedirs(args.pfs, exist_ok=True)
    bench = tuning.Bench(argparse.Namespace(
        pfs=args.pfs, pfs_call_us=2000, flush_ends=False, trim_cache_s=0.5, calibrate_with=None,
        app_args=["--steps", "5", "--compute-s", "1.5"]))
    runs: dict[str, list[dict]] = {name: [] for name in configs()}
    try:
        with tuning.dirty_pool(256):
            for rep in range(args.reps):
                for name, config in configs().items():
                    run = bench.run(config)
                    runs[name].append(run)
                    print(f"rep {rep + 1}/{args.reps} {name}: {run['flush_s'] / run['flushes']:.3f}"
                          f" s a flush, {run['wall_s']:.2f} s, {run['minor_faults']} faults",
                          flush=True)
    finally:
        shutil.rmtree(bench.work, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    report.update(configs={name: c.env for name, c in configs().items()}, runs=runs)
    for name, done in runs.items():
        print(f"{name:34} {_median(done, 'flush'):6.3f} s a flush  "
              f"{_median(done, 'blocking_s'):6.2f} s blocking  {_median(done, 'wall_s'):6.2f} s "
              f"wall  {_median(done, 'minor_faults'):9,.0f} faults")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)


def _median(runs: list[dict], key: str) -> float:
    if key == "flush":
        return statistics.median(r["flush_s"] / max(r["flushes"], 1) for r in runs)
    return statistics.median(r[key] for r in runs)


if __name__ == "__main__":
    main()
