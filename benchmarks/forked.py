"""Independent computations spread over forked worker processes, their results coming back as
bytes the caller encoded (msgspec JSON): a held-out report's fits, each to the runs outside
one group, on the cores the process may use instead of one.

Forked, not spawned: a worker starts from the parent's state (the grid read, its trace
parsed), so it only computes. Every task's result is the same bytes whichever process ran it;
a worker that fails, is killed or returns short leaves its tasks to the parent, which computes
them itself: the report never depends on how it was spread.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence

Task = Callable[[], bytes]
_LENGTH = struct.Struct("<Q")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def each(tasks: Sequence[Task], workers: int) -> list[bytes]:
    """Every task's result, in order: task i runs in worker i % workers (worker 0 is this
    process), the others forked. One worker, one task or no fork: all here, in order."""
    workers = max(1, min(workers, len(tasks)))
    if workers == 1 or not hasattr(os, "fork"):
        return [task() for task in tasks]
    children = [_start(tasks, worker, workers) for worker in range(1, workers)]
    results: list[bytes | None] = [None] * len(tasks)
    for index in range(0, len(tasks), workers):
        results[index] = tasks[index]()
    for worker, child in enumerate(children, start=1):
        mine = range(worker, len(tasks), workers)
        got = _collect(child, len(mine)) if child else []
        for index, result in zip(mine, got):
            results[index] = result
    # what a worker did not return (it failed, or could not be forked): computed here
    return [result if result is not None else tasks[index]()
            for index, result in enumerate(results)]


def _start(tasks: Sequence[Task], worker: int, workers: int) -> tuple[int, int] | None:
    """Fork worker `worker`; its pid and the pipe its results arrive on (None: no fork)."""
    try:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the worker: compute its share, write it, leave without the parent's exits
        status = 1
        try:
            os.close(read_fd)
            with os.fdopen(write_fd, "wb") as out:
                for index in range(worker, len(tasks), workers):
                    result = tasks[index]()
                    out.write(_LENGTH.pack(len(result)) + result)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    return pid, read_fd


def _collect(child: tuple[int, int], count: int) -> list[bytes]:
    """The results a worker wrote, in order, until it ended (read before it is reaped, so a
    full pipe never stalls it): as many as it finished, none if it did not exit cleanly."""
    pid, read_fd = child
    with os.fdopen(read_fd, "rb") as source:
        data = source.read()
    _, status = os.waitpid(pid, 0)
    results, offset = [], 0
    while len(results) < count and offset + _LENGTH.size <= len(data):
        (length,) = _LENGTH.unpack_from(data, offset)
        offset += _LENGTH.size
        if offset + length > len(data):
            break
        results.append(data[offset:offset + length])
        offset += length
    return results if os.waitstatus_to_exitcode(status) == 0 else []
