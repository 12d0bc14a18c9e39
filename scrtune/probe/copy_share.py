"""How much of a core a flush's transfer thread keeps busy, by file buffer size (issue 48).

An asynchronous flush's threads compete with the ranks for their cores in two ways the study's
model prices by this share: while they overlap the next checkpoint, and in the checkpoint that
starts them, whose SCR_Complete_output goes on with SCR's own work beside them (the real SCR
queued a rank 0.03-0.07 s there with 1 MiB buffers, 0.07-0.26 s with 8 and 64 MiB). A share
computed from the node-local store's read rate and the file system's call counts only the
read's copy (1, 8 and 64 MiB: 0.06, 0.35, 0.79 on the project's machine); a thread also copies
each call into the file system's page cache, and faults a buffer of 32 MiB or more in afresh for
every file (glibc maps it anew for each of AXL's per-file mallocs): measured, 0.10-0.11,
0.47-0.50 and 0.94 there under a 2 ms write call, with the page cache dropped or 9 GB full.

Measured as AXL copies: one thread reads a node-local file in buffer-sized calls into a buffer
malloc'd for every file and writes them to a new file in the parallel directory, alone on an
idle core; the share is its CPU seconds (user and kernel) over its wall seconds, in the copy
that cost the least CPU.
"""

from __future__ import annotations

import ctypes
import functools
import os
import time
from collections.abc import Callable

from scrtune.intents.inputs import ThreadShare
from scrtune.probe.storage import flushed_pair

BUFFERS = (1 << 20, 8 << 20, 64 << 20)  # SCR_FILE_BUF_SIZE's range: below, near, at the maps
SOURCE_BYTES = 2 * max(BUFFERS)  # a file two of the largest calls long
CALLS_PER_COPY = 16  # a copy stops there: many copies of small calls fit the budget


def thread_shares(local_dir: str, parallel_dir: str, budget_s: float) -> tuple[ThreadShare, ...]:
    """Each buffer size's share, from `budget_s` / 3 of copies each, and at least two.
    Raises ProbeError where a directory cannot be used."""
    with flushed_pair(local_dir, parallel_dir, "copy-share", "transfer thread") as (source,
                                                                                   target):
        with open(source, "wb") as handle:
            block = os.urandom(1 << 20)
            for _ in range(SOURCE_BYTES >> 20):
                handle.write(block)
        return tuple(ThreadShare(buffer_bytes=size, busy_share=max(0.001, round(
            _share(source, target, size, budget_s / len(BUFFERS)), 3))) for size in BUFFERS)


def _share(source: str, target: str, buffer_bytes: int, budget_s: float) -> float:
    """Copies of up to CALLS_PER_COPY calls, to a new file each, until budget_s and at least
    two; the share of the one that cost the least CPU. Not the copies' total: on the project's
    machine a copy of 128 MiB now and then cost a core 0.25-0.30 s more than the 0.03 s of the
    others (memory the page cache had not held before, at the start and again after it was
    handed back), which took 1 MiB's share anywhere from 0.12 to 0.54; and a copy that
    truncates the file it replaces waits 0.05 s more on ext4 for that file's write-back, which
    SCR's flush, writing new files, does not."""
    deadline = time.monotonic() + budget_s
    timed: list[tuple[float, float]] = []  # (CPU seconds, wall seconds) a copy
    while len(timed) < 2 or time.monotonic() < deadline:
        if os.path.exists(target):
            os.unlink(target)
        started, cpu_started = time.perf_counter(), time.thread_time()
        copy_as_axl(source, target, buffer_bytes, _calls(CALLS_PER_COPY))
        timed.append((time.thread_time() - cpu_started, time.perf_counter() - started))
    cpu_s, wall_s = min(timed)
    return min(1.0, cpu_s / wall_s)


def copy_as_axl(source: str, target: str, buffer_bytes: int,
                going: Callable[[], bool] = lambda: True) -> None:
    """One file copied as AXL copies it: a buffer malloc'd for the file (glibc maps one of
    32 MiB or more afresh), read and written in buffer-sized calls, freed after it. `going`,
    asked before each call, stops the copy early when it says no."""
    libc = _libc()
    address = libc.malloc(buffer_bytes)
    if not address:
        raise OSError(f"no memory for a {buffer_bytes}-byte buffer")
    buffer = memoryview((ctypes.c_char * buffer_bytes).from_address(address)).cast("B")
    try:
        read_fd = os.open(source, os.O_RDONLY)
        try:
            write_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                while going() and (count := os.readv(read_fd, [buffer])) > 0:
                    os.write(write_fd, buffer[:count])
            finally:
                os.close(write_fd)
        finally:
            os.close(read_fd)
    finally:
        buffer.release()
        libc.free(address)


def _calls(count: int) -> Callable[[], bool]:
    """A `going` for copy_as_axl that says yes `count` times (a call's read and write each)."""
    left = iter(range(count))
    return lambda: next(left, None) is not None


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc
