"""How much of a core a flush's transfer thread keeps busy, by file buffer size (issue 48).

An asynchronous flush's threads compete with the ranks for their cores in two ways the study's
model prices by this share: while they overlap the next checkpoint, and in the checkpoint that
starts them, whose SCR_Complete_output goes on with SCR's own work beside them (the real SCR
queued a rank 0.03-0.07 s there with 1 MiB buffers, 0.07-0.26 s with 8 and 64 MiB). A share
computed from the node-local store's read rate and the file system's call counts only the
read's copy (1, 8 and 64 MiB: 0.06, 0.35, 0.79 on the project's machine); a thread also copies
each call into the file system's page cache, and faults a buffer of 32 MiB or more in afresh for
every file (glibc maps it anew for each of AXL's per-file mallocs): measured, 0.16-0.22,
0.42-0.74 and 0.62-0.68 there under a 2 ms write call (8 MiB's the lowest right after the page
cache was dropped).

Measured as AXL copies: one thread reads a node-local file in buffer-sized calls into a buffer
malloc'd for every file and writes them to the parallel directory, alone on an idle core; the
share is its CPU seconds (user and kernel) over its wall seconds.
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


def thread_shares(local_dir: str, parallel_dir: str, budget_s: float) -> tuple[ThreadShare, ...]:
    """Each buffer size's share, a copy of at least one whole file and `budget_s` / 3 each.
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
    """The copy repeated until budget_s; this thread's CPU clock over the wall clock."""
    started, cpu_started = time.perf_counter(), time.thread_time()
    deadline = time.monotonic() + budget_s
    copy_as_axl(source, target, buffer_bytes)
    while time.monotonic() < deadline:
        copy_as_axl(source, target, buffer_bytes)
    return min(1.0, (time.thread_time() - cpu_started) / (time.perf_counter() - started))


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


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc
