"""Intent 2: SCR's copy buffers, sized so that a synchronous flush neither calls too often nor
maps fresh memory for every file it copies.

SCR_FILE_BUF_SIZE is AXL's flush buffer: a file moves in buffer-sized read and write calls, so a
larger buffer makes fewer calls to the parallel file system (under a 2 ms call, synchronous
flushes of 1 MB buffers blocked 1.5-1.7x longer than of 8-64 MB ones, issue 48). But AXL
mallocs the buffer for every file it copies and frees it after (`axl_file_copy`), and glibc
serves a request of 32 MiB or more with a fresh mmap every time (its mmap threshold follows
freed blocks only up to 32 MiB): each file's copy then faults its buffer's pages in anew
(issue 48: a 5-checkpoint job faulted 77 thousand pages with 31 MiB buffers, 292 thousand with
SCR's default 32 MiB, 537 thousand with 64 MiB; its synchronous flushes took 0.75, 0.95 and
1.03 s). So, for a synchronous flush: the largest checkpoint file rounded up to a MiB (no call
is larger), at most 31 MiB, and at most what a rank's transfer threads may hold of the node's
memory.

An asynchronous flush whose transfer threads share the ranks' cores (no idle core) gets 1 MiB
buffers (`scr_config.mapping` picks by the flush kind): a thread copying 1 MiB at a time waits
on its read and write calls more than it computes and leaves the core to the rank's
checkpoint (issue 48). Over the 6 real-SCR grids with such runs, 1 MiB blocked SINGLE and
PARTNER jobs less than 64 MiB on every one, under a 2 ms call and without one (XOR on 4 of 6),
and its flushes took no longer. Against SCR's 32 MiB, SINGLE blocked a 5-checkpoint job
1.59-2.07 s against 2.17-2.65 s, PARTNER and XOR within their runs' spread (4 runs each,
`benchmarks/results/real_scr_buffers_shared.json`), with the job's written files dropped from
memory as it ran; kept there, this machine's later checkpoints slowed down for that alone and
the two buffers tied (3.48 s against 3.75 s, `real_scr_buffers_shared_unbounded.json`). A
reused 31 MiB buffer blocked the job more there than SCR's 32 MiB (3.30 s against 2.32 s):
threads that never wait compete harder. With idle cores for the threads, SCR's own 32 MiB is
kept.

SCR_MPI_BUF_SIZE is the encode's chunk (redset: a send and a receive buffer per encode,
allocated each time): left at SCR's 1 MiB, which glibc reuses; a larger one is mapped afresh
for every checkpoint's encode (PARTNER: 112, 236 and 437 thousand faults a job with 1, 31 and
64 MiB) and moved no time measurably. (The study's "buffer cuts flush 4-5x", which sized both
to the dominant write, compared two different measures: corrected 2026-11-24.)
"""

from __future__ import annotations

import msgspec

from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.model import Intent, mib, ranks_per_node, transfer_threads

MIB = 1 << 20
DEFAULT_FILE_BUF = 32 * MIB  # SCR's own SCR_FILE_BUF_SIZE
# glibc's largest mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit): a malloc of 32 MiB
# (with its header, above the threshold) or more is always a fresh mapping; a MiB below, reused
MAPPED_BUF_MIN = 32 * MIB
REUSED_BUF_MAX = MAPPED_BUF_MIN - MIB
# an asynchronous flush on the ranks' cores: a copy call short enough that its thread mostly
# waits (on the node-local read and the parallel file system's write)
SHARED_CORE_BUF = MIB
SPARE_MEMORY_SHARE = 0.125  # of a node's memory, for SCR's buffers


class WriteSizes(msgspec.Struct, frozen=True, kw_only=True):
    dominant_bytes: int  # the largest write size holding at least a tenth of the bytes
    file_buf_bytes: int | None  # for a synchronous flush; None: keep SCR's default
    # for an asynchronous flush whose threads share the ranks' cores; None: SCR's default
    shared_core_file_buf_bytes: int | None = None
    mpi_buf_bytes: int | None  # None: keep SCR's 1 MiB


def _round_up_mib(count: int) -> int:
    return max(MIB, -(-count // MIB) * MIB)


def derive(stats: WorkloadStats, profile: SystemProfile) -> Intent:
    large = [m for m in stats.write_modes if m.bytes_share >= 0.1] or list(stats.write_modes)
    dominant = max((m.size_bytes for m in large), default=0)
    buffers = ranks_per_node(stats, profile) * transfer_threads(stats, profile)
    cap = int(profile.memory_per_node_bytes * SPARE_MEMORY_SHARE / buffers) // MIB * MIB \
        if profile.memory_per_node_bytes else 0
    file_buf = REUSED_BUF_MAX
    evidence = []
    if stats.largest_file_bytes:
        file_buf = min(file_buf, _round_up_mib(stats.largest_file_bytes))
        evidence.append(f"largest checkpoint file {mib(stats.largest_file_bytes)}")
    else:
        evidence.append("no checkpoint file sizes in the trace: the largest buffer reused")
    if cap and cap < file_buf:
        file_buf = max(MIB, cap)
        evidence.append(f"capped: {buffers} buffers per node share "
                        f"{100 * SPARE_MEMORY_SHARE:.1f}% of {mib(profile.memory_per_node_bytes)}")
    evidence += [
        f"file buffer for a synchronous flush {mib(file_buf)}: at most {mib(REUSED_BUF_MAX)}, "
        "since AXL allocates the buffer for every file it copies and glibc maps 32 MiB or more "
        "afresh each time (SCR's 32 MiB default included)",
        f"file buffer for an asynchronous flush on the ranks' cores {mib(SHARED_CORE_BUF)}: "
        "its threads then wait on their calls more than they take the core from the "
        "checkpoint; with idle cores for them, SCR's 32 MiB",
        "MPI buffer: SCR's 1 MiB kept (a larger one is mapped afresh for every encode)",
    ]
    if stats.write_modes:
        evidence.insert(0, "dominant checkpoint writes by bytes: " + ", ".join(
            f"{mib(m.size_bytes)} ({100 * m.bytes_share:.0f}%)" for m in stats.write_modes))
    measured = 0.8 if stats.largest_file_bytes else 0.5
    return Intent(name="write_sizes", scope="process", confidence=measured,
                  evidence=tuple(evidence),
                  value=WriteSizes(dominant_bytes=dominant, file_buf_bytes=file_buf,
                                   shared_core_file_buf_bytes=SHARED_CORE_BUF,
                                   mpi_buf_bytes=None))
