"""How asynchronous flushes cost the checkpoints beside them, in a timed run and in steady state:
one model for the study's timed runs (calibration), its long jobs, and the intents that choose a
synchronous or an asynchronous flush and cache or bypass (issue 48: the study let an
asynchronous flush of every k-th checkpoint hide behind k compute gaps, though SCR waits for it
SCR_CACHE_SIZE checkpoints later, and the core-affinity intent behind one gap).

SCR v3.1 starts an asynchronous flush when its checkpoint completes and does not wait for it
at the next SCR_Start_output: only a checkpoint that must evict a dataset still being flushed
(SCR_CACHE_SIZE checkpoints back) waits for that flush (scr-facts.md; benchmarks/HISTORY.md,
2026-11-25: 8 checkpoints with 1.5 s of compute and a 3 s flush took 1.88 s each with a cache
of 1, 0.51 s with 2). A flush still running when the next checkpoint starts slows it while
they overlap (2026-11-26: about 1.1 s per second of overlap; with a flush every 3rd
checkpoint, the one after a flushed checkpoint, not the third after it).
"""

from __future__ import annotations

import math

# a run of more checkpoints is stepped through this far: its mean has settled by then, and a
# runs file listing millions of checkpoints does not make every prediction of a fit take
# seconds
MAX_STEPPED = 512


def timed_blocking_s(base_s: float, flush_s: float, streaming_s: float, compute_s: float,
                     slowdown: float, flush_every: int, cache_size: int,
                     checkpoints: int, dispatch_s: float = 0.0) -> float:
    """Mean blocking per checkpoint of a timed run of `checkpoints` with asynchronous flushes
    of `flush_s` each (`streaming_s` of it moving bytes: flushes at once wait on their calls
    side by side and share the bytes' rate). A checkpoint alone takes `base_s`; beside a
    running flush it goes at 1 / (1 + slowdown) of its speed; the last checkpoint's flush
    is waited for at SCR_Finalize, outside the checkpoints' times. A checkpoint that starts a
    flush takes `dispatch_s` longer: SCR's own work after it starts the transfer threads,
    beside them."""
    steps = _blocked(base_s, flush_s, streaming_s, compute_s, slowdown, flush_every,
                     cache_size, min(checkpoints, MAX_STEPPED), dispatch_s)
    return sum(steps) / len(steps)


SETTLING = 64  # checkpoints of a long job stepped through before its mean is taken


def steady_blocking_s(base_s: float, flush_s: float, streaming_s: float, compute_s: float,
                      slowdown: float, flush_every: int, cache_size: int,
                      dispatch_s: float = 0.0) -> float:
    """Mean blocking per checkpoint of a long job, as a timed run goes once it has settled: a
    flush of every k-th checkpoint hides behind the compute until the checkpoint that must
    evict its dataset (SCR_CACHE_SIZE later) waits for it, and flushes at once share the
    bytes' rate. A flush that ends within one compute gap costs nothing but its dispatch
    (`dispatch_s`, in the checkpoint that starts it)."""
    every = max(flush_every, 1)
    if flush_s <= compute_s:
        return base_s + dispatch_s / every
    count = min(MAX_STEPPED, SETTLING + 8 * every * max(cache_size, 1))
    steps = _blocked(base_s, flush_s, streaming_s, compute_s, slowdown, every, cache_size,
                     count, dispatch_s)
    start = count // 2 // every * every  # whole flush cycles, after the first half
    settled = steps[start:start + (count - start) // every * every]
    return sum(settled) / len(settled)


def _blocked(base_s: float, flush_s: float, streaming_s: float, compute_s: float,
             slowdown: float, flush_every: int, cache_size: int, checkpoints: int,
             dispatch_s: float = 0.0) -> list[float]:
    """Each checkpoint's blocking, in order (at least one)."""
    clock, flushing_until, streamed_until = 0.0, -math.inf, -math.inf
    finish: dict[int, float] = {}
    blocked: list[float] = []
    every = max(flush_every, 1)
    checkpoints = max(checkpoints, 1)
    for index in range(1, checkpoints + 1):
        start = max(clock, finish.get(index - max(cache_size, 1), -math.inf))
        length = _slowed(base_s, flushing_until - start, slowdown)
        if index % every == 0:  # SCR_Complete_output starts its flush, then goes on beside it
            length += dispatch_s
        blocked.append(start - clock + length)
        end = start + length
        if index % every == 0 and index < checkpoints:
            streamed_until = max(end, streamed_until) + streaming_s
            # a later flush never ends before an earlier one: the last one's end is the latest
            flushing_until = finish[index] = max(end + flush_s, streamed_until)
        clock = end + compute_s
    return blocked


def overrun_excess_s(base_s: float, flush_s: float, compute_s: float, slowdown: float,
                     flush_every: int) -> float:
    """Steady state, per checkpoint: what a flush that outlasts the compute after its
    checkpoint costs the next one, which it overlaps (whatever the flush cadence: the next
    checkpoint starts one compute gap later); one checkpoint in `flush_every` follows one."""
    overrun_s = max(0.0, flush_s - max(compute_s, 0.0))
    return (_slowed(base_s, overrun_s, slowdown) - base_s) / max(flush_every, 1)


def _slowed(work_s: float, overlap_s: float, slowdown: float) -> float:
    """How long work_s seconds of a checkpoint take when its first overlap_s seconds go at
    1 / (1 + slowdown) of its speed."""
    if overlap_s <= 0 or slowdown <= 0:
        return work_s
    if work_s * (1 + slowdown) <= overlap_s:
        return work_s * (1 + slowdown)
    return overlap_s + work_s - overlap_s / (1 + slowdown)
