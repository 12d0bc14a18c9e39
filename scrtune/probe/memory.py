"""How fast this node hands a process fresh memory: what a buffer mapped anew costs beyond the
same bytes written into a buffer the process keeps.

AXL mallocs its flush buffer for every file it copies, and glibc maps a request of 32 MiB or
more afresh each time (issue 48): each file's copy then faults its buffer's pages in, which is
kernel work (a fault and a zeroed page each 4 KiB) on the transfer thread. On the project's
virtual machine a fresh page costs several times a written one (benchmarks/fresh_memory.py).
"""

from __future__ import annotations

import mmap
import time

BLOCK_BYTES = 64 << 20  # a buffer of the size scrtune once recommended


def fresh_memory_bytes_per_s(budget_s: float, block_bytes: int = BLOCK_BYTES) -> float:
    """Bytes per second of fresh pages beyond writing kept ones: blocks mapped, written and
    unmapped, against the same writes into one kept block, alternating until `budget_s`
    (at least 3 of each). 0 when the fresh ones were not measurably slower."""
    zeros = bytes(block_bytes)
    kept = mmap.mmap(-1, block_bytes)
    kept.write(zeros)  # its pages now resident: later writes fault nothing
    fresh_s = reused_s = 0.0
    rounds = 0
    deadline = time.monotonic() + budget_s
    try:
        while rounds < 3 or time.monotonic() < deadline:
            start = time.perf_counter()
            block = mmap.mmap(-1, block_bytes)
            block.write(zeros)
            block.close()
            middle = time.perf_counter()
            kept.seek(0)
            kept.write(zeros)
            fresh_s += middle - start
            reused_s += time.perf_counter() - middle
            rounds += 1
    finally:
        kept.close()
    extra_s = fresh_s - reused_s
    return rounds * block_bytes / extra_s if extra_s > 0 else 0.0
