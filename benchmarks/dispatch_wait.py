"""How long a rank waits for its core beside a flush's transfer threads just started, by buffer
size and thread count (issue 48, fortieth round):

    python benchmarks/dispatch_wait.py --pfs /tmp/slowpfs [--call-us 2000] [--budget-s 8]

SCR v3.1's SCR_Complete_output starts an asynchronous flush's transfer threads (AXL's
dispatch) and then goes on with its own work on the rank's core: collectives that test the
flushes under way, the summary and index written to the prefix. Beside threads that copy,
the rank waits for a CPU: the real SCR logged 0.03-0.07 s queued in that phase with 1 MiB
buffers and 0.07-0.26 s with 8 and 64 MiB (benchmarks/complete_sched.py), the largest with
8 MiB and 4 threads, which no share computed from a copy's steady state gives.

Measured here as it happens: one "rank" process pinned to each of up to MAX_RANKS cores does
RANK_WORK_S of CPU in pieces, a small write to the parallel directory after each (SCR's
summary writes), while a process beside it runs T threads copying files from the node-local
directory to the parallel one in buffer-sized calls, AXL's way (a buffer malloc'd for every
file, so glibc maps large ones afresh; threads on the ranks' cores, as bound ones are and free
ones are when the node has no idle core). The result is the rank's extra time off its CPU per
second of its work (its schedstat's run-queue seconds), beside the rank alone: a rank with w
seconds of work waits w x that. Printed per buffer and thread count, times RANK_WORK_S: what
the real SCR's table (benchmarks/complete_sched.py) gives as "rank queued".

What it found (HISTORY.md, issue 48's fortieth round): in a clean page cache the wait follows
SCR's table (8 MiB and 4 threads 0.13 s); with a few GB of the copies' files and dirty pages
left in memory, 2-3x more (0.30-0.35 s): too much the machine's state to be a profile's figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from real_scr_tuning import SLOW_SHIM, compiled, slow_pfs_env  # this script's folder

from scrtune.probe.copy_share import copy_as_axl
from scrtune.probe.storage import ProbeError, scratch_dir

BUFFERS = (1 << 20, 8 << 20, 64 << 20)  # SCR_FILE_BUF_SIZE's range: below, near, at the maps
THREADS = (1, 2, 4)  # a rank's transfer threads on its core
MAX_RANKS = 2  # ranks measured at once: enough for their threads to meet on shared cores
RANK_WORK_S = 0.08  # a rank's CPU in SCR_Complete_output after the dispatch (SCR v3.1.0)
PIECE_S = 0.005
FILES = 2


@dataclass(frozen=True)
class DispatchWait:
    """A rank's wait for its core per second of its work, beside `threads` transfer threads
    per core copying in `buffer_bytes` calls."""
    buffer_bytes: int
    threads: int
    wait_per_work: float


def dispatch_waits(local_dir: str, parallel_dir: str, budget_s: float) -> list[DispatchWait]:
    """Each buffer size and thread count at least once, more rounds within `budget_s`; the
    median of each. Raises ProbeError where a directory cannot be used."""
    cores = sorted(os.sched_getaffinity(0))[:MAX_RANKS]
    sources = _sources(local_dir)
    workers = _Workers(cores, sources, parallel_dir)
    try:
        alone: list[float] = []
        beside: dict[tuple[int, int], list[float]] = {}
        deadline = time.monotonic() + budget_s
        while not alone or time.monotonic() < deadline:
            alone.extend(workers.off_cpu_per_work(0, 0))
            for buffer_bytes in BUFFERS:
                for threads in THREADS:
                    beside.setdefault((buffer_bytes, threads), []).extend(
                        workers.off_cpu_per_work(buffer_bytes, threads))
    except OSError as exc:
        raise ProbeError(f"transfer threads {local_dir} -> {parallel_dir}: "
                         f"{exc.strerror or exc}") from None
    finally:
        workers.close()
        for path in sources:
            os.unlink(path)
    base = statistics.median(alone)
    return [DispatchWait(buffer_bytes, threads, round(max(0.0, statistics.median(runs) - base), 3))
            for (buffer_bytes, threads), runs in sorted(beside.items())]


def _sources(local_dir: str) -> list[str]:
    """The cached files the threads copy, each two of the largest buffer."""
    block = os.urandom(1 << 20)
    paths = []
    for index in range(FILES):
        path = os.path.join(local_dir, f"dispatch-source-{index}")
        with open(path, "wb") as handle:
            for _ in range(2 * max(BUFFERS) >> 20):
                handle.write(block)
        paths.append(path)
    return paths


class _Workers:
    """A rank per core and, beside it, as many copiers as the most threads measured: each
    copier a process of its own, so that no interpreter lock stands between the copies (a
    transfer thread of AXL holds none), kept across measurements."""

    def __init__(self, cores: list[int], sources: list[str], parallel_dir: str) -> None:
        def start(*role: str) -> subprocess.Popen:
            return subprocess.Popen([sys.executable, __file__, *role],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        shared = ",".join(str(core) for core in cores)
        self.ranks = [start("rank", str(core), parallel_dir) for core in cores]
        self.copiers = [[start("copy", shared, os.path.join(parallel_dir, f"copy-{core}-{index}"),
                               *sources[index % len(sources):], *sources[:index % len(sources)])
                         for index in range(max(THREADS))] for core in cores]

    def off_cpu_per_work(self, buffer_bytes: int, threads: int) -> list[float]:
        """Each rank's seconds off its CPU per second of its work, beside `threads` copying
        threads each (none: 0)."""
        copying = [copier for beside in self.copiers for copier in beside[:threads]]
        _ask(copying, f"start {buffer_bytes}")
        try:
            replies = _ask(self.ranks, "go")
        finally:
            _ask(copying, "stop")
        return [queued / cpu for queued, cpu in (map(float, r.split()) for r in replies)]

    def close(self) -> None:
        for process in self.ranks + sum(self.copiers, []):
            if process.stdin:
                process.stdin.close()
            process.wait(timeout=30)


def _ask(processes: list[subprocess.Popen], line: str) -> list[str]:
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(line + "\n")
        process.stdin.flush()
    replies = []
    for process in processes:
        assert process.stdout is not None
        reply = process.stdout.readline()
        if not reply or reply.startswith("error"):
            raise OSError(reply.strip().removeprefix("error ") or "a worker ended")
        replies.append(reply)
    return replies


def _rank(core: int, parallel_dir: str) -> None:
    """Per "go": RANK_WORK_S of CPU in pieces, a 4 KiB write to the parallel directory after
    each; prints its seconds queued for a CPU and on one (the kernel's schedstat)."""
    os.sched_setaffinity(0, {core})
    path = os.path.join(parallel_dir, f"dispatch-rank-{core}")
    small = bytes(4096)
    for _ in sys.stdin:
        queued_before, cpu_started = _queued_s(), time.thread_time()
        while time.thread_time() - cpu_started < RANK_WORK_S:
            piece = time.thread_time()
            while time.thread_time() - piece < PIECE_S:
                pass
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, small)
            os.close(fd)
        print(_queued_s() - queued_before, time.thread_time() - cpu_started, flush=True)
    os.unlink(path)


