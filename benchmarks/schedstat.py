"""A thread's time on a CPU and queued for one, from /proc's schedstat (issue 48): what tells
a phase's wait on the cores from its sleep on something else. For the benchmark scripts."""

from __future__ import annotations

import os


def thread_times(tid: int) -> tuple[float, float, int]:
    """Thread `tid` of this process so far: seconds on a CPU, seconds queued for one, and its
    timeslices."""
    with open(f"/proc/self/task/{tid}/schedstat") as handle:
        on_ns, queued_ns, slices = handle.read().split()
    return int(on_ns) / 1e9, int(queued_ns) / 1e9, int(slices)


def every_thread() -> dict[int, tuple[float, float, int]]:
    """thread_times of each thread of this process, by its id."""
    out = {}
    for tid in map(int, os.listdir("/proc/self/task")):
        try:
            out[tid] = thread_times(tid)
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return out
