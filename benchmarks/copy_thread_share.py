"""How much of its time a flush's copy thread wants a CPU (issue 48, thirty-seventh round):

    sudo python benchmarks/copy_thread_share.py --pfs /tmp/slowpfs [--reps 3]

Two "ranks" (processes, as the benchmark job's two fake nodes on this machine), each spinning
on its own core as a computing rank does, start THREADS threads that copy three 128 MiB files
each from /dev/shm to --pfs, AXL's way (a buffer per file, mapped afresh from 32 MiB on, read
and written in buffer-sized calls), under benchmarks/slowpfs.c's 2 ms write call. Each thread
reads its own seconds on a CPU and queued for one (/proc's schedstat). Printed per buffer and
thread count, the means over threads: the wall time a thread copied, and the share of it it
was runnable (on a CPU or queued): the busy share the model's transfer threads compete with
a rank by; and the ranks' share of their spinning spent queued for their core, and their
timeslices a second (how often the threads took the core from them). Root drops the page
cache before each run; otherwise the runs start with it.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from real_scr_tuning import SLOW_SHIM, compiled, slow_pfs_env  # this script's folder
from schedstat import thread_times

FILE_BYTES = 128 << 20
FILES = 3
MAPPED = 32 << 20  # glibc's largest mmap threshold: larger buffers are mapped afresh


def _copier(sources: list[str], lock: threading.Lock, buffer_bytes: int, target: str,
            results: list[tuple[float, float, float]]) -> None:
    tid, started = threading.get_native_id(), time.perf_counter()
    on_0, queued_0, _ = thread_times(tid)
    while True:
        with lock:
            if not sources:
                break
            source = sources.pop()
        buffer = mmap.mmap(-1, buffer_bytes) if buffer_bytes >= MAPPED else bytearray(buffer_bytes)
        view = memoryview(buffer)
        read_fd = os.open(source, os.O_RDONLY)
        write_fd = os.open(f"{target}-{tid}-{os.path.basename(source)}",
                           os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        while (count := os.readv(read_fd, [view])) > 0:
            os.write(write_fd, view[:count])
        os.close(read_fd)
        os.close(write_fd)
        view.release()
        if isinstance(buffer, mmap.mmap):
            buffer.close()
    on_1, queued_1, _ = thread_times(tid)
    results.append((time.perf_counter() - started, on_1 - on_0, queued_1 - queued_0))


def rank(core: int, threads: int, buffer_bytes: int, target: str, sources: list[str]) -> None:
    """One rank: spins on its core while its threads, free to run anywhere, copy."""
    lock, results = threading.Lock(), []
    # the threads inherit every core, as free ones do; the rank then spins on its own
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    workers = [threading.Thread(target=_copier, args=(sources, lock, buffer_bytes, target,
                                                      results)) for _ in range(threads)]
    for worker in workers:
        worker.start()
    os.sched_setaffinity(0, {core})
    tid, started = threading.get_native_id(), time.perf_counter()
    before = thread_times(tid)
    while any(worker.is_alive() for worker in workers):
        pass
    after = thread_times(tid)
    spun = (time.perf_counter() - started, *(b - a for a, b in zip(before, after)))
    print(json.dumps({"threads": results, "rank": spun}))


def _run(args: argparse.Namespace, shim: str, sources: list[list[str]], threads: int,
         buffer_mib: int) -> list[dict]:
    """Each rank's report: its threads' [copying s, on a CPU, queued] and its own [spinning s,
    on a CPU, queued, timeslices]."""
    target = os.path.join(args.pfs, "copy-thread-share")
    os.makedirs(target, exist_ok=True)
    os.sync()
    if os.geteuid() == 0:
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
    env = dict(os.environ, LD_PRELOAD=shim, **slow_pfs_env(args.pfs, args.call_us))
    ranks = [subprocess.Popen([sys.executable, __file__, "--rank", str(index), str(threads),
                               str(buffer_mib), os.path.join(target, f"r{index}"), *files],
                              env=env, stdout=subprocess.PIPE, text=True)
             for index, files in enumerate(sources)]
    try:
        return [json.loads(process.communicate()[0]) for process in ranks]
    finally:  # 768 MB a run: the copies are not kept
        shutil.rmtree(target, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        core, threads, buffer_mib, target, *sources = sys.argv[2:]
        rank(int(core), int(threads), int(buffer_mib) << 20, target, sources)
        return
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pfs", required=True, help="the 'parallel file system' directory")
    parser.add_argument("--call-us", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work, \
            tempfile.TemporaryDirectory(dir="/dev/shm") as store:
        shim = compiled(SLOW_SHIM, os.path.join(work, "libslowpfs.so"))
        sources = [[os.path.join(store, f"r{index}-f{number}") for number in range(FILES)]
                   for index in range(2)]
        for path in sum(sources, []):
            with open(path, "wb") as handle:
                handle.write(os.urandom(FILE_BYTES))
        print(f"{'buffer':>7} {'threads':>7} {'copying s':>9} {'runnable':>8} {'on a CPU':>8} "
              f"{'rank queued':>11} {'rank slices/s':>13}")
        for buffer_mib in (1, 8, 64):
            for threads in (1, 2, 3):
                reports = [r for _ in range(args.reps)
                           for r in _run(args, shim, sources, threads, buffer_mib)]
                _print_row(buffer_mib, threads, reports)


def _print_row(buffer_mib: int, threads: int, reports: list[dict]) -> None:
    copies = [copy for report in reports for copy in report["threads"]]
    wall, on, queued = (statistics.fmean(copy[index] for copy in copies) for index in range(3))
    spun, _, rank_queued, slices = (sum(report["rank"][index] for report in reports)
                                    for index in range(4))
    print(f"{buffer_mib:5} Mi {threads:7} {wall:9.2f} {(on + queued) / wall:8.2f} "
          f"{on / wall:8.2f} {rank_queued / spun:11.2f} {slices / spun:13.0f}", flush=True)


if __name__ == "__main__":
    main()