def _queued_s() -> float:
    """This thread's seconds runnable but waiting for a CPU, so far."""
    with open("/proc/thread-self/schedstat") as handle:
        return int(handle.read().split()[1]) * 1e-9


def _copy(cores: set[int], target: str, sources: list[str]) -> None:
    """Per "start BYTES": a thread copies the sources in turn until "stop"."""
    os.sched_setaffinity(0, cores)
    stop = threading.Event()
    worker: threading.Thread | None = None
    for line in sys.stdin:  # this thread waits here, holding no lock the copy needs
        command = line.split()
        if command[0] == "start":
            stop.clear()
            worker = threading.Thread(target=_copier,
                                      args=(int(command[1]), sources, target, stop))
            worker.start()
        elif worker is not None:
            stop.set()
            worker.join()
            os.unlink(target)
        print(command[0], flush=True)


def _copier(buffer_bytes: int, sources: list[str], target: str, stop: threading.Event) -> None:
    while not stop.is_set():
        for source in sources:
            copy_as_axl(source, target, buffer_bytes, lambda: not stop.is_set())


def _main(argv: list[str]) -> None:
    try:
        if argv[0] == "rank":
            _rank(int(argv[1]), argv[2])
        else:
            _copy({int(core) for core in argv[1].split(",")}, argv[2], argv[3:])
    except OSError as exc:
        print(f"error {exc.filename or ''}: {exc.strerror or exc}", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("rank", "copy"):
        _main(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pfs", required=True, help="the 'parallel file system' directory")
    parser.add_argument("--local", default="/dev/shm", help="the node-local store")
    parser.add_argument("--call-us", type=int, default=2000,
                        help="each write call under --pfs waits this long (slowpfs.c)")
    parser.add_argument("--budget-s", type=float, default=8.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        shim = compiled(SLOW_SHIM, os.path.join(work, "libslowpfs.so"))
        os.environ.update(LD_PRELOAD=shim, **slow_pfs_env(args.pfs, args.call_us))
        with scratch_dir(args.local) as local, scratch_dir(args.pfs) as parallel:
            waits = dispatch_waits(local, parallel, args.budget_s)
    print(f"{'buffer':>7} {'threads':>7} {'wait / work':>11} {'queued s':>9}")
    for wait in waits:
        print(f"{wait.buffer_bytes >> 20:4} Mi {wait.threads:7} {wait.wait_per_work:11.3f} "
              f"{wait.wait_per_work * RANK_WORK_S:9.3f}")


if __name__ == "__main__":
    main()
