"""A checkpoint's flush as the model times it: its calls and its bytes, the transfer threads
that make it and how much of a core they keep busy (model.py's flush, split out so that the
model stays readable)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from scrtune.intents.write_sizes import MAPPED_BUF_MIN

# SCR v3.1.0's own work on a rank's core in SCR_Complete_output after it starts an asynchronous
# flush's transfer threads (collectives testing the flushes under way, the summary and index
# written): 0.04-0.11 s of CPU, 0.075 s on average over 12 configurations of buffer and threads
# (benchmarks/results/real_scr_complete_sched.json). Beside the threads it waits for its core.
SCR_DISPATCH_WORK_S = 0.075

# A flush's bytes stream faster with more transfer threads copying them, each its own file:
# by the copying threads to this power. The real flush's ends say more (issue 48, the flush-ends
# grid: one thread's first flush 2.1-2.4 s, four's 0.6-1.5 s; 0.5-0.8 fits those durations),
# the blocking times less: beside a checkpoint a one-thread flush slows it less a second than
# the overlap's fitted rate, so a stronger power priced one thread's checkpoints too high.
# 0.1, chosen on the 26 stored grids (groups lost to a constant 21 -> 18), met every goal
# on the sixteenth full-scale grid, measured after the choice (HISTORY, forty-second round).
FLUSH_STREAM_THREAD_POWER = 0.1

if TYPE_CHECKING:  # the model's records; model.py imports this module
    from scrtune.intents.inputs import ThreadShare
    from scrtune.study.model import Config, Machine


def flush_parts(per_rank: float, files: float, box: Machine, config: Config, nodes: int,
                ranks_per_node: int, largest_file_bytes: float = 0.0) -> tuple[float, float]:
    """One checkpoint's flush, as its seconds waiting on its calls and streaming its bytes
    (what two flushes at once share): SCR's copy reads and writes file-buffer-sized calls; a
    SYNC flush is one thread, a PTHREAD one spreads the calls over its threads."""
    if config.flush_every == 0:
        return 0.0, 0.0
    threads = _flush_threads(files, box, config)
    file_bytes = per_rank / files
    calls = files * max(1, math.ceil(file_bytes / config.file_buf_bytes))
    # faulting in a buffer mapped afresh for each file is work on a core: the threads fault
    # side by side only on as many cores as they may run on (issue 48: with 64 MiB buffers
    # and a core a node, SINGLE's flush took 1.74, 1.84-1.89 and 1.91 s with 1, 2 and 4
    # threads, where 1 MiB buffers, waiting on calls, went 2.14, 1.78 and 1.74 s)
    parallel = min(threads, _thread_cores(box, config, ranks_per_node))
    mapping = _mapped_s(per_rank, files, box, config, largest_file_bytes) / parallel
    if box.rates is None:
        latency = mapping + calls * (box.local_read.latency_s + box.pfs_write.latency_s) \
            / threads
        streaming = per_rank / box.pfs_write.rank_bytes_per_s(nodes, ranks_per_node) \
            + per_rank / box.local_read.rank_bytes_per_s(nodes, ranks_per_node)
    else:  # SCR's flush as measured end to end, its calls' cost fitted apart
        latency = mapping + calls * box.rates.flush_call_s / threads
        streaming = per_rank / box.scr_rank_bytes_per_s(box.rates.flush_bytes_per_s, nodes,
                                                        ranks_per_node)
    if config.flush_async and not config.threads_on_idle_cores:
        # transfer threads share the computing rank's core: the copying slows, a call's wait
        # on the file system (a server's round trip) needs no core and does not
        streaming *= box.busy_core_slowdown
    copying = _copying_threads(threads, per_rank, largest_file_bytes)
    return latency, streaming / copying ** FLUSH_STREAM_THREAD_POWER


def _mapped_s(per_rank: float, files: float, box: Machine, config: Config,
              largest_file_bytes: float) -> float:
    """What a flush's buffers mapped afresh cost a rank: as many files as carry its bytes
    (the trace's largest), each filling min(largest, buffer), where the trace knows the
    largest; else every file the mean's. The kernel counted it (issue 48, forty-first round):
    64 MiB buffers against 1 MiB ones faulted 1919 MiB more a full-scale job on all 19 grids
    that counted (2 ranks, 5 flushes, three 128 MiB tensors: 1920 MiB), where seven files of
    the mean 55 MiB (SCR's small files beside the tensors) made 3840."""
    if largest_file_bytes > 0:
        carrying = min(files, _carrying_files(per_rank, largest_file_bytes))
        return carrying * _fresh_buffer_s(largest_file_bytes, box, config)
    return files * _fresh_buffer_s(per_rank / files, box, config)


def _carrying_files(per_rank: float, largest_file_bytes: float) -> int:
    """The files that carry a rank's bytes: its bytes over the trace's largest file (the
    benchmark job's three tensors, not SCR's small files beside them)."""
    return max(1, round(per_rank / largest_file_bytes))


def _fresh_buffer_s(file_bytes: float, box: Machine, config: Config) -> float:
    """Per file copied: AXL mallocs its buffer for every file and glibc maps 32 MiB or more
    afresh each time, so the copy faults in as much of it as the file fills (issue 48: a job
    faulted 77, 292 and 537 thousand pages with 31, 32 and 64 MiB buffers). Nothing when the
    buffer is reused or the profile has no fresh-memory rate."""
    if config.file_buf_bytes < MAPPED_BUF_MIN or box.fresh_memory_bytes_per_s <= 0:
        return 0.0
    return min(file_bytes, config.file_buf_bytes) / box.fresh_memory_bytes_per_s


def _flush_threads(files: float, box: Machine, config: Config) -> int:
    """A flush's threads per rank: SYNC copies in the rank's own thread; PTHREAD starts
    min(CPUs, 16, files) (AXL), each thread a file at a time, or as many as the run set."""
    if not config.flush_async:
        return 1
    return max(1, min(config.transfer_threads or box.cores_per_node, 16, math.ceil(files)))


def beside_threads(per_rank: float, files: float, box: Machine, config: Config,
                   ranks_per_node: int, largest_file_bytes: float) -> tuple[float, float]:
    """An asynchronous flush's cost to the checkpoints beside its threads (calibrated): the
    slowdown of one it overlaps (SCR's fitted rates, the interference per busy thread) and
    the dispatch the one that starts it pays. With measured shares, threads beyond the files
    that carry the bytes idle; without, the model stays as it was scored (the cap alone,
    tried: HISTORY, issue 48's fortieth round)."""
    assert box.rates is not None
    largest = largest_file_bytes if box.thread_shares else 0.0
    busy = busy_threads(per_rank, files, box, config, ranks_per_node, largest)
    return (box.rates.flush_overlap_slowdown + box.rates.flush_interference * busy,
            _dispatch(busy, box, config))


def busy_threads(per_rank: float, files: float, box: Machine, config: Config,
                 ranks_per_node: int, largest_file_bytes: float = 0.0) -> float:
    """Transfer threads copying, on average, per core they share with the rank's checkpoint
    (1 for one thread that never waits): each thread's busy share (`thread_busy_share`) times
    the threads, over the cores they run on. AXL gives each thread a file at a time, so no
    more threads copy than there are files carrying the rank's bytes (its largest files: a
    thread given a metadata file is soon idle). Threads free to run on idle cores spread over
    the rank's share of the node's cores."""
    call_bytes = min(per_rank / files, config.file_buf_bytes)
    threads = _copying_threads(_flush_threads(files, box, config), per_rank, largest_file_bytes)
    return threads * thread_busy_share(call_bytes, box) / _thread_cores(box, config,
                                                                        ranks_per_node)


def _copying_threads(threads: int, per_rank: float, largest_file_bytes: float) -> int:
    """Of a flush's `threads`, those that copy the rank's bytes: AXL gives each thread a file
    at a time, so no more than the files that carry them (where the trace knows its largest
    file)."""
    if largest_file_bytes > 0:
        return min(threads, _carrying_files(per_rank, largest_file_bytes))
    return threads


def dispatch_s(per_rank: float, files: float, box: Machine, config: Config,
               ranks_per_node: int, largest_file_bytes: float = 0.0) -> float:
    """What a checkpoint that starts an asynchronous flush pays for SCR's work beside the
    threads it has just started: that work waits for its core behind the busy threads (issue
    48: the real SCR queued a rank 0.03-0.07 s there with 1 MiB buffers, 0.07-0.26 s with 8 and
    64 MiB, the most with 4 threads). Priced only with a measured busy share (the profile's
    `transfer_thread_shares`): the computed one leaves out the write's copy and misorders the
    buffers."""
    return _dispatch(busy_threads(per_rank, files, box, config, ranks_per_node,
                                  largest_file_bytes), box, config)


def _dispatch(busy: float, box: Machine, config: Config) -> float:
    if not box.thread_shares or not config.flush_async or config.flush_every == 0:
        return 0.0
    return SCR_DISPATCH_WORK_S * busy


def thread_busy_share(call_bytes: float, box: Machine) -> float:
    """The share of its time a transfer thread copying `call_bytes` calls keeps a core busy.
    Measured by `scrtune profile` at a few buffer sizes (interpolated in the size's logarithm,
    held at the ends). Else computed: it reads a file buffer of the cached copy at memory speed
    (one stream's read rate from the node-local store, as measured, not fitted: the fit would
    bend it) and then waits for the file system to take the call (the fitted per-call cost),
    which leaves the core to the rank (issue 48: SINGLE asynchronous checkpoints 0.19 s with
    1 MB buffers whatever the threads, 0.21, 0.31 and 0.36 s with 64 MB and 1, 2 and 4
    threads). A buffer mapped afresh is not counted: beside checkpoints such threads blocked
    the job less than ones with a reused buffer, their faults waiting more than computing. The
    store's write rate is no measure of it: timed with its fsync, it came out at 262 MB/s on
    one grid's tmpfs (read 5 GB/s) and made 1 MB calls look as busy as 8 MB ones."""
    if box.thread_shares:
        return _interpolated(box.thread_shares, call_bytes)
    assert box.rates is not None
    copy_s = call_bytes / box.local_read.stream_bytes_per_s
    return copy_s / (copy_s + box.rates.flush_call_s) if copy_s > 0 else 0.0


def _interpolated(ordered: tuple[ThreadShare, ...], call_bytes: float) -> float:
    """`ordered` by buffer size, as machine() keeps them."""
    if call_bytes <= ordered[0].buffer_bytes:
        return ordered[0].busy_share
    for low, high in zip(ordered, ordered[1:]):
        if call_bytes <= high.buffer_bytes:
            at = math.log(call_bytes / low.buffer_bytes) / math.log(high.buffer_bytes
                                                                     / low.buffer_bytes)
            return low.busy_share + at * (high.busy_share - low.busy_share)
    return ordered[-1].busy_share


def _thread_cores(box: Machine, config: Config, ranks_per_node: int) -> float:
    """The cores a rank's transfer threads run on: its own (a SYNC flush, or threads bound
    beside it), or its share of the node's when they are free to run on idle ones."""
    if config.flush_async and config.threads_on_idle_cores:
        return max(1.0, box.cores_per_node / max(ranks_per_node, 1))
    return 1.0
