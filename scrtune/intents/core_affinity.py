"""Intent 1: where SCR's transfer threads may run.

PTHREAD flush starts min(CPUs, 16, files) threads per rank, and they inherit the affinity of
the thread that starts them: with ranks bound to cores they share the training rank's core,
and the flush takes longer by the profile's `busy_core_slowdown` (its `scr_rates` one when
calibrated through SCR; the corrected study saw ~1.8x on Corona;
on the real SCR here, a flush that mostly waits on the disk was ~1.5x slower). With idle
cores, asynchronous flush runs there. Without, it still pays when the slowed flush blocks the
checkpoints less than a synchronous flush does (measured on the real SCR: async with bound
threads beat sync by 3.6x in blocking time): per checkpoint, as the study's model of SCR's
flushes settles over a long job (overlap.steady_blocking_s: SCR waits for a flush when a
checkpoint must evict its dataset, SCR_CACHE_SIZE checkpoints later), against a synchronous
flush of every k-th checkpoint, 1/k of it.
"""

from __future__ import annotations

import msgspec

from scrtune.intents import redundancy
from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.model import (
    Intent,
    flush_s,
    ranks_per_node,
    transfer_threads,
)
from scrtune.intents.overlap import steady_blocking_s
from scrtune.intents.writes import planned_write_times
from scrtune.units import human_seconds, ordinal, plural


class CoreAffinity(msgspec.Struct, frozen=True, kw_only=True):
    async_flush_pays: bool
    idle_cores: tuple[int, ...]
    transfer_threads_per_rank: int
    cores_per_node: int
    ranks_per_node: int


class FlushCost(msgspec.Struct, frozen=True, kw_only=True):
    """One cached checkpoint's flush to the parallel file system, and what it blocks."""
    flush_s: float  # alone
    slowed_s: float  # asynchronous, beside the ranks when no core is idle
    compute_s: float  # between two checkpoints
    every: int  # a flush of every k-th checkpoint
    async_s: float  # per checkpoint, an asynchronous flush, as a long job settles
    sync_s: float  # per checkpoint, a synchronous flush: 1/k of one


def flush_cost(stats: WorkloadStats, profile: SystemProfile, cost_s: float, idle: bool
               ) -> FlushCost | None:
    """The flush of a checkpoint that blocks `cost_s`, at the compute gap and the flush
    cadence the interval intent sets for a cached job (the chosen scheme's: Daly's interval
    for its checkpoint and encode, or the job's own gap); None without a flush or a gap."""
    flush = flush_s(stats, profile)
    scheme = redundancy.choose(stats, profile)
    compute = scheme.interval_s if stats.checkpoints else 0.0
    if flush <= 0 or compute <= 0:
        return None
    every = scheme.flush_every
    slowed = flush * (1.0 if idle else profile.flush_slowdown())
    beside = profile.scr_rates.flush_overlap_slowdown if profile.scr_rates else 0.0
    base = max(cost_s, 0.0)
    blocked = steady_blocking_s(base, slowed, slowed, compute, beside, every,
                                redundancy.CACHED_CHECKPOINTS) - base
    return FlushCost(flush_s=flush, slowed_s=slowed, compute_s=compute, every=every,
                     async_s=max(blocked, 0.0), sync_s=flush / every)


def idle_cores(stats: WorkloadStats, profile: SystemProfile) -> tuple[tuple[int, ...], str]:
    """The node's cores the application leaves idle, and how that is known."""
    cores = profile.cores_per_node
    if stats.cores_used:
        used = set(stats.cores_used)
        return (tuple(c for c in range(cores) if c not in used),
                f"the trace records the application's cores {sorted(used)}")
    # Without affinity records assume one bound core per rank, the rest idle (highest ids).
    per_node = ranks_per_node(stats, profile)
    return (tuple(range(min(per_node, cores), cores)),
            f"no core affinity in the trace: assumed one core per rank ({per_node} per node)")


def derive(stats: WorkloadStats, profile: SystemProfile) -> Intent:
    per_node = ranks_per_node(stats, profile)
    cores = profile.cores_per_node
    threads = transfer_threads(stats, profile)
    idle, how = idle_cores(stats, profile)
    confidence = 0.9 if stats.cores_used else 0.5
    pthread = "PTHREAD" in profile.flush_types  # else every async flush fails, exit 0
    shared = "" if idle or not pthread else _shared_cores_verdict(stats, profile)
    pays = pthread and (len(idle) >= 1 or shared.startswith("asynchronous"))
    evidence = (
        how,
        f"{plural(cores, 'core')} per node ({profile.source.split(';')[0]}), {len(idle)} idle",
        f"PTHREAD flush would start {plural(threads, 'transfer thread')} per rank "
        "(min(CPUs, 16, files per rank))",
        "asynchronous flush pays: transfer threads go to the idle cores" if pays and idle else
        shared if pthread else f"this SCR/AXL build has no PTHREAD transfer (flush_types "
        f"{list(profile.flush_types)}): an asynchronous flush would fail silently; flush "
        "synchronously",
    )
    value = CoreAffinity(async_flush_pays=pays, idle_cores=idle,
                         transfer_threads_per_rank=threads, cores_per_node=cores,
                         ranks_per_node=per_node)
    return Intent(name="core_affinity", scope="node", confidence=confidence, evidence=evidence,
                  value=value)


def _shared_cores_verdict(stats: WorkloadStats, profile: SystemProfile) -> str:
    """No idle core: whether a flush slowed by sharing the ranks' cores still blocks less
    than a synchronous one. Starts with "asynchronous" when it does."""
    # the compute the flush hides behind: the interval the recommendation sets (issue 48), or
    # the job's own when it keeps its cadence; the checkpoints between, as the cache writes
    # them (the trace's may be another configuration's: bypass's, under SCR's defaults)
    times = planned_write_times(stats, profile)
    cost = flush_cost(stats, profile, times.cache_s if times else stats.ckpt_dur_s, idle=False)
    if cost is None:
        return "no idle core, and no flush time or compute gap to weigh: flush synchronously"
    which = "every checkpoint" if cost.every == 1 else f"every {ordinal(cost.every)} checkpoint"
    said = (f"no idle core: a flush of {human_seconds(cost.flush_s)} ({which}) takes "
            f"{human_seconds(cost.slowed_s)} beside the ranks (x{profile.flush_slowdown():g}), "
            f"with {human_seconds(cost.compute_s)} of compute between checkpoints and SCR "
            f"waiting for it {plural(redundancy.CACHED_CHECKPOINTS, 'checkpoint')} later")
    if cost.async_s < cost.sync_s:
        return f"asynchronous flush pays anyway: {said}, blocking " \
               f"{human_seconds(cost.async_s)} a checkpoint instead of " \
               f"{human_seconds(cost.sync_s)}"
    return f"{said}: it would block {human_seconds(cost.async_s)} a checkpoint, a " \
           f"synchronous flush {human_seconds(cost.sync_s)}; flush synchronously"
