"""Freed memory kept for reuse instead of going back to the kernel, for the processes that
turn trace blocks into columns: the daemon, and the commands that read trace files.

Each block of trace lines (a few MiB) becomes columns and temporaries that are freed a moment
later. By default glibc unmaps such allocations when they are freed (above its mmap
threshold) and trims the free top of its heaps, so every block faults its pages in again:
about a sixth of the daemon's parse and loop threads' CPU, and a tenth of a 2M-record replay
with two workers (benchmarks/RESULTS.md, issue 14). With the settings below the allocations
come from the heap and stay there. The cost: resident memory stays near its high-water mark
instead of shrinking after a burst, by at most TRIM_THRESHOLD_BYTES per malloc arena (20-30
MiB more at a replay's peak). A library call never changes them: only the process's owner
(the daemon, the `scrtune` command) does.
"""

from __future__ import annotations

import ctypes
import os

MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's largest allowed on 64-bit systems
TRIM_THRESHOLD_BYTES = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h


def hold_freed_memory() -> bool:
    """Apply the settings for this process; False (nothing changed) unless the C library is
    glibc and takes them."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        mallopt = ctypes.CDLL(None).mallopt
    except (ValueError, OSError, AttributeError):  # not glibc: no such name or function
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
