"""How much longer a flush copy takes when its thread shares a core with a busy rank.

SCR's transfer threads inherit the affinity of the thread that starts them; with ranks bound
to cores they run on a core a training rank keeps busy. The copy is measured as AXL does it
(read a cached file in buffer-sized calls, write it to the parallel file system, fsync), pinned
to one core, alone and beside a process spinning on that core. The ratio is the profile's
`busy_core_slowdown`: a copy that mostly waits on the disk loses little, one that is mostly
memory copying loses about half the core.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from scrtune.probe.storage import drop_cached, flushed_pair, time_write

SPIN = "import os, time\nos.sched_setaffinity(0, {%d})\nend = time.monotonic() + %f\n" \
       "while time.monotonic() < end:\n    pass\n"
BUFFER_BYTES = 32 << 20  # SCR's default SCR_FILE_BUF_SIZE


def _copy(source: str, target: str) -> float:
    drop_cached(source)
    started = time.perf_counter()
    with open(source, "rb", buffering=0) as src:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            while chunk := src.read(BUFFER_BYTES):
                os.write(fd, chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - started


def _pinned_copy(core: int, source: str, target: str, busy: bool, budget_s: float) -> float:
    before = os.sched_getaffinity(0)
    spinner = subprocess.Popen([sys.executable, "-c", SPIN % (core, budget_s)]) if busy else None
    try:
        if spinner is not None:
            time.sleep(0.1)  # let it reach its loop
        os.sched_setaffinity(0, {core})
        return _copy(source, target)
    finally:
        os.sched_setaffinity(0, before)
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def busy_core_slowdown(local_dir: str, parallel_dir: str, file_bytes: int,
                       budget_s: float) -> float:
    """Median over up to three pairs of copies (alone, beside a spinner) within `budget_s`."""
    core = max(os.sched_getaffinity(0))
    deadline = time.monotonic() + budget_s
    with flushed_pair(local_dir, parallel_dir, "flush", "flush copy") as (source, target):
        time_write(source, min(BUFFER_BYTES, file_bytes), file_bytes, deadline)
        ratios = []
        while len(ratios) < 3 and (not ratios or time.monotonic() < deadline):
            alone = _pinned_copy(core, source, target, busy=False, budget_s=budget_s)
            beside = _pinned_copy(core, source, target, busy=True, budget_s=budget_s)
            ratios.append(beside / alone)
    return max(1.0, statistics.median(ratios))
